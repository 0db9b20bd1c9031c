//! PodDisruptionBudget arithmetic for the in-memory API's Eviction endpoint, as the API server
//! does it with the disruption controller's counts: the pods a budget's selector matches in its
//! namespace, the healthy ones among them (bound, Running, not being deleted or evicted), and
//! `minAvailable` or `maxUnavailable` (an integer, or a percentage of the matched pods rounded
//! up). An eviction is refused when the pod is healthy and one fewer healthy pod would be too
//! few, or when the pod is not healthy and the budget is already short (the default
//! `unhealthyPodEvictionPolicy: IfHealthyBudget`). [`refresh_statuses`] writes each budget's
//! status from the same counts, as the disruption controller does (`expectedPods`,
//! `currentHealthy`, `desiredHealthy`, `disruptionsAllowed`), so readers of the status see what
//! the Eviction endpoint will allow.

use fleetwright_crds::conditions;
use serde_json::Value;

use super::State;

const PODS: &str = "/api/v1/pods";
pub(super) const BUDGETS: &str = "/apis/policy/v1/poddisruptionbudgets";

/// Bound, Running, and neither being deleted nor evicted.
fn healthy(state: &State, p: &Value) -> bool {
    let key = format!(
        "{}/{}",
        p["metadata"]["namespace"].as_str().unwrap_or_default(),
        p["metadata"]["name"].as_str().unwrap_or_default()
    );
    p["spec"]["nodeName"]
        .as_str()
        .is_some_and(|n| !n.is_empty())
        && p["status"]["phase"] == "Running"
        && p["metadata"]["deletionTimestamp"].is_null()
        && !state.evicted.contains(&key)
}

/// A budget's counts: the pods it selects (finished ones left out), and the healthy ones.
fn counts(state: &State, budget: &Value) -> (i64, i64) {
    let namespace = &budget["metadata"]["namespace"];
    let matched: Vec<&Value> = state
        .objects
        .get(PODS)
        .into_iter()
        .flatten()
        .filter(|p| &p["metadata"]["namespace"] == namespace)
        .filter(|p| !matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed")))
        .filter(|p| selects(&budget["spec"]["selector"], &p["metadata"]["labels"]))
        .collect();
    let current = matched.iter().filter(|p| healthy(state, p)).count() as i64;
    (matched.len() as i64, current)
}

/// How many budgets select `namespace/name` (0 when the pod is unknown).
pub(super) fn selecting(state: &State, namespace: &str, name: &str) -> usize {
    let Some(pod) = find(state, namespace, name) else {
        return 0;
    };
    state
        .objects
        .get(BUDGETS)
        .into_iter()
        .flatten()
        .filter(|b| b["metadata"]["namespace"] == namespace)
        .filter(|b| selects(&b["spec"]["selector"], &pod["metadata"]["labels"]))
        .count()
}

fn find<'a>(state: &'a State, namespace: &str, name: &str) -> Option<&'a Value> {
    state
        .objects
        .get(PODS)?
        .iter()
        .find(|p| p["metadata"]["namespace"] == namespace && p["metadata"]["name"] == name)
}

/// Writes every budget's status as the disruption controller computes it.
pub fn refresh_statuses(state: &mut State) {
    let Some(budgets) = state.objects.get(BUDGETS) else {
        return;
    };
    let statuses: Vec<Value> = budgets
        .iter()
        .map(|b| {
            let (expected, current) = counts(state, b);
            let desired = desired_healthy(&b["spec"], expected);
            let allowed = (current - desired).max(0);
            let (condition, reason) = if allowed > 0 {
                ("True", conditions::SUFFICIENT_PODS)
            } else {
                ("False", conditions::INSUFFICIENT_PODS)
            };
            serde_json::json!({
                "observedGeneration": b["metadata"]["generation"].as_i64().unwrap_or(1),
                "expectedPods": expected, "currentHealthy": current,
                "desiredHealthy": desired, "disruptionsAllowed": allowed,
                "conditions": [{"type": conditions::DISRUPTION_ALLOWED, "status": condition, "reason": reason,
                    "message": ""}]})
        })
        .collect();
    let now = state
        .now
        .clone()
        .unwrap_or_else(|| "2026-11-22T00:00:00Z".into());
    if let Some(budgets) = state.objects.get_mut(BUDGETS) {
        for (b, mut status) in budgets.iter_mut().zip(statuses) {
            let old = &b["status"]["conditions"][0];
            let since = if old["status"] == status["conditions"][0]["status"] {
                old["lastTransitionTime"].clone()
            } else {
                serde_json::json!(now)
            };
            status["conditions"][0]["lastTransitionTime"] = since;
            b["status"] = status;
        }
    }
}

/// The name of the budget that refuses evicting `namespace/name`, if one does.
pub(super) fn refusing_budget(state: &State, namespace: &str, name: &str) -> Option<String> {
    let pod = find(state, namespace, name)?;
    state
        .objects
        .get(BUDGETS)?
        .iter()
        .filter(|b| b["metadata"]["namespace"] == namespace)
        .filter(|b| selects(&b["spec"]["selector"], &pod["metadata"]["labels"]))
        .find(|b| {
            let (expected, current) = counts(state, b);
            let desired = desired_healthy(&b["spec"], expected);
            let after = if healthy(state, pod) {
                current - 1
            } else {
                current
            };
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
#[path = "../../tests/unit/memory/budget.rs"]
mod tests;
