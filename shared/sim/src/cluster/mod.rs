//! The simulated cluster around the in-memory Kubernetes API: what the rest of Kubernetes does
//! between two Fleetwright invocations. A kubelet registers a node about 40 s after its instance
//! launched (with the `karpenter.sh/unregistered` taint and the NodeClaim's labels and taints),
//! reports it Ready 20 s later, and ends the pods being deleted on it ([`kubelet`]); the Node of
//! an instance that is gone is deleted through the API, and its finalizers hold it. Deployments
//! (through their ReplicaSet) keep their replica count, replacing pods being deleted and pods
//! whose node is gone; the disruption controller keeps every PodDisruptionBudget's status
//! ([`controllers`]). DaemonSets put a pod on every node whose taints they tolerate. A scheduler
//! binds pending pods to Ready, schedulable nodes, least-allocated first, and marks the rest
//! `Unschedulable` as kube-scheduler does. The in-memory API server runs with graceful pod
//! deletion (`graceful_pods`).
//!
//! The scheduler checks requests, nodeSelector, required node affinity and taints; it ignores
//! pod (anti-)affinity, topology spread and host ports.

use std::collections::{BTreeMap, BTreeSet};

use crate::memory::MemoryApi;
use chrono::{DateTime, Duration, SecondsFormat, Utc};
use fleetwright_core::labels::{NODEPOOL, TAINT_NOT_READY, TAINT_UNREACHABLE, TAINT_UNREGISTERED};
use fleetwright_core::InstanceType;
use fleetwright_crds::conditions;
use serde_json::{json, Value};
use tracing::info;

use crate::cloud::SimInstance;
use fleetwright_core::rng::Rng;

pub const PODS: &str = "/api/v1/pods";
pub const NODES: &str = "/api/v1/nodes";
pub const NODECLAIMS: &str = "/apis/karpenter.sh/v1/nodeclaims";
/// Launch to node registration.
pub const REGISTER_AFTER: Duration = Duration::seconds(40);
/// Registration to Ready.
pub const READY_AFTER: Duration = Duration::seconds(20);

/// The list path of each kind a scenario may hold.
const PATHS: [(&str, &str); 7] = [
    ("NodePool", "/apis/karpenter.sh/v1/nodepools"),
    ("EC2NodeClass", "/apis/karpenter.k8s.aws/v1/ec2nodeclasses"),
    ("NodeOverlay", "/apis/karpenter.sh/v1alpha1/nodeoverlays"),
    ("DaemonSet", "/apis/apps/v1/daemonsets"),
    (
        "PodDisruptionBudget",
        "/apis/policy/v1/poddisruptionbudgets",
    ),
    ("Pod", PODS),
    ("Node", NODES),
];

mod controllers;
mod kubelet;
mod scheduler;

pub use kubelet::node_object;

fn stamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// A Deployment: its pod template and replica count.
#[derive(Clone, Debug)]
struct Deployment {
    namespace: String,
    replicas: u32,
    template: Value,
    /// The ReplicaSet's name (`<deployment>-<hash>`).
    replicaset: String,
}

/// A bound pod's wait: when it was created and how long it stayed pending.
#[derive(Clone, Debug, PartialEq)]
pub struct Wait {
    pub pod: String,
    pub created: DateTime<Utc>,
    pub seconds: i64,
}

/// The simulated cluster.
pub struct Cluster {
    pub api: MemoryApi,
    deployments: BTreeMap<String, Deployment>,
    types: BTreeMap<String, InstanceType>,
    /// Core views of pods, by `namespace/name` (pods never change their requests).
    pods: BTreeMap<String, fleetwright_core::model::Pod>,
    /// Bound pods' waits, in binding order.
    pub waits: Vec<Wait>,
    rng: Rng,
    /// Nodes whose kubelet or hardware failed: the kubelet no longer reports them Ready.
    failed: BTreeSet<String>,
    /// Failed nodes whose fault a reboot does not clear.
    persistent: BTreeSet<String>,
    /// Instances rebooting: the reboot count the kubelet last saw, and since when.
    rebooting: BTreeMap<String, (u32, DateTime<Utc>)>,
    /// Instances whose node registers and never becomes Ready.
    pub never_ready: BTreeSet<String>,
    /// Instances whose kubelet has registered its node (it does not register it again).
    registered: BTreeSet<String>,
    /// Pods being deleted take a share of their grace period to exit, drawn from their name;
    /// otherwise they exit at once.
    pub slow_exits: bool,
    /// Every eviction the API server accepted (`namespace/name`), in order.
    pub evictions: Vec<String>,
    /// Pods deleted by their own controllers (a scale-down, a Deployment deleted).
    pub scaled_down: BTreeSet<String>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster").finish_non_exhaustive()
    }
}

