//! The simulated kubelets and the node lifecycle controller. A kubelet registers its node about
//! [`REGISTER_AFTER`] after its instance launched (once: a Node deleted by hand is not registered
//! again) and reports it Ready [`READY_AFTER`] later, unless its instance is one that never
//! initializes. It ends the pods being deleted on its node when their containers have exited
//! (at once, or with [`Cluster::slow_exits`] after a share of their grace period), by the final
//! delete with `gracePeriodSeconds=0`. The node lifecycle controller marks the Node of an
//! instance that is gone unreachable (Ready `Unknown`, the `unreachable` taints) and deletes it
//! through the API: a Node with finalizers stays, being deleted, until its owner removes them,
//! and the pods being deleted on it stay too, since no kubelet ends them. Nothing here writes around the API server's delete rules.

use std::collections::BTreeMap;

use crate::memory::{component_request, grace_seconds, State};
use chrono::{DateTime, Utc};
use fleetwright_core::labels::{
    ARCH, CAPACITY_TYPE, HOSTNAME, INSTANCE_TYPE, NODEPOOL, REGION, ZONE,
};
use fleetwright_core::model::{tolerates_all, TaintEffect};
use fleetwright_core::InstanceType;
use fleetwright_kube::convert;
use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{json, Value};
use tracing::info;

use super::scheduler::bind;
use super::*;

