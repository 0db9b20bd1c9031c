//! Workloads in a dump whose pods are not in it: a Deployment, ReplicaSet, StatefulSet or Job
//! written by hand (or dumped before its controller made pods) stands for its replicas, each a
//! pending pod of its template. Without this, a plan of such a dump plans nothing.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde_json::Value;

use crate::error::KubeError;
use crate::strict::{InputWarning, Problem};

/// The kinds expanded.
pub const KINDS: [&str; 4] = ["Deployment", "ReplicaSet", "StatefulSet", "Job"];

/// One workload expanded: `Kind namespace/name` and how many pending pods stand for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expanded {
    pub workload: String,
    pub pods: usize,
}

/// The pending pods of every workload none of whose pods is among `pods`, and what was
/// expanded. A ReplicaSet whose Deployment is in the dump is left to the Deployment. Keys of a
/// template that a pod does not read are added to `warnings`.
pub fn expand(
    workloads: &[Value],
    pods: &[Pod],
    warnings: &mut Vec<InputWarning>,
) -> Result<(Vec<Pod>, Vec<Expanded>), KubeError> {
    let mut out = Vec::new();
    let mut expanded = Vec::new();
    for w in workloads {
        if owned_by_listed_deployment(w, workloads) || has_pods(w, pods) {
            continue;
        }
        let count = replicas(w);
        if count == 0 {
            continue;
        }
        let kind = w["kind"].as_str().unwrap_or_default();
        let template = template(w, kind, warnings)?;
        for i in 0..count {
            out.push(pod(w, kind, &template, i));
        }
        expanded.push(Expanded {
            workload: format!("{kind} {}/{}", namespace(w), name(w)),
            pods: count,
        });
    }
    Ok((out, expanded))
}

fn namespace(w: &Value) -> &str {
    w["metadata"]["namespace"].as_str().unwrap_or("default")
}

fn name(w: &Value) -> &str {
    w["metadata"]["name"].as_str().unwrap_or_default()
}

/// How many pods the workload runs now: `replicas` (1 when unset), a Job's `parallelism`
/// capped by its `completions`, none for a suspended Job.
fn replicas(w: &Value) -> usize {
    let spec = &w["spec"];
    let n = match w["kind"].as_str() {
        Some("Job") if spec["suspend"] == true => 0,
        Some("Job") => {
            let parallel = spec["parallelism"].as_i64().unwrap_or(1);
            spec["completions"]
                .as_i64()
                .map_or(parallel, |c| c.min(parallel))
        }
        _ => spec["replicas"].as_i64().unwrap_or(1),
    };
    n.max(0) as usize
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

/// Whether any pod of the dump belongs to the workload: one it owns by name, or one in its
/// namespace that its selector's `matchLabels` select.
fn has_pods(w: &Value, pods: &[Pod]) -> bool {
    let selector: BTreeMap<String, String> =
        serde_json::from_value(w["spec"]["selector"]["matchLabels"].clone()).unwrap_or_default();
    pods.iter()
        .filter(|p| p.metadata.namespace.as_deref().unwrap_or("default") == namespace(w))
        .any(|p| {
            let owned = p.metadata.owner_references.iter().flatten().any(|o| {
                o.name == name(w) || o.name.rsplit_once('-').is_some_and(|(n, _)| n == name(w))
            });
            let labels = p.metadata.labels.clone().unwrap_or_default();
            let selected =
                !selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v));
            owned || selected
        })
}

/// The workload's pod template, read as a pod reads it; an unknown key is a warning on the
/// workload, a value that does not read is an error naming it.
fn template(
    w: &Value,
    kind: &str,
    warnings: &mut Vec<InputWarning>,
) -> Result<PodTemplateSpec, KubeError> {
    let object = format!("{kind} {}/{}", namespace(w), name(w));
    let (template, unknown): (PodTemplateSpec, _) =
        crate::strict::typed_noting(w["spec"]["template"].clone(), kind).map_err(|e| match e {
            KubeError::Field { field, reason, .. } => KubeError::Field {
                object: object.clone(),
                field: format!("spec.template.{field}"),
                reason,
            },
            other => other,
        })?;
    warnings.extend(unknown.into_iter().map(|path| InputWarning {
        object: object.clone(),
        path: format!("spec.template.{path}"),
        problem: Problem::Unknown,
    }));
    Ok(template)
}

