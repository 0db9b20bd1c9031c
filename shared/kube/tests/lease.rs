//! The single-writer lease against the HTTP-level fake API: one of two concurrent ticks wins,
//! a live lease is respected, a dead holder's lease is taken over, and release hands it on.

mod fake_api;

use std::collections::BTreeMap;
use std::time::Duration;

use fake_api::FakeApi;
use fleetwright_kube::lease::try_acquire;
use k8s_openapi::jiff::Timestamp;

const TTL: Duration = Duration::from_secs(60);

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_790_000_000 + seconds).unwrap()
}

#[tokio::test]
async fn two_concurrent_ticks_only_one_holds_the_lease() {
    let api = FakeApi::start(BTreeMap::new()).await;
    let (a, b) = tokio::join!(
        try_acquire(
            api.client(),
            "fleetwright",
            "tick",
            "invocation-a",
            TTL,
            at(0)
        ),
        try_acquire(
            api.client(),
            "fleetwright",
            "tick",
            "invocation-b",
            TTL,
            at(0)
        ),
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    assert!(
        a.is_some() != b.is_some(),
        "exactly one holder: a={:?} b={:?}",
        a.is_some(),
        b.is_some()
    );
    let winner = a.or(b).unwrap();
    assert!(matches!(
        winner.holder(),
        Some("invocation-a") | Some("invocation-b")
    ));
}

#[tokio::test]
async fn a_live_lease_is_respected_and_a_dead_one_taken_over() {
    let api = FakeApi::start(BTreeMap::new()).await;
    let first = try_acquire(api.client(), "fleetwright", "tick", "a", TTL, at(0))
        .await
        .unwrap();
    assert!(first.is_some());
    // 30 s later the holder is alive: b exits cleanly.
    assert!(
        try_acquire(api.client(), "fleetwright", "tick", "b", TTL, at(30))
            .await
            .unwrap()
            .is_none()
    );
    // The holder died; after the lease duration b takes over.
    let taken = try_acquire(api.client(), "fleetwright", "tick", "b", TTL, at(61))
        .await
        .unwrap()
        .expect("taken over");
    assert_eq!(taken.holder(), Some("b"));
    // a's stale view cannot overwrite b: releasing with an old resourceVersion is a no-op.
    first.unwrap().release().await.unwrap();
    assert!(
        try_acquire(api.client(), "fleetwright", "tick", "c", TTL, at(62))
            .await
            .unwrap()
            .is_none()
    );
    // b releases and c gets it at once.
    taken.release().await.unwrap();
    let c = try_acquire(api.client(), "fleetwright", "tick", "c", TTL, at(63))
        .await
        .unwrap();
    assert_eq!(c.unwrap().holder(), Some("c"));
}

#[tokio::test]
async fn the_same_holder_renews_its_own_lease() {
    let api = FakeApi::start(BTreeMap::new()).await;
    assert!(try_acquire(api.client(), "ns", "tick", "a", TTL, at(0))
        .await
        .unwrap()
        .is_some());
    assert!(try_acquire(api.client(), "ns", "tick", "a", TTL, at(10))
        .await
        .unwrap()
        .is_some());
}

/// A 503 on the Lease write is retried (the write carries its resourceVersion, so a retry after
/// one that landed meets a 409), and so is one on its release: a blip of the API server does not
/// leave the lease held for its whole duration, and every later tick skipped.
#[tokio::test]
async fn transient_errors_on_the_lease_writes_are_retried() {
    use fleetwright_sim::memory::{Fault, MemoryApi};
    let api = MemoryApi::new(BTreeMap::new());
    let write_fails = |times| Fault {
        method: "WRITE".into(),
        path: "/".into(),
        status: 503,
        skip: 0,
        times,
    };
    api.lock().faults.push(write_fails(2));
    let held = try_acquire(api.client(), "fleetwright", "tick", "a", TTL, at(0))
        .await
        .expect("retried past two 503s")
        .expect("the lease is free");
    api.lock().faults.push(write_fails(1));
    held.release().await.expect("the release is retried too");
    let next = try_acquire(api.client(), "fleetwright", "tick", "b", TTL, at(1))
        .await
        .unwrap();
    assert!(next.is_some(), "the released lease is free at once");
}

/// A client whose first `times` writes to a Lease land on the server, but whose answers are lost
/// on the way back (answered 503), as when a connection drops after the API server wrote.
fn losing_lease_answers(api: &fleetwright_sim::memory::MemoryApi, times: usize) -> kube::Client {
    use http_body_util::BodyExt;
    let api = api.clone();
    let left = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(times));
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let (api, left) = (api.clone(), left.clone());
        async move {
            let (parts, body) = request.into_parts();
            let body = body
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            let uri = parts.uri.to_string();
            let method = parts.method.as_str();
            let mut reply = api.respond(method, &uri, "", &body);
            let lease_write = method != "GET" && uri.contains("/leases");
            if lease_write
                && left
                    .fetch_update(
                        std::sync::atomic::Ordering::SeqCst,
                        std::sync::atomic::Ordering::SeqCst,
                        |n| n.checked_sub(1),
                    )
                    .is_ok()
            {
                reply.status = 503;
                reply.body = serde_json::json!({"kind": "Status", "apiVersion": "v1",
                    "status": "Failure", "reason": "ServiceUnavailable", "code": 503,
                    "message": "the answer was lost"});
            }
            Ok::<_, std::convert::Infallible>(reply.into_http())
        }
    });
    kube::Client::new(service, "default")
}

/// A Lease write whose answer was lost is retried and meets its own write as a 409: the Lease,
/// read again, names this invocation, so the tick holds it (instead of skipping while holding
/// it, and every tick after it until the Lease expires). The same holds for the first create.
#[tokio::test]
async fn a_retried_lease_write_that_meets_its_own_write_holds_the_lease() {
    use fleetwright_sim::memory::MemoryApi;
    let api = MemoryApi::new(BTreeMap::new());
    let created = try_acquire(losing_lease_answers(&api, 1), "ns", "tick", "a", TTL, at(0))
        .await
        .unwrap()
        .expect("the create landed: the lease is a's");
    assert_eq!(created.holder(), Some("a"));
    created.release().await.unwrap();

    let replaced = try_acquire(losing_lease_answers(&api, 1), "ns", "tick", "b", TTL, at(5))
        .await
        .unwrap()
        .expect("the replace landed: the lease is b's");
    assert_eq!(replaced.holder(), Some("b"));
    // The guard carries the current resourceVersion, so its release lands and frees the lease.
    replaced.release().await.unwrap();
    let next = try_acquire(api.client(), "ns", "tick", "c", TTL, at(6))
        .await
        .unwrap();
    assert!(next.is_some(), "b's release freed the lease");

    // c holds it now: others are still kept out.
    assert!(try_acquire(api.client(), "ns", "tick", "d", TTL, at(7))
        .await
        .unwrap()
        .is_none());
}
