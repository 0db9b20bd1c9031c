use super::*;

/// The disruption controller writes every budget's status each pass, so a reader of
/// `status.disruptionsAllowed` sees what the Eviction API allows; pods of a node that no
/// longer exists are collected.
#[test]
fn budgets_get_their_status_and_orphaned_pods_are_collected() {
    let budget = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}});
    let mut cluster = Cluster::new(&[budget], BTreeMap::new(), 1);
    let pod = |name: &str, node: &str| {
        json!({"metadata": {"name": name, "namespace": "shop", "labels": {"app": "web"}},
                "spec": {"nodeName": node}, "status": {"phase": "Running"}})
    };
    let node = json!({"metadata": {"name": "n1"}});
    {
        let mut state = cluster.api.lock();
        state.objects.insert(NODES.into(), vec![node]);
        state.objects.insert(
            PODS.into(),
            vec![pod("a", "n1"), pod("b", "n1"), pod("c", "gone")],
        );
    }
    cluster.controllers(Utc::now());
    let state = cluster.api.lock();
    assert_eq!(state.objects[PODS].len(), 2, "the orphan is collected");
    let status = &state.objects["/apis/policy/v1/poddisruptionbudgets"][0]["status"];
    assert_eq!(status["expectedPods"], 2);
    assert_eq!(status["currentHealthy"], 2);
    assert_eq!(status["desiredHealthy"], 1);
    assert_eq!(status["disruptionsAllowed"], 1);
}
