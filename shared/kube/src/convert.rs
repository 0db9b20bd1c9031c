//! Conversion of Kubernetes objects (k8s-openapi types and Karpenter's CRDs) into the core's
//! snapshot model. The snapshot reader and the CLI's cluster dumps share this one path.

use std::collections::{BTreeMap, BTreeSet};

use fleetwright_core::catalog::{KubeletSettings, NodeClassSettings};
use fleetwright_core::labels::{DO_NOT_DISRUPT, NODEPOOL, ZONE};
use fleetwright_core::model::{
    self as core, ContainerRequests, HostPort, Namespaces, TaintEffect, Toleration,
};
use fleetwright_core::quantity::parse_units;
use fleetwright_core::requirements::{Operator, Requirement, Requirements};
use fleetwright_core::resources::Resources;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{
    Node, NodeSelectorTerm, PersistentVolume, PersistentVolumeClaim, Pod, PodSpec,
    ResourceRequirements,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use serde_json::Value;

use crate::crds::{self, EC2NodeClass, NodeClaim, NodePool};
use crate::dump::ClusterDump;
use crate::error::KubeError;

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
fn snapshot_with_pods(
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
        snapshot.node_class_state.entry(name).or_default().hash = Some(node_class_hash(c));
    }
    for d in &dump.daemonsets {
        snapshot.daemonsets.push(daemonset(d)?);
    }
    for p in &dump.pdbs {
        snapshot.pdbs.push(pdb(p)?);
    }
    Ok(snapshot)
}

/// A node's last pod event, as far as a read can tell: the newest creation of a pod bound to it
/// (pod deletions leave no trace to read, so a node emptied by a deletion counts from its last
/// pod's creation).
fn stamp_last_pod_events(dump: &ClusterDump, nodes: &mut [core::Node]) {
    let mut latest: std::collections::BTreeMap<&str, i64> = std::collections::BTreeMap::new();
    for p in &dump.pods {
        if let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
            let t = latest.entry(node).or_insert(0);
            *t = (*t).max(seconds(&p.metadata));
        }
    }
    for n in nodes {
        n.last_pod_event = latest.get(n.name.as_str()).copied().unwrap_or(n.created);
    }
}

