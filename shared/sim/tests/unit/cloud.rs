//! The simulated cloud's warnings and injected listings.

use super::*;

fn spot(id: &str) -> Instance {
    Instance {
        id: id.to_string(),
        instance_type: "m5.large".into(),
        zone: "us-east-1a".into(),
        state: "running".into(),
        capacity_type: "spot".into(),
        image_id: "ami-1".into(),
        subnet_id: String::new(),
        security_groups: Vec::new(),
        launch_time: None,
        tags: [(NODEPOOL.to_string(), "default".to_string())].into(),
        capacity_reservation_id: None,
        partition: None,
    }
}

/// Polls a future that never waits (the simulated cloud's calls do not).
fn ready<T>(f: impl std::future::Future<Output = T>) -> T {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match f.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => v,
        std::task::Poll::Pending => unreachable!("the simulated cloud never waits"),
    }
}

#[test]
fn an_injected_listing_succeeds_empty_or_stale_once() {
    let cloud = SimCloud::new("c", Arc::new(Catalog::embedded().clone()));
    for id in ["i-1", "i-2", "i-3"] {
        cloud.adopt(spot(id), 0.05);
    }
    let listing = |cloud: &SimCloud| -> Vec<String> {
        ready(cloud.instances())
            .map(|l| l.into_iter().map(|i| i.id).collect())
            .unwrap_or_default()
    };
    for (code, want) in [(EMPTY_LISTING, vec![]), ("StaleTags", vec!["i-1", "i-3"])] {
        cloud.inject(CloudFault {
            operation: "DescribeInstancesListing",
            code: code.into(),
            times: 1,
            after_launch: false,
        });
        assert_eq!(listing(&cloud), want, "{code}");
        assert_eq!(listing(&cloud), ["i-1", "i-2", "i-3"], "once");
    }
}

#[test]
fn a_warning_goes_to_a_preferred_instance_while_one_is_left() {
    let cloud = SimCloud::new("c", Arc::new(Catalog::embedded().clone()));
    for id in ["i-1", "i-2", "i-3"] {
        cloud.adopt(spot(id), 0.05);
    }
    let now = Utc::now();
    let busy = |i: &Instance| i.id == "i-3";
    let first = cloud.warn_spot_preferring("default", 1, now, busy, |_| 0);
    assert_eq!(first[0].id, "i-3", "the only preferred instance goes first");
    let next = cloud.warn_spot_preferring("default", 3, now, busy, |_| 0);
    let ids: Vec<&str> = next.iter().map(|i| i.id.as_str()).collect();
    assert_eq!(ids, ["i-1", "i-2"], "then the rest, each once");
    assert!(cloud.warn_spot("other", 1, now, |_| 0).is_empty());
}
