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

/// `POST …/pods/{name}/eviction`, with `options` the Eviction's `deleteOptions` (a UID
/// precondition that names another pod is answered 409, as the API server does).
pub(super) fn evict(state: &mut State, namespace: &str, name: &str, options: &Value) -> Reply {
    let key = format!("{namespace}/{name}");
    if let Some(reply) = uid_conflict(state, namespace, name, options) {
        return reply;
    }
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

/// The 409 a request whose UID precondition names another pod than the one of that name gets.
fn uid_conflict(state: &State, namespace: &str, name: &str, options: &Value) -> Option<Reply> {
    let uid = options["preconditions"]["uid"].as_str()?;
    let pod = &state.objects[PODS][position(state, namespace, name)?];
    let actual = pod["metadata"]["uid"].as_str()?;
    (actual != uid).then(|| {
        let message = format!(
            "Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}"
        );
        status(409, "Conflict", message)
    })
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
    if let Some(reply) = uid_conflict(state, namespace, name, options) {
        return reply;
    }
    let pod = &state.objects[PODS][index];
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
#[path = "../../tests/unit/memory/pods.rs"]
mod tests;
