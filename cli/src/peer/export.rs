//! The peer's input: a core snapshot written back as the Kubernetes objects an API server would
//! hold (pending Pods, karpenter.sh/v1 NodePools, DaemonSets) and a catalog as the instance types a
//! cloud provider reports (labels, capacity, overhead, offerings with prices). Fleetwright then
//! plans on these same objects, read back through its own converter, so both schedulers see one
//! input.

use std::collections::{BTreeMap, BTreeSet};

use fleetwright_core::catalog::InstanceType;
use fleetwright_core::labels::{CAPACITY_TYPE, INSTANCE_TYPE, ZONE};
use fleetwright_core::model::{
    DaemonSet, InclusionPolicy, Namespaces, NodePool, Pod, PodAffinityTerm, SpreadConstraint,
    Taint, Toleration,
};
use fleetwright_core::requirements::{Operator, Requirement, Requirements};
use fleetwright_core::resources::Resources;
use fleetwright_crds::conditions::{POD_SCHEDULED, UNSCHEDULABLE};
use serde_json::{json, Value};

/// Labels Karpenter knows without a cloud provider (`v1.WellKnownLabels`); the rest of an
/// instance type's labels are registered by the peer, as a provider registers its own.
const KARPENTER_WELL_KNOWN: [&str; 8] = [
    "karpenter.sh/nodepool",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "node.kubernetes.io/instance-type",
    "kubernetes.io/arch",
    "kubernetes.io/os",
    "karpenter.sh/capacity-type",
    "node.kubernetes.io/windows-build",
];

/// The whole input for one case.
pub fn input(
    pods: &[Pod],
    nodepools: &[NodePool],
    daemonsets: &[DaemonSet],
    types: &[InstanceType],
    repeat: usize,
) -> Value {
    let mut extra_labels = BTreeSet::new();
    let types: Vec<Value> = types
        .iter()
        .map(|t| instance_type(t, &mut extra_labels))
        .collect();
    json!({
        "wellKnownLabels": extra_labels,
        "instanceTypes": types,
        "nodePools": nodepools.iter().map(nodepool).collect::<Vec<_>>(),
        "pods": pods.iter().map(pending_pod).collect::<Vec<_>>(),
        "daemonSets": daemonsets.iter().map(daemonset).collect::<Vec<_>>(),
        "repeat": repeat,
    })
}

fn instance_type(t: &InstanceType, extra_labels: &mut BTreeSet<String>) -> Value {
    let mut labels = BTreeMap::new();
    for r in t.requirements.iter() {
        let single = r.operator() == Operator::In && r.values().len() == 1;
        if !single || [ZONE, CAPACITY_TYPE, INSTANCE_TYPE].contains(&r.key.as_str()) {
            continue;
        }
        if !KARPENTER_WELL_KNOWN.contains(&r.key.as_str()) {
            extra_labels.insert(r.key.clone());
        }
        labels.insert(r.key.clone(), r.any().unwrap_or_default().to_string());
    }
    let offerings: Vec<Value> = t
        .offerings
        .iter()
        .map(|o| {
            json!({"zone": o.zone, "capacityType": o.capacity_type, "price": o.price,
                "available": o.available})
        })
        .collect();
    json!({"name": t.name, "labels": labels, "capacity": quantities(&t.capacity, true),
        "overhead": quantities(&t.overhead, true), "offerings": offerings})
}

/// Resources as a Kubernetes resource list; `pods` only where it is a capacity (a pod's own
/// count of one is added by the scheduler).
fn quantities(r: &Resources, with_pods: bool) -> BTreeMap<String, String> {
    let mut map = r.to_map();
    if !with_pods {
        map.remove("pods");
    }
    map
}