fn object(kind: &str, meta: &ObjectMeta) -> String {
    let name = meta.name.as_deref().unwrap_or("<unnamed>");
    match &meta.namespace {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}

fn seconds(meta: &ObjectMeta) -> i64 {
    meta.creation_timestamp
        .as_ref()
        .map(|t| t.0.as_second())
        .unwrap_or(0)
}

/// Parses a Kubernetes resource list, naming the object and field on error.
fn resource_list<'a, I>(entries: I, obj: &str, field: &str) -> Result<Resources, KubeError>
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

fn quantities(map: Option<&BTreeMap<String, Quantity>>) -> impl Iterator<Item = (&String, &str)> {
    map.into_iter().flatten().map(|(k, v)| (k, v.0.as_str()))
}

fn values(map: Option<&BTreeMap<String, Value>>) -> Vec<(&String, String)> {
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

fn value_list(
    map: Option<&BTreeMap<String, Value>>,
    obj: &str,
    field: &str,
) -> Result<Resources, KubeError> {
    let pairs = values(map);
    resource_list(pairs.iter().map(|(k, v)| (*k, v.as_str())), obj, field)
}

/// Requests of one container: requests, defaulting to limits as the API server does.
fn container_requests(
    res: Option<&ResourceRequirements>,
    obj: &str,
    field: &str,
) -> Result<Resources, KubeError> {
    let mut merged: BTreeMap<String, &str> = BTreeMap::new();
    if let Some(r) = res {
        for (k, v) in quantities(r.limits.as_ref()) {
            merged.insert(k.clone(), v);
        }
        for (k, v) in quantities(r.requests.as_ref()) {
            merged.insert(k.clone(), v);
        }
    }
    resource_list(merged.iter().map(|(k, v)| (k, *v)), obj, field)
}

/// A pod's effective requests, per Kubernetes' rules for init containers, sidecars and overhead.
pub fn pod_requests(spec: &PodSpec, obj: &str) -> Result<Resources, KubeError> {
    let mut reqs = ContainerRequests::default();
    for (i, c) in spec.containers.iter().enumerate() {
        reqs.containers.push(container_requests(
            c.resources.as_ref(),
            obj,
            &format!("spec.containers[{i}].resources"),
        )?);
    }
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        let r = container_requests(
            c.resources.as_ref(),
            obj,
            &format!("spec.initContainers[{i}].resources"),
        )?;
        reqs.init_containers
            .push((r, c.restart_policy.as_deref() == Some("Always")));
    }
    if let Some(o) = &spec.overhead {
        reqs.overhead = Some(resource_list(quantities(Some(o)), obj, "spec.overhead")?);
    }
    Ok(reqs.effective())
}

fn operator(op: &str, obj: &str, field: &str) -> Result<Operator, KubeError> {
    Operator::parse(op)
        .ok_or_else(|| KubeError::field(obj, field, format!("unknown operator {op:?}")))
}

fn requirement(
    key: &str,
    op: &str,
    vals: &[String],
    obj: &str,
    field: &str,
) -> Result<Requirement, KubeError> {
    Requirement::new(key, operator(op, obj, field)?, vals)
        .map_err(|e| KubeError::field(obj, field, e))
}

fn node_selector_term(
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
fn match_nothing() -> Requirements {
    let mut r = Requirements::new();
    r.add(Requirement::does_not_exist("fleetwright.io/never"));
    r.add(Requirement::exists("fleetwright.io/never"));
    r
}

fn affinity_term(
    t: &k8s_openapi::api::core::v1::PodAffinityTerm,
    pod_ns: &str,
    pod_labels: &BTreeMap<String, String>,
    obj: &str,
    field: &str,
) -> Result<core::PodAffinityTerm, KubeError> {
    let mut selector = match &t.label_selector {
        Some(s) => label_selector(s, obj, &format!("{field}.labelSelector"))?,
        None => match_nothing(),
    };
    for key in t.match_label_keys.iter().flatten() {
        if let Some(v) = pod_labels.get(key) {
            selector.add(Requirement::single(key, v));
        }
    }
    let namespaces = match (&t.namespaces, &t.namespace_selector) {
        (_, Some(_)) => Namespaces::All,
        (Some(list), None) if !list.is_empty() => {
            Namespaces::Listed(list.iter().cloned().collect())
        }
        _ => Namespaces::Listed(BTreeSet::from([pod_ns.to_string()])),
    };
    Ok(core::PodAffinityTerm {
        selector,
        namespaces,
        topology_key: t.topology_key.clone(),
    })
}

fn taint_effect(effect: &str, obj: &str, field: &str) -> Result<TaintEffect, KubeError> {
    TaintEffect::parse(effect)
        .ok_or_else(|| KubeError::field(obj, field, format!("unknown taint effect {effect:?}")))
}

fn toleration(
    t: &k8s_openapi::api::core::v1::Toleration,
    obj: &str,
    field: &str,
) -> Result<Toleration, KubeError> {
    let effect = match t.effect.as_deref() {
        None | Some("") => None,
        Some(e) => Some(taint_effect(e, obj, &format!("{field}.effect"))?),
    };
    Ok(Toleration {
        key: t.key.clone().filter(|k| !k.is_empty()),
        exists: t.operator.as_deref() == Some("Exists"),
        value: t.value.clone().unwrap_or_default(),
        effect,
    })
}

type AffinityTerms = (
    Vec<core::PodAffinityTerm>,
    Vec<(i32, core::PodAffinityTerm)>,
);

/// The required and preferred terms of a `podAffinity` or `podAntiAffinity` block.
fn pod_affinity_terms(
    required: Option<&[k8s_openapi::api::core::v1::PodAffinityTerm]>,
    preferred: Option<&[k8s_openapi::api::core::v1::WeightedPodAffinityTerm]>,
    (namespace, labels): (&str, &BTreeMap<String, String>),
    obj: &str,
    field: &str,
) -> Result<AffinityTerms, KubeError> {
    let mut hard = Vec::new();
    for (i, t) in required.unwrap_or_default().iter().enumerate() {
        let f = format!("{field}.requiredDuringSchedulingIgnoredDuringExecution[{i}]");
        hard.push(affinity_term(t, namespace, labels, obj, &f)?);
    }
    let mut soft = Vec::new();
    for (i, t) in preferred.unwrap_or_default().iter().enumerate() {
        let f =
            format!("{field}.preferredDuringSchedulingIgnoredDuringExecution[{i}].podAffinityTerm");
        soft.push((
            t.weight,
            affinity_term(&t.pod_affinity_term, namespace, labels, obj, &f)?,
        ));
    }
    Ok((hard, soft))
}

/// Converts a pod spec and metadata into the core pod.
pub fn pod_from_spec(meta: &ObjectMeta, spec: &PodSpec, obj: &str) -> Result<core::Pod, KubeError> {
    let namespace = meta
        .namespace
        .clone()
        .unwrap_or_else(|| "default".to_string());
    let labels = meta.labels.clone().unwrap_or_default();
    let annotations = meta.annotations.clone().unwrap_or_default();
    let mut p = core::Pod {
        namespace: namespace.clone(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        labels: labels.clone(),
        requests: pod_requests(spec, obj)?,
        node_selector: spec.node_selector.clone().unwrap_or_default(),
        priority: spec.priority.unwrap_or(0),
        node_name: spec.node_name.clone().filter(|n| !n.is_empty()),
        do_not_disrupt: annotations.get(DO_NOT_DISRUPT).is_some_and(|v| v == "true"),
        deletion_cost: annotations
            .get("controller.kubernetes.io/pod-deletion-cost")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
        ..Default::default()
    };
    if let Some(owner) = meta
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
    {
        p.owner_kind = Some(owner.kind.clone());
        p.owner_name = Some(owner.name.clone());
    }
    for (i, t) in spec.tolerations.iter().flatten().enumerate() {
        p.tolerations
            .push(toleration(t, obj, &format!("spec.tolerations[{i}]"))?);
    }
    for (ci, c) in spec.containers.iter().enumerate() {
        for port in c
            .ports
            .iter()
            .flatten()
            .filter(|p| p.host_port.unwrap_or(0) > 0)
        {
            let _ = ci;
            p.host_ports.push(HostPort {
                port: port.host_port.unwrap_or(0),
                protocol: port.protocol.clone().unwrap_or_else(|| "TCP".into()),
                ip: port.host_ip.clone().unwrap_or_default(),
            });
        }
    }
    if let Some(aff) = &spec.affinity {
        if let Some(na) = &aff.node_affinity {
            if let Some(req) = &na.required_during_scheduling_ignored_during_execution {
                for (i, t) in req.node_selector_terms.iter().enumerate() {
                    let f = format!("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{i}]");
                    p.required_terms.push(node_selector_term(t, obj, &f)?);
                }
            }
            for (i, t) in na
                .preferred_during_scheduling_ignored_during_execution
                .iter()
                .flatten()
                .enumerate()
            {
                let f = format!("spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}].preference");
                p.preferred_terms
                    .push((t.weight, node_selector_term(&t.preference, obj, &f)?));
            }
        }
        if let Some(pa) = &aff.pod_affinity {
            let (required, preferred) = pod_affinity_terms(
                pa.required_during_scheduling_ignored_during_execution
                    .as_deref(),
                pa.preferred_during_scheduling_ignored_during_execution
                    .as_deref(),
                (&namespace, &labels),
                obj,
                "spec.affinity.podAffinity",
            )?;
            p.affinity = required;
            p.preferred_affinity = preferred;
        }
        if let Some(pa) = &aff.pod_anti_affinity {
            let (required, preferred) = pod_affinity_terms(
                pa.required_during_scheduling_ignored_during_execution
                    .as_deref(),
                pa.preferred_during_scheduling_ignored_during_execution
                    .as_deref(),
                (&namespace, &labels),
                obj,
                "spec.affinity.podAntiAffinity",
            )?;
            p.anti_affinity = required;
            p.preferred_anti_affinity = preferred;
        }
    }
    for (i, c) in spec
        .topology_spread_constraints
        .iter()
        .flatten()
        .enumerate()
    {
        let f = format!("spec.topologySpreadConstraints[{i}]");
        let mut selector = match &c.label_selector {
            Some(s) => label_selector(s, obj, &format!("{f}.labelSelector"))?,
            None => match_nothing(),
        };
        for key in c.match_label_keys.iter().flatten() {
            if let Some(v) = labels.get(key) {
                selector.add(Requirement::single(key, v));
            }
        }
        let hard = match c.when_unsatisfiable.as_str() {
            "DoNotSchedule" => true,
            "ScheduleAnyway" => false,
            other => {
                return Err(KubeError::field(
                    obj,
                    format!("{f}.whenUnsatisfiable"),
                    format!("unknown value {other:?}"),
                ))
            }
        };
        if c.max_skew < 1 {
            return Err(KubeError::field(
                obj,
                format!("{f}.maxSkew"),
                "must be at least 1",
            ));
        }
        p.spread.push(core::SpreadConstraint {
            max_skew: c.max_skew,
            topology_key: c.topology_key.clone(),
            hard,
            selector,
            min_domains: c.min_domains,
        });
    }
    Ok(p)
}

/// Zones of bound persistent volumes, by (namespace, claim name).
pub type VolumeZones = BTreeMap<(String, String), BTreeSet<String>>;

/// PVC name → zones of its bound volume, from the volume's node affinity or zone label.
pub fn volume_zones(pvcs: &[PersistentVolumeClaim], pvs: &[PersistentVolume]) -> VolumeZones {
    let mut pv_zones: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for pv in pvs {
        let name = pv.metadata.name.clone().unwrap_or_default();
        let mut zones = BTreeSet::new();
        if let Some(z) = pv.metadata.labels.as_ref().and_then(|l| l.get(ZONE)) {
            zones.insert(z.clone());
        }
        let terms = pv
            .spec
            .as_ref()
            .and_then(|s| s.node_affinity.as_ref())
            .and_then(|a| a.required.as_ref());
        for term in terms
            .map(|t| t.node_selector_terms.as_slice())
            .unwrap_or_default()
        {
            for e in term.match_expressions.iter().flatten() {
                if (e.key == ZONE || e.key == "topology.ebs.csi.aws.com/zone") && e.operator == "In"
                {
                    zones.extend(e.values.iter().flatten().cloned());
                }
            }
        }
        if !zones.is_empty() {
            pv_zones.insert(name, zones);
        }
    }
    let mut out = BTreeMap::new();
    for pvc in pvcs {
        let volume = pvc.spec.as_ref().and_then(|s| s.volume_name.clone());
        if let Some(zones) = volume.and_then(|v| pv_zones.get(&v)) {
            let key = (
                pvc.metadata.namespace.clone().unwrap_or_default(),
                pvc.metadata.name.clone().unwrap_or_default(),
            );
            out.insert(key, zones.clone());
        }
    }
    out
}

/// Converts a pod.
pub fn pod(p: &Pod, volume_zones: &VolumeZones) -> Result<core::Pod, KubeError> {
    let obj = object("Pod", &p.metadata);
    let spec = p
        .spec
        .as_ref()
        .ok_or_else(|| KubeError::field(&obj, "spec", "missing"))?;
    let mut out = pod_from_spec(&p.metadata, spec, &obj)?;
    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
    out.terminal = matches!(phase, Some("Succeeded") | Some("Failed"));
    for v in spec.volumes.iter().flatten() {
        if let Some(claim) = &v.persistent_volume_claim {
            if let Some(z) = volume_zones.get(&(out.namespace.clone(), claim.claim_name.clone())) {
                let merged = match &out.volume_zones {
                    Some(prev) => prev.intersection(z).cloned().collect(),
                    None => z.clone(),
                };
                out.volume_zones = Some(merged);
            }
        }
    }
    Ok(out)
}

/// Converts a node.
pub fn node(n: &Node) -> Result<core::Node, KubeError> {
    let obj = object("Node", &n.metadata);
    let status = n.status.as_ref();
    let allocatable = resource_list(
        quantities(status.and_then(|s| s.allocatable.as_ref())),
        &obj,
        "status.allocatable",
    )?;
    let capacity = resource_list(
        quantities(status.and_then(|s| s.capacity.as_ref())),
        &obj,
        "status.capacity",
    )?;
    let spec = n.spec.as_ref();
    let mut taints = Vec::new();
    for (i, t) in spec
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
    {
        taints.push(core::Taint {
            key: t.key.clone(),
            value: t.value.clone().unwrap_or_default(),
            effect: taint_effect(&t.effect, &obj, &format!("spec.taints[{i}].effect"))?,
        });
    }
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    Ok(core::Node {
        name: n.metadata.name.clone().unwrap_or_default(),
        labels: n.metadata.labels.clone().unwrap_or_default(),
        taints,
        allocatable,
        capacity,
        unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
        ready,
        deleting: n.metadata.deletion_timestamp.is_some(),
        provider_id: spec.and_then(|s| s.provider_id.clone()),
        annotations: n.metadata.annotations.clone().unwrap_or_default(),
        created: seconds(&n.metadata),
        last_pod_event: seconds(&n.metadata),
    })
}

/// The NodePool template hash NodeClaims record in `karpenter.sh/nodepool-hash`: FNV-1a over
/// the template's canonical JSON (labels, annotations, taints, requirements, nodeClassRef,
/// kubelet, expiry). Stable across releases; a different value means the template changed.
pub fn template_hash(p: &NodePool) -> String {
    fnv_hex(&serde_json::to_string(&p.spec.template).unwrap_or_default())
}

/// The EC2NodeClass static hash NodeClaims record in `karpenter.k8s.aws/ec2nodeclass-hash`:
/// FNV-1a over the spec's canonical JSON without the selector terms, whose changes show up as
/// AMI, subnet or security-group drift instead.
pub fn node_class_hash(c: &EC2NodeClass) -> String {
    let mut spec = c.spec.clone();
    spec.ami_selector_terms.clear();
    spec.subnet_selector_terms.clear();
    spec.security_group_selector_terms.clear();
    spec.capacity_reservation_selector_terms.clear();
    fnv_hex(&serde_json::to_string(&spec).unwrap_or_default())
}

fn fnv_hex(text: &str) -> String {
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{hash:016x}")
}

fn taints(list: &[crds::TaintSpec], obj: &str, field: &str) -> Result<Vec<core::Taint>, KubeError> {
    list.iter()
        .enumerate()
        .map(|(i, t)| {
            Ok(core::Taint {
                key: t.key.clone(),
                value: t.value.clone().unwrap_or_default(),
                effect: taint_effect(&t.effect, obj, &format!("{field}[{i}].effect"))?,
            })
        })
        .collect()
}

fn requirements(
    list: &[crds::NodeSelectorRequirementWithMinValues],
    obj: &str,
    field: &str,
) -> Result<Requirements, KubeError> {
    let mut reqs = Requirements::new();
    for (i, r) in list.iter().enumerate() {
        let f = format!("{field}[{i}]");
        reqs.add(
            requirement(&r.key, &r.operator, &r.values, obj, &f)?.with_min_values(r.min_values),
        );
    }
    Ok(reqs)
}

/// Parses a Go-style duration (`30s`, `1h30m`, `720h`) or `Never` (None).
pub fn duration_seconds(text: &str) -> Result<Option<i64>, String> {
    if text == "Never" {
        return Ok(None);
    }
    let mut total = 0f64;
    let mut number = String::new();
    let mut chars = text.chars().peekable();
    let mut any = false;
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() || c == '.' {
            number.push(c);
            continue;
        }
        let mut unit = c.to_string();
        if c == 'm' && chars.peek() == Some(&'s') {
            unit.push(chars.next().unwrap_or('s'));
        }
        let n: f64 = number
            .parse()
            .map_err(|_| format!("invalid duration {text:?}"))?;
        number.clear();
        total += n * match unit.as_str() {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 0.001,
            _ => return Err(format!("invalid duration {text:?}: unknown unit {unit:?}")),
        };
        any = true;
    }
    if !number.is_empty() || !any {
        return Err(format!(
            "invalid duration {text:?}: expected a number and a unit such as 30s or 720h"
        ));
    }
    Ok(Some(total.round() as i64))
}

/// Converts a NodePool.
pub fn nodepool(p: &NodePool) -> Result<core::NodePool, KubeError> {
    let obj = object("NodePool", &p.metadata);
    let spec = &p.spec;
    let tmpl = &spec.template.spec;
    let mut limits = None;
    if let Some(l) = &spec.limits {
        limits = Some(value_list(Some(l), &obj, "spec.limits")?);
    }
    let disruption = spec.disruption.clone().unwrap_or_default();
    let consolidation_policy = match disruption.consolidation_policy.as_deref() {
        None | Some("WhenEmptyOrUnderutilized") => {
            core::ConsolidationPolicy::WhenEmptyOrUnderutilized
        }
        Some("WhenEmpty") => core::ConsolidationPolicy::WhenEmpty,
        Some(other) => {
            return Err(KubeError::field(
                &obj,
                "spec.disruption.consolidationPolicy",
                format!("unknown policy {other:?}"),
            ))
        }
    };
    let consolidate_after = match disruption.consolidate_after.as_deref() {
        None => Some(0),
        Some(d) => duration_seconds(d)
            .map_err(|e| KubeError::field(&obj, "spec.disruption.consolidateAfter", e))?,
    };
    let expire_after = match tmpl.expire_after.as_deref() {
        None => Some(720 * 3600),
        Some(d) => duration_seconds(d)
            .map_err(|e| KubeError::field(&obj, "spec.template.spec.expireAfter", e))?,
    };
    let mut budgets = Vec::new();
    for (i, b) in disruption.budgets.iter().enumerate() {
        let duration = match &b.duration {
            Some(d) => duration_seconds(d).map_err(|e| {
                KubeError::field(&obj, format!("spec.disruption.budgets[{i}].duration"), e)
            })?,
            None => None,
        };
        budgets.push(core::Budget {
            nodes: b.nodes.clone(),
            schedule: b.schedule.clone(),
            duration,
            reasons: b.reasons.clone(),
        });
    }
    Ok(core::NodePool {
        name: p.metadata.name.clone().unwrap_or_default(),
        weight: spec.weight.unwrap_or(0),
        requirements: requirements(&tmpl.requirements, &obj, "spec.template.spec.requirements")?,
        labels: spec
            .template
            .metadata
            .as_ref()
            .map(|m| m.labels.clone())
            .unwrap_or_default(),
        taints: taints(&tmpl.taints, &obj, "spec.template.spec.taints")?,
        startup_taints: taints(
            &tmpl.startup_taints,
            &obj,
            "spec.template.spec.startupTaints",
        )?,
        limits,
        node_class: tmpl
            .node_class_ref
            .as_ref()
            .map(|r| r.name.clone())
            .unwrap_or_default(),
        consolidation_policy,
        consolidate_after,
        expire_after,
        budgets,
        deleting: p.metadata.deletion_timestamp.is_some(),
        template_hash: Some(template_hash(p)),
    })
}

/// The node-class settings that shape allocatable resources.
pub fn nodeclass_settings(c: &EC2NodeClass) -> Result<NodeClassSettings, KubeError> {
    let obj = object("EC2NodeClass", &c.metadata);
    let mut out = NodeClassSettings::default();
    if let Some(k) = &c.spec.kubelet {
        let list = |m: &Option<BTreeMap<String, String>>,
                    field: &str|
         -> Result<Option<Resources>, KubeError> {
            match m {
                Some(m) => Ok(Some(resource_list(
                    m.iter().map(|(k, v)| (k, v.as_str())),
                    &obj,
                    field,
                )?)),
                None => Ok(None),
            }
        };
        out.kubelet = KubeletSettings {
            max_pods: k.max_pods,
            pods_per_core: k.pods_per_core,
            kube_reserved: list(&k.kube_reserved, "spec.kubelet.kubeReserved")?,
            system_reserved: list(&k.system_reserved, "spec.kubelet.systemReserved")?,
            eviction_hard: k.eviction_hard.clone().unwrap_or_default(),
        };
    }
    let root = c
        .spec
        .block_device_mappings
        .iter()
        .enumerate()
        .find(|(_, b)| b.root_volume == Some(true))
        .or_else(|| c.spec.block_device_mappings.iter().enumerate().next());
    if let Some((i, b)) = root {
        if let Some(size) = b.ebs.as_ref().and_then(|e| e.volume_size.as_ref()) {
            let bytes = parse_units(size).map_err(|e| {
                KubeError::field(
                    &obj,
                    format!("spec.blockDeviceMappings[{i}].ebs.volumeSize"),
                    e,
                )
            })?;
            out.root_volume_bytes = Some(bytes);
        }
    }
    out.instance_store_raid0 = c.spec.instance_store_policy.as_deref() == Some("RAID0");
    Ok(out)
}

/// Converts a NodeClaim.
pub fn nodeclaim(c: &NodeClaim) -> Result<core::NodeClaim, KubeError> {
    let obj = object("NodeClaim", &c.metadata);
    let labels = c.metadata.labels.clone().unwrap_or_default();
    let status = c.status.clone().unwrap_or_default();
    let condition = |t: &str| {
        status
            .conditions
            .iter()
            .any(|x| x.type_ == t && x.status == "True")
    };
    let allocatable = match &status.allocatable {
        Some(a) if !a.is_empty() => Some(value_list(Some(a), &obj, "status.allocatable")?),
        _ => None,
    };
    let capacity = match &status.capacity {
        Some(a) if !a.is_empty() => Some(value_list(Some(a), &obj, "status.capacity")?),
        _ => None,
    };
    Ok(core::NodeClaim {
        name: c.metadata.name.clone().unwrap_or_default(),
        nodepool: labels.get(NODEPOOL).cloned().unwrap_or_default(),
        requirements: requirements(&c.spec.requirements, &obj, "spec.requirements")?,
        taints: taints(&c.spec.taints, &obj, "spec.taints")?,
        labels,
        allocatable,
        capacity,
        node_name: status.node_name.clone(),
        provider_id: status.provider_id.clone(),
        image_id: status.image_id.clone(),
        launched: condition("Launched"),
        registered: condition("Registered"),
        initialized: condition("Initialized"),
        deleting: c.metadata.deletion_timestamp.is_some(),
        annotations: c.metadata.annotations.clone().unwrap_or_default(),
        created: seconds(&c.metadata),
    })
}

/// Converts a DaemonSet into the pod it would run.
pub fn daemonset(d: &DaemonSet) -> Result<core::DaemonSet, KubeError> {
    let obj = object("DaemonSet", &d.metadata);
    let spec = d
        .spec
        .as_ref()
        .ok_or_else(|| KubeError::field(&obj, "spec", "missing"))?;
    let template = &spec.template;
    let mut meta = template.metadata.clone().unwrap_or_default();
    meta.namespace = d.metadata.namespace.clone();
    meta.name = d.metadata.name.clone();
    let pod_spec = template
        .spec
        .as_ref()
        .ok_or_else(|| KubeError::field(&obj, "spec.template.spec", "missing"))?;
    let mut pod = pod_from_spec(&meta, pod_spec, &obj)?;
    pod.owner_kind = Some("DaemonSet".into());
    pod.owner_name = d.metadata.name.clone();
    Ok(core::DaemonSet {
        namespace: d.metadata.namespace.clone().unwrap_or_default(),
        name: d.metadata.name.clone().unwrap_or_default(),
        pod,
    })
}

/// Converts a PodDisruptionBudget.
pub fn pdb(p: &PodDisruptionBudget) -> Result<core::Pdb, KubeError> {
    let obj = object("PodDisruptionBudget", &p.metadata);
    let selector = match p.spec.as_ref().and_then(|s| s.selector.as_ref()) {
        Some(s) => label_selector(s, &obj, "spec.selector")?,
        None => match_nothing(),
    };
    Ok(core::Pdb {
        namespace: p.metadata.namespace.clone().unwrap_or_default(),
        name: p.metadata.name.clone().unwrap_or_default(),
        selector,
        disruptions_allowed: p
            .status
            .as_ref()
            .map(|s| s.disruptions_allowed)
            .unwrap_or(0),
    })
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
