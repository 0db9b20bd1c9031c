//! Nodes and Karpenter's objects into the core model: Nodes, NodePools (with their template hash),
//! EC2NodeClasses (settings and static hash), NodeClaims, DaemonSets and PodDisruptionBudgets.

use std::collections::BTreeMap;

use fleetwright_core::catalog::{
    is_quantity, CapacityReservation, KubeletExpressions, KubeletSettings, NodeClassSettings,
    MAX_PODS_FIELD,
};
use fleetwright_core::labels::NODEPOOL;
use fleetwright_core::model::{self as core};
use fleetwright_core::quantity::parse_units;
use fleetwright_core::requirements::Requirements;
use fleetwright_core::resources::Resources;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;

use crate::crds::{self, EC2NodeClass, KubeletConfiguration, MaxPods, NodeClaim, NodePool};
use crate::error::KubeError;

use super::pod::pod_from_spec;
use super::{
    label_selector, match_nothing, object, quantities, requirement, resource_list, seconds,
    taint_effect, value_list,
};

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

/// The NodePool template hash NodeClaims record in `karpenter.sh/nodepool-hash` (version
/// `v3`): Karpenter's own (`NodePool.Hash()`), so a NodeClaim Karpenter launched and one
/// Fleetwright launched compare alike. A different value means a static field changed: labels,
/// annotations, taints, startup taints, `nodeClassRef`, `expireAfter`,
/// `terminationGracePeriod` (the requirements are checked against the node's labels instead).
pub fn template_hash(p: &NodePool) -> Result<String, KubeError> {
    crate::crds::hash::nodepool_hash(&p.spec.template)
        .map_err(|e| KubeError::field(object("NodePool", &p.metadata), e.field, e.reason))
}

/// The EC2NodeClass static hash NodeClaims record in `karpenter.k8s.aws/ec2nodeclass-hash`
/// (version `v6`): Karpenter's own (`EC2NodeClass.Hash(caBundle)`), over the spec but its
/// selector terms (whose changes show up as AMI, subnet, security-group and reservation drift),
/// the resolved AMI family, the cluster's CA bundle as Karpenter holds it (`ca_bundle`: the
/// base64 of `kube-root-ca.crt`, see [`crate::dump::ClusterDump::ca_bundle`]), and the kubelet
/// settings as their JSON text.
pub fn node_class_hash(c: &EC2NodeClass, ca_bundle: &str) -> Result<String, KubeError> {
    crate::crds::hash::ec2nodeclass_hash(&c.spec, ca_bundle)
        .map_err(|e| KubeError::field(object("EC2NodeClass", &c.metadata), e.field, e.reason))
}

/// The template hash Fleetwright wrote before it used Karpenter's (version `fleetwright-v2`):
/// FNV-1a over the template's JSON without its requirements, `expireAfter` and
/// `terminationGracePeriod`. Only read, to tell whether a NodeClaim stamped with it had drifted
/// when the tick re-stamps it.
pub fn legacy_template_hash(p: &NodePool) -> String {
    let mut template = p.spec.template.clone();
    template.spec.requirements.clear();
    template.spec.expire_after = None;
    template.spec.termination_grace_period = None;
    template.spec.taints = template.spec.taints.filter(|t| !t.is_empty());
    template.spec.startup_taints = template.spec.startup_taints.filter(|t| !t.is_empty());
    if let Some(meta) = template.metadata.as_mut() {
        meta.labels = meta.labels.take().filter(|m| !m.is_empty());
        meta.annotations = meta.annotations.take().filter(|m| !m.is_empty());
    }
    fnv_hex(&serde_json::to_string(&template).unwrap_or_default())
}

/// The EC2NodeClass hash Fleetwright wrote before it used Karpenter's (version
/// `fleetwright-v2`): FNV-1a over the spec's JSON without the selector terms.
pub fn legacy_node_class_hash(c: &EC2NodeClass) -> String {
    let mut spec = c.spec.clone();
    spec.ami_selector_terms.clear();
    spec.subnet_selector_terms.clear();
    spec.security_group_selector_terms.clear();
    spec.capacity_reservation_selector_terms.clear();
    spec.tags = spec.tags.filter(|t| !t.is_empty());
    spec.block_device_mappings = spec.block_device_mappings.filter(|b| !b.is_empty());
    fnv_hex(&serde_json::to_string(&spec).unwrap_or_default())
}

pub(crate) fn fnv_hex(text: &str) -> String {
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{hash:016x}")
}

