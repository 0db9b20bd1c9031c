//! Pods in the in-memory API: the Eviction subresource and pod deletion.
//!
//! An eviction is answered as the API server's eviction handler answers it: a pod listed in
//! `pdb_blocked`, or one whose PodDisruptionBudget does not allow it, gets 429; a pod that more
//! than one budget selects gets 500 (the eviction subresource does not support it); an accepted
//! eviction is recorded in `evicted`.
//!
//! With [`State::graceful_pods`] (the simulator), pods end as a kubelet ends them: an accepted
//! eviction or a DELETE of a running pod only sets its `deletionTimestamp` (the request time plus
//! its `terminationGracePeriodSeconds`, 30 unless set), and the pod goes when its kubelet deletes
//! it with `gracePeriodSeconds=0`; an unbound or finished pod, or a pod being deleted, is evicted
//! without asking its budgets, as the API server's `canIgnorePDB` has it. Without it (the tests),
//! an accepted eviction leaves the pod to the caller and a DELETE removes it at once.

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::{json, Value};

use super::{budget, reply, status, Reply, State, PODS};

/// A pod's `terminationGracePeriodSeconds` when its spec sets none.
pub const DEFAULT_GRACE_SECONDS: i64 = 30;

/// The message the API server gives a pod that more than one budget selects.
pub const MULTIPLE_BUDGETS: &str =
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.";

fn position(state: &State, namespace: &str, name: &str) -> Option<usize> {
    state.objects.get(PODS)?.iter().position(|p| {
        p["metadata"]["name"] == json!(name)
            && p["metadata"]["namespace"].as_str().unwrap_or("default") == namespace
    })
}

/// Whether the API server evicts `pod` without asking its budgets: it does not run (pending,
/// finished) or is already being deleted.
fn can_ignore_budgets(pod: &Value) -> bool {
    let phase = pod["status"]["phase"].as_str().unwrap_or("Pending");
    matches!(phase, "Pending" | "Succeeded" | "Failed")
        || !pod["metadata"]["deletionTimestamp"].is_null()
}

/// `POST …/pods/{name}/eviction`.
pub(super) fn evict(state: &mut State, namespace: &str, name: &str) -> Reply {
    let key = format!("{namespace}/{name}");
    let accepted = || {
        reply(
            201,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}),
        )
    };
    let found = position(state, namespace, name);
    if state.graceful_pods {
        let Some(index) = found else {
            return status(404, "NotFound", format!("pods {name:?} not found"));
        };
        if can_ignore_budgets(&state.objects[PODS][index]) {
            state.evicted.push(key);
            terminate(state, index, None);
            return accepted();
        }
    }
    if state.pdb_blocked.contains(&key) {
        return too_many_requests();
    }
    if budget::selecting(state, namespace, name) > 1 {
        return status(500, "InternalError", MULTIPLE_BUDGETS.into());
    }
    if budget::refusing_budget(state, namespace, name).is_some() {
        return too_many_requests();
    }
    state.evicted.push(key);
    if let Some(index) = found.filter(|_| state.graceful_pods) {
        terminate(state, index, None);
        budget::refresh_statuses(state);
    }
    accepted()
}

fn too_many_requests() -> Reply {
    status(
        429,
        "TooManyRequests",
        "Cannot evict pod as it would violate the pod's disruption budget.".into(),
    )
}

/// `DELETE …/pods/{name}[?gracePeriodSeconds=N]`, with `options` the request's DeleteOptions
/// (its `gracePeriodSeconds` and `preconditions.uid` are honoured, as the API server does).
pub(super) fn delete(
    state: &mut State,
    namespace: &str,
    name: &str,
    query: &str,
    options: &Value,
) -> Reply {
    let Some(index) = position(state, namespace, name) else {
        return status(404, "NotFound", format!("pod {namespace}/{name} not found"));
    };
    let pod = &state.objects[PODS][index];
    if let Some(uid) = options["preconditions"]["uid"].as_str() {
        if pod["metadata"]["uid"].as_str().is_some_and(|u| u != uid) {
            let message = format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                pod["metadata"]["uid"]
            );
            return status(409, "Conflict", message);
        }
    }
    let grace = super::query_param(query, "gracePeriodSeconds")
        .and_then(|g| g.parse::<i64>().ok())
        .or_else(|| options["gracePeriodSeconds"].as_i64());
    let force = grace == Some(0);
    let running = pod["spec"]["nodeName"]
        .as_str()
        .is_some_and(|n| !n.is_empty())
        && !matches!(
            pod["status"]["phase"].as_str().unwrap_or("Pending"),
            "Succeeded" | "Failed"
        );
    if !state.graceful_pods || force || !running {
        let removed = remove(state, index);
        return reply(200, removed);
    }
    terminate(state, index, grace);
    budget::refresh_statuses(state);
    reply(200, state.objects[PODS][index].clone())
}

fn remove(state: &mut State, index: usize) -> Value {
    let pods = state.objects.entry(PODS.to_string()).or_default();
    pods.remove(index)
}

