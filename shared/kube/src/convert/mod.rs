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

mod durations;
mod nodeclass;
mod objects;
mod pod;
pub mod pod_events;

pub use self::durations::duration_seconds;
pub use self::nodeclass::{nodeclass_settings, reservation, NODE_CLASS_CEL_SETTING};
pub use self::objects::{
    daemonset, legacy_node_class_hash, legacy_template_hash, node, node_class_hash, nodeclaim,
    nodepool, overlay, pdb, template_hash,
};
pub use self::pod::{pod, pod_from_spec, pod_requests, volume_zones, VolumeZones};

/// An object a read or a conversion left out, and why: the error names the object and the
/// field. The tick reports each (a condition where the kind has one, and an Event) and goes on
/// with every other object.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rejected {
    pub kind: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    pub error: String,
}

impl Rejected {
    pub fn new(kind: &str, meta: &ObjectMeta, error: impl std::fmt::Display) -> Rejected {
        Rejected {
            kind: kind.to_string(),
            name: meta.name.clone().unwrap_or_default(),
            namespace: meta.namespace.clone(),
            uid: meta.uid.clone(),
            error: error.to_string(),
        }
    }

    /// `NodePool default`, `Pod shop/web-0`.
    pub fn object(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }
}

/// What the core sees of a bound pod that does not convert: the pod, on its node, with nothing
/// known of its requests and protected from disruption, so its node is never taken for empty
/// and never chosen for disruption while the pod is unreadable (drains still see it through the
/// dump). None for a pod not bound to a node: it is left out.
pub fn unreadable_pod(pod: &k8s_openapi::api::core::v1::Pod) -> Option<core::Pod> {
    let node = pod.spec.as_ref()?.node_name.clone()?;
    let meta = &pod.metadata;
    let mut out = core::Pod::new(
        meta.namespace.as_deref().unwrap_or("default"),
        meta.name.as_deref().unwrap_or_default(),
        fleetwright_core::resources::Resources::default(),
    );
    out.node_name = Some(node);
    out.do_not_disrupt = core::Protection::Always;
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

/// The snapshot of a live read, with each object that does not convert left out and returned
/// with its error (besides those the read already rejected): one bad object never stops the
/// others.
pub fn take_snapshot_isolating(dump: &mut ClusterDump) -> (core::Snapshot, Vec<Rejected>) {
    let mut rejected = dump.rejected.clone();
    let pods = match dump.converted_pods.take() {
        Some(pods) => pods,
        None => {
            let zones = volume_zones(&dump.pvcs, &dump.pvs);
            let mut out = Vec::new();
            for p in &dump.pods {
                match pod(p, &zones) {
                    Ok(converted) => out.push(converted),
                    Err(e) => {
                        rejected.push(Rejected::new("Pod", &p.metadata, e));
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
    for n in &dump.nodes {
        match node(n) {
            Ok(x) => snapshot.nodes.push(x),
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
                snapshot.node_class_state.entry(name).or_default().hash = hash;
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
            Err(e) => keep("PodDisruptionBudget", &p.metadata, e),
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
    for node in &mut snapshot.nodes {
        let tainted = node.taints.iter().any(|t| t.key == TAINT_DISRUPTED);
        if commanded.contains(node.name.as_str()) && !tainted {
            node.taints.push(core::Taint {
                key: TAINT_DISRUPTED.into(),
                value: String::new(),
                effect: TaintEffect::NoSchedule,
            });
        }
    }
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

    /// A NodePool's durations follow Karpenter's CRD pattern, `^(([0-9]+(s|m|h))+|Never)$`:
    /// what the API server would refuse is refused here too, with the reason.
    #[test]
    fn nodepool_durations_are_whole_hours_minutes_and_seconds() {
        use super::durations::nodepool_duration;
        assert_eq!(nodepool_duration("1h30m"), Ok(Some(5400)));
        assert_eq!(nodepool_duration("90s"), Ok(Some(90)));
        assert_eq!(nodepool_duration("0s"), Ok(Some(0)));
        assert_eq!(nodepool_duration("Never"), Ok(None));
        for bad in ["1.5m", "-1m", "500ms", "30", "", "m", "1h 30m", "1d"] {
            let e = nodepool_duration(bad).unwrap_err();
            assert!(e.contains("whole hours, minutes and seconds"), "{bad}: {e}");
        }
        let hints = [
            ("never", "Never"),
            ("10min", "10m"),
            ("1d", "24h"),
            ("300", "300s"),
            ("5 m", "5m"),
            ("1H", "1h"),
        ];
        for (typed, meant) in hints {
            let e = nodepool_duration(typed).unwrap_err();
            assert!(
                e.ends_with(&format!("did you mean {meant:?}?")),
                "{typed}: {e}"
            );
        }
        let e = nodepool_duration("9999999999h").unwrap_err();
        assert!(e.contains("longer than Karpenter can read"), "{e}");
    }

    #[test]
    fn pod_level_requests_stand_for_the_pod_and_never_lower_its_containers() {
        let spec = |pod: serde_json::Value| -> k8s_openapi::api::core::v1::PodSpec {
            serde_json::from_value(serde_json::json!({
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "600m", "memory": "1Gi"}}}],
                "resources": pod,
                "overhead": {"cpu": "100m"}
            }))
            .unwrap()
        };
        let r = pod::pod_requests(
            &spec(serde_json::json!({"requests": {"cpu": "8"}})),
            "Pod p",
        )
        .unwrap();
        assert_eq!((r.cpu, r.memory), (8100, 1 << 30));
        let r = pod::pod_requests(
            &spec(serde_json::json!({"limits": {"memory": "32Gi"}})),
            "Pod p",
        )
        .unwrap();
        assert_eq!((r.cpu, r.memory), (700, 32 << 30));
        let r = pod::pod_requests(&spec(serde_json::json!({})), "Pod p").unwrap();
        assert_eq!(r.cpu, 700);
    }

    #[test]
    fn disruption_cost_comes_before_pod_deletion_cost_and_is_an_int32() {
        let cost = |annotations: serde_json::Value| {
            let p: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
                "metadata": {"name": "p", "namespace": "n", "annotations": annotations},
                "spec": {"containers": [{"name": "c"}]}
            }))
            .unwrap();
            pod(&p, &Default::default()).unwrap().deletion_cost
        };
        let both = serde_json::json!({
            "karpenter.sh/disruption-cost": "-5",
            "controller.kubernetes.io/pod-deletion-cost": "7"
        });
        assert_eq!(cost(both), -5);
        let deletion = serde_json::json!({"controller.kubernetes.io/pod-deletion-cost": "7"});
        assert_eq!(cost(deletion), 7);
        let unreadable = serde_json::json!({
            "karpenter.sh/disruption-cost": "a lot",
            "controller.kubernetes.io/pod-deletion-cost": "7"
        });
        assert_eq!(
            cost(unreadable),
            0,
            "an unreadable disruption-cost hides the other"
        );
        let too_large = serde_json::json!({"karpenter.sh/disruption-cost": "4294967296"});
        assert_eq!(cost(too_large), 0);
    }

    #[test]
    fn a_budget_karpenter_would_refuse_is_an_error_naming_its_field() {
        let pool = |budget: serde_json::Value| -> crate::crds::NodePool {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
                "metadata": {"name": "general"},
                "spec": {
                    "template": {"spec": {
                        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                        "requirements": []
                    }},
                    "disruption": {"budgets": [{"nodes": "10%"}, budget]}
                }
            }))
            .unwrap()
        };
        let error = |budget| nodepool(&pool(budget)).err().map(|e| e.to_string());
        let cases = [
            (serde_json::json!({"nodes": "abc"}), "budgets[1].nodes"),
            (serde_json::json!({"nodes": "150%"}), "budgets[1].nodes"),
            (
                serde_json::json!({"nodes": "0", "reasons": ["Underutilised"]}),
                "budgets[1].reasons",
            ),
            (
                serde_json::json!({"nodes": "0", "schedule": "0 9 * * *"}),
                "budgets[1].duration",
            ),
            (
                serde_json::json!({"nodes": "0", "duration": "8h"}),
                "budgets[1].schedule",
            ),
            (
                serde_json::json!({"nodes": "0", "schedule": "at nine", "duration": "8h"}),
                "budgets[1].schedule",
            ),
        ];
        for (budget, field) in cases {
            let e = error(budget.clone()).unwrap_or_else(|| panic!("{budget} was accepted"));
            assert!(
                e.contains("NodePool general") && e.contains(field),
                "{budget}: {e}"
            );
        }
        let fine = serde_json::json!({"nodes": "0", "schedule": "@daily", "duration": "8h", "reasons": ["Underutilized", "Unhealthy"]});
        assert_eq!(error(fine), None);
    }
}
