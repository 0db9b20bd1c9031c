//! Conversion of Kubernetes objects (k8s-openapi types and Karpenter's CRDs) into the core's
//! snapshot model. The snapshot reader and the CLI's cluster dumps share this one path: pods
//! ([`pod`]), nodes and Karpenter's objects ([`objects`]), and here the snapshot itself and the
//! helpers both use (quantities, taint effects; selectors are [`crate::selectors`]).

use std::collections::{BTreeMap, BTreeSet};

use fleetwright_core::model::{self as core, TaintEffect};
use fleetwright_core::resources::Resources;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use crate::dump::ClusterDump;
use crate::error::KubeError;

mod durations;
mod nodeclass;
mod objects;
mod pdb;
mod pod;
pub mod pod_events;
mod volumes;

pub use self::durations::duration_seconds;
pub use self::nodeclass::{nodeclass_settings, reservation, NODE_CLASS_CEL_SETTING};
pub use self::objects::{
    daemonset, foreign, foreign_claim, legacy_node_class_hash, legacy_template_hash, node,
    node_class_hash, nodeclaim, nodepool, overlay, template_hash,
};
pub use self::pdb::pdb;
pub use self::pod::{pod, pod_from_spec, pod_requests};
pub use self::volumes::{claims, volume_limits, Claims};
pub use crate::rejected::Rejected;

/// What the core sees of a bound pod that does not convert: the pod, on its node, with nothing
/// known of its requests and protected from disruption, so its node is never taken for empty
/// and never chosen for disruption while the pod is unreadable (drains still see it through the
/// dump). None for a pod not bound to a node: it is left out.
pub fn unreadable_pod(pod: &k8s_openapi::api::core::v1::Pod) -> Option<core::Pod> {
    let node = pod
        .spec
        .as_ref()?
        .node_name
        .clone()
        .filter(|n| !n.is_empty())?;
    let meta = &pod.metadata;
    let mut out = core::Pod::new(
        meta.namespace.as_deref().unwrap_or("default"),
        meta.name.as_deref().unwrap_or_default(),
        fleetwright_core::resources::Resources::default(),
    );
    out.node_name = Some(node);
    out.do_not_disrupt = core::Protection::Always;
    out.unread = true;
    Some(out)
}

/// Converts a whole dump into a snapshot.
pub fn snapshot_from_dump(dump: &ClusterDump) -> Result<core::Snapshot, KubeError> {
    let pods = match &dump.converted_pods {
        Some(converted) => converted.clone(),
        None if dump.slim => {
            return Err(KubeError::Document {
                source_name: "cluster read".into(),
                reason: "the pods were slimmed at read time and their conversion was taken; \
                         convert a read once, with take_snapshot"
                    .into(),
            })
        }
        None => {
            let zones = claims(&dump.pvcs, &dump.pvs, &dump.storage_classes, true);
            dump.pods
                .iter()
                .map(|p| pod(p, &zones))
                .collect::<Result<_, _>>()?
        }
    };
    snapshot_with_pods(dump, pods)
}

/// The snapshot of a read, moving the pods the reader already converted out of the dump instead
/// of copying them (a large cluster's pods are then held once). The dump keeps its slim pods.
pub fn take_snapshot(dump: &mut ClusterDump) -> Result<core::Snapshot, KubeError> {
    match dump.converted_pods.take() {
        Some(pods) => snapshot_with_pods(dump, pods),
        None => snapshot_from_dump(dump),
    }
}

/// The snapshot of a live read, with each object that does not convert left out and returned
/// with its error (besides those the read already rejected): one bad object never stops the
/// others.
pub fn take_snapshot_isolating(dump: &mut ClusterDump) -> (core::Snapshot, Vec<Rejected>) {
    let mut rejected = dump.rejected.clone();
    let pods = match dump.converted_pods.take() {
        Some(pods) => pods,
        None => {
            let zones = claims(&dump.pvcs, &dump.pvs, &dump.storage_classes, true);
            let mut out = Vec::new();
            for p in &dump.pods {
                match pod(p, &zones) {
                    Ok(converted) => out.push(converted),
                    Err(e) => {
                        let r = on_workload(p, e);
                        if !rejected.contains(&r) {
                            rejected.push(r);
                        }
                        out.extend(unreadable_pod(p));
                    }
                }
            }
            out
        }
    };
    let (snapshot, errors) = convert_all(dump, pods);
    rejected.extend(errors.into_iter().map(|(r, _)| r));
    (snapshot, rejected)
}