fn key(pod: &Value) -> String {
    format!(
        "{}/{}",
        pod["metadata"]["namespace"].as_str().unwrap_or("default"),
        pod["metadata"]["name"].as_str().unwrap_or_default()
    )
}

fn owner_name(pod: &Value) -> Option<&str> {
    pod["metadata"]["ownerReferences"]
        .as_array()?
        .iter()
        .find(|o| o["controller"] == true)?["name"]
        .as_str()
}

fn is_daemon_pod(pod: &Value) -> bool {
    pod["metadata"]["ownerReferences"]
        .as_array()
        .is_some_and(|o| o.iter().any(|o| o["kind"] == "DaemonSet"))
}

fn node_name(pod: &Value) -> Option<&str> {
    pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty())
}

fn ready(node: &Value) -> bool {
    node["status"]["conditions"].as_array().is_some_and(|c| {
        c.iter()
            .any(|c| c["type"] == conditions::READY && c["status"] == "True")
    })
}

fn set_condition(object: &mut Value, condition: Value) {
    let conditions = object["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut kept: Vec<Value> = conditions
        .into_iter()
        .filter(|c| c["type"] != condition["type"])
        .collect();
    kept.push(condition);
    object["status"]["conditions"] = Value::Array(kept);
}

impl Cluster {
    /// A cluster holding the scenario's objects; Deployments are kept here (the API fake does
    /// not serve them) and start with the replica count they declare.
    pub fn new(objects: &[Value], types: BTreeMap<String, InstanceType>, seed: u64) -> Cluster {
        let mut collections: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        let mut deployments = BTreeMap::new();
        for o in objects {
            let kind = o["kind"].as_str().unwrap_or_default();
            if kind == "Deployment" {
                let name = o["metadata"]["name"].as_str().unwrap_or_default();
                deployments.insert(
                    name.to_string(),
                    Deployment {
                        namespace: o["metadata"]["namespace"]
                            .as_str()
                            .unwrap_or("default")
                            .to_string(),
                        replicas: o["spec"]["replicas"].as_u64().unwrap_or(1) as u32,
                        template: o["spec"]["template"].clone(),
                        replicaset: format!("{name}-{:09x}", fnv(name) & 0xf_ffff_ffff),
                    },
                );
            } else if let Some((_, path)) = PATHS.iter().find(|(k, _)| *k == kind) {
                collections
                    .entry(path.to_string())
                    .or_default()
                    .push(o.clone());
            }
        }
        let api = MemoryApi::new(collections);
        api.lock().graceful_pods = true;
        Cluster {
            api,
            deployments,
            types,
            pods: BTreeMap::new(),
            waits: Vec::new(),
            rng: Rng::new(seed ^ 0x9e37_79b9),
            failed: BTreeSet::new(),
            persistent: BTreeSet::new(),
            rebooting: BTreeMap::new(),
            never_ready: BTreeSet::new(),
            registered: BTreeSet::new(),
            slow_exits: false,
            evictions: Vec::new(),
            scaled_down: BTreeSet::new(),
        }
    }

    /// Sets the API server's clock (for the deletion timestamps it writes).
    pub fn set_clock(&self, now: DateTime<Utc>) {
        self.api.lock().now = Some(stamp(now));
    }

    pub fn scale(&mut self, deployment: &str, replicas: u32) {
        if let Some(d) = self.deployments.get_mut(deployment) {
            d.replicas = replicas;
        }
    }

    /// Replaces the NodePool, EC2NodeClass or NodeOverlay of `object`'s kind and name (or adds it), as
    /// `kubectl apply` would: the stored object's status and identity are kept.
    pub fn apply(&mut self, object: &Value) {
        let kind = object["kind"].as_str().unwrap_or_default();
        let Some((_, path)) = PATHS.iter().find(|(k, _)| *k == kind) else {
            return;
        };
        let mut state = self.api.lock();
        let list = state.objects.entry(path.to_string()).or_default();
        let name = &object["metadata"]["name"];
        let mut next = object.clone();
        match list.iter_mut().find(|o| &o["metadata"]["name"] == name) {
            Some(current) => {
                for key in ["uid", "creationTimestamp", "resourceVersion"] {
                    if !current["metadata"][key].is_null() {
                        next["metadata"][key] = current["metadata"][key].clone();
                    }
                }
                if !current["status"].is_null() {
                    next["status"] = current["status"].clone();
                }
                *current = next;
            }
            None => list.push(next),
        }
    }

    /// Deletes the NodePool, EC2NodeClass, NodeOverlay, DaemonSet or PodDisruptionBudget of
    /// `object`'s kind and name, as `kubectl delete` would. Returns whether it was there.
    pub fn remove(&mut self, object: &Value) -> bool {
        let kind = object["kind"].as_str().unwrap_or_default();
        let Some((_, path)) = PATHS.iter().find(|(k, _)| *k == kind) else {
            return false;
        };
        let mut state = self.api.lock();
        let list = state.objects.entry(path.to_string()).or_default();
        let before = list.len();
        list.retain(|o| {
            o["metadata"]["name"] != object["metadata"]["name"]
                || o["metadata"]["namespace"] != object["metadata"]["namespace"]
        });
        before != list.len()
    }

    /// `kubectl delete node`: one registered node that is not being deleted yet (`pick` chooses
    /// among them) is deleted through the API, so its finalizers hold it. Returns its name and
    /// provider ID.
    pub fn delete_node_by_hand(
        &mut self,
        pick: impl FnOnce(usize) -> usize,
    ) -> Option<(String, String)> {
        let mut state = self.api.lock();
        let candidates: Vec<(String, String)> = state
            .objects
            .get(NODES)
            .into_iter()
            .flatten()
            .filter(|n| n["metadata"]["deletionTimestamp"].is_null())
            // A person deletes a node they can see working: one that has joined.
            .filter(|n| {
                !n["spec"]["taints"]
                    .as_array()
                    .is_some_and(|t| t.iter().any(|t| t["key"] == TAINT_UNREGISTERED))
            })
            .map(|n| {
                let name = n["metadata"]["name"].as_str().unwrap_or_default();
                let provider = n["spec"]["providerID"].as_str().unwrap_or_default();
                (name.to_string(), provider.to_string())
            })
            .collect();
        if candidates.is_empty() {
            return None;
        }
        let chosen = candidates[pick(candidates.len())].clone();
        let uri = format!("{NODES}/{}", chosen.0);
        crate::memory::component_request(&mut state, "DELETE", &uri, b"");
        info!(target: "simulate::kubelet", node = %chosen.0, "node deleted by hand");
        Some(chosen)
    }

    /// A node of `nodepool` fails (one holding workload pods while there is one; `pick` chooses
    /// among the candidates): its `condition` takes `status`, with `reason`, from `now` on and
    /// stays so. A
    /// failed `Ready` is tainted as the node lifecycle controller taints it (`unreachable` for
    /// `Unknown`, `not-ready` for `False`), so nothing new is scheduled there; its pods stay
    /// bound, as they do on a node whose kubelet is gone. Returns the node.
    pub fn fail_node(
        &mut self,
        nodepool: &str,
        (condition, status, reason): (&str, &str, &str),
        now: DateTime<Utc>,
        pick: impl FnOnce(usize) -> usize,
    ) -> Option<String> {
        let mut state = self.api.lock();
        let busy: BTreeSet<String> = state
            .objects
            .get(PODS)
            .into_iter()
            .flatten()
            .filter(|p| !is_daemon_pod(p))
            .filter_map(|p| node_name(p).map(str::to_string))
            .collect();
        let nodes = state.objects.entry(NODES.into()).or_default();
        let of_pool: Vec<usize> = (0..nodes.len())
            .filter(|&i| nodes[i]["metadata"]["labels"][NODEPOOL] == nodepool)
            .filter(|&i| {
                !self
                    .failed
                    .contains(nodes[i]["metadata"]["name"].as_str().unwrap_or_default())
            })
            .collect();
        let holding: Vec<usize> = of_pool
            .iter()
            .copied()
            .filter(|&i| busy.contains(nodes[i]["metadata"]["name"].as_str().unwrap_or_default()))
            .collect();
        let candidates = if holding.is_empty() { of_pool } else { holding };
        if candidates.is_empty() {
            return None;
        }
        let node = &mut nodes[candidates[pick(candidates.len())]];
        let name = node["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        set_condition(
            node,
            json!({"type": condition, "status": status, "reason": reason,
                "lastTransitionTime": stamp(now)}),
        );
        if condition == conditions::READY {
            let taint = if status == "Unknown" {
                TAINT_UNREACHABLE
            } else {
                TAINT_NOT_READY
            };
            let taints = node["spec"]["taints"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let mut taints: Vec<Value> = taints;
            for effect in ["NoSchedule", "NoExecute"] {
                taints.push(json!({"key": taint, "effect": effect}));
            }
            node["spec"]["taints"] = Value::Array(taints);
        }
        info!(target: "simulate::kubelet", node = %name, %condition, %status, "node failed");
        self.failed.insert(name.clone());
        Some(name)
    }

    /// The fault of a failed node outlives its reboots (a GPU that is really broken).
    pub fn persist_failure(&mut self, node: &str) {
        self.persistent.insert(node.to_string());
    }

    /// Pods of a deployment that are bound, and all of its pods.
    pub fn deployment_pods(&self, deployment: &str) -> (usize, usize) {
        let Some(d) = self.deployments.get(deployment) else {
            return (0, 0);
        };
        let state = self.api.lock();
        let pods: Vec<&Value> = state
            .objects
            .get(PODS)
            .into_iter()
            .flatten()
            .filter(|p| owner_name(p) == Some(d.replicaset.as_str()))
            .collect();
        let bound = pods.iter().filter(|p| node_name(p).is_some()).count();
        (bound, pods.len())
    }

    /// Nodes, and how many are Ready.
    pub fn nodes(&self) -> (usize, usize) {
        let state = self.api.lock();
        let nodes = state.objects.get(NODES).map(Vec::as_slice).unwrap_or(&[]);
        let ready = nodes
            .iter()
            .filter(|n| {
                n["status"]["conditions"].as_array().is_some_and(|c| {
                    c.iter()
                        .any(|c| c["type"] == conditions::READY && c["status"] == "True")
                })
            })
            .count();
        (nodes.len(), ready)
    }

    /// The node of an instance, if it registered.
    pub fn node_of(&self, zone: &str, instance_id: &str) -> Option<String> {
        let provider = format!("aws:///{zone}/{instance_id}");
        let state = self.api.lock();
        state
            .objects
            .get(NODES)?
            .iter()
            .find(|n| n["spec"]["providerID"] == provider.as_str())
            .and_then(|n| n["metadata"]["name"].as_str().map(str::to_string))
    }

    /// Workload pods bound to a node.
    pub fn workload_on(&self, node: &str) -> usize {
        let state = self.api.lock();
        state
            .objects
            .get(PODS)
            .into_iter()
            .flatten()
            .filter(|p| !is_daemon_pod(p) && node_name(p) == Some(node))
            .count()
    }

    /// Workload pods (not DaemonSet pods): running, and pending with their creation times.
    pub fn workload(&self) -> (usize, Vec<DateTime<Utc>>) {
        let state = self.api.lock();
        let mut running = 0;
        let mut pending = Vec::new();
        for p in state.objects.get(PODS).into_iter().flatten() {
            if is_daemon_pod(p) {
                continue;
            }
            if node_name(p).is_some() {
                running += 1;
            } else {
                let created = p["metadata"]["creationTimestamp"]
                    .as_str()
                    .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                    .map(|t| t.with_timezone(&Utc))
                    .unwrap_or_default();
                pending.push(created);
            }
        }
        (running, pending)
    }

    /// The workload pods, all as pending, for a from-scratch plan (the LP bound).
    pub fn workload_as_pending(&self) -> Vec<Value> {
        let state = self.api.lock();
        state
            .objects
            .get(PODS)
            .into_iter()
            .flatten()
            .filter(|p| !is_daemon_pod(p))
            .map(|p| {
                let mut p = p.clone();
                p["spec"]["nodeName"] = Value::Null;
                p["status"] = json!({"phase": "Pending", "conditions": [
                    {"type": conditions::POD_SCHEDULED, "status": "False",
                        "reason": conditions::UNSCHEDULABLE}]});
                p
            })
            .collect()
    }

    /// The objects a plan needs besides pods: NodePools, EC2NodeClasses, NodeOverlays,
    /// DaemonSets.
    pub fn configuration(&self) -> Vec<Value> {
        let state = self.api.lock();
        PATHS[..4]
            .iter()
            .flat_map(|(_, path)| state.objects.get(*path).cloned().unwrap_or_default())
            .collect()
    }
}

/// FNV-1a, for stable generated names.
pub fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}
