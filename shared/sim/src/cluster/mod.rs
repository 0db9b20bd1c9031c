//! The simulated cluster around the in-memory Kubernetes API: what the rest of Kubernetes does
//! between two Fleetwright invocations. A kubelet registers a node about 40 s after its instance
//! launched (with the `karpenter.sh/unregistered` taint and the NodeClaim's labels and taints) and
//! reports it Ready 20 s later; nodes go when their instance does. Deployments (through their
//! ReplicaSet) keep their replica count, replacing evicted pods and pods whose node is gone.
//! DaemonSets put a pod on every node whose taints they tolerate. A scheduler binds pending pods
//! to Ready, schedulable nodes, least-allocated first, and marks the rest `Unschedulable` as
//! kube-scheduler does.
//!
//! The scheduler checks requests, nodeSelector, required node affinity and taints; it ignores
//! pod (anti-)affinity, topology spread and host ports.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use fleetwright_core::labels::{
    ARCH, CAPACITY_TYPE, HOSTNAME, INSTANCE_TYPE, NODEPOOL, REGION, ZONE,
};
use fleetwright_core::model::{tolerates_all, TaintEffect};
use fleetwright_core::InstanceType;
use fleetwright_kube::convert;
use fleetwright_kube::memory::MemoryApi;
use k8s_openapi::api::core::v1::{Node, Pod};
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
const UNREGISTERED: &str = "karpenter.sh/unregistered";

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

mod scheduler;

