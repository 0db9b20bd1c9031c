//! The objects the executor writes, built purely: NodeClaims from the plan, a node registered
//! to its NodeClaim (labels and taints synced, `karpenter.sh/unregistered` removed, finalizer
//! added) or cordoned with `karpenter.sh/disrupted:NoSchedule`, status conditions, object
//! references, and which pods a drain leaves alone and in what order it takes the rest.

use std::collections::BTreeMap;

use fleetwright_core::disruption::{
    CLASS_HASH_VERSION, NODECLASS_HASH, NODECLASS_HASH_VERSION, NODEPOOL_HASH,
    NODEPOOL_HASH_VERSION, POOL_HASH_VERSION,
};
use fleetwright_core::labels::{
    is_well_known, MIRROR_POD, NODEPOOL, NODE_REGISTERED, TAINT_DISRUPTED, TAINT_UNREGISTERED,
};
use fleetwright_core::plan::NewNodeClaim;
use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde_json::Value;

use crate::crds::{
    self, Condition, EC2NodeClass, NodeClaim, NodeClaimResources, NodeClaimStatus, NodeClassRef,
    NodePool, NodeSelectorRequirementWithMinValues,
};

/// The finalizer Karpenter and Fleetwright put on NodeClaims and nodes.
pub const TERMINATION_FINALIZER: &str = "karpenter.sh/termination";

/// The NodeClaim to create for a planned node, from its NodePool and EC2NodeClass in `dump`;
/// None when the pool is gone.
pub fn nodeclaim_in(dump: &crate::dump::ClusterDump, planned: &NewNodeClaim) -> Option<NodeClaim> {
    let (pool, class) = dump.pool_and_class(&planned.nodepool)?;
    let class = class.map(|c| (c, dump.ca_bundle.as_deref()));
    Some(nodeclaim_for(pool, class, planned))
}

/// Whether the scheduler lowered a `minValues` to launch the NodeClaim (Karpenter's annotation).
pub const MIN_VALUES_RELAXED: &str = "karpenter.sh/nodeclaim-min-values-relaxed";

/// The NodePool template hash annotations a NodeClaim of `pool` carries: Karpenter's hash, in
/// its version. None when the template cannot be hashed (a duration that does not parse: its
/// conversion fails the same way, so nothing is planned for it).
pub fn pool_hash(pool: &NodePool) -> Vec<(String, String)> {
    let Ok(hash) = crate::convert::template_hash(pool) else {
        return Vec::new();
    };
    vec![
        (NODEPOOL_HASH.to_string(), hash),
        (
            NODEPOOL_HASH_VERSION.to_string(),
            POOL_HASH_VERSION.to_string(),
        ),
    ]
}

/// The EC2NodeClass static hash annotations a NodeClaim of `class` carries: Karpenter's hash,
/// in its version, with the cluster's CA bundle. None while the bundle is unknown (a hash
/// without it would differ from the one the NodeClaim is later compared with) or the spec
/// cannot be hashed; the tick stamps them once they can be.
pub fn class_hash(class: &EC2NodeClass, ca_bundle: Option<&str>) -> Vec<(String, String)> {
    let hash = ca_bundle.and_then(|ca| crate::convert::node_class_hash(class, ca).ok());
    let Some(hash) = hash else {
        return Vec::new();
    };
    vec![
        (NODECLASS_HASH.to_string(), hash),
        (
            NODECLASS_HASH_VERSION.to_string(),
            CLASS_HASH_VERSION.to_string(),
        ),
    ]
}

/// The label a new NodeClaim carries for one of its requirements, as Karpenter labels it: the
/// value of a single-valued `In`; and for a label that is not well-known (which no launch will
/// set), any value the requirement allows: the first of an `In`, else the least non-negative
/// integer an `Exists`, `NotIn`, `Gt` or `Lt` allows (Karpenter picks one at random).
fn label_value(r: &fleetwright_core::plan::RequirementOut) -> Option<String> {
    if r.operator == "In" && (r.values.len() == 1 || !is_well_known(&r.key)) {
        return r.values.first().cloned();
    }
    if is_well_known(&r.key) {
        return None;
    }
    let bound = || r.values.first().and_then(|v| v.parse::<i64>().ok());
    let value = match r.operator.as_str() {
        "Exists" => 0,
        "NotIn" => (0..).find(|n: &i64| !r.values.contains(&n.to_string()))?,
        "Gt" => bound()?.checked_add(1)?.max(0),
        "Lt" => bound()?.checked_sub(1).filter(|n| *n >= 0)?,
        _ => return None,
    };
    Some(value.to_string())
}

