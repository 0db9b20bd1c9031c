//! Pods into the core model: requests (init containers, overhead), node selectors and affinity,
//! tolerations, pod (anti-)affinity and topology spread, and the zones their volumes pin them to.

use std::collections::{BTreeMap, BTreeSet};

use fleetwright_core::labels::{DISRUPTION_COST, DO_NOT_DISRUPT, POD_DELETION_COST};
use fleetwright_core::model::{self as core, ContainerRequests, HostPort, Namespaces, Toleration};
use fleetwright_core::requirements::Requirement;
use fleetwright_core::resources::Resources;
use k8s_openapi::api::core::v1::{Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::error::KubeError;
use crate::selectors::{label_selector, match_nothing, node_selector_term};

use super::{object, quantities, resource_list, taint_effect};

/// Requests of one container: requests, defaulting to limits as the API server does.
pub(crate) fn container_requests(
    res: Option<&ResourceRequirements>,
    obj: &str,
    field: &str,
) -> Result<Resources, KubeError> {
    let mut merged: BTreeMap<String, &str> = BTreeMap::new();
    if let Some(r) = res {
        // Each list is read on its own first, so an error names `requests` or `limits`.
        resource_list(
            quantities(r.limits.as_ref()),
            obj,
            &format!("{field}.limits"),
        )?;
        resource_list(
            quantities(r.requests.as_ref()),
            obj,
            &format!("{field}.requests"),
        )?;
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
    let overhead = reqs.overhead.clone().unwrap_or_default();
    let mut effective = reqs.effective();
    // Pod-level resources (beta and on by default from Kubernetes 1.34): a resource the pod
    // requests as a whole is requested at that amount, which the API server holds at no less
    // than its containers' sum; limits stand for a missing request, as for containers.
    let pod_level = container_requests(spec.resources.as_ref(), obj, "spec.resources")?;
    for name in pod_level.names() {
        let whole = pod_level.get(name) + overhead.get(name);
        if whole > effective.get(name) {
            effective.set(name, whole);
        }
    }
    Ok(effective)
}

pub(crate) fn affinity_term(
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

pub(crate) fn toleration(
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
pub(crate) fn pod_affinity_terms(
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
        do_not_disrupt: core::Protection::from_annotation(
            annotations.get(DO_NOT_DISRUPT).map(String::as_str),
            super::seconds(meta),
        ),
        deletion_cost: eviction_cost(&annotations),
        unread: annotations.contains_key(fleetwright_core::labels::UNREAD_POD),
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
            node_affinity_policy: inclusion_policy(
                c.node_affinity_policy.as_deref(),
                core::InclusionPolicy::Honor,
                obj,
                &format!("{f}.nodeAffinityPolicy"),
            )?,
            node_taints_policy: inclusion_policy(
                c.node_taints_policy.as_deref(),
                core::InclusionPolicy::Ignore,
                obj,
                &format!("{f}.nodeTaintsPolicy"),
            )?,
        });
    }
    Ok(p)
}

/// A spread's `nodeAffinityPolicy` or `nodeTaintsPolicy`: `Honor`, `Ignore`, or `default` when
/// unset.
fn inclusion_policy(
    value: Option<&str>,
    default: core::InclusionPolicy,
    obj: &str,
    field: &str,
) -> Result<core::InclusionPolicy, KubeError> {
    match value {
        None | Some("") => Ok(default),
        Some("Honor") => Ok(core::InclusionPolicy::Honor),
        Some("Ignore") => Ok(core::InclusionPolicy::Ignore),
        Some(other) => Err(KubeError::field(
            obj,
            field,
            format!("unknown value {other:?} (Honor or Ignore)"),
        )),
    }
}

/// Converts a pod.
pub fn pod(p: &Pod, claims: &super::Claims) -> Result<core::Pod, KubeError> {
    let obj = object("Pod", &p.metadata);
    let spec = p
        .spec
        .as_ref()
        .ok_or_else(|| KubeError::field(&obj, "spec", "missing"))?;
    let mut out = pod_from_spec(&p.metadata, spec, &obj)?;
    // A duration in do-not-disrupt counts from the pod's start, once it has one.
    if let Some(started) = p.status.as_ref().and_then(|s| s.start_time.as_ref()) {
        let value = p
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(DO_NOT_DISRUPT));
        out.do_not_disrupt =
            core::Protection::from_annotation(value.map(String::as_str), started.0.as_second());
    }
    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
    out.terminal = matches!(phase, Some("Succeeded") | Some("Failed"));
    out.deleting = p.metadata.deletion_timestamp.is_some();
    claims.apply(p, spec, &mut out);
    let stand_in = p
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(crate::workloads::STAND_IN));
    if out.node_name.is_none() && !out.deleting {
        claims.check(p, spec, &obj, stand_in)?;
    }
    Ok(out)
}

/// The cost a pod's annotations put on evicting it, as Karpenter v1.15 reads them:
/// `karpenter.sh/disruption-cost` when present, else `controller.kubernetes.io/pod-deletion-cost`
/// (each an int32; one that does not parse counts as 0, and a `disruption-cost` that does not
/// parse still hides the other, as in Karpenter's `EvictionCost`).
fn eviction_cost(annotations: &BTreeMap<String, String>) -> i64 {
    let value = annotations
        .get(DISRUPTION_COST)
        .or_else(|| annotations.get(POD_DELETION_COST));
    value
        .and_then(|v| v.parse::<i32>().ok())
        .map_or(0, i64::from)
}