use scheduler::bind;

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
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
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
        Cluster {
            api: MemoryApi::new(collections),
            deployments,
            types,
            pods: BTreeMap::new(),
            waits: Vec::new(),
            rng: Rng::new(seed ^ 0x9e37_79b9),
            failed: BTreeSet::new(),
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

    pub fn delete(&mut self, deployment: &str) {
        if let Some(d) = self.deployments.remove(deployment) {
            let mut state = self.api.lock();
            let pods = state.objects.entry(PODS.into()).or_default();
            pods.retain(|p| owner_name(p) != Some(d.replicaset.as_str()));
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

    /// A node of `nodepool` fails (one holding workload pods while there is one; `pick` chooses
    /// among the candidates): its `condition` takes `status` from `now` on and stays so. A
    /// failed `Ready` is tainted as the node lifecycle controller taints it (`unreachable` for
    /// `Unknown`, `not-ready` for `False`), so nothing new is scheduled there; its pods stay
    /// bound, as they do on a node whose kubelet is gone. Returns the node.
    pub fn fail_node(
        &mut self,
        nodepool: &str,
        condition: &str,
        status: &str,
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
            json!({"type": condition, "status": status, "reason": "Simulated",
                "lastTransitionTime": stamp(now)}),
        );
        if condition == "Ready" {
            let taint = if status == "Unknown" {
                "unreachable"
            } else {
                "not-ready"
            };
            let taints = node["spec"]["taints"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let mut taints: Vec<Value> = taints;
            for effect in ["NoSchedule", "NoExecute"] {
                taints
                    .push(json!({"key": format!("node.kubernetes.io/{taint}"), "effect": effect}));
            }
            node["spec"]["taints"] = Value::Array(taints);
        }
        info!(target: "simulate::kubelet", node = %name, %condition, %status, "node failed");
        self.failed.insert(name.clone());
        Some(name)
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
                        .any(|c| c["type"] == "Ready" && c["status"] == "True")
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
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]});
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

    /// Registers nodes for instances launched long enough ago, reports them Ready, and removes
    /// the nodes of instances that are gone.
    pub fn kubelet(&mut self, live: &BTreeMap<String, SimInstance>, now: DateTime<Utc>) {
        let providers: BTreeMap<String, &SimInstance> = live
            .values()
            .map(|i| (format!("aws:///{}/{}", i.instance.zone, i.instance.id), i))
            .collect();
        let mut state = self.api.lock();
        let claims = state.objects.get(NODECLAIMS).cloned().unwrap_or_default();
        let nodes = state.objects.entry(NODES.into()).or_default();
        let before: BTreeSet<String> = nodes
            .iter()
            .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_string))
            .collect();
        nodes.retain(|n| {
            providers.contains_key(n["spec"]["providerID"].as_str().unwrap_or_default())
        });
        for gone in before
            .iter()
            .filter(|b| !nodes.iter().any(|n| n["metadata"]["name"] == **b))
        {
            info!(target: "simulate::kubelet", node = %gone, "node removed: its instance is gone");
        }
        let mut joined = Vec::new();
        for (provider, instance) in &providers {
            let launched = instance.instance.launch_time.unwrap_or(now);
            let existing = nodes
                .iter_mut()
                .find(|n| n["spec"]["providerID"] == **provider);
            match existing {
                Some(node)
                    if now - launched >= REGISTER_AFTER + READY_AFTER
                        && !ready(node)
                        && !self
                            .failed
                            .contains(node["metadata"]["name"].as_str().unwrap_or_default()) =>
                {
                    mark_ready(node, &claims, now);
                    info!(target: "simulate::kubelet", node = %node["metadata"]["name"].as_str().unwrap_or_default(), "node ready");
                }
                Some(_) => {}
                None if now - launched >= REGISTER_AFTER => {
                    let node = self.new_node(provider, instance, &claims, now);
                    info!(target: "simulate::kubelet", node = %node["metadata"]["name"].as_str().unwrap_or_default(), instance_id = %instance.instance.id, "node registered");
                    joined.push(node.clone());
                    nodes.push(node);
                }
                None => {}
            }
        }
        let daemonsets = state.objects.get(PATHS[3].1).cloned().unwrap_or_default();
        let pods = state.objects.entry(PODS.into()).or_default();
        for node in &joined {
            pods.extend(daemon_pods(&daemonsets, node, now));
        }
    }

    fn new_node(
        &self,
        provider: &str,
        instance: &SimInstance,
        claims: &[Value],
        now: DateTime<Utc>,
    ) -> Value {
        node_object(&self.types, provider, instance, claims, now)
    }

    /// The Deployment and ReplicaSet controllers and pod garbage collection: evicted pods and
    /// pods whose node is gone are deleted; each Deployment is brought to its replica count.
    /// Returns the pods created.
    pub fn controllers(&mut self, now: DateTime<Utc>) -> Vec<Value> {
        let mut state = self.api.lock();
        let evicted: BTreeSet<String> = std::mem::take(&mut state.evicted).into_iter().collect();
        let nodes: BTreeSet<String> = state
            .objects
            .get(NODES)
            .into_iter()
            .flatten()
            .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_string))
            .collect();
        let pods = state.objects.entry(PODS.into()).or_default();
        pods.retain(|p| {
            let orphaned = node_name(p).is_some_and(|n| !nodes.contains(n));
            !(evicted.contains(&key(p)) || orphaned)
        });
        let mut created = Vec::new();
        for d in self.deployments.values() {
            let mine: Vec<usize> = (0..pods.len())
                .filter(|&i| owner_name(&pods[i]) == Some(d.replicaset.as_str()))
                .collect();
            let want = d.replicas as usize;
            if mine.len() > want {
                // Unbound pods go first, then the newest.
                let mut order = mine.clone();
                order.sort_by_key(|&i| (node_name(&pods[i]).is_some(), std::cmp::Reverse(i)));
                let drop: BTreeSet<usize> = order.into_iter().take(mine.len() - want).collect();
                let mut i = 0;
                pods.retain(|_| {
                    i += 1;
                    !drop.contains(&(i - 1))
                });
            }
            for _ in mine.len()..want {
                let pod = new_pod(d, &self.rng.suffix(), now);
                created.push(pod.clone());
                pods.push(pod);
            }
        }
        created
    }
}

