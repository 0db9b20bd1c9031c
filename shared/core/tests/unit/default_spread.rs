use super::*;
use crate::resources::Resources;

fn pod(name: &str, labels: &[(&str, &str)], owner: Option<(&str, &str)>) -> Pod {
    let mut p = Pod::new("web", name, Resources::new(100, 0));
    p.labels = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    p.owner_kind = owner.map(|(k, _)| k.to_string());
    p.owner_name = owner.map(|(_, n)| n.to_string());
    p
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn zone_default() -> Vec<DefaultSpread> {
    vec![DefaultSpread::new(1, "topology.kubernetes.io/zone", false)]
}

fn selectors() -> Selectors {
    let mut s = Selectors::default();
    s.add_service("web", map(&[("app", "web")]));
    s.add_service("other", map(&[("tier", "x")]));
    let mut rs = Requirements::new();
    rs.add(Requirement::single("pod-template-hash", "abc"));
    s.sets
        .insert(("web".into(), "ReplicaSet".into(), "web-abc".into()), rs);
    s.replication_controllers
        .insert(("web".into(), "legacy".into()), map(&[("rc", "legacy")]));
    s
}

#[test]
fn a_pod_of_a_service_and_a_replicaset_is_spread_over_both_their_selectors() {
    let mut pods = vec![pod(
        "web-1",
        &[("app", "web"), ("pod-template-hash", "abc"), ("tier", "x")],
        Some(("ReplicaSet", "web-abc")),
    )];
    apply(&mut pods, &zone_default(), &selectors());
    let spread = &pods[0].spread;
    assert_eq!(spread.len(), 1);
    assert!(!spread[0].hard);
    let mut want = Requirements::new();
    want.add(Requirement::single("pod-template-hash", "abc"));
    want.add(Requirement::single("app", "web"));
    assert_eq!(
        spread[0].selector, want,
        "the other namespace's Service is not counted"
    );
}

#[test]
fn a_replication_controller_selector_merges_as_labels() {
    let mut pods = vec![pod(
        "rc-1",
        &[("rc", "legacy")],
        Some(("ReplicationController", "legacy")),
    )];
    apply(&mut pods, &zone_default(), &selectors());
    assert_eq!(
        pods[0].spread[0].selector,
        Requirements::from_labels(&map(&[("rc", "legacy")]))
    );
}

#[test]
fn pods_with_their_own_spread_or_nothing_to_deduce_from_are_left_alone() {
    let mut own = pod("own", &[("app", "web")], None);
    own.spread.push(constraint(
        &DefaultSpread::new(3, "kubernetes.io/hostname", true),
        Requirements::new(),
    ));
    let job = pod("job-1", &[("batch", "x")], Some(("Job", "nightly")));
    let gone = pod("gone", &[], Some(("ReplicaSet", "deleted")));
    let mut pods = vec![own.clone(), job, gone];
    apply(&mut pods, &zone_default(), &selectors());
    assert_eq!(
        pods[0].spread, own.spread,
        "a pod's own spread wins, all or nothing"
    );
    assert!(pods[1].spread.is_empty(), "a Job's pod no Service selects");
    assert!(
        pods[2].spread.is_empty(),
        "an owner that cannot be read adds nothing"
    );
}

#[test]
fn no_defaults_change_nothing() {
    let mut pods = vec![pod("web-1", &[("app", "web")], None)];
    apply(&mut pods, &[], &selectors());
    assert!(pods[0].spread.is_empty());
}