/// The record of a pod that does not convert. A stand-in pod's error is its workload's template's
/// (`Deployment web/inflate: field spec.template.spec.containers[0]...`), named once for all
/// its replicas.
fn on_workload(p: &k8s_openapi::api::core::v1::Pod, e: KubeError) -> Rejected {
    let stands_for = p
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(crate::workloads::STANDS_FOR))
        .and_then(|w| w.split_once('/'));
    let (Some((kind, name)), KubeError::Field { field, reason, .. }) = (stands_for, &e) else {
        return Rejected::new("Pod", &p.metadata, e);
    };
    let meta = ObjectMeta {
        name: Some(name.to_string()),
        namespace: p.metadata.namespace.clone(),
        ..Default::default()
    };
    let object = format!(
        "{kind} {}/{name}",
        p.metadata.namespace.as_deref().unwrap_or("default")
    );
    let e = KubeError::field(object, format!("spec.template.{field}"), reason);
    Rejected::new(kind, &meta, e)
}

/// Everything but the pods, converted, around the given core pods; the first object that does
/// not convert is the error.
pub(crate) fn snapshot_with_pods(
    dump: &ClusterDump,
    pods: Vec<core::Pod>,
) -> Result<core::Snapshot, KubeError> {
    let (snapshot, errors) = convert_all(dump, pods);
    match errors.into_iter().next() {
        Some((_, e)) => Err(e),
        None => Ok(snapshot),
    }
}

/// Converts each object on its own: those that convert make the snapshot, the others are
/// returned with their errors.
fn convert_all(
    dump: &ClusterDump,
    pods: Vec<core::Pod>,
) -> (core::Snapshot, Vec<(Rejected, KubeError)>) {
    let mut snapshot = core::Snapshot {
        pods,
        ..Default::default()
    };
    fleetwright_core::default_spread::apply(
        &mut snapshot.pods,
        &dump.default_spread,
        &dump.selectors,
    );
    let mut errors = Vec::new();
    let mut keep = |kind: &str, meta: &ObjectMeta, e: KubeError| {
        errors.push((Rejected::new(kind, meta, &e), e));
    };
    let mut limits = volume_limits(&dump.csinodes);
    for n in &dump.nodes {
        match node(n) {
            Ok(mut x) => {
                x.volume_limits = limits.remove(&x.name).unwrap_or_default();
                fence_foreign_leaving(dump, n, &mut x);
                snapshot.nodes.push(x);
            }
            Err(e) => keep("Node", &n.metadata, e),
        }
    }
    stamp_last_pod_events(dump, &mut snapshot.nodes);
    for c in &dump.nodeclaims {
        match nodeclaim(c) {
            Ok(x) => snapshot.nodeclaims.push(x),
            Err(e) => keep("NodeClaim", &c.metadata, e),
        }
    }
    taint_commanded(&mut snapshot);
    taint_rebooting(dump, &mut snapshot);
    for p in &dump.nodepools {
        match nodepool(p) {
            Ok(x) => snapshot.nodepools.push(x),
            Err(e) => keep("NodePool", &p.metadata, e),
        }
    }
    for c in &dump.nodeclasses {
        let name = c.metadata.name.clone().unwrap_or_default();
        let hash = dump
            .ca_bundle
            .as_deref()
            .map(|ca| node_class_hash(c, ca))
            .transpose();
        match nodeclass_settings(c, dump.node_class_cel).and_then(|s| Ok((s, hash?))) {
            Ok((settings, hash)) => {
                snapshot.node_classes.insert(name.clone(), settings);
                let state = snapshot.node_class_state.entry(name).or_default();
                state.hash = hash;
                status_state(c, state);
            }
            Err(e) => keep("EC2NodeClass", &c.metadata, e),
        }
    }
    for d in &dump.daemonsets {
        match daemonset(d) {
            Ok(x) => snapshot.daemonsets.push(x),
            Err(e) => keep("DaemonSet", &d.metadata, e),
        }
    }
    for p in &dump.pdbs {
        match pdb(p) {
            Ok(x) => snapshot.pdbs.push(x),
            Err(e) => {
                keep("PodDisruptionBudget", &p.metadata, e);
                snapshot.pdbs.extend(self::pdb::fail_closed(p));
            }
        }
    }
    for o in &dump.nodeoverlays {
        match overlay(o) {
            Ok(x) => snapshot.overlays.push(x),
            Err(e) => keep("NodeOverlay", &o.metadata, e),
        }
    }
    (snapshot, errors)
}