impl Cluster {
    /// Registers nodes for instances launched long enough ago, reports them Ready, ends the pods
    /// whose containers have exited, and deletes the Nodes of instances that are gone. Returns
    /// the Nodes registered (created), for the admission webhook.
    pub fn kubelet(
        &mut self,
        live: &BTreeMap<String, SimInstance>,
        now: DateTime<Utc>,
    ) -> Vec<Value> {
        let providers: BTreeMap<String, &SimInstance> = live
            .values()
            .map(|i| (format!("aws:///{}/{}", i.instance.zone, i.instance.id), i))
            .collect();
        let api = self.api.clone();
        let mut state = api.lock();
        self.delete_gone_nodes(&mut state, &providers);
        self.end_exited_pods(&mut state, &providers, now);
        let claims = state.objects.get(NODECLAIMS).cloned().unwrap_or_default();
        let nodes = state.objects.entry(NODES.into()).or_default();
        let mut joined = Vec::new();
        for (provider, instance) in &providers {
            let launched = instance.instance.launch_time.unwrap_or(now);
            let existing = nodes
                .iter_mut()
                .find(|n| n["spec"]["providerID"] == **provider);
            let name_of = |n: &Value| {
                n["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            };
            match existing {
                Some(node)
                    if now - launched >= REGISTER_AFTER + READY_AFTER
                        && !ready(node)
                        && node["metadata"]["deletionTimestamp"].is_null()
                        && !self.never_ready.contains(&instance.instance.id)
                        && !self.failed.contains(&name_of(node)) =>
                {
                    mark_ready(node, &claims, now);
                    info!(target: "simulate::kubelet", node = %name_of(node), "node ready");
                }
                Some(_) => {}
                None if now - launched >= REGISTER_AFTER
                    && !self.registered.contains(&instance.instance.id) =>
                {
                    let node = node_object(&self.types, provider, instance, &claims, now);
                    info!(target: "simulate::kubelet", node = %name_of(&node), instance_id = %instance.instance.id, "node registered");
                    self.registered.insert(instance.instance.id.clone());
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
        joined
    }

    /// The node lifecycle controller: the Node of an instance that is gone is deleted (once).
    fn delete_gone_nodes(&self, state: &mut State, providers: &BTreeMap<String, &SimInstance>) {
        let gone: Vec<String> = state
            .objects
            .get(NODES)
            .into_iter()
            .flatten()
            .filter(|n| {
                !providers.contains_key(n["spec"]["providerID"].as_str().unwrap_or_default())
            })
            .filter(|n| n["metadata"]["deletionTimestamp"].is_null())
            .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_string))
            .collect();
        for name in gone {
            mark_unreachable(state, &name);
            let reply = component_request(state, "DELETE", &format!("{NODES}/{name}"), b"");
            let held = !reply.body["metadata"]["deletionTimestamp"].is_null()
                && reply.body["metadata"]["finalizers"]
                    .as_array()
                    .is_some_and(|f| !f.is_empty());
            if held {
                info!(target: "simulate::kubelet", node = %name, "node deleted: its instance is gone; its finalizers hold it");
            } else {
                info!(target: "simulate::kubelet", node = %name, "node removed: its instance is gone");
            }
        }
    }

    /// Pods being deleted on a node whose kubelet runs go once their containers have exited.
    fn end_exited_pods(
        &self,
        state: &mut State,
        providers: &BTreeMap<String, &SimInstance>,
        now: DateTime<Utc>,
    ) {
        let running: BTreeSet<String> = state
            .objects
            .get(NODES)
            .into_iter()
            .flatten()
            .filter(|n| {
                providers.contains_key(n["spec"]["providerID"].as_str().unwrap_or_default())
            })
            .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_string))
            .collect();
        let exited: Vec<(String, String)> = state
            .objects
            .get(PODS)
            .into_iter()
            .flatten()
            .filter(|p| node_name(p).is_some_and(|n| running.contains(n)))
            .filter(|p| self.exited(p, now))
            .map(|p| {
                (
                    p["metadata"]["namespace"]
                        .as_str()
                        .unwrap_or("default")
                        .to_string(),
                    p["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                )
            })
            .collect();
        for (namespace, name) in exited {
            let uri = format!("/api/v1/namespaces/{namespace}/pods/{name}?gracePeriodSeconds=0");
            component_request(state, "DELETE", &uri, b"");
        }
    }

    /// Whether a pod being deleted has exited by `now`: at once, or with slow exits after a
    /// share of its grace period drawn from its name (never later than the grace period).
    fn exited(&self, pod: &Value, now: DateTime<Utc>) -> bool {
        let Some(deadline) = pod["metadata"]["deletionTimestamp"]
            .as_str()
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        else {
            return false;
        };
        let grace = pod["metadata"]["deletionGracePeriodSeconds"]
            .as_i64()
            .unwrap_or_else(|| grace_seconds(pod));
        let asked = deadline.with_timezone(&Utc) - Duration::seconds(grace);
        let after = if self.slow_exits {
            (fnv(&key(pod)) % (grace.max(0) as u64 + 1)) as i64
        } else {
            0
        };
        now >= asked + Duration::seconds(after)
    }
}

/// What the node lifecycle controller writes on a Node whose kubelet stopped reporting: Ready
/// `Unknown`, and the `unreachable` taints, so nothing new is scheduled there.
fn mark_unreachable(state: &mut State, name: &str) {
    let Some(node) = state
        .objects
        .get_mut(NODES)
        .and_then(|n| n.iter_mut().find(|n| n["metadata"]["name"] == name))
    else {
        return;
    };
    set_condition(
        node,
        json!({"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
            "message": "Kubelet stopped posting node status."}),
    );
    let mut taints = node["spec"]["taints"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for effect in ["NoSchedule", "NoExecute"] {
        let taint = json!({"key": "node.kubernetes.io/unreachable", "effect": effect});
        if !taints.contains(&taint) {
            taints.push(taint);
        }
    }
    node["spec"]["taints"] = Value::Array(taints);
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

#[cfg(test)]
mod tests {
    use super::*;
    use fleetwright_cloud::Instance;

    fn instance(id: &str) -> SimInstance {
        SimInstance {
            instance: Instance {
                id: id.into(),
                instance_type: "m6i.large".into(),
                zone: "us-east-1a".into(),
                state: "running".into(),
                capacity_type: "on-demand".into(),
                image_id: String::new(),
                subnet_id: String::new(),
                security_groups: Vec::new(),
                launch_time: Some(start()),
                tags: [(NODEPOOL.to_string(), "web".to_string())].into(),
                capacity_reservation_id: None,
                partition: None,
            },
            price: 0.1,
            warned: None,
        }
    }

    fn start() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-22T10:00:00Z")
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or_default()
    }

    fn at(seconds: i64) -> DateTime<Utc> {
        start() + Duration::seconds(seconds)
    }

    fn joined(cluster: &mut Cluster, live: &BTreeMap<String, SimInstance>) -> String {
        cluster.kubelet(live, at(60));
        let state = cluster.api.lock();
        state.objects[NODES][0]["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// The Node of a vanished instance is deleted through the API: its finalizer holds it,
    /// being deleted, until its owner removes the finalizer; and its kubelet registers no node
    /// again for an instance whose Node was deleted.
    #[test]
    fn a_vanished_instances_node_is_held_by_its_finalizer_and_never_registered_again() {
        let mut cluster = Cluster::new(&[], BTreeMap::new(), 1);
        let live: BTreeMap<String, SimInstance> = [("i-1".to_string(), instance("i-1"))].into();
        let node = joined(&mut cluster, &live);
        cluster.api.lock().objects.get_mut(NODES).unwrap()[0]["metadata"]["finalizers"] =
            json!(["karpenter.sh/termination"]);
        cluster.set_clock(at(70));
        cluster.kubelet(&BTreeMap::new(), at(70));
        {
            let state = cluster.api.lock();
            let held = &state.objects[NODES][0];
            assert_eq!(held["metadata"]["name"], node.as_str());
            assert_eq!(
                held["metadata"]["deletionTimestamp"],
                "2026-11-22T10:01:10Z"
            );
        }
        cluster.api.lock().objects.get_mut(NODES).unwrap().clear();
        cluster.kubelet(&live, at(80));
        assert!(cluster.api.lock().objects[NODES].is_empty(), "not again");
    }

    /// By hand, only a node that has joined is deleted, and through the API: a finalizer
    /// holds it.
    #[test]
    fn a_node_is_deleted_by_hand_only_once_it_has_joined() {
        let mut cluster = Cluster::new(&[], BTreeMap::new(), 1);
        let live: BTreeMap<String, SimInstance> = [("i-1".to_string(), instance("i-1"))].into();
        let node = joined(&mut cluster, &live);
        assert_eq!(
            cluster.delete_node_by_hand(|_| 0),
            None,
            "still unregistered"
        );
        {
            let mut state = cluster.api.lock();
            let n = &mut state.objects.get_mut(NODES).unwrap()[0];
            n["spec"]["taints"] = json!([]);
            n["metadata"]["finalizers"] = json!(["karpenter.sh/termination"]);
        }
        let (name, _) = cluster.delete_node_by_hand(|_| 0).unwrap();
        assert_eq!(name, node);
        let state = cluster.api.lock();
        assert!(!state.objects[NODES][0]["metadata"]["deletionTimestamp"].is_null());
    }

    /// A pod being deleted stays on its node until its containers exit: at once by default,
    /// with slow exits within its grace period, and never while its node's kubelet is gone.
    #[test]
    fn a_pod_being_deleted_goes_when_it_exits_within_its_grace_period() {
        let mut cluster = Cluster::new(&[], BTreeMap::new(), 1);
        cluster.slow_exits = true;
        let live: BTreeMap<String, SimInstance> = [("i-1".to_string(), instance("i-1"))].into();
        let node = joined(&mut cluster, &live);
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "shop", "deletionTimestamp": "2026-11-22T10:02:00Z",
                "deletionGracePeriodSeconds": 60},
            "spec": {"nodeName": node}, "status": {"phase": "Running"}});
        cluster.api.lock().objects.insert(PODS.into(), vec![pod]);
        let exit = (fnv("shop/p") % 61) as i64;
        cluster.kubelet(&live, at(60 + exit - 1));
        assert_eq!(cluster.api.lock().objects[PODS].len(), 1, "still exiting");
        cluster.kubelet(&BTreeMap::new(), at(60 + exit));
        assert_eq!(
            cluster.api.lock().objects[PODS].len(),
            1,
            "its kubelet is gone"
        );
        let mut fast = Cluster::new(&[], BTreeMap::new(), 1);
        fast.api.lock().objects.insert(NODES.into(), Vec::new());
        let node = joined(&mut fast, &live);
        let mut pod = cluster.api.lock().objects[PODS][0].clone();
        pod["spec"]["nodeName"] = json!(node);
        fast.api.lock().objects.insert(PODS.into(), vec![pod]);
        fast.kubelet(&live, at(60));
        assert!(fast.api.lock().objects[PODS].is_empty(), "exits at once");
    }
}