/// The NodeClaim to create for one planned node of `pool`.
/// `class` is the pool's EC2NodeClass with the cluster's CA bundle, when known.
pub fn nodeclaim_for(
    pool: &NodePool,
    class: Option<(&EC2NodeClass, Option<&str>)>,
    planned: &NewNodeClaim,
) -> NodeClaim {
    let pool_name = pool.metadata.name.clone().unwrap_or_default();
    let template = &pool.spec.template;
    let mut labels: BTreeMap<String, String> = template
        .metadata
        .as_ref()
        .map(|m| m.labels().clone())
        .unwrap_or_default();
    labels.insert(NODEPOOL.to_string(), pool_name.clone());
    for r in &planned.requirements {
        if let Some(value) = label_value(r) {
            labels.entry(r.key.clone()).or_insert(value);
        }
    }
    let mut annotations = template
        .metadata
        .as_ref()
        .map(|m| m.annotations().clone())
        .unwrap_or_default();
    annotations.extend(pool_hash(pool));
    if let Some(relaxed) = planned.min_values_relaxed {
        annotations.insert(MIN_VALUES_RELAXED.to_string(), relaxed.to_string());
    }
    if let Some((class, ca_bundle)) = class {
        annotations.extend(class_hash(class, ca_bundle));
    }
    let annotations = Some(annotations);
    let owner = OwnerReference {
        api_version: "karpenter.sh/v1".into(),
        kind: "NodePool".into(),
        name: pool_name.clone(),
        uid: pool.metadata.uid.clone().unwrap_or_default(),
        block_owner_deletion: Some(true),
        controller: None,
    };
    let spec = crds::NodeClaimSpec {
        node_class_ref: template.spec.node_class_ref.clone().or_else(|| {
            Some(NodeClassRef {
                group: "karpenter.k8s.aws".into(),
                kind: "EC2NodeClass".into(),
                name: planned.node_class.clone(),
            })
        }),
        requirements: planned
            .requirements
            .iter()
            .map(|r| NodeSelectorRequirementWithMinValues {
                key: r.key.clone(),
                operator: r.operator.clone(),
                values: r.values.clone(),
                min_values: r.min_values,
            })
            .collect(),
        taints: template.spec.taints().to_vec(),
        startup_taints: template.spec.startup_taints().to_vec(),
        expire_after: template.spec.expire_after.clone(),
        termination_grace_period: template.spec.termination_grace_period.clone(),
        resources: Some(NodeClaimResources {
            requests: planned
                .requests
                .to_map()
                .into_iter()
                .map(|(k, v)| (k, Value::String(v)))
                .collect(),
        }),
        extra: BTreeMap::new(),
    };
    NodeClaim {
        metadata: ObjectMeta {
            generate_name: Some(format!("{pool_name}-")),
            labels: Some(labels),
            annotations,
            owner_references: Some(vec![owner]),
            finalizers: Some(vec![TERMINATION_FINALIZER.to_string()]),
            ..Default::default()
        },
        spec,
        status: None,
    }
}

pub(crate) fn taint_key(t: &Taint) -> (&str, &str) {
    (t.key.as_str(), t.effect.as_str())
}

/// The node after registration against its NodeClaim, or None when nothing changes.
pub fn registered(node: &Node, claim: &NodeClaim) -> Option<Node> {
    let mut out = node.clone();
    let labels = out.metadata.labels.get_or_insert_with(Default::default);
    for (k, v) in claim.metadata.labels.iter().flatten() {
        labels.insert(k.clone(), v.clone());
    }
    labels.insert(NODE_REGISTERED.into(), "true".into());
    let spec = out.spec.get_or_insert_with(Default::default);
    let mut taints: Vec<Taint> = spec.taints.clone().unwrap_or_default();
    taints.retain(|t| t.key != TAINT_UNREGISTERED);
    for t in &claim.spec.taints {
        let wanted = Taint {
            key: t.key.clone(),
            value: t.value.clone(),
            effect: t.effect.clone(),
            time_added: None,
        };
        if !taints.iter().any(|x| taint_key(x) == taint_key(&wanted)) {
            taints.push(wanted);
        }
    }
    spec.taints = (!taints.is_empty()).then_some(taints);
    let finalizers = out.metadata.finalizers.get_or_insert_with(Vec::new);
    if !finalizers.iter().any(|f| f == TERMINATION_FINALIZER) {
        finalizers.push(TERMINATION_FINALIZER.to_string());
    }
    (out != *node).then_some(out)
}

/// The node with `karpenter.sh/disrupted:NoSchedule`, or None when it already has it.
pub fn cordoned(node: &Node) -> Option<Node> {
    with_no_schedule(node, TAINT_DISRUPTED)
}

/// The node with the NoSchedule taint `key`, or None when it already has it.
pub fn with_no_schedule(node: &Node, key: &str) -> Option<Node> {
    let taints = node.spec.as_ref().and_then(|s| s.taints.as_ref());
    if taints
        .into_iter()
        .flatten()
        .any(|t| t.key == key && t.effect == "NoSchedule")
    {
        return None;
    }
    let mut out = node.clone();
    let spec = out.spec.get_or_insert_with(Default::default);
    spec.taints.get_or_insert_with(Vec::new).push(Taint {
        key: key.into(),
        value: None,
        effect: "NoSchedule".into(),
        time_added: None,
    });
    Some(out)
}

/// `namespace/name` of a pod.
pub fn pod_key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

