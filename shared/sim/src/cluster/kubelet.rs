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
    ARCH, CAPACITY_TYPE, HOSTNAME, INSTANCE_TYPE, NODEPOOL, OS, REGION, TAINT_NOT_READY,
    TAINT_UNREACHABLE, TAINT_UNREGISTERED, ZONE,
};
use fleetwright_core::model::{tolerates_all, TaintEffect};
use fleetwright_core::InstanceType;
use fleetwright_crds::conditions;
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

    /// Instances rebooted (`reboots`: how many times each) come back [`REBOOT_TAKES`] after
    /// their reboot is first seen, with a new boot ID; a fault a reboot clears is gone then.
    /// Returns the nodes that came back.
    pub fn reboots(&mut self, reboots: &BTreeMap<String, u32>, now: DateTime<Utc>) -> Vec<String> {
        for (id, &boots) in reboots {
            let seen = self.rebooting.entry(id.clone()).or_insert((0, now));
            if seen.0 != boots {
                *seen = (boots, now);
            }
        }
        let api = self.api.clone();
        let mut state = api.lock();
        let nodes = state.objects.entry(NODES.into()).or_default();
        let mut back = Vec::new();
        for node in nodes.iter_mut() {
            let provider = node["spec"]["providerID"].as_str().unwrap_or_default();
            let id = provider.rsplit('/').next().unwrap_or_default();
            let Some(&(boots, at)) = self.rebooting.get(id) else {
                continue;
            };
            let boot_id = format!("boot-{boots}");
            if now - at < REBOOT_TAKES || node["status"]["nodeInfo"]["bootID"] == boot_id {
                continue;
            }
            node["status"]["nodeInfo"]["bootID"] = json!(boot_id);
            let name = node["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            if !self.persistent.contains(&name) && self.failed.remove(&name) {
                heal(node, now);
            }
            info!(target: "simulate::kubelet", node = %name, boots, "node rebooted");
            back.push(name);
        }
        back
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
        json!({"type": conditions::READY, "status": "Unknown", "reason": conditions::NODE_STATUS_UNKNOWN,
            "message": "Kubelet stopped posting node status."}),
    );
    let mut taints = node["spec"]["taints"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for effect in ["NoSchedule", "NoExecute"] {
        let taint = json!({"key": TAINT_UNREACHABLE, "effect": effect});
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
    labels[OS] = json!("linux");
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
    taints.push(json!({"key": TAINT_UNREGISTERED, "effect": "NoExecute"}));
    // Extended resources (GPUs, pod ENIs) as their device plugins report them once running.
    let allocatable = types.get(&i.instance_type).map_or(json!({}), |t| {
        let a = &t.allocatable;
        let mut out = json!({"cpu": format!("{}m", a.cpu), "memory": a.memory.to_string(),
               "pods": a.pods.to_string(), "ephemeral-storage": a.ephemeral.to_string()});
        for (name, amount) in &a.extended {
            out[name.as_str()] = json!(amount.to_string());
        }
        out
    });
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": format!("uid-{name}"), "labels": labels,
            "creationTimestamp": stamp(now)},
        "spec": {"providerID": provider, "taints": taints},
        "status": {"allocatable": allocatable, "capacity": allocatable,
            "nodeInfo": {"bootID": "boot-0"},
            "conditions": [{"type": conditions::READY, "status": "False",
                "reason": conditions::KUBELET_NOT_READY}]}})
}

/// How long an instance takes to come back from a reboot.
pub const REBOOT_TAKES: chrono::Duration = chrono::Duration::seconds(60);

/// A node whose fault a reboot cleared: each condition that was not healthy is again, and the
/// node lifecycle controller's not-ready taints are gone.
fn heal(node: &mut Value, now: DateTime<Utc>) {
    if let Some(list) = node["status"]["conditions"].as_array_mut() {
        for c in list.iter_mut().filter(|c| c["status"] != "True") {
            let reason = match c["type"] == conditions::READY {
                true => conditions::KUBELET_READY,
                false => "Healthy",
            };
            *c = json!({"type": c["type"], "status": "True", "reason": reason,
                "lastTransitionTime": stamp(now)});
        }
    }
    if let Some(taints) = node["spec"]["taints"].as_array_mut() {
        taints.retain(|t| t["key"] != TAINT_NOT_READY && t["key"] != TAINT_UNREACHABLE);
    }
}

fn mark_ready(node: &mut Value, claims: &[Value], now: DateTime<Utc>) {
    node["status"]["conditions"] = json!([{"type": conditions::READY, "status": "True",
        "reason": conditions::KUBELET_READY,
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
                    && t.key != TAINT_UNREGISTERED
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
#[path = "../../tests/unit/cluster/kubelet.rs"]
mod tests;
