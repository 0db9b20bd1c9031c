//! The simulated kube-scheduler: it binds pending pods to Ready, schedulable nodes,
//! least-allocated first, checking requests, nodeSelector, required node affinity and taints, and
//! marks the rest `Unschedulable`. It ignores pod (anti-)affinity, topology spread and host ports.

use chrono::{DateTime, Utc};
use fleetwright_core::model::{tolerates_all, TaintEffect};
use fleetwright_core::resources::Resources;
use fleetwright_crds::conditions;
use fleetwright_kube::convert;
use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

use super::*;

impl Cluster {
    /// Binds pending pods to Ready, schedulable nodes with room (least allocated first); marks
    /// the pods left `Unschedulable`. Returns how many were bound.
    pub fn scheduler(&mut self, now: DateTime<Utc>) -> usize {
        let mut state = self.api.lock();
        let unbound = state
            .objects
            .get(PODS)
            .is_some_and(|pods| pods.iter().any(|p| node_name(p).is_none()));
        if !unbound {
            return 0;
        }
        let nodes = schedulable_nodes(state.objects.get(NODES).map(Vec::as_slice).unwrap_or(&[]));
        let pods = state.objects.entry(PODS.into()).or_default();
        let live: BTreeSet<String> = pods.iter().map(key).collect();
        self.pods.retain(|k, _| live.contains(k));
        let mut used: BTreeMap<String, Resources> = BTreeMap::new();
        for p in pods.iter() {
            if let Some(n) = node_name(p) {
                let requests = core_pod(&mut self.pods, p).requests.clone();
                used.entry(n.to_string()).or_default().add(&requests);
            }
        }
        let mut bound = 0;
        for pod in pods.iter_mut().filter(|p| node_name(p).is_none()) {
            let core = core_pod(&mut self.pods, pod).clone();
            let choice = nodes
                .iter()
                .filter(|n| fits(&core, n, used.get(&n.name)))
                .max_by(|a, b| {
                    free_share(a, used.get(&a.name))
                        .total_cmp(&free_share(b, used.get(&b.name)))
                        .then_with(|| b.name.cmp(&a.name))
                });
            match choice {
                Some(n) => {
                    used.entry(n.name.clone()).or_default().add(&core.requests);
                    bind(pod, &n.name, now);
                    let created = pod["metadata"]["creationTimestamp"]
                        .as_str()
                        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                        .map_or(now, |t| t.with_timezone(&Utc));
                    self.waits.push(Wait {
                        pod: key(pod),
                        created,
                        seconds: (now - created).num_seconds(),
                    });
                    bound += 1;
                }
                None => set_condition(
                    pod,
                    json!({"type": conditions::POD_SCHEDULED, "status": "False",
                        "reason": conditions::UNSCHEDULABLE,
                        "message": "0/0 nodes are available"}),
                ),
            }
        }
        bound
    }
}

fn core_pod<'a>(
    cache: &'a mut BTreeMap<String, fleetwright_core::model::Pod>,
    pod: &Value,
) -> &'a fleetwright_core::model::Pod {
    cache.entry(key(pod)).or_insert_with(|| {
        serde_json::from_value::<Pod>(pod.clone())
            .ok()
            .and_then(|p| convert::pod(&p, &Default::default()).ok())
            .unwrap_or_default()
    })
}

fn schedulable_nodes(nodes: &[Value]) -> Vec<fleetwright_core::model::Node> {
    nodes
        .iter()
        .filter_map(|n| serde_json::from_value::<Node>(n.clone()).ok())
        .filter_map(|n| convert::node(&n).ok())
        .filter(|n| n.ready && !n.unschedulable && !n.deleting)
        .collect()
}

fn fits(
    pod: &fleetwright_core::model::Pod,
    node: &fleetwright_core::model::Node,
    used: Option<&Resources>,
) -> bool {
    let blocking = node
        .taints
        .iter()
        .filter(|t| matches!(t.effect, TaintEffect::NoSchedule | TaintEffect::NoExecute));
    if tolerates_all(&pod.tolerations, blocking).is_some() {
        return false;
    }
    if !pod.base_requirements().matches_labels(&node.labels) {
        return false;
    }
    if !pod.required_terms.is_empty()
        && !pod
            .required_terms
            .iter()
            .any(|t| t.matches_labels(&node.labels))
    {
        return false;
    }
    let mut total = used.cloned().unwrap_or_default();
    total.add(&pod.requests);
    total.fits_in(&node.allocatable)
}

fn free_share(node: &fleetwright_core::model::Node, used: Option<&Resources>) -> f64 {
    let cpu = used.map_or(0, |u| u.cpu);
    1.0 - cpu as f64 / node.allocatable.cpu.max(1) as f64
}

pub(super) fn bind(pod: &mut Value, node: &str, now: DateTime<Utc>) {
    pod["spec"]["nodeName"] = json!(node);
    pod["status"]["phase"] = json!("Running");
    pod["status"]["startTime"] = json!(stamp(now));
    // As kube-scheduler: the binding's time is what a node's last pod event reads.
    let scheduled = json!({"type": conditions::POD_SCHEDULED, "status": "True", "lastTransitionTime": stamp(now)});
    set_condition(pod, scheduled);
    set_condition(pod, json!({"type": conditions::READY, "status": "True"}));
}
