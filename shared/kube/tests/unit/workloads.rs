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

/// Expands with warnings and rejections thrown away.
fn expand_all(workloads: &[Value], pods: &[Pod]) -> (Vec<Pod>, Vec<Expanded>) {
    expand(workloads, pods, (&mut Vec::new(), &mut Vec::new()))
}

#[test]
fn a_deployment_without_pods_stands_for_its_replicas() {
    let mut warnings = Vec::new();
    let (pods, expanded) = expand(&[deployment(3)], &[], (&mut warnings, &mut Vec::new()));
    assert_eq!(pods.len(), 3);
    assert_eq!(
        expanded,
        vec![Expanded {
            workload: "Deployment web/inflate".into(),
            pods: 3,
            first: "inflate-deployment-0".into(),
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
    let (pods, expanded) = expand_all(&[deployment(3)], &[pod]);
    assert!(pods.is_empty() && expanded.is_empty());
    let (pods, _) = expand_all(&[deployment(0)], &[]);
    assert!(pods.is_empty());
}

#[test]
fn a_replicaset_of_a_listed_deployment_and_a_suspended_job_add_nothing() {
    let rs = json!({"kind": "ReplicaSet", "metadata": {"name": "inflate-5d8", "namespace": "web",
            "ownerReferences": [{"kind": "Deployment", "name": "inflate"}]},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "inflate"}},
                "template": {"metadata": {"labels": {"app": "inflate"}},
                    "spec": {"containers": [{"name": "c"}]}}}});
    let job = json!({"kind": "Job", "metadata": {"name": "j"},
            "spec": {"suspend": true, "template": {"spec": {"containers": [{"name": "c"}]}}}});
    let (pods, _) = expand_all(&[deployment(2), rs, job], &[]);
    assert_eq!(pods.len(), 2);
    let job = json!({"kind": "Job", "metadata": {"name": "j"},
            "spec": {"parallelism": 4, "completions": 2, "template": {"spec": {"containers": [{"name": "c"}]}}}});
    let (pods, _) = expand_all(&[job], &[]);
    assert_eq!(pods.len(), 2);
}

#[test]
fn a_template_typo_warns_on_the_workload_and_a_bad_value_names_it() {
    let mut d = deployment(1);
    d["spec"]["template"]["spec"]["containers"][0]["resorces"] = json!({});
    let mut warnings = Vec::new();
    expand(&[d.clone()], &[], (&mut warnings, &mut Vec::new()));
    assert_eq!(warnings[0].object, "Deployment web/inflate");
    assert_eq!(
        warnings[0].path,
        "spec.template.spec.containers[0].resorces"
    );
    let mut typo = deployment(1);
    typo["spec"]["replica"] = json!(5);
    let mut warnings = Vec::new();
    expand(&[typo], &[], (&mut warnings, &mut Vec::new()));
    assert_eq!(warnings[0].path, "spec.replica", "{warnings:?}");
    d["spec"]["template"]["spec"]["containers"] = json!("none");
    let mut rejected = Vec::new();
    let (pods, _) = expand(&[d, deployment(2)], &[], (&mut Vec::new(), &mut rejected));
    assert_eq!(
        pods.len(),
        2,
        "the other Deployment still stands for its pods"
    );
    let err = &rejected[0].error;
    assert!(
        err.contains("Deployment web/inflate") && err.contains("spec.template.spec.containers"),
        "{err}"
    );
}

#[test]
fn finished_jobs_expression_selectors_and_claims_are_read_as_their_controllers_would() {
    let done = json!({"kind": "Job", "metadata": {"name": "j"},
            "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}},
            "status": {"conditions": [{"type": "Complete", "status": "True"}]}});
    let (pods, _) = expand_all(&[done], &[]);
    assert!(pods.is_empty());

    let mut d = deployment(2);
    d["spec"]["selector"] =
        json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["inflate"]}]});
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p",
            "namespace": "web", "labels": {"app": "inflate"}}}))
    .unwrap();
    let (pods, _) = expand_all(&[d], &[pod]);
    assert!(
        pods.is_empty(),
        "the selector's expressions select the pod in the dump"
    );

    let set = json!({"kind": "StatefulSet", "metadata": {"name": "db", "namespace": "data"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "db"}},
                "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "c"}]}},
                "volumeClaimTemplates": [{"metadata": {"name": "pgdata"}}]}});
    let job = json!({"kind": "Job", "metadata": {"name": "db", "namespace": "data"},
            "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}});
    let (pods, _) = expand_all(&[set, job], &[]);
    let claim = |p: &Pod| {
        p.spec.as_ref().unwrap().volumes.as_ref().map(|v| {
            v[0].persistent_volume_claim
                .as_ref()
                .unwrap()
                .claim_name
                .clone()
        })
    };
    assert_eq!(claim(&pods[1]).as_deref(), Some("pgdata-db-1"));
    let names: std::collections::BTreeSet<_> = pods
        .iter()
        .map(|p| p.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
}

/// A count the API server would refuse is named on its workload, which stands for no pods.
#[test]
fn a_replica_count_that_is_no_whole_number_is_named() {
    for bad in [json!(-2), json!("3"), json!(1.5)] {
        let mut d = deployment(1);
        d["spec"]["replicas"] = bad.clone();
        let mut rejected = Vec::new();
        let (pods, _) = expand(&[d], &[], (&mut Vec::new(), &mut rejected));
        assert!(pods.is_empty(), "{bad}");
        assert!(
            rejected[0].error.contains("field spec.replicas"),
            "{bad}: {rejected:?}"
        );
    }
}
