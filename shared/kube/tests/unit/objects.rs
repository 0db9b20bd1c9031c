use super::*;
use fleetwright_core::plan::RequirementOut;

fn req(key: &str, operator: &str, values: &[&str]) -> RequirementOut {
    RequirementOut {
        key: key.into(),
        operator: operator.into(),
        values: values.iter().map(|v| v.to_string()).collect(),
        min_values: None,
    }
}

fn planned(requirements: Vec<RequirementOut>, relaxed: Option<bool>) -> NewNodeClaim {
    NewNodeClaim {
        nodepool: "default".into(),
        instance_types: vec!["m5.large".into()],
        capacity_types: vec!["spot".into()],
        zones: vec!["us-east-1a".into()],
        pods: vec![],
        requests: Default::default(),
        price: 0.1,
        requirements,
        labels: Default::default(),
        taints: vec![],
        startup_taints: vec![],
        node_class: "default".into(),
        min_values_relaxed: relaxed,
        reservation: None,
    }
}

/// Every custom requirement becomes a label with a value it allows (Karpenter labels each
/// one), so the node satisfies its own pool's requirements; a multi-valued well-known one
/// waits for the launch to say which value it got.
#[test]
fn a_new_nodeclaim_is_labelled_for_each_requirement_and_marked_when_relaxed() {
    let claim = nodeclaim_for(
        &NodePool::new("default", Default::default()),
        None,
        &planned(
            vec![
                req("team", "In", &["web", "api"]),
                req("tier", "Exists", &[]),
                req("slot", "NotIn", &["0", "1"]),
                req("gen", "Gt", &["4"]),
                req("karpenter.sh/capacity-type", "In", &["spot", "on-demand"]),
                req("kubernetes.io/arch", "In", &["arm64"]),
            ],
            Some(true),
        ),
    );
    let labels = claim.metadata.labels.unwrap();
    for (key, value) in [
        ("team", "web"),
        ("tier", "0"),
        ("slot", "2"),
        ("gen", "5"),
        ("kubernetes.io/arch", "arm64"),
    ] {
        assert_eq!(labels.get(key).map(String::as_str), Some(value), "{key}");
    }
    assert!(!labels.contains_key("karpenter.sh/capacity-type"));
    let annotations = claim.metadata.annotations.unwrap();
    assert_eq!(annotations[MIN_VALUES_RELAXED], "true");
    let plain = nodeclaim_for(
        &NodePool::new("default", Default::default()),
        None,
        &planned(vec![], None),
    );
    assert!(!plain
        .metadata
        .annotations
        .unwrap()
        .contains_key(MIN_VALUES_RELAXED));
}

fn tolerating(tolerations: serde_json::Value) -> Pod {
    serde_json::from_value(serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "shop"},
        "spec": {"containers": [], "tolerations": tolerations}}))
    .unwrap()
}

/// A drain neither evicts nor waits for a pod that tolerates `karpenter.sh/disrupted:NoSchedule`
/// (Karpenter's `ToleratesDisruptedNoScheduleTaint`): any key with `Exists`, the key with
/// `Exists` or an empty value, and no effect or `NoSchedule`.
#[test]
fn a_pod_tolerating_the_disrupted_taint_is_left_by_a_drain() {
    use serde_json::json;
    let tolerates = |t| tolerates_no_schedule(&tolerating(t), TAINT_DISRUPTED);
    assert!(tolerates(json!([{"operator": "Exists"}])));
    assert!(tolerates(
        json!([{"key": "karpenter.sh/disrupted", "operator": "Exists"}])
    ));
    assert!(tolerates(
        json!([{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}])
    ));
    assert!(!tolerates(
        json!([{"operator": "Exists", "effect": "NoExecute"}])
    ));
    assert!(!tolerates(
        json!([{"key": "karpenter.sh/disrupted", "value": "x"}])
    ));
    assert!(!tolerates(
        json!([{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}])
    ));
    assert!(!tolerates(json!([])));
    let everything = tolerating(json!([{"operator": "Exists"}]));
    assert!(left_by_drain(&everything, TAINT_DISRUPTED));
    assert!(!left_by_drain(&tolerating(json!([])), TAINT_DISRUPTED));
    // Behind another fence, only a toleration of that fence counts.
    let disrupted = tolerating(json!([{"key": "karpenter.sh/disrupted", "operator": "Exists"}]));
    assert!(!left_by_drain(&disrupted, "karpenter.sh/rebooting"));
    assert!(left_by_drain(&everything, "karpenter.sh/rebooting"));
}