pub(crate) fn taints(
    list: &[crds::TaintSpec],
    obj: &str,
    field: &str,
) -> Result<Vec<core::Taint>, KubeError> {
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

pub(crate) fn requirements(
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
        limits = Some(zero_limits_kept(
            value_list(Some(l), &obj, "spec.limits")?,
            l,
        ));
    }
    static_checks(spec, &obj)?;
    let disruption = spec.disruption.clone().unwrap_or_default();
    let consolidation_policy = match disruption.consolidation_policy.as_deref() {
        None | Some("WhenEmptyOrUnderutilized") => {
            core::ConsolidationPolicy::WhenEmptyOrUnderutilized
        }
        Some("WhenEmpty") => core::ConsolidationPolicy::WhenEmpty,
        Some("Balanced") => core::ConsolidationPolicy::Balanced,
        Some(other) => {
            let hint = if other == "WhenUnderutilized" {
                " (v1beta1's WhenUnderutilized is WhenEmptyOrUnderutilized in v1)"
            } else {
                " (one of WhenEmptyOrUnderutilized, WhenEmpty, Balanced)"
            };
            return Err(KubeError::field(
                &obj,
                "spec.disruption.consolidationPolicy",
                format!("unknown policy {other:?}{hint}"),
            ));
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
            .map(|m| m.labels().clone())
            .unwrap_or_default(),
        taints: taints(tmpl.taints(), &obj, "spec.template.spec.taints")?,
        startup_taints: taints(
            tmpl.startup_taints(),
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
        template_hash: Some(template_hash(p)?),
        // A setting of the cluster, not of the NodePool: the caller applies it.
        min_values_policy: Default::default(),
        replicas: spec.replicas,
    })
}

/// What Karpenter's CRD validates of a static NodePool (`spec.replicas`), for objects that did
/// not pass an API server (dumps, scenarios): replicas not negative, only `limits.nodes`, no
/// weight.
fn static_checks(spec: &crate::crds::NodePoolSpec, obj: &str) -> Result<(), KubeError> {
    let Some(replicas) = spec.replicas else {
        return Ok(());
    };
    if replicas < 0 {
        return Err(KubeError::field(
            obj,
            "spec.replicas",
            format!("{replicas} is negative"),
        ));
    }
    if let Some(other) = spec
        .limits
        .iter()
        .flatten()
        .map(|(k, _)| k)
        .find(|k| *k != "nodes")
    {
        return Err(KubeError::field(
            obj,
            format!("spec.limits.{other}"),
            "only limits.nodes is supported on static NodePools (spec.replicas is set)",
        ));
    }
    if spec.weight.is_some() {
        return Err(KubeError::field(
            obj,
            "spec.weight",
            "weight cannot be set on static NodePools (spec.replicas is set)",
        ));
    }
    Ok(())
}

/// The node-class settings that shape allocatable resources. `node_class_cel` is Karpenter's
/// `NodeClassCEL` feature gate: without it, a class whose kubelet settings hold a CEL
/// expression is refused, as Karpenter marks it not ready.
pub fn nodeclass_settings(
    c: &EC2NodeClass,
    node_class_cel: bool,
) -> Result<NodeClassSettings, KubeError> {
    let obj = object("EC2NodeClass", &c.metadata);
    for (i, term) in c.spec.ami_selector_terms.iter().enumerate() {
        if let Some(alias) = &term.alias {
            check_alias(alias).map_err(|e| {
                KubeError::field(&obj, format!("spec.amiSelectorTerms[{i}].alias"), e)
            })?;
        }
    }
    let mut out = NodeClassSettings::default();
    if let Some(k) = &c.spec.kubelet {
        // Reservations written as expressions are evaluated per type; the quantities are read
        // here. A map of expressions only leaves the defaults of the other resources alone.
        let list = |m: &Option<BTreeMap<String, String>>,
                    field: &str|
         -> Result<Option<Resources>, KubeError> {
            let quantities: Vec<(&String, &str)> = m
                .iter()
                .flatten()
                .map(|(k, v)| (k, v.as_str()))
                .filter(|(_, v)| is_quantity(v))
                .collect();
            match m {
                Some(m) if quantities.is_empty() && !m.is_empty() => Ok(None),
                Some(_) => Ok(Some(resource_list(quantities, &obj, field)?)),
                None => Ok(None),
            }
        };
        out.kubelet = KubeletSettings {
            max_pods: k.max_pods.as_ref().and_then(MaxPods::count),
            expressions: kubelet_expressions(k, &obj, node_class_cel)?,
            pods_per_core: k.pods_per_core,
            kube_reserved: list(&k.kube_reserved, "spec.kubelet.kubeReserved")?,
            system_reserved: list(&k.system_reserved, "spec.kubelet.systemReserved")?,
            eviction_hard: k.eviction_hard.clone().unwrap_or_default(),
            eviction_soft: if bottlerocket(&c.spec) {
                Default::default()
            } else {
                k.eviction_soft.clone().unwrap_or_default()
            },
        };
    }
    let devices = c.spec.block_device_mappings();
    let root = devices
        .iter()
        .enumerate()
        .find(|(_, b)| b.root_volume == Some(true))
        .or_else(|| devices.iter().enumerate().next());
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
    out.reservations = reservations(c);
    Ok(out)
}

/// The kubelet settings' CEL expressions, compiled. Refused without the `NodeClassCEL` gate
/// (before they are compiled, as Karpenter checks the gate first), and where one does not
/// compile.
fn kubelet_expressions(
    k: &KubeletConfiguration,
    obj: &str,
    node_class_cel: bool,
) -> Result<KubeletExpressions, KubeError> {
    let written = |m: &Option<BTreeMap<String, String>>| {
        m.iter()
            .flatten()
            .find(|(_, v)| !is_quantity(v))
            .map(|(r, _)| r.clone())
    };
    let first = match (
        k.max_pods.as_ref().and_then(MaxPods::expression),
        written(&k.kube_reserved),
        written(&k.system_reserved),
    ) {
        (Some(_), _, _) => Some(MAX_PODS_FIELD.to_string()),
        (None, Some(r), _) => Some(format!("spec.kubelet.kubeReserved.{r}")),
        (None, None, Some(r)) => Some(format!("spec.kubelet.systemReserved.{r}")),
        (None, None, None) => None,
    };
    let Some(field) = first else {
        return Ok(KubeletExpressions::default());
    };
    if !node_class_cel {
        return Err(KubeError::field(
            obj,
            field,
            format!("is a CEL expression, which Karpenter evaluates only with its NodeClassCEL feature gate on (off by default); turn it on with {NODE_CLASS_CEL_SETTING}=true, or `--node-class-cel` on the command line"),
        ));
    }
    KubeletExpressions::read(
        k.max_pods.as_ref().and_then(MaxPods::expression),
        k.kube_reserved.as_ref(),
        k.system_reserved.as_ref(),
    )
    .map_err(|e| KubeError::field(obj, e.field, e.reason))
}

/// The setting that turns Karpenter's `NodeClassCEL` feature gate on for the functions.
pub const NODE_CLASS_CEL_SETTING: &str = "FLEETWRIGHT_NODE_CLASS_CEL";

/// The capacity reservations the class's status lists.
fn reservations(c: &EC2NodeClass) -> Vec<CapacityReservation> {
    let Some(status) = &c.status else {
        return Vec::new();
    };
    status
        .capacity_reservations
        .iter()
        .filter_map(reservation)
        .collect()
}

/// One reservation of an EC2NodeClass's status, with its type, zone and count (the type
/// `default`, the state `active` and the count 0 when unset); one without an instance type or
/// a zone is no offering, and None.
pub fn reservation(r: &fleetwright_crds::CapacityReservation) -> Option<CapacityReservation> {
    Some(CapacityReservation {
        id: r.id.clone(),
        instance_type: r.instance_type.clone()?,
        zone: r.availability_zone.clone()?,
        kind: r
            .reservation_type
            .clone()
            .unwrap_or_else(|| "default".into()),
        interruptible: r.interruptible.unwrap_or(false),
        state: r.state.clone().unwrap_or_else(|| "active".into()),
        available: r.available_instance_count.unwrap_or(0) as usize,
    })
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
        // Absent is the CRD's default, as on the NodePool's template.
        expire_after: lenient_duration(Some(c.spec.expire_after.as_deref().unwrap_or("720h"))),
        termination_grace_period: lenient_duration(c.spec.termination_grace_period.as_deref()),
    })
}

