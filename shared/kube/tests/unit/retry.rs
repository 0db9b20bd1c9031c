use super::*;

fn unavailable() -> kube::Error {
    kube::Error::Api(
        kube::core::Status::failure("unavailable", "ServiceUnavailable")
            .with_code(503)
            .boxed(),
    )
}

/// A retried call ends within the budget however its attempts behave: slow failures are
/// retried only while one more fits, and a hung attempt is cut at the budget. Unbounded,
/// four attempts of one read timeout each would outlast the deadline margin several times.
#[tokio::test]
async fn a_retried_call_ends_within_its_budget() {
    let budget = Duration::from_millis(400);
    let started = std::time::Instant::now();
    let attempts = std::sync::atomic::AtomicU32::new(0);
    let slow_failures = within(budget, "slow", || async {
        attempts.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(150)).await;
        Err::<(), _>(unavailable())
    })
    .await;
    assert!(slow_failures.is_err());
    assert!(started.elapsed() < budget + Duration::from_millis(100));
    assert!(
        attempts.load(Ordering::Relaxed) >= 2,
        "a retry that fits is made"
    );

    let started = std::time::Instant::now();
    let hung = within(budget, "hung", || {
        std::future::pending::<Result<(), kube::Error>>()
    });
    let err = hung.await.unwrap_err();
    assert!(transient(&err), "{err}");
    assert!(started.elapsed() < budget + Duration::from_millis(100));
}

/// The default: one call with its retries, hung or failing slowly, ends within [`BUDGET`],
/// not after [`ATTEMPTS`] read timeouts.
#[tokio::test]
async fn with_retries_is_bounded_by_the_budget() {
    assert!(BUDGET < READ_TIMEOUT * ATTEMPTS);
    let started = std::time::Instant::now();
    let slow = with_retries("slow", || async {
        tokio::time::sleep(Duration::from_secs(3)).await;
        Err::<(), _>(unavailable())
    });
    assert!(tokio::time::timeout(BUDGET + Duration::from_secs(1), slow)
        .await
        .is_ok_and(|r| r.is_err()));
    assert!(started.elapsed() <= BUDGET + Duration::from_millis(200));
}

#[test]
fn a_jittered_pause_is_between_half_and_all_of_it() {
    for ms in [0u64, 1, 100, 800] {
        for _ in 0..50 {
            let wait = jittered(Duration::from_millis(ms)).as_millis() as u64;
            assert!(wait >= ms / 2 && wait <= ms, "{wait} ms for {ms} ms");
        }
    }
}