/// The `i`th pending pod of the workload, named and owned as its controller would name and own
/// it (a Deployment's through a ReplicaSet).
fn pod(w: &Value, kind: &str, template: &PodTemplateSpec, i: usize) -> Pod {
    let (owner_kind, owner, pod_name) = match kind {
        "Deployment" => {
            let rs = format!("{}-expanded", name(w));
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
            format!("{}-expanded-{i}", name(w)),
        ),
    };
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
            annotations: meta.annotations,
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
        spec: template.spec.clone(),
        status: Some(k8s_openapi::api::core::v1::PodStatus {
            phase: Some("Pending".to_string()),
            ..Default::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment(replicas: i64) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "inflate", "namespace": "web"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "inflate"}},
                "template": {"metadata": {"labels": {"app": "inflate"}},
                    "spec": {"containers": [{"name": "c", "image": "pause",
                        "resources": {"requests": {"cpu": "1"}}}]}}}})
    }

    #[test]
    fn a_deployment_without_pods_stands_for_its_replicas() {
        let mut warnings = Vec::new();
        let (pods, expanded) = expand(&[deployment(3)], &[], &mut warnings).unwrap();
        assert_eq!(pods.len(), 3);
        assert_eq!(
            expanded,
            vec![Expanded {
                workload: "Deployment web/inflate".into(),
                pods: 3
            }]
        );
        let names: Vec<_> = pods
            .iter()
            .map(|p| p.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(
            names.len(),
            names
                .iter()
                .collect::<std::collections::BTreeSet<_>>()
                .len()
        );
        assert_eq!(pods[0].metadata.labels.as_ref().unwrap()["app"], "inflate");
        assert!(warnings.is_empty());
    }

    #[test]
    fn a_workload_with_pods_in_the_dump_is_left_as_it_is() {
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "inflate-abc-1",
            "namespace": "web", "labels": {"app": "inflate"}}}))
        .unwrap();
        let (pods, expanded) = expand(&[deployment(3)], &[pod], &mut Vec::new()).unwrap();
        assert!(pods.is_empty() && expanded.is_empty());
        let (pods, _) = expand(&[deployment(0)], &[], &mut Vec::new()).unwrap();
        assert!(pods.is_empty());
    }

    #[test]
    fn a_replicaset_of_a_listed_deployment_and_a_suspended_job_add_nothing() {
        let rs = json!({"kind": "ReplicaSet", "metadata": {"name": "inflate-5d8", "namespace": "web",
            "ownerReferences": [{"kind": "Deployment", "name": "inflate"}]},
            "spec": {"replicas": 3, "template": {"spec": {"containers": []}}}});
        let job = json!({"kind": "Job", "metadata": {"name": "j"},
            "spec": {"suspend": true, "template": {"spec": {"containers": []}}}});
        let (pods, _) = expand(&[deployment(2), rs, job], &[], &mut Vec::new()).unwrap();
        assert_eq!(pods.len(), 2);
        let job = json!({"kind": "Job", "metadata": {"name": "j"},
            "spec": {"parallelism": 4, "completions": 2, "template": {"spec": {"containers": []}}}});
        let (pods, _) = expand(&[job], &[], &mut Vec::new()).unwrap();
        assert_eq!(pods.len(), 2);
    }

    #[test]
    fn a_template_typo_warns_on_the_workload_and_a_bad_value_names_it() {
        let mut d = deployment(1);
        d["spec"]["template"]["spec"]["containers"][0]["resorces"] = json!({});
        let mut warnings = Vec::new();
        expand(&[d.clone()], &[], &mut warnings).unwrap();
        assert_eq!(warnings[0].object, "Deployment web/inflate");
        assert_eq!(
            warnings[0].path,
            "spec.template.spec.containers[0].resorces"
        );
        d["spec"]["template"]["spec"]["containers"] = json!("none");
        let err = expand(&[d], &[], &mut Vec::new()).unwrap_err().to_string();
        assert!(
            err.contains("Deployment web/inflate") && err.contains("spec.template.spec.containers"),
            "{err}"
        );
    }
}
