//! Nodes and Karpenter's objects into the core model: Nodes, NodePools (with their template hash),
//! EC2NodeClasses' static hash, NodeClaims, DaemonSets and NodeOverlays.

use super::durations::{duration_seconds, nodepool_duration};
use std::collections::BTreeMap;

use fleetwright_core::labels::NODEPOOL;
use fleetwright_core::model::{self as core};
use fleetwright_core::requirements::Requirements;
use fleetwright_core::resources::Resources;
use fleetwright_crds::conditions;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Node;

use crate::crds::{self, EC2NodeClass, NodeClaim, NodePool};
use crate::error::KubeError;
use crate::selectors::requirement;

use super::pod::pod_from_spec;
use super::{object, quantities, resource_list, seconds, taint_effect, value_list};

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
        .any(|c| c.type_ == conditions::READY && c.status == "True");
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
        volume_limits: Default::default(),
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
        Some(d) => nodepool_duration(d)
            .map_err(|e| KubeError::field(&obj, "spec.disruption.consolidateAfter", e))?,
    };
    let expire_after = match tmpl.expire_after.as_deref() {
        None => Some(720 * 3600),
        Some(d) => nodepool_duration(d)
            .map_err(|e| KubeError::field(&obj, "spec.template.spec.expireAfter", e))?,
    };
    let mut budgets = Vec::new();
    for (i, b) in disruption.budgets.iter().enumerate() {
        let field = |f: &str| format!("spec.disruption.budgets[{i}].{f}");
        let duration = match &b.duration {
            Some(d) => {
                duration_seconds(d).map_err(|e| KubeError::field(&obj, field("duration"), e))?
            }
            None => None,
        };
        check_budget(b).map_err(|(f, e)| KubeError::field(&obj, field(f), e))?;
        budgets.push(core::Budget {
            nodes: b.nodes.clone(),
            schedule: b.schedule.clone(),
            duration,
            reasons: b.reasons.clone(),
        });
    }
    if let Some(w) = spec.weight.filter(|w| !(1..=100).contains(w)) {
        let why = format!("{w} is outside 1–100, which Karpenter's CRD refuses");
        return Err(KubeError::field(&obj, "spec.weight", why));
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
        node_class: node_class(tmpl.node_class_ref.as_ref(), &obj)?,
        consolidation_policy,
        consolidate_after,
        expire_after,
        budgets,
        deleting: p.metadata.deletion_timestamp.is_some(),
        template_hash: Some(template_hash(p)?),
        // A setting of the cluster, not of the NodePool: the caller applies it.
        min_values_policy: Default::default(),
        terminate_first: Default::default(),
        spot_to_spot: false,
        replicas: spec.replicas,
    })
}

/// Whether a NodePool's class belongs to another provider (EKS Auto Mode's
/// `eks.amazonaws.com/NodeClass`, say): such a NodePool is not Fleetwright's, and is read as if
/// it were not there. Another provider's class is in another group (GCP's `GCENodeClass` is a
/// few letters from `EC2NodeClass`, but not in `karpenter.k8s.aws`). A reference in a group a
/// letter or two off `karpenter.k8s.aws`, in Karpenter's own group (which holds no class), or
/// to the kind `EC2NodeClass` is a typo: [`nodepool`] names it, so that a pool meant for
/// Fleetwright is never silently left out.
pub fn foreign(pool: &NodePool) -> bool {
    foreign_class(pool.spec.template.spec.node_class_ref.as_ref())
}

/// Whether a NodeClaim's class belongs to another provider, as [`foreign`] reads a NodePool's.
pub fn foreign_claim(claim: &NodeClaim) -> bool {
    foreign_class(claim.spec.node_class_ref.as_ref())
}

fn foreign_class(r: Option<&crate::crds::NodeClassRef>) -> bool {
    let Some(r) = r else {
        return false;
    };
    let far = |value: &str, ours: &str| {
        !value.is_empty()
            && crate::strict::distance(&value.to_ascii_lowercase(), &ours.to_ascii_lowercase()) > 2
    };
    let group = group(&r.group);
    far(group, "karpenter.k8s.aws")
        && !group.eq_ignore_ascii_case("karpenter.sh")
        && !r.kind.eq_ignore_ascii_case("EC2NodeClass")
}

/// A class reference's group without a version some write after it (`karpenter.k8s.aws/v1`,
/// as one of Karpenter's own examples does).
fn group(written: &str) -> &str {
    written.split('/').next().unwrap_or(written)
}

/// The EC2NodeClass a NodePool names. A reference to another kind or group (`EC2NodeClas`,
/// `karpenter.sh`) names no class the AWS provider reads: the NodePool could launch nothing.
fn node_class(r: Option<&fleetwright_crds::NodeClassRef>, obj: &str) -> Result<String, KubeError> {
    let Some(r) = r else {
        return Ok(String::new());
    };
    let field = "spec.template.spec.nodeClassRef";
    if !r.kind.is_empty() && r.kind != "EC2NodeClass" {
        let why = format!(
            "{:?} is not EC2NodeClass, the only kind the AWS provider reads",
            r.kind
        );
        return Err(KubeError::field(obj, format!("{field}.kind"), why));
    }
    if !r.group.is_empty() && group(&r.group) != "karpenter.k8s.aws" {
        let why = format!(
            "{:?} is not karpenter.k8s.aws, EC2NodeClass's group",
            r.group
        );
        return Err(KubeError::field(obj, format!("{field}.group"), why));
    }
    Ok(r.name.clone())
}

/// What Karpenter's CRD validates of a static NodePool (`spec.replicas`), for objects that did
/// not pass an API server (dumps, scenarios): replicas not negative, only `limits.nodes`, no
/// weight.
/// A disruption budget as Karpenter's CRD admits it: `nodes` a count or a percentage, each
/// reason one of Karpenter's, a `schedule` that parses and comes with a `duration` (and the
/// other way round). A budget read any other way would freeze a pool's disruption, or let a
/// maintenance freeze with a misspelt reason apply to nothing.
fn check_budget(b: &crds::BudgetSpec) -> Result<(), (&'static str, String)> {
    use fleetwright_core::budget::parse_nodes;
    let nodes = b.nodes.trim();
    let count = nodes.strip_suffix('%').unwrap_or(nodes);
    if count.is_empty()
        || !count.chars().all(|c| c.is_ascii_digit())
        || parse_nodes(nodes, 100).is_none()
    {
        return Err((
            "nodes",
            format!(
                "{:?} is not a node count (\"3\") or a percentage up to 100% (\"10%\")",
                b.nodes
            ),
        ));
    }
    const REASONS: [&str; 4] = ["Underutilized", "Empty", "Drifted", "Unhealthy"];
    if let Some(r) = b.reasons.iter().find(|r| !REASONS.contains(&r.as_str())) {
        return Err((
            "reasons",
            format!("{r:?} is not one of {}", REASONS.join(", ")),
        ));
    }
    // A schedule no parser reads is the caller's warning: the budget then allows nothing.
    match (&b.schedule, &b.duration) {
        (Some(_), None) => Err(("duration", "is required with a schedule".into())),
        (None, Some(_)) => Err(("schedule", "is required with a duration".into())),
        _ => Ok(()),
    }
}

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
        launched: condition(conditions::LAUNCHED),
        registered: condition(conditions::REGISTERED),
        initialized: condition(conditions::INITIALIZED),
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
