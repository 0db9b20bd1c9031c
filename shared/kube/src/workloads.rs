//! Workloads in a dump whose pods are not in it: a Deployment, ReplicaSet, StatefulSet or Job
//! written by hand (or dumped before its controller made pods) stands for its replicas, each a
//! pending pod of its template. Without this, a plan of such a dump plans nothing.

use std::collections::BTreeMap;

use fleetwright_crds::conditions::{JOB_COMPLETE, JOB_FAILED};
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde_json::Value;

use crate::error::KubeError;
use crate::rejected::Rejected;
use crate::strict::{InputWarning, Problem};

/// The kinds expanded.
pub const KINDS: [&str; 4] = ["Deployment", "ReplicaSet", "StatefulSet", "Job"];

/// One workload expanded: `Kind namespace/name` and how many pending pods stand for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expanded {
    pub workload: String,
    pub pods: usize,
    /// The first of the pods' names (`inflate-deployment-0`), for `explain --pod`.
    pub first: String,
}

/// The pending pods of every workload none of whose pods is among `pods`, and what was
/// expanded. A ReplicaSet whose Deployment is in the dump is left to the Deployment. Keys of a
/// template that a pod does not read are added to `warnings`. A workload whose template does
/// not read is named in `rejected` (its own kind and name, the field under `spec.template`)
/// and stands for no pods; the others still do. (A value that reads but does not convert is
/// named on the workload too, when its pods are converted: see [`STANDS_FOR`].)
pub fn expand(
    workloads: &[Value],
    pods: &[Pod],
    (warnings, rejected): (&mut Vec<InputWarning>, &mut Vec<Rejected>),
) -> (Vec<Pod>, Vec<Expanded>) {
    let mut out = Vec::new();
    let mut expanded = Vec::new();
    for w in workloads {
        warnings.extend(unknown_keys(w));
        if owned_by_listed_deployment(w, workloads) || has_pods(w, pods) {
            continue;
        }
        let kind = w["kind"].as_str().unwrap_or_default();
        if let Some(e) = bad_count(w, kind) {
            rejected.push(Rejected::new(kind, &meta(w), e));
            continue;
        }
        // The API server refuses a bad workload whatever its replicas: checked at zero too.
        let template = match template(w, kind).and_then(|t| admitted(w, kind, t)) {
            Ok(t) => t,
            Err(e) => {
                rejected.push(Rejected::new(kind, &meta(w), e));
                continue;
            }
        };
        let count = replicas(w);
        if count == 0 {
            continue;
        }
        let first = out.len();
        for i in 0..count {
            out.push(pod(w, kind, &template, i));
        }
        expanded.push(Expanded {
            workload: format!("{kind} {}/{}", namespace(w), name(w)),
            pods: count,
            first: out[first].metadata.name.clone().unwrap_or_default(),
        });
    }
    (out, expanded)
}

/// The workload's own name, namespace and uid, for the record of a rejection.
fn meta(w: &Value) -> ObjectMeta {
    ObjectMeta {
        name: Some(name(w).to_string()),
        namespace: Some(namespace(w).to_string()),
        uid: w["metadata"]["uid"].as_str().map(str::to_string),
        ..Default::default()
    }
}

fn namespace(w: &Value) -> &str {
    w["metadata"]["namespace"].as_str().unwrap_or("default")
}

fn name(w: &Value) -> &str {
    w["metadata"]["name"].as_str().unwrap_or_default()
}

/// The most pods one workload stands for: a mistyped `replicas` must not exhaust memory.
const MAX_REPLICAS: i64 = 100_000;

/// How many pods the workload runs now: `replicas` (1 when unset), a Job's `parallelism`
/// capped by its `completions`, none for a suspended or finished Job.
fn replicas(w: &Value) -> usize {
    let spec = &w["spec"];
    let n = match w["kind"].as_str() {
        Some("Job") if spec["suspend"] == true || finished(w) => 0,
        Some("Job") => {
            let parallel = spec["parallelism"].as_i64().unwrap_or(1);
            spec["completions"]
                .as_i64()
                .map_or(parallel, |c| c.min(parallel))
        }
        _ => spec["replicas"].as_i64().unwrap_or(1),
    };
    n.clamp(0, MAX_REPLICAS) as usize
}

/// A count of pods that is no whole number at least 0 (`replicas: -2`, `replicas: "3"`), which
/// the API server refuses: named, rather than read as some other count.
fn bad_count(w: &Value, kind: &str) -> Option<KubeError> {
    let fields: &[&str] = match kind {
        "Job" => &["parallelism", "completions"],
        _ => &["replicas"],
    };
    fields.iter().find_map(|field| {
        let value = &w["spec"][*field];
        let fine = value.is_null() || value.as_i64().is_some_and(|n| n >= 0);
        (!fine).then(|| {
            KubeError::field(
                format!("{kind} {}/{}", namespace(w), name(w)),
                format!("spec.{field}"),
                format!("{value} is not a whole number of at least 0"),
            )
        })
    })
}