/// A disruption command is recorded on a NodeClaim before its node is tainted, so a read
/// between the two sees the node as the next step will leave it: tainted, being disrupted (no
/// candidate for another command, and counted against its budget).
fn taint_commanded(snapshot: &mut core::Snapshot) {
    use fleetwright_core::labels::{DISRUPTION_COMMAND, TAINT_DISRUPTED};
    let commanded: std::collections::BTreeSet<&str> = snapshot
        .nodeclaims
        .iter()
        .filter(|c| c.annotations.contains_key(DISRUPTION_COMMAND))
        .filter_map(|c| c.node_name.as_deref())
        .collect();
    let commanded: BTreeSet<String> = commanded.into_iter().map(str::to_string).collect();
    taint(snapshot, &commanded, TAINT_DISRUPTED);
}

/// What an EC2NodeClass's status says it last resolved to (AMIs, subnets, security groups), the
/// drift reference Karpenter reads too: a read of a dump drifts against it. A tick replaces it
/// with what it resolves the class to now, or with nothing when that fails.
fn status_state(class: &crate::crds::EC2NodeClass, state: &mut core::NodeClassState) {
    let Some(status) = class.status.as_ref() else {
        return;
    };
    let ids = |list: &[Value]| -> BTreeSet<String> {
        (list.iter())
            .filter_map(|v| v.get("id").and_then(Value::as_str).map(str::to_string))
            .collect()
    };
    state.images = ids(&status.amis);
    state.subnets = ids(&status.subnets);
    state.security_groups = ids(&status.security_groups);
}

/// Another provider's node that is going (its Node or its NodeClaim being deleted), read as
/// cordoned and not as deleting: its room is going, so no plan counts on it, but its pods are
/// not planned ahead and no command of Fleetwright's waits on them, since its own provider
/// replaces it.
fn fence_foreign_leaving(
    dump: &ClusterDump,
    n: &k8s_openapi::api::core::v1::Node,
    x: &mut core::Node,
) {
    let leaving = &dump.foreign.leaving;
    let provider = x.provider_id.as_ref();
    let claim_going = leaving.contains(&x.name) || provider.is_some_and(|p| leaving.contains(p));
    // A node one of Fleetwright's own NodeClaims names is never another's, whatever its labels.
    let ours = || {
        let node_of = |c: &crate::crds::NodeClaim| c.status.as_ref()?.node_name.clone();
        dump.nodeclaims
            .iter()
            .any(|c| node_of(c).as_ref() == Some(&x.name))
    };
    if (claim_going || x.deleting) && dump.foreign.has_node(n) && !ours() {
        x.deleting = false;
        x.unschedulable = true;
    }
}

/// The named nodes, given the NoSchedule taint `key` where they lack it.
fn taint(snapshot: &mut core::Snapshot, nodes: &BTreeSet<String>, key: &str) {
    for node in &mut snapshot.nodes {
        let tainted = node.taints.iter().any(|t| t.key == key);
        if nodes.contains(&node.name) && !tainted {
            node.taints.push(core::Taint {
                key: key.into(),
                value: String::new(),
                effect: TaintEffect::NoSchedule,
            });
        }
    }
}

/// A reboot is committed on its NodeClaim before its node is fenced, and the fence goes once
/// the node has booted again, before it is Ready: through all of it the node is seen fenced
/// (no candidate, counted against every budget, and its capacity coming back).
fn taint_rebooting(dump: &ClusterDump, snapshot: &mut core::Snapshot) {
    use fleetwright_core::labels::TAINT_REBOOTING;
    let rebooting: BTreeSet<String> = dump
        .nodeclaims
        .iter()
        .filter(|c| {
            c.status.as_ref().is_some_and(|s| {
                s.conditions.iter().any(|c| {
                    c.type_ == fleetwright_crds::conditions::REBOOTING && c.status == "True"
                })
            })
        })
        .filter_map(|c| c.status.as_ref()?.node_name.clone())
        .collect();
    taint(snapshot, &rebooting, TAINT_REBOOTING);
}

