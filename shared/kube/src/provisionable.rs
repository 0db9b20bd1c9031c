//! Which unbound pods of a cluster dump are not ones to provision for: a pod kube-scheduler
//! nominated a node for or is binding, a pod it has not found unschedulable, and, when a dump
//! written by hand gives no condition, a gated pod and another scheduler's pod. The tick never sees such a pod as pending (it
//! needs kube-scheduler's `Unschedulable`, as Karpenter does); a dump written by hand may lack
//! that condition, so the cases are named here.

use k8s_openapi::api::core::v1::Pod;

/// Why an unbound pod is not one to provision for, if it is not. A pod kube-scheduler marked
/// `Unschedulable` is one, whatever its scheduler's name (a second kube-scheduler profile), unless
/// it has a nominated node: the tick's live read and Karpenter hold the same.
pub fn waits_for_another(pod: &Pod) -> Option<&'static str> {
    let spec = pod.spec.as_ref()?;
    if spec.node_name.as_deref().is_some_and(|n| !n.is_empty()) {
        return None;
    }
    let status = pod.status.as_ref();
    let scheduled = status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "PodScheduled");
    let unschedulable = scheduled
        .is_some_and(|c| c.status == "False" && c.reason.as_deref() == Some("Unschedulable"));
    if status
        .and_then(|s| s.nominated_node_name.as_deref())
        .is_some_and(|n| !n.is_empty())
    {
        Some("kube-scheduler nominated a node for it")
    } else if unschedulable {
        None
    } else if let Some(c) = scheduled {
        Some(if c.status == "True" {
            "kube-scheduler is binding it"
        } else {
            "kube-scheduler has not found it unschedulable"
        })
    } else if spec
        .scheduling_gates
        .as_ref()
        .is_some_and(|g| !g.is_empty())
    {
        Some("it has scheduling gates")
    } else if (spec.scheduler_name.as_deref()).is_some_and(|n| n != "default-scheduler") {
        Some("another scheduler places it")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
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
}
