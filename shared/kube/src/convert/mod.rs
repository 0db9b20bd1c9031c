//! Conversion of Kubernetes objects (k8s-openapi types and Karpenter's CRDs) into the core's
//! snapshot model. The snapshot reader and the CLI's cluster dumps share this one path: pods
//! ([`pod`]), nodes and Karpenter's objects ([`objects`]), and here the snapshot itself and the
//! helpers both use (quantities, selectors, requirements, taint effects).

use std::collections::BTreeMap;

use fleetwright_core::model::{self as core, TaintEffect};
use fleetwright_core::requirements::{Operator, Requirement, Requirements};
use fleetwright_core::resources::Resources;
use k8s_openapi::api::core::v1::NodeSelectorTerm;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use serde_json::Value;

use crate::dump::ClusterDump;
use crate::error::KubeError;

mod objects;
mod pod;

pub use self::objects::{
    daemonset, duration_seconds, legacy_node_class_hash, legacy_template_hash, node,
    node_class_hash, nodeclaim, nodeclass_settings, nodepool, overlay, pdb, reservation,
    template_hash,
};
pub use self::pod::{pod, pod_from_spec, pod_requests, volume_zones, VolumeZones};

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
            let zones = volume_zones(&dump.pvcs, &dump.pvs);
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

/// Everything but the pods, converted, around the given core pods.
pub(crate) fn snapshot_with_pods(
    dump: &ClusterDump,
    pods: Vec<core::Pod>,
) -> Result<core::Snapshot, KubeError> {
    let mut snapshot = core::Snapshot {
        pods,
        ..Default::default()
    };
    for n in &dump.nodes {
        snapshot.nodes.push(node(n)?);
    }
    stamp_last_pod_events(dump, &mut snapshot.nodes);
    for c in &dump.nodeclaims {
        snapshot.nodeclaims.push(nodeclaim(c)?);
    }
    for p in &dump.nodepools {
        snapshot.nodepools.push(nodepool(p)?);
    }
    for c in &dump.nodeclasses {
        let name = c.metadata.name.clone().unwrap_or_default();
        snapshot
            .node_classes
            .insert(name.clone(), nodeclass_settings(c)?);
        snapshot.node_class_state.entry(name).or_default().hash = dump
            .ca_bundle
            .as_deref()
            .map(|ca| node_class_hash(c, ca))
            .transpose()?;
    }
    for d in &dump.daemonsets {
        snapshot.daemonsets.push(daemonset(d)?);
    }
    for p in &dump.pdbs {
        snapshot.pdbs.push(pdb(p)?);
    }
    for o in &dump.nodeoverlays {
        snapshot.overlays.push(overlay(o)?);
    }
    Ok(snapshot)
}

/// A node's last pod event, as far as a read can tell: the newest creation of a pod bound to it
/// (pod deletions leave no trace to read, so a node emptied by a deletion counts from its last
/// pod's creation).
pub(crate) fn stamp_last_pod_events(dump: &ClusterDump, nodes: &mut [core::Node]) {
    let mut latest: std::collections::BTreeMap<&str, i64> = std::collections::BTreeMap::new();
    for (node, metadata) in dump.pod_placements() {
        if let Some(node) = node {
            let t = latest.entry(node).or_insert(0);
            *t = (*t).max(seconds(metadata));
        }
    }
    for n in nodes {
        n.last_pod_event = latest.get(n.name.as_str()).copied().unwrap_or(n.created);
    }
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

/// Parses a Kubernetes resource list, naming the object and field on error.
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
        out.set_quantity(name, value)
            .map_err(|e| KubeError::field(obj, format!("{field}.{name}"), e))?;
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

pub(crate) fn operator(op: &str, obj: &str, field: &str) -> Result<Operator, KubeError> {
    Operator::parse(op)
        .ok_or_else(|| KubeError::field(obj, field, format!("unknown operator {op:?}")))
}

pub(crate) fn requirement(
    key: &str,
    op: &str,
    vals: &[String],
    obj: &str,
    field: &str,
) -> Result<Requirement, KubeError> {
    Requirement::new(key, operator(op, obj, field)?, vals)
        .map_err(|e| KubeError::field(obj, field, e))
}

pub(crate) fn node_selector_term(
    term: &NodeSelectorTerm,
    obj: &str,
    field: &str,
) -> Result<Requirements, KubeError> {
    let mut reqs = Requirements::new();
    for (i, e) in term.match_expressions.iter().flatten().enumerate() {
        let f = format!("{field}.matchExpressions[{i}]");
        reqs.add(requirement(
            &e.key,
            &e.operator,
            e.values.as_deref().unwrap_or_default(),
            obj,
            &f,
        )?);
    }
    Ok(reqs)
}

/// A label selector as requirements (`matchLabels` as `In`, `matchExpressions` as written).
pub fn label_selector(
    sel: &LabelSelector,
    obj: &str,
    field: &str,
) -> Result<Requirements, KubeError> {
    let mut reqs = Requirements::new();
    for (k, v) in sel.match_labels.iter().flatten() {
        reqs.add(Requirement::single(k, v));
    }
    for (i, e) in sel.match_expressions.iter().flatten().enumerate() {
        let f = format!("{field}.matchExpressions[{i}]");
        reqs.add(requirement(
            &e.key,
            &e.operator,
            e.values.as_deref().unwrap_or_default(),
            obj,
            &f,
        )?);
    }
    Ok(reqs)
}

/// A selector that matches nothing (a null selector in an affinity term).
pub(crate) fn match_nothing() -> Requirements {
    let mut r = Requirements::new();
    r.add(Requirement::does_not_exist("fleetwright.io/never"));
    r.add(Requirement::exists("fleetwright.io/never"));
    r
}

pub(crate) fn taint_effect(effect: &str, obj: &str, field: &str) -> Result<TaintEffect, KubeError> {
    TaintEffect::parse(effect)
        .ok_or_else(|| KubeError::field(obj, field, format!("unknown taint effect {effect:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(duration_seconds("720h"), Ok(Some(2_592_000)));
        assert_eq!(duration_seconds("1h30m"), Ok(Some(5400)));
        assert_eq!(duration_seconds("30s"), Ok(Some(30)));
        assert_eq!(duration_seconds("Never"), Ok(None));
        assert!(duration_seconds("soon").is_err());
        assert!(duration_seconds("30").is_err());
    }
}