/// Each node's last pod event ([`pod_events::last_pod_event`]), from its pods and its
/// NodeClaim's record; when nothing is known, when its NodeClaim was initialized (as Karpenter
/// counts), else the node's creation.
pub(crate) fn stamp_last_pod_events(dump: &ClusterDump, nodes: &mut [core::Node]) {
    let pods = pod_events::pods_by_node(dump);
    let claims: BTreeMap<&str, &crate::crds::NodeClaim> = dump
        .nodeclaims
        .iter()
        .filter_map(|c| Some((c.status.as_ref()?.node_name.as_deref()?, c)))
        .collect();
    for n in nodes {
        let name = n.name.as_str();
        let claim = claims.get(name).copied();
        let last = pod_events::last_pod_event(claim, pods.get(name), dump.observed_at);
        let initialized = claim.and_then(initialized_at);
        n.last_pod_event = last.or(initialized).unwrap_or(n.created);
    }
}

/// When a NodeClaim became Initialized, in seconds.
fn initialized_at(claim: &crate::crds::NodeClaim) -> Option<i64> {
    let status = claim.status.as_ref()?;
    let condition = status
        .conditions
        .iter()
        .find(|c| c.type_ == fleetwright_crds::conditions::INITIALIZED && c.status == "True")?;
    let at = condition.last_transition_time.as_deref()?;
    at.parse::<k8s_openapi::jiff::Timestamp>()
        .ok()
        .map(|t| t.as_second())
}

pub(crate) fn object(kind: &str, meta: &ObjectMeta) -> String {
    let name = meta.name.as_deref().unwrap_or("<unnamed>");
    match &meta.namespace {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}

pub(crate) fn seconds(meta: &ObjectMeta) -> i64 {
    meta.creation_timestamp
        .as_ref()
        .map(|t| t.0.as_second())
        .unwrap_or(0)
}

/// Parses a Kubernetes resource list, naming the object and field on error. A negative amount
/// is refused, as the API server refuses it in requests, limits and overhead.
pub(crate) fn resource_list<'a, I>(
    entries: I,
    obj: &str,
    field: &str,
) -> Result<Resources, KubeError>
where
    I: IntoIterator<Item = (&'a String, &'a str)>,
{
    let mut out = Resources::default();
    for (name, value) in entries {
        let path = || format!("{field}.{name}");
        out.set_quantity(name, value)
            .map_err(|e| KubeError::field(obj, path(), e))?;
        if out.get(name) < 0 {
            return Err(KubeError::field(
                obj,
                path(),
                format!("{value:?} must be greater than or equal to 0"),
            ));
        }
    }
    Ok(out)
}

pub(crate) fn quantities(
    map: Option<&BTreeMap<String, Quantity>>,
) -> impl Iterator<Item = (&String, &str)> {
    map.into_iter().flatten().map(|(k, v)| (k, v.0.as_str()))
}

pub(crate) fn values(map: Option<&BTreeMap<String, Value>>) -> Vec<(&String, String)> {
    map.into_iter()
        .flatten()
        .map(|(k, v)| {
            (
                k,
                v.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| v.to_string()),
            )
        })
        .collect()
}

pub(crate) fn value_list(
    map: Option<&BTreeMap<String, Value>>,
    obj: &str,
    field: &str,
) -> Result<Resources, KubeError> {
    let pairs = values(map);
    resource_list(pairs.iter().map(|(k, v)| (*k, v.as_str())), obj, field)
}

pub(crate) fn taint_effect(effect: &str, obj: &str, field: &str) -> Result<TaintEffect, KubeError> {
    TaintEffect::parse(effect)
        .ok_or_else(|| KubeError::field(obj, field, format!("unknown taint effect {effect:?}")))
}

#[cfg(test)]
#[path = "../../tests/unit/convert.rs"]
mod tests;
