//! Which unbound pods of a cluster dump are not ones to provision for: a pod kube-scheduler
//! nominated a node for or is binding, a pod it has not found unschedulable, and, when a dump
//! written by hand gives no condition, a gated pod and another scheduler's pod. The tick never sees such a pod as pending (it
//! needs kube-scheduler's `Unschedulable`, as Karpenter does); a dump written by hand may lack
//! that condition, so the cases are named here.

use fleetwright_crds::conditions::{POD_SCHEDULED, UNSCHEDULABLE};
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
        .find(|c| c.type_ == POD_SCHEDULED);
    let unschedulable = scheduled
        .is_some_and(|c| c.status == "False" && c.reason.as_deref() == Some(UNSCHEDULABLE));
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
#[path = "../tests/unit/provisionable.rs"]
mod tests;
