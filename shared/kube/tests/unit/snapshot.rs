use super::*;
use serde_json::json;

fn pod(value: serde_json::Value) -> Pod {
    serde_json::from_value(value).unwrap()
}

#[test]
fn pending_means_unschedulable_unbound_unnominated_and_not_a_daemonset() {
    let unschedulable =
        json!({"type": "PodScheduled", "status": "False", "reason": "Unschedulable"});
    let base = json!({"metadata": {"name": "p"}, "spec": {"containers": []}, "status": {"conditions": [unschedulable]}});
    assert!(is_pending(&pod(base.clone())));
    let mut bound = base.clone();
    bound["spec"]["nodeName"] = json!("n1");
    assert!(!is_pending(&pod(bound)));
    let mut nominated = base.clone();
    nominated["status"]["nominatedNodeName"] = json!("n1");
    assert!(!is_pending(&pod(nominated)));
    let mut ds = base.clone();
    ds["metadata"]["ownerReferences"] =
        json!([{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "u"}]);
    assert!(!is_pending(&pod(ds)));
    let fresh = json!({"metadata": {"name": "p"}, "spec": {"containers": []}, "status": {"phase": "Pending"}});
    assert!(!is_pending(&pod(fresh)), "not yet seen by kube-scheduler");
}