/// Starts a pod's graceful deletion (with `grace` seconds, else its own), unless it has
/// started already.
fn terminate(state: &mut State, index: usize, grace: Option<i64>) {
    let now = state
        .now
        .as_deref()
        .unwrap_or("2026-11-22T00:00:00Z")
        .parse::<Timestamp>()
        .unwrap_or(Timestamp::UNIX_EPOCH);
    let Some(pod) = state.objects.get_mut(PODS).and_then(|p| p.get_mut(index)) else {
        return;
    };
    if !pod["metadata"]["deletionTimestamp"].is_null() {
        return;
    }
    let grace = grace.unwrap_or_else(|| grace_seconds(pod));
    let at = now
        .checked_add(SignedDuration::from_secs(grace))
        .unwrap_or(now);
    pod["metadata"]["deletionTimestamp"] = json!(at.to_string());
    pod["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
}

/// A pod's `terminationGracePeriodSeconds`, 30 unless set.
pub fn grace_seconds(pod: &Value) -> i64 {
    pod["spec"]["terminationGracePeriodSeconds"]
        .as_i64()
        .unwrap_or(DEFAULT_GRACE_SECONDS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn pod(name: &str, app: &str, node: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "shop", "labels": {"app": app}},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 20},
            "status": {"phase": if node.is_empty() { "Pending" } else { "Running" }}})
    }

    fn budget(name: &str, app: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "shop"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": app}}}})
    }

    fn state(pods: Vec<Value>, budgets: Vec<Value>, graceful: bool) -> State {
        let mut objects = BTreeMap::new();
        objects.insert(PODS.to_string(), pods);
        objects.insert(budget::BUDGETS.to_string(), budgets);
        State {
            objects,
            graceful_pods: graceful,
            now: Some("2026-11-22T10:00:00Z".into()),
            ..Default::default()
        }
    }

    #[test]
    fn a_pod_two_budgets_select_is_refused_with_500_as_the_api_server_does() {
        for graceful in [false, true] {
            let mut s = state(
                vec![pod("a", "api", "n1"), pod("b", "api", "n1")],
                vec![budget("one", "api"), budget("two", "api")],
                graceful,
            );
            let r = evict(&mut s, "shop", "a");
            assert_eq!(r.status, 500, "{r:?}");
            assert_eq!(r.body["message"], MULTIPLE_BUDGETS);
            assert!(s.evicted.is_empty());
        }
    }

    #[test]
    fn a_graceful_eviction_leaves_the_pod_terminating_until_its_grace_and_updates_the_budget() {
        let mut s = state(
            vec![pod("a", "api", "n1"), pod("b", "api", "n1")],
            vec![budget("one", "api")],
            true,
        );
        assert_eq!(evict(&mut s, "shop", "a").status, 201);
        let a = &s.objects[PODS][0];
        assert_eq!(a["metadata"]["deletionTimestamp"], "2026-11-22T10:00:20Z");
        assert_eq!(a["metadata"]["deletionGracePeriodSeconds"], 20);
        let b = &s.objects[budget::BUDGETS][0];
        assert_eq!(b["status"]["disruptionsAllowed"], 0, "{b}");
        assert_eq!(evict(&mut s, "shop", "b").status, 429);
        // Evicting a pod already being deleted asks no budget.
        assert_eq!(evict(&mut s, "shop", "a").status, 201);
        // The kubelet's final delete removes it.
        assert_eq!(
            delete(&mut s, "shop", "a", "gracePeriodSeconds=0", &Value::Null).status,
            200
        );
        assert_eq!(s.objects[PODS].len(), 1);
        assert_eq!(evict(&mut s, "shop", "gone").status, 404);
    }

    #[test]
    fn a_graceful_delete_of_a_running_pod_waits_and_an_unbound_pod_goes_at_once() {
        let mut s = state(
            vec![pod("a", "api", "n1"), pod("p", "api", "")],
            Vec::new(),
            true,
        );
        assert_eq!(delete(&mut s, "shop", "a", "", &Value::Null).status, 200);
        assert_eq!(s.objects[PODS].len(), 2);
        assert!(!s.objects[PODS][0]["metadata"]["deletionTimestamp"].is_null());
        assert_eq!(delete(&mut s, "shop", "p", "", &Value::Null).status, 200);
        assert_eq!(s.objects[PODS].len(), 1);
        let mut old = state(vec![pod("a", "api", "n1")], Vec::new(), false);
        assert_eq!(delete(&mut old, "shop", "a", "", &Value::Null).status, 200);
        assert!(
            old.objects[PODS].is_empty(),
            "without graceful pods, at once"
        );
    }

    #[test]
    fn a_delete_honours_its_grace_and_its_uid_precondition() {
        let mut s = state(vec![pod("a", "api", "n1")], Vec::new(), true);
        s.objects.get_mut(PODS).unwrap()[0]["metadata"]["uid"] = json!("uid-a");
        let other = json!({"preconditions": {"uid": "uid-earlier-a"}});
        assert_eq!(delete(&mut s, "shop", "a", "", &other).status, 409);
        assert!(s.objects[PODS][0]["metadata"]["deletionTimestamp"].is_null());
        let options = json!({"gracePeriodSeconds": 7, "preconditions": {"uid": "uid-a"}});
        assert_eq!(delete(&mut s, "shop", "a", "", &options).status, 200);
        assert_eq!(
            s.objects[PODS][0]["metadata"]["deletionGracePeriodSeconds"],
            7
        );
    }
}