pub(crate) fn is_critical(pod: &Pod) -> bool {
    matches!(
        pod.spec
            .as_ref()
            .and_then(|s| s.priority_class_name.as_deref()),
        Some("system-cluster-critical") | Some("system-node-critical")
    )
}

/// Pods a drain leaves alone: DaemonSet pods, mirror (static) pods and finished pods.
pub fn skipped_by_drain(pod: &Pod) -> bool {
    let owned_by_daemonset = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "DaemonSet");
    let mirror = pod
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(MIRROR_POD));
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    owned_by_daemonset || mirror || matches!(phase, Some("Succeeded") | Some("Failed"))
}

/// Whether the pod tolerates `<key>:NoSchedule` (a taint with no value). A drain behind such a
/// fence neither evicts the pod (it would come straight back to the node) nor waits for it, as
/// Karpenter's termination does with `karpenter.sh/disrupted`; it goes with its node.
pub fn tolerates_no_schedule(pod: &Pod, taint: &str) -> bool {
    let tolerations = pod.spec.as_ref().and_then(|s| s.tolerations.as_ref());
    tolerations.into_iter().flatten().any(|t| {
        let effect = t.effect.as_deref().unwrap_or_default();
        let key = t.key.as_deref().unwrap_or_default();
        let exists = t.operator.as_deref() == Some("Exists");
        let value = t.value.as_deref().unwrap_or_default();
        (effect.is_empty() || effect == "NoSchedule")
            && match key {
                "" => exists,
                k if k == taint => exists || value.is_empty(),
                _ => false,
            }
    })
}

/// Pods a drain behind the fence `taint` leaves on the node and does not wait for: those
/// [`skipped_by_drain`], and those that [`tolerates_no_schedule`] the fence.
pub fn left_by_drain(pod: &Pod, taint: &str) -> bool {
    skipped_by_drain(pod) || tolerates_no_schedule(pod, taint)
}

/// A condition stamped at `now` (RFC 3339).
pub fn condition(type_: &str, status: bool, reason: &str, now: &str) -> Condition {
    Condition {
        type_: type_.into(),
        status: if status { "True" } else { "False" }.into(),
        reason: Some(reason.into()),
        message: None,
        last_transition_time: Some(now.into()),
        observed_generation: None,
    }
}

/// `status` with `c` set: replaces the condition of the same type, keeping its transition time
/// when its status does not change. None when nothing changes.
pub fn with_condition(status: &NodeClaimStatus, c: Condition) -> Option<NodeClaimStatus> {
    let mut out = status.clone();
    match out.conditions.iter_mut().find(|x| x.type_ == c.type_) {
        Some(existing) if existing.status == c.status && existing.reason == c.reason => {
            return None
        }
        Some(existing) => {
            let keep = (existing.status == c.status)
                .then(|| existing.last_transition_time.clone())
                .flatten();
            *existing = Condition {
                last_transition_time: keep.or(c.last_transition_time.clone()),
                ..c
            };
        }
        None => out.conditions.push(c),
    }
    Some(out)
}

/// A reference to a cluster-scoped object for an Event: a Node (`v1`) or a NodeClaim.
pub fn reference(
    api_version: &str,
    kind: &str,
    name: &str,
    uid: Option<String>,
) -> ObjectReference {
    ObjectReference {
        api_version: Some(api_version.into()),
        kind: Some(kind.into()),
        name: Some(name.into()),
        uid,
        ..Default::default()
    }
}

/// What one drain pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DrainOutcome {
    /// `namespace/name` of pods whose eviction was accepted (or that were already gone).
    pub evicted: Vec<String>,
    /// Pods left in place this pass, with the reason (a PDB refusal is retried on a later pass).
    pub blocked: Vec<(String, String)>,
    /// Critical pods held back until the other pods are gone (Karpenter's drain order).
    pub deferred: Vec<String>,
    /// Pods whose eviction failed with another error (a pod two PDBs cover answers 500, a
    /// webhook that denies evictions 403), with the error: left in place and retried on a later
    /// pass, while the rest of the node, and of the tick, goes on.
    pub failed: Vec<(String, String)>,
}

impl DrainOutcome {
    /// Whether nothing that a drain moves is left on the node.
    pub fn done(&self) -> bool {
        self.blocked.is_empty() && self.deferred.is_empty() && self.failed.is_empty()
    }
}

/// Whether the pod's `karpenter.sh/do-not-disrupt` holds it at `now` (seconds): a duration
/// counts from the pod's start (its creation, before it has one). A drain never sends such a
/// pod to the Eviction API; it stays until its node's `terminationGracePeriod` is over.
pub fn do_not_disrupt_holds(pod: &Pod, now: i64) -> bool {
    let value = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(fleetwright_core::labels::DO_NOT_DISRUPT));
    let started = pod
        .status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .or(pod.metadata.creation_timestamp.as_ref())
        .map_or(0, |t| t.0.as_second());
    fleetwright_core::model::Protection::from_annotation(value.map(String::as_str), started)
        .holds(now)
}

#[cfg(test)]
#[path = "../tests/unit/objects.rs"]
mod tests;
