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
    // Left out, `nodes` is `10%`, as the API server defaults it from Karpenter's CRD.
    let defaulted = nodepool(&pool(serde_json::json!({"reasons": ["Unhealthy"]}))).unwrap();
    assert_eq!(defaulted.budgets[1].nodes, "10%");
}