/// A NodePool as karpenter.sh/v1 writes it.
pub fn nodepool(p: &NodePool) -> Value {
    let mut spec = json!({
        "template": {
            "metadata": {"labels": p.labels},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": p.node_class},
                "requirements": expressions(&p.requirements),
                "taints": p.taints.iter().map(taint).collect::<Vec<_>>(),
            }
        }
    });
    if p.weight != 0 {
        spec["weight"] = json!(p.weight);
    }
    if let Some(limits) = &p.limits {
        spec["limits"] = json!(quantities(limits, true));
    }
    json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": p.name, "uid": format!("uid-nodepool-{}", p.name)}, "spec": spec})
}

fn taint(t: &Taint) -> Value {
    let mut v = json!({"key": t.key, "effect": t.effect});
    if !t.value.is_empty() {
        v["value"] = json!(t.value);
    }
    v
}

/// Requirements as node selector requirements (`matchExpressions`).
pub fn expressions(reqs: &Requirements) -> Vec<Value> {
    reqs.iter().map(expression).collect()
}

fn expression(r: &Requirement) -> Value {
    let (operator, values): (&str, Vec<String>) = match (r.greater_than(), r.less_than()) {
        (Some(gt), _) => ("Gt", vec![gt.to_string()]),
        (_, Some(lt)) => ("Lt", vec![lt.to_string()]),
        _ => (
            match r.operator() {
                Operator::In => "In",
                Operator::NotIn => "NotIn",
                Operator::Exists => "Exists",
                Operator::DoesNotExist => "DoesNotExist",
                Operator::Gt | Operator::Gte => "Gt",
                Operator::Lt | Operator::Lte => "Lt",
            },
            r.values().iter().cloned().collect(),
        ),
    };
    let mut v = json!({"key": r.key, "operator": operator});
    if !values.is_empty() {
        v["values"] = json!(values);
    }
    if let Some(min) = r.min_values {
        v["minValues"] = json!(min);
    }
    v
}

/// A pending pod, as the API server holds it once kube-scheduler found no node for it.
pub fn pending_pod(p: &Pod) -> Value {
    let mut pod = pod_object(p);
    pod["status"] = json!({"phase": "Pending", "conditions": [
        {"type": POD_SCHEDULED, "status": "False", "reason": UNSCHEDULABLE}]});
    pod
}

fn pod_object(p: &Pod) -> Value {
    let uid = if p.uid.is_empty() {
        format!("uid-{}-{}", p.namespace, p.name)
    } else {
        p.uid.clone()
    };
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": p.name, "namespace": p.namespace, "uid": uid, "labels": p.labels},
        "spec": pod_spec(p),
    })
}

fn pod_spec(p: &Pod) -> Value {
    let mut spec = json!({
        "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": quantities(&p.requests, false)}}],
    });
    if !p.node_selector.is_empty() {
        spec["nodeSelector"] = json!(p.node_selector);
    }
    if !p.tolerations.is_empty() {
        spec["tolerations"] = json!(p.tolerations.iter().map(toleration).collect::<Vec<_>>());
    }
    if !p.spread.is_empty() {
        spec["topologySpreadConstraints"] = json!(p.spread.iter().map(spread).collect::<Vec<_>>());
    }
    let affinity = affinity(p);
    if affinity.as_object().is_some_and(|a| !a.is_empty()) {
        spec["affinity"] = affinity;
    }
    spec
}

fn toleration(t: &Toleration) -> Value {
    let mut v = json!({"operator": if t.exists { "Exists" } else { "Equal" }});
    if let Some(key) = &t.key {
        v["key"] = json!(key);
    }
    if !t.exists {
        v["value"] = json!(t.value);
    }
    if let Some(effect) = t.effect {
        v["effect"] = json!(effect);
    }
    v
}

fn spread(s: &SpreadConstraint) -> Value {
    let mut v = json!({
        "maxSkew": s.max_skew,
        "topologyKey": s.topology_key,
        "whenUnsatisfiable": if s.hard { "DoNotSchedule" } else { "ScheduleAnyway" },
        "labelSelector": label_selector(&s.selector),
    });
    if let Some(min) = s.min_domains {
        v["minDomains"] = json!(min);
    }
    // Only what differs from Kubernetes' defaults (Honor, Ignore) is written.
    if s.node_affinity_policy == InclusionPolicy::Ignore {
        v["nodeAffinityPolicy"] = json!("Ignore");
    }
    if s.node_taints_policy == InclusionPolicy::Honor {
        v["nodeTaintsPolicy"] = json!("Honor");
    }
    v
}

