//! How full the run's nodes are: the requests of the pods bound to them over their allocatable
//! CPU and memory (what Karpenter's performance tests call reserved-capacity utilization), read
//! the same way whichever autoscaler made the nodes.

use std::collections::BTreeMap;

use fleetwright_core::resources::Resources;
use k8s_openapi::api::core::v1::{Node, Pod};

/// CPU and memory utilization of `nodes` by `pods`; None without nodes.
pub fn utilization(nodes: &[Node], pods: &[Pod]) -> Option<(f64, f64)> {
    let mut allocatable = Resources::default();
    let mut names = Vec::new();
    for node in nodes {
        let Some(status) = &node.status else { continue };
        allocatable.add(&resources(status.allocatable.as_ref()));
        names.extend(node.metadata.name.clone());
    }
    let mut requested = Resources::default();
    for pod in pods.iter().filter(|p| running_on(p, &names)) {
        for container in pod.spec.iter().flat_map(|s| &s.containers) {
            let requests = container
                .resources
                .as_ref()
                .and_then(|r| r.requests.as_ref());
            requested.add(&resources(requests));
        }
    }
    let share = |r: &str| match allocatable.get(r) {
        0 => 0.0,
        total => requested.get(r) as f64 / total as f64,
    };
    (!names.is_empty()).then(|| (share("cpu"), share("memory")))
}

/// Bound to one of `nodes` and not finished.
fn running_on(pod: &Pod, nodes: &[String]) -> bool {
    let bound = pod.spec.as_ref().and_then(|s| s.node_name.as_ref());
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    bound.is_some_and(|n| nodes.contains(n)) && !matches!(phase, Some("Succeeded" | "Failed"))
}

fn resources(
    list: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) -> Resources {
    let entries = list
        .into_iter()
        .flatten()
        .filter(|(name, _)| matches!(name.as_str(), "cpu" | "memory"))
        .map(|(name, q)| (name.as_str(), q.0.as_str()));
    Resources::parse(entries).unwrap_or_default()
}

#[cfg(test)]
#[path = "../../../tests/unit/simulate/live/utilization.rs"]
mod tests;
