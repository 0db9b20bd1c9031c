//! What a live run measures at the end of each second: the fleet, the Deployments' progress,
//! and each minute a sample of nodes, pods, cost against the LP bound and utilization.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};
use serde_json::{json, Value};

use super::{stamp, utilization, Live};
use crate::simulate::report::Sample;

impl Live {
    pub(super) async fn observe(&mut self, t: i64, pods: &[Pod]) {
        // Seconds lost to a slow round repeat the fleet as it was.
        while (self.watch.series.len() as i64) < t {
            let last = self.watch.series.last().copied().unwrap_or_default();
            self.watch.series.push(last);
        }
        let live = match self.karpenter {
            Some(_) => self.karpenter_fleet().await,
            None => self.cloud.live(),
        };
        self.watch.note_fleet(t, self.nodes.len(), &live);
        let mut counts = BTreeMap::new();
        for o in self
            .scenario
            .objects
            .iter()
            .filter(|o| o["kind"] == "Deployment")
        {
            let name = o["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            if let Ok(d) = self.deployment(&name).get(&name).await {
                let status = d.status.unwrap_or_default();
                counts.insert(
                    name,
                    (
                        status.ready_replicas.unwrap_or(0),
                        status.replicas.unwrap_or(0),
                    ),
                );
            }
        }
        self.watch.note_scaling(t, |d, replicas| {
            counts
                .get(d)
                .is_some_and(|&(ready, total)| ready == replicas as i32 && total == replicas as i32)
        });
        if t % 60 == 0 || t == self.scenario.duration {
            let ready_nodes = self.ready_nodes().await;
            let used = self.utilization(pods).await;
            let workload: Vec<&Pod> = pods.iter().filter(|p| workload(p)).collect();
            let running = workload
                .iter()
                .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
                .count();
            let pending = workload
                .iter()
                .filter(|p| p.spec.as_ref().is_none_or(|s| s.node_name.is_none()))
                .count();
            self.watch.samples.push(Sample {
                t,
                nodes: self.nodes.len(),
                ready_nodes,
                running_pods: running,
                pending_pods: pending,
                hourly_cost: self.hourly(),
                lower_bound: self.lower_bound(&workload),
                cpu_utilization: used.map(|u| u.0),
                memory_utilization: used.map(|u| u.1),
            });
        }
    }

    /// CPU and memory utilization of the run's nodes by `pods`.
    pub(super) async fn utilization(&self, pods: &[Pod]) -> Option<(f64, f64)> {
        let api: Api<Node> = Api::all(self.admin.clone());
        let params = ListParams::default().labels(&self.run.selector());
        let nodes = api.list(&params).await.ok()?.items;
        let nodes: Vec<Node> = nodes.into_iter().filter(|n| self.run.owns(n)).collect();
        utilization::utilization(&nodes, pods)
    }

    pub(super) async fn ready_nodes(&self) -> usize {
        let api: Api<Node> = Api::all(self.admin.clone());
        let mut ready_count = 0;
        for name in self.nodes.keys() {
            if api.get(name).await.is_ok_and(|n| ready(&n)) {
                ready_count += 1;
            }
        }
        ready_count
    }

    pub(super) fn lower_bound(&self, workload: &[&Pod]) -> f64 {
        let mut items: Vec<Value> = self
            .scenario
            .objects
            .iter()
            .filter(|o| {
                matches!(
                    o["kind"].as_str(),
                    Some("NodePool" | "EC2NodeClass" | "NodeOverlay" | "DaemonSet")
                )
            })
            .cloned()
            .collect();
        for pod in workload {
            let Ok(mut value) = serde_json::to_value(pod) else {
                continue;
            };
            if let Some(spec) = value["spec"].as_object_mut() {
                spec.remove("nodeName");
            }
            value["status"] = json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]});
            items.push(value);
        }
        crate::simulate::whole_reservations(&mut items, &self.scenario);
        crate::simulate::lower_bound(&self.catalog, items)
    }
}

/// A pod of the workload: not a DaemonSet's.
pub(super) fn workload(pod: &Pod) -> bool {
    !pod.metadata
        .owner_references
        .as_ref()
        .is_some_and(|o| o.iter().any(|o| o.kind == "DaemonSet"))
}

pub(super) fn ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// When kube-scheduler bound the pod.
pub(super) fn bound_at(pod: &Pod) -> Option<DateTime<Utc>> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled" && c.status == "True")?
        .last_transition_time
        .as_ref()
        .map(stamp)
}
