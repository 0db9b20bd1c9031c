//! PodDisruptionBudget arithmetic for the in-memory API's Eviction endpoint, as the API server
//! does it with the disruption controller's counts: the pods a budget's selector matches in its
//! namespace, the healthy ones among them (bound, Running, not being deleted or evicted), and
//! `minAvailable` or `maxUnavailable` (an integer, or a percentage of the matched pods rounded
//! up). An eviction is refused when the pod is healthy and one fewer healthy pod would be too
//! few, or when the pod is not healthy and the budget is already short (the default
//! `unhealthyPodEvictionPolicy: IfHealthyBudget`).

use serde_json::Value;

use super::State;

const PODS: &str = "/api/v1/pods";
const BUDGETS: &str = "/apis/policy/v1/poddisruptionbudgets";

/// The name of the budget that refuses evicting `namespace/name`, if one does.
pub(super) fn refusing_budget(state: &State, namespace: &str, name: &str) -> Option<String> {
    let pods = state.objects.get(PODS)?;
    let pod = pods
        .iter()
        .find(|p| p["metadata"]["namespace"] == namespace && p["metadata"]["name"] == name)?;
    let evicting = |p: &Value| {
        let key = format!(
            "{}/{}",
            p["metadata"]["namespace"].as_str().unwrap_or_default(),
            p["metadata"]["name"].as_str().unwrap_or_default()
        );
        state.evicted.contains(&key)
    };
    let healthy = |p: &Value| {
        p["spec"]["nodeName"]
            .as_str()
            .is_some_and(|n| !n.is_empty())
            && p["status"]["phase"] == "Running"
            && p["metadata"]["deletionTimestamp"].is_null()
            && !evicting(p)
    };
    state
        .objects
        .get(BUDGETS)?
        .iter()
        .filter(|b| b["metadata"]["namespace"] == namespace)
        .filter(|b| selects(&b["spec"]["selector"], &pod["metadata"]["labels"]))
        .find(|b| {
            let matched: Vec<&Value> = pods
                .iter()
                .filter(|p| p["metadata"]["namespace"] == namespace)
                .filter(|p| selects(&b["spec"]["selector"], &p["metadata"]["labels"]))
                .collect();
            let current = matched.iter().filter(|p| healthy(p)).count() as i64;
            let desired = desired_healthy(&b["spec"], matched.len() as i64);
            let after = if healthy(pod) { current - 1 } else { current };
            after < desired
        })
        .map(|b| {
            b["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
}

/// How many of `expected` matched pods the budget wants healthy.
fn desired_healthy(spec: &Value, expected: i64) -> i64 {
    if let Some(min) = count(&spec["minAvailable"], expected) {
        return min;
    }
    match count(&spec["maxUnavailable"], expected) {
        Some(max) => (expected - max).max(0),
        None => 0,
    }
}

/// An integer, or a percentage of `of` rounded up.
fn count(value: &Value, of: i64) -> Option<i64> {
    if let Some(n) = value.as_i64() {
        return Some(n);
    }
    let percent: i64 = value.as_str()?.strip_suffix('%')?.parse().ok()?;
    Some((percent * of + 99) / 100)
}

/// Whether a label selector (`matchLabels`, `matchExpressions`) selects `labels`. An empty
/// selector selects every pod, as policy/v1 has it.
fn selects(selector: &Value, labels: &Value) -> bool {
    let label = |k: &str| labels[k].as_str();
    let by_labels = selector["matchLabels"]
        .as_object()
        .is_none_or(|m| m.iter().all(|(k, v)| label(k) == v.as_str()));
    let by_expressions = selector["matchExpressions"].as_array().is_none_or(|es| {
        es.iter().all(|e| {
            let key = e["key"].as_str().unwrap_or_default();
            let values: Vec<&str> = e["values"]
                .as_array()
                .map(|v| v.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            match e["operator"].as_str().unwrap_or_default() {
                "In" => label(key).is_some_and(|v| values.contains(&v)),
                "NotIn" => label(key).is_none_or(|v| !values.contains(&v)),
                "Exists" => label(key).is_some(),
                "DoesNotExist" => label(key).is_none(),
                _ => false,
            }
        })
    });
    by_labels && by_expressions
}

#[cfg(test)]
mod tests {
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
}
