use super::*;
use fleetwright_kube::dump::SlimPod;
use k8s_openapi::api::core::v1::Pod;

fn pending(created: i64) -> SlimPod {
    let mut pod = Pod::default();
    pod.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::from_second(created).unwrap(),
    ));
    SlimPod::new(pod)
}

/// Launches wait while pods keep coming (two or more less than a second old), and never
/// past ten seconds after the oldest; a lone new pod does not wait.
#[test]
fn the_batch_stays_open_while_pods_keep_coming_and_at_most_ten_seconds() {
    let now = DateTime::from_timestamp(1_800_000_000, 0).unwrap();
    let t = now.timestamp();
    let dump = |created: &[i64]| ClusterDump {
        slim_pods: created.iter().map(|&c| pending(c)).collect(),
        ..Default::default()
    };
    assert_eq!(batch_wait(&dump(&[t - 3, t, t]), now), Some(BATCH_IDLE));
    assert_eq!(batch_wait(&dump(&[t - 3, t - 1, t - 1]), now), None);
    assert_eq!(batch_wait(&dump(&[t - 10, t, t]), now), None);
    // A lone new pod is planned at once.
    assert_eq!(batch_wait(&dump(&[t - 3, t]), now), None);
    assert_eq!(batch_wait(&dump(&[]), now), None);
    let mut bound = pending(t);
    bound.node_name = Some("n1".into());
    let with_bound = ClusterDump {
        slim_pods: vec![pending(t - 3), pending(t), bound],
        ..Default::default()
    };
    assert_eq!(batch_wait(&with_bound, now), None);
}
