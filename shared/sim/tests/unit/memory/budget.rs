use super::*;
use serde_json::json;

fn pod(name: &str, running: bool) -> Value {
    json!({"metadata": {"name": name, "namespace": "shop", "labels": {"app": "api"}},
            "spec": {"nodeName": if running { "n1" } else { "" }},
            "status": {"phase": if running { "Running" } else { "Pending" }}})
}

fn state(pods: Vec<Value>, spec: Value) -> State {
    let mut state = State::default();
    state.objects.insert(PODS.into(), pods);
    let mut budget = json!({"metadata": {"name": "api", "namespace": "shop"},
            "spec": {"selector": {"matchLabels": {"app": "api"}}}});
    for (k, v) in spec.as_object().unwrap() {
        budget["spec"][k] = v.clone();
    }
    state.objects.insert(BUDGETS.into(), vec![budget]);
    state
}

#[test]
fn max_unavailable_one_lets_one_eviction_through_at_a_time() {
    let mut s = state(
        vec![pod("a", true), pod("b", true), pod("c", true)],
        json!({"maxUnavailable": 1}),
    );
    assert_eq!(refusing_budget(&s, "shop", "a"), None);
    s.evicted.push("shop/a".into());
    assert_eq!(refusing_budget(&s, "shop", "b").as_deref(), Some("api"));
}

#[test]
fn min_available_counts_only_healthy_pods_and_percentages_round_up() {
    let s = state(
        vec![pod("a", true), pod("b", true), pod("c", false)],
        json!({"minAvailable": "50%"}),
    );
    // 50% of 3 is 2 (rounded up): two healthy pods, none to spare.
    assert_eq!(refusing_budget(&s, "shop", "a").as_deref(), Some("api"));
    // The pending pod may go only while the budget is whole: it is (2 >= 2).
    assert_eq!(refusing_budget(&s, "shop", "c"), None);
}

#[test]
fn statuses_carry_the_disruption_controllers_counts() {
    let mut s = state(
        vec![pod("a", true), pod("b", true), pod("c", false)],
        json!({"minAvailable": 1}),
    );
    refresh_statuses(&mut s);
    let status = &s.objects[BUDGETS][0]["status"];
    assert_eq!(status["expectedPods"], 3);
    assert_eq!(status["currentHealthy"], 2);
    assert_eq!(status["desiredHealthy"], 1);
    assert_eq!(status["disruptionsAllowed"], 1);
    assert_eq!(status["conditions"][0]["reason"], "SufficientPods");
    s.evicted.push("shop/a".into());
    refresh_statuses(&mut s);
    assert_eq!(s.objects[BUDGETS][0]["status"]["disruptionsAllowed"], 0);
}

#[test]
fn a_budget_selects_by_expressions_and_only_in_its_namespace() {
    let mut s = state(
        vec![pod("a", true)],
        json!({"minAvailable": 1, "selector": {"matchExpressions": [
                {"key": "app", "operator": "In", "values": ["api", "web"]}]}}),
    );
    assert_eq!(refusing_budget(&s, "shop", "a").as_deref(), Some("api"));
    s.objects.get_mut(BUDGETS).unwrap()[0]["metadata"]["namespace"] = json!("other");
    assert_eq!(refusing_budget(&s, "shop", "a"), None);
}
