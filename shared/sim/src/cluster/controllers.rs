//! The simulated kube-controller-manager: the Deployment and ReplicaSet controllers (a replica
//! count kept, pods being deleted not counted, surplus pods deleted through the API), pod garbage
//! collection (pods bound to a Node that no longer exists are force-deleted through the API), and
//! the disruption controller (every PodDisruptionBudget's status). Every deletion goes through
//! the in-memory API server's rules.

use crate::memory::{component_request, refresh_budget_statuses, State};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use super::*;

fn pod_uri(pod: &Value, force: bool) -> String {
    let namespace = pod["metadata"]["namespace"].as_str().unwrap_or("default");
    let name = pod["metadata"]["name"].as_str().unwrap_or_default();
    let query = if force { "?gracePeriodSeconds=0" } else { "" };
    format!("/api/v1/namespaces/{namespace}/pods/{name}{query}")
}

fn deleting(pod: &Value) -> bool {
    !pod["metadata"]["deletionTimestamp"].is_null()
}

impl Cluster {
    /// The Deployment and ReplicaSet controllers, pod garbage collection and the disruption
    /// controller. Returns the pods created.
    pub fn controllers(&mut self, now: DateTime<Utc>) -> Vec<Value> {
        let api = self.api.clone();
        let mut state = api.lock();
        let accepted = std::mem::take(&mut state.evicted);
        self.evictions.extend(accepted);
        collect_orphans(&mut state);
        let mut created = Vec::new();
        let deployments: Vec<Deployment> = self.deployments.values().cloned().collect();
        for d in &deployments {
            created.extend(self.reconcile(&mut state, d, now));
        }
        refresh_budget_statuses(&mut state);
        created
    }

    /// Brings one Deployment's pods to its replica count: unbound pods go first, then the
    /// newest; pods being deleted count for nothing.
    fn reconcile(&mut self, state: &mut State, d: &Deployment, now: DateTime<Utc>) -> Vec<Value> {
        let pods = state.objects.entry(PODS.into()).or_default();
        let mine: Vec<usize> = (0..pods.len())
            .filter(|&i| owner_name(&pods[i]) == Some(d.replicaset.as_str()))
            .filter(|&i| !deleting(&pods[i]))
            .collect();
        let want = d.replicas as usize;
        let mut created = Vec::new();
        if mine.len() > want {
            let mut order = mine.clone();
            order.sort_by_key(|&i| (node_name(&pods[i]).is_some(), std::cmp::Reverse(i)));
            let surplus: Vec<Value> = order
                .into_iter()
                .take(mine.len() - want)
                .map(|i| pods[i].clone())
                .collect();
            // Without slow exits a pod's containers stop at once: it goes in the same second.
            for pod in surplus {
                self.scaled_down.insert(key(&pod));
                component_request(state, "DELETE", &pod_uri(&pod, !self.slow_exits), b"");
            }
            return created;
        }
        for _ in mine.len()..want {
            let pod = new_pod(d, &self.rng.suffix(), now);
            created.push(pod.clone());
            pods.push(pod);
        }
        created
    }

    /// Deletes a Deployment and, through the API, its pods (the garbage collector's cascade).
    pub fn delete(&mut self, deployment: &str) {
        let Some(d) = self.deployments.remove(deployment) else {
            return;
        };
        let api = self.api.clone();
        let mut state = api.lock();
        let theirs: Vec<Value> = state
            .objects
            .get(PODS)
            .into_iter()
            .flatten()
            .filter(|p| owner_name(p) == Some(d.replicaset.as_str()))
            .cloned()
            .collect();
        for pod in theirs {
            self.scaled_down.insert(key(&pod));
            component_request(&mut state, "DELETE", &pod_uri(&pod, !self.slow_exits), b"");
        }
    }
}

/// Pod garbage collection: pods bound to a Node that does not exist are force-deleted.
fn collect_orphans(state: &mut State) {
    let nodes: BTreeSet<String> = state
        .objects
        .get(NODES)
        .into_iter()
        .flatten()
        .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    let orphans: Vec<Value> = state
        .objects
        .get(PODS)
        .into_iter()
        .flatten()
        .filter(|p| node_name(p).is_some_and(|n| !nodes.contains(n)))
        .cloned()
        .collect();
    for pod in orphans {
        component_request(state, "DELETE", &pod_uri(&pod, true), b"");
    }
}

pub(super) fn new_pod(d: &Deployment, suffix: &str, now: DateTime<Utc>) -> Value {
    let name = format!("{}-{suffix}", d.replicaset);
    let mut metadata = d.template["metadata"].clone();
    if !metadata.is_object() {
        metadata = json!({});
    }
    metadata["name"] = json!(name);
    metadata["namespace"] = json!(d.namespace);
    metadata["uid"] = json!(format!("uid-{name}"));
    metadata["creationTimestamp"] = json!(stamp(now));
    metadata["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "name": d.replicaset, "uid": format!("uid-{}", d.replicaset), "controller": true}]);
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
        "spec": d.template["spec"].clone(), "status": {"phase": "Pending"}})
}

#[cfg(test)]
#[path = "../../tests/unit/cluster/controllers.rs"]
mod tests;
