use super::*;
use serde_json::json;

fn pod(spec: serde_json::Value, status: serde_json::Value) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "a"},
            "spec": spec, "status": status}))
    .unwrap()
}

#[test]
fn only_pods_kube_scheduler_could_not_place_ask_for_capacity() {
    let plain = json!({"containers": []});
    assert_eq!(waits_for_another(&pod(plain.clone(), json!({}))), None);
    let unschedulable = json!({"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]});
    assert_eq!(waits_for_another(&pod(plain.clone(), unschedulable)), None);
    let gated_condition = json!({"conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]});
    assert!(waits_for_another(&pod(plain.clone(), gated_condition)).is_some());
    let gated = json!({"containers": [], "schedulingGates": [{"name": "wait"}]});
    assert!(waits_for_another(&pod(gated, json!({}))).is_some());
    let fargate = json!({"containers": [], "schedulerName": "fargate-scheduler"});
    assert!(waits_for_another(&pod(fargate, json!({}))).is_some());
    let nominated = json!({"nominatedNodeName": "n1"});
    assert!(waits_for_another(&pod(plain.clone(), nominated)).is_some());
    let profile = json!({"containers": [], "schedulerName": "batch-profile"});
    let marked = json!({"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]});
    assert_eq!(waits_for_another(&pod(profile, marked)), None);
    let binding = json!({"conditions": [{"type": "PodScheduled", "status": "True"}]});
    assert!(waits_for_another(&pod(plain, binding)).is_some());
    let bound = json!({"containers": [], "nodeName": "n1", "schedulerName": "other"});
    assert_eq!(waits_for_another(&pod(bound, json!({}))), None);
}