/// A NodeClaim's duration field: None when absent, `Never`, or unreadable. A NodeClaim is the
/// record of a running instance, so a value that cannot be read leaves it be (it never expires,
/// its drain waits for evictions) rather than setting the NodeClaim aside.
fn lenient_duration(text: Option<&str>) -> Option<i64> {
    text.and_then(|d| duration_seconds(d).ok().flatten())
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

/// Converts a NodeOverlay; a bad price, adjustment or capacity is an error naming the field.
pub fn overlay(o: &crate::crds::NodeOverlay) -> Result<core::NodeOverlay, KubeError> {
    let obj = object("NodeOverlay", &o.metadata);
    let spec = &o.spec;
    let price = match (&spec.price, &spec.price_adjustment) {
        (Some(_), Some(_)) => {
            return Err(KubeError::field(
                &obj,
                "spec.priceAdjustment",
                "cannot be set together with spec.price",
            ))
        }
        (Some(p), None) => Some(core::PriceChange::Set(
            p.parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| {
                    KubeError::field(
                        &obj,
                        "spec.price",
                        format!("{p:?} is not a price such as \"0.25\""),
                    )
                })?,
        )),
        (None, Some(a)) => Some(core::PriceChange::adjustment(a).ok_or_else(|| {
            KubeError::field(
                &obj,
                "spec.priceAdjustment",
                format!("{a:?} is not an adjustment such as \"+0.05\", \"-10%\""),
            )
        })?),
        (None, None) => None,
    };
    let capacity = value_list(spec.capacity.as_ref(), &obj, "spec.capacity")?;
    if capacity.cpu != 0 || capacity.memory != 0 || capacity.ephemeral != 0 || capacity.pods != 0 {
        return Err(KubeError::field(
            &obj,
            "spec.capacity",
            "cpu, memory, ephemeral-storage and pods cannot be overlaid, only extended resources",
        ));
    }
    Ok(core::NodeOverlay {
        name: o.metadata.name.clone().unwrap_or_default(),
        weight: spec.weight.unwrap_or(0),
        requirements: requirements(&spec.requirements, &obj, "spec.requirements")?,
        price,
        capacity: capacity.extended,
    })
}

