use super::*;
use serde_json::json;

fn spec(value: Value) -> PodSpec {
    serde_json::from_value(value).unwrap()
}

fn refusal(value: Value) -> String {
    pod_spec(&spec(value), "Pod default/p", "spec")
        .unwrap_err()
        .to_string()
}

#[test]
fn a_pod_without_containers_is_refused() {
    let err = refusal(json!({"containers": []}));
    assert!(
        err.contains("Pod default/p") && err.contains("spec.containers"),
        "{err}"
    );
}

#[test]
fn a_request_above_its_limit_is_refused_in_any_unit() {
    let c = |requests: Value, limits: Value| json!({"containers": [{"name": "ok"}, {"name": "c", "resources": {"requests": requests, "limits": limits}}]});
    let err = refusal(c(json!({"cpu": "1500m"}), json!({"cpu": "1"})));
    assert!(
        err.contains("spec.containers[1].resources.requests"),
        "{err}"
    );
    assert!(
        err.contains("cpu \"1500m\"") && err.contains("\"1\""),
        "{err}"
    );
    let err = refusal(c(json!({"memory": "2Gi"}), json!({"memory": "2000Mi"})));
    assert!(err.contains("memory"), "{err}");
    // Equal amounts in other units, and a request with no limit of its own, are admitted.
    for (requests, limits) in [
        (
            json!({"cpu": "1000m", "memory": "1Gi"}),
            json!({"cpu": "1", "memory": "1024Mi"}),
        ),
        (json!({"cpu": "2"}), json!({"memory": "1Gi"})),
    ] {
        assert!(pod_spec(&spec(c(requests, limits)), "p", "spec").is_ok());
    }
    let init = json!({"containers": [{"name": "c"}],
        "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}]});
    assert!(refusal(init).contains("spec.initContainers[0].resources.requests"));
}

#[test]
fn a_toleration_the_api_server_refuses_is_named() {
    let with = |t: Value| json!({"containers": [{"name": "c"}], "tolerations": [{"operator": "Exists"}, t]});
    let cases = [
        (
            json!({"key": "k", "operator": "Equals", "value": "v"}),
            "spec.tolerations[1].operator",
            "\"Equals\"",
        ),
        (
            json!({"key": "k", "operator": "Exists", "value": "v"}),
            "spec.tolerations[1].value",
            "must be empty",
        ),
        (
            json!({"operator": "Equal", "value": "v"}),
            "spec.tolerations[1].operator",
            "key is empty",
        ),
    ];
    for (t, field, why) in cases {
        let err = refusal(with(t));
        assert!(err.contains(field) && err.contains(why), "{err}");
    }
    for fine in [
        json!({"key": "k", "value": "v"}),
        json!({"key": "k", "operator": "Exists"}),
    ] {
        assert!(pod_spec(&spec(with(fine)), "p", "spec").is_ok());
    }
}

fn labels_match(selector: &Value, labels: &std::collections::BTreeMap<String, String>) -> bool {
    let wanted: std::collections::BTreeMap<String, String> =
        serde_json::from_value(selector["matchLabels"].clone()).unwrap_or_default();
    !wanted.is_empty() && wanted.iter().all(|(k, v)| labels.get(k) == Some(v))
}

#[test]
fn a_workload_selector_must_exist_and_select_its_template() {
    let deployment = |selector: Value| {
        json!({"kind": "Deployment", "spec": {"selector": selector,
            "template": {"metadata": {"labels": {"app": "web"}}}}})
    };
    let check = |w: Value| workload_selector(&w, "Deployment default/web", labels_match);
    assert!(check(deployment(json!({"matchLabels": {"app": "web"}}))).is_ok());
    let err = check(deployment(json!({"matchLabels": {"app": "api"}})))
        .unwrap_err()
        .to_string();
    assert!(err.contains("spec.template.metadata.labels"), "{err}");
    let err = check(deployment(Value::Null)).unwrap_err().to_string();
    assert!(
        err.contains("spec.selector") && err.contains("required"),
        "{err}"
    );
    // A Job's selector is made by its controller.
    let job = json!({"kind": "Job", "spec": {"template": {}}});
    assert!(check(job).is_ok());
}

#[test]
fn a_written_nodeclass_spec_without_its_required_terms_is_warned_about() {
    let paths = |spec: Value| -> Vec<String> {
        nodeclass_required(
            &json!({"kind": "EC2NodeClass", "spec": spec}),
            "EC2NodeClass default",
        )
        .into_iter()
        .map(|w| w.path)
        .collect()
    };
    assert_eq!(
        paths(json!({"role": "R", "amiFamily": "AL2023"})),
        [
            "spec.amiSelectorTerms",
            "spec.subnetSelectorTerms",
            "spec.securityGroupSelectorTerms"
        ]
    );
    let full = json!({"role": "R", "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "subnetSelectorTerms": [{"tags": {"a": "b"}}], "securityGroupSelectorTerms": [{"id": "sg-1"}]});
    assert!(paths(full.clone()).is_empty());
    let mut by_id = full;
    by_id["amiSelectorTerms"] = json!([{"id": "ami-1"}]);
    assert_eq!(paths(by_id), ["spec.amiFamily"]);
    // A class with no spec is admitted.
    assert!(nodeclass_required(&json!({"kind": "EC2NodeClass"}), "x").is_empty());
}

/// Karpenter's NodePool CRD requires the whole class reference: a part left out is a warning
/// naming it, and `--strict` an error.
#[test]
fn a_nodepool_class_reference_without_its_group_or_kind_is_warned_about() {
    let paths = |template_spec: Value| -> Vec<String> {
        let pool = json!({"kind": "NodePool", "spec": {"template": {"spec": template_spec}}});
        nodepool_required(&pool, "NodePool default")
            .into_iter()
            .map(|w| w.path)
            .collect()
    };
    assert_eq!(
        paths(json!({"nodeClassRef": {"name": "default"}})),
        [
            "spec.template.spec.nodeClassRef.group",
            "spec.template.spec.nodeClassRef.kind"
        ]
    );
    let full = json!({"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}});
    assert!(paths(full).is_empty());
    assert_eq!(
        paths(json!({"requirements": []})),
        ["spec.template.spec.nodeClassRef"]
    );
    let versioned = json!({"kind": "NodePool", "spec": {"template": {"spec": {"nodeClassRef":
        {"group": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "name": "default"}}}}});
    let warned = nodepool_required(&versioned, "NodePool default");
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert_eq!(warned[0].problem, Problem::VersionedGroup);
    assert_eq!(warned[0].path, "spec.template.spec.nodeClassRef.group");
}

/// A budget schedule Karpenter's CRD admits but no cron parser reads is a warning naming it
/// (the budget then allows nothing); one that reads is not.
#[test]
fn a_budget_schedule_that_does_not_parse_is_warned_about() {
    let pool = json!({"kind": "NodePool", "spec": {"disruption": {"budgets": [
        {"nodes": "10%"},
        {"nodes": "0", "schedule": "0 9 * * mon-fri", "duration": "8h"},
        {"nodes": "0", "schedule": "CRON_TZ=Asia/Seoul 0 9 * * *", "duration": "8h"},
        {"nodes": "0", "schedule": "@daily", "duration": "1h"},
    ]}}});
    let warned = nodepool_schedules(&pool, "NodePool default");
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert_eq!(warned[0].problem, Problem::BadSchedule);
    assert_eq!(warned[0].path, "spec.disruption.budgets[2].schedule");
    assert!(warned[0].to_string().contains("allows no disruption"));
}