/// The Node a kubelet registers for `instance` (provider ID `provider`): the labels and taints
/// of its NodeClaim (from `claims`), the well-known labels, the unregistered taint, and the
/// allocatable resources of its type; not Ready yet.
pub fn node_object(
    types: &BTreeMap<String, InstanceType>,
    provider: &str,
    instance: &SimInstance,
    claims: &[Value],
    now: DateTime<Utc>,
) -> Value {
    let i = &instance.instance;
    let serial = u64::from_str_radix(i.id.trim_start_matches("i-"), 16).unwrap_or(0) & 0xffff;
    let name = format!("ip-10-0-{}-{}.ec2.internal", serial / 250, serial % 250 + 1);
    let claim = claims
        .iter()
        .find(|c| c["status"]["providerID"] == provider)
        .cloned()
        .unwrap_or(Value::Null);
    let mut labels = claim["metadata"]["labels"].clone();
    if !labels.is_object() {
        labels = json!({});
    }
    labels[HOSTNAME] = json!(name);
    labels[INSTANCE_TYPE] = json!(i.instance_type);
    labels[ZONE] = json!(i.zone);
    labels[CAPACITY_TYPE] = json!(i.capacity_type);
    labels[NODEPOOL] = json!(instance.nodepool());
    // What a kubelet and the cloud node manager label every node with.
    labels["kubernetes.io/os"] = json!("linux");
    if let Some(region) = fleetwright_core::region::of_zone(&i.zone) {
        labels[REGION] = json!(region);
    }
    if let Some(arch) = types
        .get(&i.instance_type)
        .and_then(|t| t.requirements.get(ARCH).and_then(|r| r.any()))
    {
        labels[ARCH] = json!(arch);
    }
    let mut taints: Vec<Value> = claim["spec"]["taints"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    taints.extend(
        claim["spec"]["startupTaints"]
            .as_array()
            .cloned()
            .unwrap_or_default(),
    );
    taints.push(json!({"key": UNREGISTERED, "effect": "NoExecute"}));
    let allocatable = types.get(&i.instance_type).map_or(json!({}), |t| {
        let a = &t.allocatable;
        json!({"cpu": format!("{}m", a.cpu), "memory": a.memory.to_string(),
               "pods": a.pods.to_string(), "ephemeral-storage": a.ephemeral.to_string()})
    });
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": format!("uid-{name}"), "labels": labels,
            "creationTimestamp": stamp(now)},
        "spec": {"providerID": provider, "taints": taints},
        "status": {"allocatable": allocatable, "capacity": allocatable,
            "conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}]}})
}

fn mark_ready(node: &mut Value, claims: &[Value], now: DateTime<Utc>) {
    node["status"]["conditions"] = json!([{"type": "Ready", "status": "True", "reason": "KubeletReady",
        "lastTransitionTime": stamp(now)}]);
    // The agents that own startup taints (a CNI, say) remove them once the node is up.
    let provider = node["spec"]["providerID"].clone();
    let startup: Vec<Value> = claims
        .iter()
        .find(|c| c["status"]["providerID"] == provider)
        .and_then(|c| c["spec"]["startupTaints"].as_array().cloned())
        .unwrap_or_default();
    if let Some(taints) = node["spec"]["taints"].as_array_mut() {
        taints.retain(|t| !startup.iter().any(|s| s["key"] == t["key"]));
    }
}

fn new_pod(d: &Deployment, suffix: &str, now: DateTime<Utc>) -> Value {
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

fn daemon_pods(daemonsets: &[Value], node: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let name = node["metadata"]["name"].as_str().unwrap_or_default();
    let taints: Vec<fleetwright_core::model::Taint> = serde_json::from_value::<Node>(node.clone())
        .ok()
        .and_then(|n| convert::node(&n).ok())
        .map(|n| n.taints)
        .unwrap_or_default();
    daemonsets
        .iter()
        .filter_map(|ds| {
            let ds_name = ds["metadata"]["name"].as_str()?;
            let pod = json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("{ds_name}-{:05x}", fnv(name) & 0xfffff),
                    "namespace": ds["metadata"]["namespace"].as_str().unwrap_or("default"),
                    "creationTimestamp": stamp(now),
                    "labels": ds["spec"]["template"]["metadata"]["labels"].clone(),
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": ds_name,
                        "uid": format!("uid-{ds_name}"), "controller": true}]},
                "spec": ds["spec"]["template"]["spec"].clone(),
                "status": {"phase": "Running"}});
            let core = serde_json::from_value::<Pod>(pod.clone())
                .ok()
                .and_then(|p| convert::pod(&p, &Default::default()).ok())?;
            let blocking = taints.iter().filter(|t| {
                matches!(t.effect, TaintEffect::NoSchedule | TaintEffect::NoExecute)
                    && t.key != UNREGISTERED
            });
            tolerates_all(&core.tolerations, blocking).is_none().then(|| {
                let mut pod = pod;
                bind(&mut pod, name, now);
                pod
            })
        })
        .collect()
}

/// FNV-1a, for stable generated names.
pub fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}