/// Whether the class's nodes run Bottlerocket, whose kubelet Karpenter gives no soft
/// eviction thresholds: by `amiFamily`, else by the family of its first AMI alias.
fn bottlerocket(spec: &fleetwright_crds::EC2NodeClassSpec) -> bool {
    match &spec.ami_family {
        Some(family) => family.eq_ignore_ascii_case("bottlerocket"),
        None => spec
            .ami_selector_terms
            .iter()
            .filter_map(|t| t.alias.as_deref())
            .next()
            .is_some_and(|a| a.to_ascii_lowercase().starts_with("bottlerocket@")),
    }
}

/// An AMI alias as Karpenter accepts it: `family@version`, the family one of Karpenter's
/// (`al2023`, `al2`, `bottlerocket`, `windows2019`, `windows2022`, `windows2025`), the version
/// `latest` or a release.
fn check_alias(alias: &str) -> Result<(), String> {
    let Some((family, version)) = alias.split_once('@') else {
        return Err(format!(
            "{alias:?} is not of the form family@version (al2023@latest, bottlerocket@v1.20.3)"
        ));
    };
    if version.is_empty() {
        return Err(format!("{alias:?} names no version (al2023@latest)"));
    }
    let family = family.to_ascii_lowercase();
    let windows = family
        .strip_prefix("windows")
        .is_some_and(|year| !year.is_empty() && year.chars().all(|c| c.is_ascii_digit()));
    match family.as_str() {
        "al2023" | "al2" | "bottlerocket" => Ok(()),
        _ if windows => Ok(()),
        _ => Err(format!(
            "{alias:?}: the family must be al2023, al2, bottlerocket or windows<year>"
        )),
    }
}

/// Limits with their zeros kept: `cpu: 0` is how a NodePool is paused, and a resource amount of
/// zero reads as "not limited". A zero CPU, memory, ephemeral-storage or pods limit becomes the
/// smallest unit (no instance fits it), and a zero limit of `nodes` or of an extended resource
/// is kept as zero.
fn zero_limits_kept(
    mut limits: Resources,
    written: &BTreeMap<String, serde_json::Value>,
) -> Resources {
    use fleetwright_core::labels::{
        RESOURCE_CPU, RESOURCE_EPHEMERAL, RESOURCE_MEMORY, RESOURCE_PODS,
    };
    for name in written.keys() {
        if limits.get(name) != 0 {
            continue;
        }
        match name.as_str() {
            RESOURCE_CPU | RESOURCE_MEMORY | RESOURCE_EPHEMERAL | RESOURCE_PODS => {
                limits.set(name, 1)
            }
            other => {
                limits.extended.insert(other.to_string(), 0);
            }
        }
    }
    limits
}
