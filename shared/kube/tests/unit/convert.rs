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
    // A schedule no cron parser reads is admitted by Karpenter's CRD and fails closed there: the
    // NodePool still reads (the readers warn with the field), and its budget allows nothing.
    let zoned = serde_json::json!({"nodes": "0", "schedule": "at nine", "duration": "8h"});
    assert_eq!(error(zoned), None);
    // Left out, `nodes` is `10%`, as the API server defaults it from Karpenter's CRD.
    let defaulted = nodepool(&pool(serde_json::json!({"reasons": ["Unhealthy"]}))).unwrap();
    assert_eq!(defaulted.budgets[1].nodes, "10%");
}

/// A PodDisruptionBudget's `minAvailable` and `maxUnavailable` are a count or a percentage up
/// to 100 %, one of them at most, as the API server validates them: anything else is an error
/// that names the budget and the field.
#[test]
fn a_pdb_budget_that_is_no_count_or_percentage_is_named() {
    let budget = |spec: serde_json::Value| -> Result<fleetwright_core::model::Pdb, KubeError> {
        let p = serde_json::json!({
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": spec,
        });
        pdb(&serde_json::from_value(p).unwrap())
    };
    for ok in [
        json_spec("minAvailable", 2),
        json_spec("maxUnavailable", "25%"),
    ] {
        assert!(budget(ok.clone()).is_ok(), "{ok}");
    }
    for (spec, field) in [
        (json_spec("minAvailable", "four"), "spec.minAvailable"),
        (json_spec("maxUnavailable", "150%"), "spec.maxUnavailable"),
        (json_spec("minAvailable", -1), "spec.minAvailable"),
        (
            serde_json::json!({"minAvailable": 1, "maxUnavailable": 1}),
            "spec.maxUnavailable",
        ),
    ] {
        let err = budget(spec.clone()).expect_err("refused").to_string();
        assert!(
            err.contains("PodDisruptionBudget shop/web") && err.contains(field),
            "{spec}: {err}"
        );
    }
}

fn json_spec(field: &str, value: impl serde::Serialize) -> serde_json::Value {
    serde_json::json!({ field: value, "selector": {"matchLabels": {"app": "web"}} })
}

/// An EC2NodeClass's status is the drift reference a read of the cluster starts from, as
/// Karpenter's is: its AMIs, subnets and security groups by id.
#[test]
fn a_nodeclass_status_is_read_as_what_it_resolved_to() {
    let mut dump = crate::dump::parse(
        r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: R
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
status:
  amis: [{id: ami-new, name: al2023}]
  subnets: [{id: subnet-a, zone: us-east-1a}]
  securityGroups: [{id: sg-1, name: nodes}]
"#,
        "class",
    )
    .expect("parses");
    let snapshot = take_snapshot(&mut dump).expect("converts");
    let state = &snapshot.node_class_state["default"];
    assert_eq!(state.images.iter().collect::<Vec<_>>(), ["ami-new"]);
    assert_eq!(state.subnets.iter().collect::<Vec<_>>(), ["subnet-a"]);
    assert_eq!(state.security_groups.iter().collect::<Vec<_>>(), ["sg-1"]);
}

/// A PodDisruptionBudget that does not read is reported and still protects its pods: it is read
/// as one that allows no eviction ever.
#[test]
fn a_pdb_that_does_not_read_fails_closed() {
    let mut dump = crate::dump::parse(
        r#"
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: shop}
spec:
  minAvailable: four
  selector: {matchLabels: {app: web}}
"#,
        "pdb",
    )
    .expect("parses");
    let (snapshot, rejected) = take_snapshot_isolating(&mut dump);
    assert_eq!(rejected.len(), 1, "{rejected:?}");
    assert!(
        rejected[0].error.contains("spec.minAvailable"),
        "{rejected:?}"
    );
    assert_eq!(snapshot.pdbs.len(), 1);
    assert!(snapshot.pdbs[0].fully_blocking);
    assert_eq!(snapshot.pdbs[0].disruptions_allowed, 0);
}
