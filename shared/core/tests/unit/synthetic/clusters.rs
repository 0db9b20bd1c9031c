use super::*;

#[test]
fn every_mix_has_about_the_pods_asked_for_and_is_deterministic() {
    for mix in CLUSTER_MIXES {
        let a = cluster_mix(mix, 1000, 3).expect("a known mix");
        let b = cluster_mix(mix, 1000, 3).expect("a known mix");
        assert!(
            (900..=1100).contains(&a.pods.len()),
            "{mix}: {} pods",
            a.pods.len()
        );
        let requests = |s: &Snapshot| -> Vec<Resources> {
            s.pods.iter().map(|p| p.requests.clone()).collect()
        };
        assert_eq!(requests(&a), requests(&b), "{mix}");
    }
    assert!(cluster_mix("nope", 10, 1).is_none());
}