/// A Job whose status says it completed or failed.
fn finished(w: &Value) -> bool {
    let done =
        |c: &Value| (c["type"] == JOB_COMPLETE || c["type"] == JOB_FAILED) && c["status"] == "True";
    w["status"]["completionTime"].is_string()
        || w["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(done)
}

/// A ReplicaSet that a Deployment of the dump controls: the Deployment stands for it.
fn owned_by_listed_deployment(w: &Value, workloads: &[Value]) -> bool {
    let owners = w["metadata"]["ownerReferences"].as_array();
    owners.into_iter().flatten().any(|o| {
        o["kind"] == "Deployment"
            && workloads.iter().any(|d| {
                d["kind"] == "Deployment"
                    && namespace(d) == namespace(w)
                    && d["metadata"]["name"] == o["name"]
            })
    })
}

/// Whether any pod of the dump belongs to the workload: one it owns (a Deployment through a
/// ReplicaSet named after it), or one in its namespace that its selector selects.
fn has_pods(w: &Value, pods: &[Pod]) -> bool {
    let kind = w["kind"].as_str().unwrap_or_default();
    let selector = &w["spec"]["selector"];
    pods.iter()
        .filter(|p| p.metadata.namespace.as_deref().unwrap_or("default") == namespace(w))
        .any(|p| {
            let owned = p
                .metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| match kind {
                    "Deployment" => {
                        o.kind == "ReplicaSet"
                            && o.name.rsplit_once('-').is_some_and(|(n, _)| n == name(w))
                    }
                    _ => o.kind == kind && o.name == name(w),
                });
            let labels = p.metadata.labels.clone().unwrap_or_default();
            owned || selects(selector, &labels)
        })
}

/// Whether a label selector (`matchLabels` and `matchExpressions`) selects these labels. An
/// empty or missing selector selects nothing here.
fn selects(selector: &Value, labels: &BTreeMap<String, String>) -> bool {
    let match_labels: BTreeMap<String, String> =
        serde_json::from_value(selector["matchLabels"].clone()).unwrap_or_default();
    let expressions = selector["matchExpressions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if match_labels.is_empty() && expressions.is_empty() {
        return false;
    }
    let values = |e: &Value| -> Vec<String> {
        serde_json::from_value(e["values"].clone()).unwrap_or_default()
    };
    match_labels.iter().all(|(k, v)| labels.get(k) == Some(v))
        && expressions.iter().all(|e| {
            let value = labels.get(e["key"].as_str().unwrap_or_default());
            match e["operator"].as_str() {
                Some("In") => value.is_some_and(|v| values(e).contains(v)),
                Some("NotIn") => value.is_none_or(|v| !values(e).contains(v)),
                Some("Exists") => value.is_some(),
                Some("DoesNotExist") => value.is_none(),
                _ => false,
            }
        })
}

/// The workload's pod template, read as a pod reads it; an unknown key is a warning on the
/// workload, a value that does not read is an error naming it.
fn template(w: &Value, kind: &str) -> Result<PodTemplateSpec, KubeError> {
    let object = format!("{kind} {}/{}", namespace(w), name(w));
    let under_template = |e: KubeError| match e {
        KubeError::Field { field, reason, .. } => KubeError::Field {
            object,
            field: format!("spec.template.{field}"),
            reason,
        },
        other => other,
    };
    crate::strict::typed(w["spec"]["template"].clone(), kind).map_err(under_template)
}

/// The template, when the API server would admit the workload: a selector that selects it,
/// and a pod spec it admits.
fn admitted(
    w: &Value,
    kind: &str,
    template: PodTemplateSpec,
) -> Result<PodTemplateSpec, KubeError> {
    let object = format!("{kind} {}/{}", namespace(w), name(w));
    crate::api_rules::workload_selector(w, &object, selects)?;
    if let Some(spec) = &template.spec {
        crate::api_rules::pod_spec(spec, &object, "spec.template.spec")?;
    }
    Ok(template)
}

/// The keys of a workload that its kind does not read, its own spec's (`replica:`) as well as
/// its template's. A workload that does not read as its kind gets none here: its template is
/// what a plan reads, and errors there are named when it is expanded.
fn unknown_keys(w: &Value) -> Vec<InputWarning> {
    use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
    use k8s_openapi::api::batch::v1::Job;
    let kind = w["kind"].as_str().unwrap_or_default();
    let value = w.clone();
    let unknown = match kind {
        "Deployment" => crate::strict::typed_noting::<Deployment>(value, kind).map(|r| r.1),
        "ReplicaSet" => crate::strict::typed_noting::<ReplicaSet>(value, kind).map(|r| r.1),
        "StatefulSet" => crate::strict::typed_noting::<StatefulSet>(value, kind).map(|r| r.1),
        "Job" => crate::strict::typed_noting::<Job>(value, kind).map(|r| r.1),
        _ => Ok(Vec::new()),
    };
    let object = format!("{kind} {}/{}", namespace(w), name(w));
    unknown
        .unwrap_or_default()
        .into_iter()
        .map(|path| InputWarning {
            object: object.clone(),
            path,
            problem: Problem::Unknown,
        })
        .collect()
}