/// A label selector: single values as `matchLabels`, the rest as `matchExpressions`.
fn label_selector(reqs: &Requirements) -> Value {
    let mut match_labels = BTreeMap::new();
    let mut match_expressions = Vec::new();
    for r in reqs.iter() {
        if r.operator() == Operator::In && r.values().len() == 1 {
            match_labels.insert(r.key.clone(), r.any().unwrap_or_default().to_string());
        } else {
            match_expressions.push(expression(r));
        }
    }
    let mut v = json!({});
    if !match_labels.is_empty() {
        v["matchLabels"] = json!(match_labels);
    }
    if !match_expressions.is_empty() {
        v["matchExpressions"] = json!(match_expressions);
    }
    v
}

fn affinity_term(t: &PodAffinityTerm) -> Value {
    let mut v =
        json!({"labelSelector": label_selector(&t.selector), "topologyKey": t.topology_key});
    match &t.namespaces {
        Namespaces::All => v["namespaceSelector"] = json!({}),
        Namespaces::Listed(list) => v["namespaces"] = json!(list),
    }
    v
}

fn affinity(p: &Pod) -> Value {
    let mut affinity = json!({});
    let mut node = json!({});
    if !p.required_terms.is_empty() {
        let terms: Vec<Value> = p
            .required_terms
            .iter()
            .map(|t| json!({"matchExpressions": expressions(t)}))
            .collect();
        node["requiredDuringSchedulingIgnoredDuringExecution"] =
            json!({"nodeSelectorTerms": terms});
    }
    if !p.preferred_terms.is_empty() {
        let terms: Vec<Value> = p
            .preferred_terms
            .iter()
            .map(|(w, t)| json!({"weight": w, "preference": {"matchExpressions": expressions(t)}}))
            .collect();
        node["preferredDuringSchedulingIgnoredDuringExecution"] = json!(terms);
    }
    if node.as_object().is_some_and(|n| !n.is_empty()) {
        affinity["nodeAffinity"] = node;
    }
    let pod_terms = |required: &[PodAffinityTerm], preferred: &[(i32, PodAffinityTerm)]| {
        let mut v = json!({});
        if !required.is_empty() {
            v["requiredDuringSchedulingIgnoredDuringExecution"] =
                json!(required.iter().map(affinity_term).collect::<Vec<_>>());
        }
        if !preferred.is_empty() {
            v["preferredDuringSchedulingIgnoredDuringExecution"] = json!(preferred
                .iter()
                .map(|(w, t)| json!({"weight": w, "podAffinityTerm": affinity_term(t)}))
                .collect::<Vec<_>>());
        }
        v
    };
    let pod_affinity = pod_terms(&p.affinity, &p.preferred_affinity);
    if pod_affinity.as_object().is_some_and(|a| !a.is_empty()) {
        affinity["podAffinity"] = pod_affinity;
    }
    let anti = pod_terms(&p.anti_affinity, &p.preferred_anti_affinity);
    if anti.as_object().is_some_and(|a| !a.is_empty()) {
        affinity["podAntiAffinity"] = anti;
    }
    affinity
}

/// A DaemonSet whose pod template is the core's DaemonSet pod.
pub fn daemonset(d: &DaemonSet) -> Value {
    let mut labels = d.pod.labels.clone();
    labels.insert("app".into(), d.name.clone());
    json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": d.name, "namespace": d.namespace, "uid": format!("uid-ds-{}", d.name)},
        "spec": {
            "selector": {"matchLabels": {"app": d.name}},
            "template": {"metadata": {"labels": labels}, "spec": pod_spec(&d.pod)},
        }
    })
}