/// The ReplicaSet a file's Deployment's expanded pods are owned by.
pub fn replica_set_name(deployment: &str) -> String {
    format!("{deployment}-deployment")
}

/// The `i`th pending pod of the workload, named and owned as its controller would name and own
/// it (a Deployment's through a ReplicaSet).
fn pod(w: &Value, kind: &str, template: &PodTemplateSpec, i: usize) -> Pod {
    let kind_name = kind.to_ascii_lowercase();
    let (owner_kind, owner, pod_name) = match kind {
        "Deployment" => {
            let rs = replica_set_name(name(w));
            ("ReplicaSet", rs.clone(), format!("{rs}-{i}"))
        }
        "StatefulSet" => (
            "StatefulSet",
            name(w).to_string(),
            format!("{}-{i}", name(w)),
        ),
        _ => (
            kind,
            name(w).to_string(),
            format!("{}-{kind_name}-{i}", name(w)),
        ),
    };
    let mut spec = template.spec.clone();
    if kind == "StatefulSet" {
        add_claims(w, &mut spec, i);
    }
    let api_version = if owner_kind == "Job" {
        "batch/v1"
    } else {
        "apps/v1"
    };
    let meta = template.metadata.clone().unwrap_or_default();
    Pod {
        metadata: ObjectMeta {
            name: Some(pod_name),
            namespace: Some(namespace(w).to_string()),
            labels: meta.labels,
            annotations: Some({
                let mut a = meta.annotations.unwrap_or_default();
                a.insert(STAND_IN.to_string(), "true".to_string());
                a.insert(STANDS_FOR.to_string(), format!("{kind}/{}", name(w)));
                a
            }),
            owner_references: Some(vec![OwnerReference {
                api_version: api_version.to_string(),
                kind: owner_kind.to_string(),
                name: owner.clone(),
                uid: format!("expanded-{}-{owner}", namespace(w)),
                controller: Some(true),
                ..Default::default()
            }]),
            ..Default::default()
        },
        spec,
        status: Some(k8s_openapi::api::core::v1::PodStatus {
            phase: Some("Pending".to_string()),
            ..Default::default()
        }),
    }
}

/// A StatefulSet pod's volumes from its `volumeClaimTemplates`: the claim `<template>-<set>-<i>`
/// its controller would make, so a claim of the dump bound to one zone's volume keeps the pod in
/// that zone.
fn add_claims(w: &Value, spec: &mut Option<k8s_openapi::api::core::v1::PodSpec>, i: usize) {
    use k8s_openapi::api::core::v1::{PersistentVolumeClaimVolumeSource, Volume};
    let Some(spec) = spec.as_mut() else { return };
    for t in w["spec"]["volumeClaimTemplates"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let Some(claim) = t["metadata"]["name"].as_str() else {
            continue;
        };
        spec.volumes.get_or_insert_with(Vec::new).push(Volume {
            name: claim.to_string(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: format!("{claim}-{}-{i}", name(w)),
                read_only: None,
            }),
            ..Default::default()
        });
    }
}

/// On a stand-in pod: the workload it stands for (`Deployment/web`), so an error in the
/// template is named once, on the workload.
pub const STANDS_FOR: &str = "fleetwright.io/stands-for";
/// On a claim made up for a StatefulSet's stand-in pod: the dump did not hold it.
pub const STAND_IN: &str = "fleetwright.io/stand-in";

/// The claims a StatefulSet's controller makes from its `volumeClaimTemplates` before it makes
/// the pods, for each StatefulSet expanded: its stand-in pods' claims then read as the real ones
/// would (their class, zones and attach driver), where the dump does not hold them already.
pub fn stand_in_claims(
    workloads: &[Value],
    expanded: &[Expanded],
) -> Vec<k8s_openapi::api::core::v1::PersistentVolumeClaim> {
    use k8s_openapi::api::core::v1::PersistentVolumeClaim;
    let mut out = Vec::new();
    for w in workloads.iter().filter(|w| w["kind"] == "StatefulSet") {
        let id = format!("StatefulSet {}/{}", namespace(w), name(w));
        let Some(e) = expanded.iter().find(|e| e.workload == id) else {
            continue;
        };
        for t in w["spec"]["volumeClaimTemplates"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let Some(claim) = t["metadata"]["name"].as_str() else {
                continue;
            };
            for i in 0..e.pods {
                let mut pvc = serde_json::json!({
                    "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                    "metadata": {
                        "name": format!("{claim}-{}-{i}", name(w)),
                        "namespace": namespace(w),
                        "annotations": {STAND_IN: "true"},
                    },
                    "spec": t["spec"].clone(),
                });
                if pvc["spec"].is_null() {
                    pvc["spec"] = serde_json::json!({});
                }
                if let Ok(pvc) = serde_json::from_value::<PersistentVolumeClaim>(pvc) {
                    out.push(pvc);
                }
            }
        }
    }
    out
}

#[cfg(test)]
#[path = "../tests/unit/workloads.rs"]
mod tests;
