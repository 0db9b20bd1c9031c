//! An in-memory Kubernetes API: the real list paths of the kinds Fleetwright reads, with
//! `limit`/`continue` pagination (and `remainingItemCount`, as the API server sets it), and a
//! record of every request. [`MemoryApi::client`] is a real [`kube::Client`] whose transport is
//! this store, in process; `fleetwright simulate` runs the runtime against it, and the tests
//! also serve it over HTTP.
//!
//! Leases (`coordination.k8s.io/v1`) and ConfigMaps can be created, read and replaced, with the API
//! server's optimistic concurrency: a create of an existing lease and a replace with a stale
//! `resourceVersion` both answer 409 Conflict. NodeClaims can be created (with `generateName`);
//! nodes, NodeClaims, NodePools and EC2NodeClasses read, replaced (also through `/status`) and deleted one by one,
//! with the same `resourceVersion` checks; a delete of an object with finalizers only sets its
//! `deletionTimestamp`, and the object goes once its finalizers are removed. Node conflicts can be
//! injected with `node_conflicts`. Events can be created. A NodeClaim with neither `name` nor
//! `generateName` is refused with 422 Invalid. Any request can be made to fail with `faults`, or
//! to wait with `latency`. Pod evictions are accepted, or refused with 429 when a
//! PodDisruptionBudget does not allow them (see [`budget`]) or the pod is listed in
//! `pdb_blocked`, and with 500 when more than one budget selects the pod. Pods can be deleted
//! one by one: at once, or gracefully with [`State::graceful_pods`] (see [`pods`]).
//!
//! Those four kinds also take JSON merge patches (also through `/status`).
//!
//! It does not emulate: watches, label or field selectors, `resourceVersion` on lists, writes to
//! other kinds, other patches, admission, or authentication.
//! Unknown paths answer 404 with a `Status` body, as the API server does.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;

mod budget;
mod pods;
mod singles;

use singles::lease;
pub use singles::MEMORY_CA;

pub use budget::refresh_statuses as refresh_budget_statuses;
use http_body_util::{BodyExt, Full};
pub use pods::{grace_seconds, DEFAULT_GRACE_SECONDS, MULTIPLE_BUDGETS};
use serde_json::{json, Value};

const PODS: &str = "/api/v1/pods";

/// The list path, list kind and API version of each kind the snapshot reader lists.
pub const COLLECTIONS: [(&str, &str, &str); 16] = [
    ("/api/v1/pods", "PodList", "v1"),
    ("/api/v1/nodes", "NodeList", "v1"),
    ("/apis/apps/v1/daemonsets", "DaemonSetList", "apps/v1"),
    (
        "/apis/policy/v1/poddisruptionbudgets",
        "PodDisruptionBudgetList",
        "policy/v1",
    ),
    (
        "/api/v1/persistentvolumeclaims",
        "PersistentVolumeClaimList",
        "v1",
    ),
    ("/api/v1/persistentvolumes", "PersistentVolumeList", "v1"),
    // What volume attach limits are counted from.
    (
        "/apis/storage.k8s.io/v1/storageclasses",
        "StorageClassList",
        "storage.k8s.io/v1",
    ),
    (
        "/apis/storage.k8s.io/v1/csinodes",
        "CSINodeList",
        "storage.k8s.io/v1",
    ),
    (
        "/apis/karpenter.sh/v1/nodepools",
        "NodePoolList",
        "karpenter.sh/v1",
    ),
    (
        "/apis/karpenter.sh/v1/nodeclaims",
        "NodeClaimList",
        "karpenter.sh/v1",
    ),
    (
        "/apis/karpenter.k8s.aws/v1/ec2nodeclasses",
        "EC2NodeClassList",
        "karpenter.k8s.aws/v1",
    ),
    (
        "/apis/karpenter.sh/v1alpha1/nodeoverlays",
        "NodeOverlayList",
        "karpenter.sh/v1alpha1",
    ),
    // What default topology spread deduces selectors from.
    ("/api/v1/services", "ServiceList", "v1"),
    (
        "/api/v1/replicationcontrollers",
        "ReplicationControllerList",
        "v1",
    ),
    ("/apis/apps/v1/replicasets", "ReplicaSetList", "apps/v1"),
    ("/apis/apps/v1/statefulsets", "StatefulSetList", "apps/v1"),
];

/// The fake's objects (by list path) and the request log.
#[derive(Debug, Default)]
pub struct State {
    pub objects: BTreeMap<String, Vec<Value>>,
    /// Single objects (leases) by their path.
    pub singles: BTreeMap<String, Value>,
    pub next_version: u64,
    pub requests: Vec<String>,
    /// The `Authorization` header of every request.
    pub authorizations: Vec<String>,
    /// The next this-many node updates answer 409, as if another writer got there first.
    pub node_conflicts: usize,
    /// Pods (`namespace/name`) whose eviction a PodDisruptionBudget refuses with 429.
    pub pdb_blocked: Vec<String>,
    /// Pods (`namespace/name`) whose eviction was accepted.
    pub evicted: Vec<String>,
    /// Events recorded.
    pub events: Vec<Value>,
    /// The server's clock (RFC 3339) for the `deletionTimestamp` it sets; a fixed instant
    /// when unset.
    pub now: Option<String>,
    /// Injected failures, answered before anything else (see [`Fault`]).
    pub faults: Vec<Fault>,
    /// Injected latency: the next `.1` requests through [`MemoryApi::client`] are each held
    /// for `.0` before the server reads them (another writer may get there first meanwhile).
    pub latency: Option<(std::time::Duration, usize)>,
    /// Pods end as a kubelet ends them: evictions and deletes of running pods set their
    /// `deletionTimestamp` and leave them to their kubelet (see [`pods`]).
    pub graceful_pods: bool,
    /// Every request through [`MemoryApi::client`] first yields to the runtime once, so work
    /// joined with a caller's requests runs between them (a tick that takes simulated time).
    pub yield_requests: bool,
}

/// An injected failure: after `skip` matching requests pass, the next `times` requests whose
/// method is `method` (any, when empty; any but GET, when `WRITE`) and whose path starts with
/// `path` answer `status` (429, 500, 503, …) with a `Status` body; a `path` that starts with `*`
/// matches the paths that end with the rest (`*/eviction`, every eviction). A `WRITE` fault with a large
/// `times` is an invocation cut off at an await point: nothing after it reaches the server.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Fault {
    pub method: String,
    pub path: String,
    pub status: u16,
    pub skip: usize,
    pub times: usize,
}

impl Fault {
    fn matches(&self, method: &str, path: &str) -> bool {
        let method_matches = match self.method.as_str() {
            "" => true,
            "WRITE" => method != "GET",
            m => m == method,
        };
        let path_matches = match self.path.strip_prefix('*') {
            Some(suffix) => path.ends_with(suffix),
            None => path.starts_with(&self.path),
        };
        self.times > 0 && method_matches && path_matches
    }
}

/// The answer to one request: an HTTP status and a JSON body.
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    pub status: u16,
    pub body: Value,
}

/// An in-memory API server; clones share the store.
#[derive(Clone, Default)]
pub struct MemoryApi {
    pub state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for MemoryApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryApi").finish_non_exhaustive()
    }
}

impl MemoryApi {
    /// A server holding `objects` (by list path, as in [`COLLECTIONS`]).
    pub fn new(objects: BTreeMap<String, Vec<Value>>) -> MemoryApi {
        MemoryApi {
            state: Arc::new(Mutex::new(State {
                objects,
                next_version: 1,
                ..Default::default()
            })),
        }
    }

    /// The store, locked.
    pub fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A real [`kube::Client`] whose requests this server answers in process. It needs a Tokio
    /// runtime, as every client does.
    pub fn client(&self) -> kube::Client {
        let api = self.clone();
        let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
            let api = api.clone();
            async move {
                let (parts, body) = request.into_parts();
                let body = body
                    .collect()
                    .await
                    .map(|b| b.to_bytes())
                    .unwrap_or_default();
                let authorization = parts
                    .headers
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default();
                let uri = parts.uri.to_string();
                if let Some(delay) = api.take_latency() {
                    tokio::time::sleep(delay).await;
                }
                if api.lock().yield_requests {
                    tokio::task::yield_now().await;
                }
                let reply = api.respond(parts.method.as_str(), &uri, authorization, &body);
                Ok::<_, Infallible>(reply.into_http())
            }
        });
        kube::Client::new(service, "default")
    }

    /// The delay for one request, if latency is injected (and one fewer request to delay).
    fn take_latency(&self) -> Option<std::time::Duration> {
        let mut state = self.lock();
        let (delay, left) = state.latency.as_mut()?;
        let delay = *delay;
        *left -= 1;
        if *left == 0 {
            state.latency = None;
        }
        Some(delay)
    }

    /// Answers one request: `uri` is the path and query.
    pub fn respond(&self, method: &str, uri: &str, authorization: &str, body: &[u8]) -> Reply {
        respond(&mut self.lock(), method, uri, authorization, body)
    }

    /// The requests made to `path` (any query), as `METHOD uri`.
    pub fn requests_to(&self, path: &str) -> Vec<String> {
        self.lock()
            .requests
            .iter()
            .filter(|r| r.split(' ').nth(1).and_then(|u| u.split('?').next()) == Some(path))
            .cloned()
            .collect()
    }
}

impl Reply {
    /// The reply as an HTTP response with a JSON body.
    pub fn into_http(self) -> http::Response<Full<Bytes>> {
        let mut response = http::Response::new(Full::new(Bytes::from(self.body.to_string())));
        *response.status_mut() = http::StatusCode::from_u16(self.status)
            .unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        response
    }
}

pub(super) fn query_param<'a>(query: &'a str, name: &str) -> Option<&'a str> {
    query.split('&').find_map(|kv| {
        kv.strip_prefix(name)
            .and_then(|rest| rest.strip_prefix('='))
    })
}

pub(super) fn status(code: u16, reason: &str, message: String) -> Reply {
    let body = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "code": code, "message": message});
    reply(code, body)
}

/// Creates NodeClaims and Events, reads/replaces/deletes nodes and NodeClaims (and NodeClaim
/// status), and accepts or refuses (429) pod evictions.
fn write(state: &mut State, method: &str, uri: &str, body: &[u8]) -> Option<Reply> {
    let (path, query) = uri.split_once('?').unwrap_or((uri, ""));
    let mut object: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    if let Some(rest) = path
        .strip_prefix("/api/v1/namespaces/")
        .and_then(|r| r.strip_suffix("/eviction"))
    {
        let (namespace, name) = rest.split_once("/pods/")?;
        return Some(pods::evict(
            state,
            namespace,
            name,
            &object["deleteOptions"],
        ));
    }
    if method == "POST" && path.starts_with("/api/v1/namespaces/") && path.ends_with("/events") {
        state.events.push(object.clone());
        return Some(reply(201, object));
    }
    if method == "POST" && path == "/apis/karpenter.sh/v1/nodeclaims" {
        let invalid =
            object["metadata"]["name"].is_null() && object["metadata"]["generateName"].is_null();
        if invalid {
            return Some(status(422, "Invalid", "NodeClaim is invalid: metadata.name: Required value: name or generateName is required".into()));
        }
        let prefix = object["metadata"]["generateName"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let name = format!("{prefix}{:05}", state.next_version);
        object["metadata"]["name"] = json!(name);
        object["metadata"]["resourceVersion"] = json!(state.next_version.to_string());
        // As the API server: every object it creates has a uid and its creation time (the
        // code under test measures a NodeClaim's age from it).
        object["metadata"]["uid"] = json!(format!("uid-{name}"));
        if let Some(now) = &state.now {
            object["metadata"]["creationTimestamp"] = json!(now);
        }
        state.next_version += 1;
        state
            .objects
            .entry(path.to_string())
            .or_default()
            .push(object.clone());
        return Some(reply(201, object));
    }
    if method == "DELETE" {
        if let Some((namespace, name)) = path
            .strip_prefix("/api/v1/namespaces/")
            .and_then(|r| r.split_once("/pods/"))
            .filter(|(_, name)| !name.contains('/'))
        {
            return Some(pods::delete(state, namespace, name, query, &object));
        }
    }
    let collection = [
        "/api/v1/nodes",
        "/apis/karpenter.sh/v1/nodeclaims",
        "/apis/karpenter.sh/v1/nodepools",
        "/apis/karpenter.k8s.aws/v1/ec2nodeclasses",
    ]
    .into_iter()
    .find(|c| path.starts_with(&format!("{c}/")))?;
    let rest = &path[collection.len() + 1..];
    let (name, subresource) = match rest.split_once('/') {
        Some((n, sub)) => (n.to_string(), Some(sub.to_string())),
        None => (rest.to_string(), None),
    };
    let version = state.next_version;
    let is_node = collection == "/api/v1/nodes";
    let inject_conflict = is_node && method == "PUT" && state.node_conflicts > 0;
    if inject_conflict {
        state.node_conflicts -= 1;
    }
    let items = state.objects.entry(collection.to_string()).or_default();
    let Some(index) = items
        .iter()
        .position(|n| n["metadata"]["name"] == json!(name))
    else {
        return Some(status(404, "NotFound", format!("{name:?} not found")));
    };
    if items[index]["metadata"]["resourceVersion"].is_null() {
        items[index]["metadata"]["resourceVersion"] = json!("1");
    }
    let conflict = || {
        status(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {name:?}: the object has been modified"),
        )
    };
    let response = match method {
        "GET" => reply(200, items[index].clone()),
        "PUT" => {
            if object["metadata"]["resourceVersion"] != items[index]["metadata"]["resourceVersion"]
            {
                return Some(conflict());
            }
            if inject_conflict {
                items[index]["metadata"]["resourceVersion"] = json!(version.to_string());
                state.next_version += 1;
                return Some(conflict());
            }
            let mut stored = items[index].clone();
            if subresource.as_deref() == Some("status") {
                stored["status"] = object["status"].clone();
            } else {
                let status = stored["status"].clone();
                let deleting = stored["metadata"]["deletionTimestamp"].clone();
                stored = object;
                stored["status"] = status;
                if !deleting.is_null() {
                    stored["metadata"]["deletionTimestamp"] = deleting;
                }
            }
            stored["metadata"]["resourceVersion"] = json!(version.to_string());
            state.next_version += 1;
            let gone = !stored["metadata"]["deletionTimestamp"].is_null()
                && stored["metadata"]["finalizers"]
                    .as_array()
                    .is_none_or(|f| f.is_empty());
            if gone {
                items.remove(index);
            } else {
                items[index] = stored.clone();
            }
            reply(200, stored)
        }
        "PATCH" => {
            // A JSON merge patch (the only kind the code under test sends): onto the status
            // alone through `/status`, onto everything else otherwise.
            let mut stored = items[index].clone();
            if subresource.as_deref() == Some("status") {
                merge_patch(&mut stored["status"], &object["status"]);
            } else {
                let status = stored["status"].clone();
                merge_patch(&mut stored, &object);
                stored["status"] = status;
            }
            stored["metadata"]["resourceVersion"] = json!(version.to_string());
            state.next_version += 1;
            items[index] = stored.clone();
            reply(200, stored)
        }
        "DELETE" => {
            let has_finalizers = items[index]["metadata"]["finalizers"]
                .as_array()
                .is_some_and(|f| !f.is_empty());
            if has_finalizers {
                let now = state.now.as_deref().unwrap_or("2026-11-22T00:00:00Z");
                items[index]["metadata"]["deletionTimestamp"] = json!(now);
                items[index]["metadata"]["resourceVersion"] = json!(version.to_string());
                state.next_version += 1;
                reply(200, items[index].clone())
            } else {
                let removed = items.remove(index);
                reply(200, removed)
            }
        }
        _ => return None,
    };
    Some(response)
}

/// Applies a JSON merge patch (RFC 7386): objects merge key by key, `null` removes a key, and
/// anything else replaces.
fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(entries) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    if let Value::Object(fields) = target {
        for (key, value) in entries {
            if value.is_null() {
                fields.remove(key);
            } else {
                merge_patch(fields.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }
}

/// A request of the simulated control plane's own components (a kubelet's final pod delete, the
/// node lifecycle controller's Node delete): answered as any other, with finalizers and grace
/// periods honoured, but neither met by injected faults nor written to the request log, which
/// records what the code under test asked.
pub fn component_request(state: &mut State, method: &str, uri: &str, body: &[u8]) -> Reply {
    if let Some(response) = write(state, method, uri, body) {
        return response;
    }
    status(405, "MethodNotAllowed", format!("{method} {uri}"))
}

/// The first matching injected fault's answer, if any (and one fewer of it left).
fn injected(state: &mut State, method: &str, uri: &str) -> Option<Reply> {
    let path = uri.split('?').next().unwrap_or(uri);
    let fault = state.faults.iter_mut().find(|f| f.matches(method, path))?;
    if fault.skip > 0 {
        fault.skip -= 1;
        return None;
    }
    fault.times -= 1;
    let reason = match fault.status {
        429 => "TooManyRequests",
        409 => "Conflict",
        410 => "Expired",
        503 => "ServiceUnavailable",
        _ => "InternalError",
    };
    state.requests.push(format!("{method} {uri}"));
    Some(status(fault.status, reason, format!("injected: {reason}")))
}

fn respond(state: &mut State, method: &str, uri: &str, authorization: &str, body: &[u8]) -> Reply {
    if let Some(reply) = injected(state, method, uri) {
        return reply;
    }
    let (path, query) = uri.split_once('?').unwrap_or((uri, ""));
    state.requests.push(format!("{method} {uri}"));
    state.authorizations.push(authorization.to_string());
    if let Some(response) = lease(state, method, path, body) {
        return response;
    }
    if let Some(response) = write(state, method, uri, body) {
        return response;
    }
    let Some((_, kind, api_version)) = COLLECTIONS.iter().find(|(p, _, _)| *p == path) else {
        let body = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404,
                          "message": format!("the server could not find the requested resource ({path})")});
        return reply(404, body);
    };
    let items: &[Value] = state.objects.get(path).map(Vec::as_slice).unwrap_or(&[]);
    let start: usize = query_param(query, "continue")
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let limit: usize = query_param(query, "limit")
        .and_then(|l| l.parse().ok())
        .unwrap_or(usize::MAX);
    let end = start.saturating_add(limit).min(items.len());
    let mut metadata = json!({"resourceVersion": "1000"});
    if end < items.len() {
        metadata["continue"] = json!(end.to_string());
        metadata["remainingItemCount"] = json!(items.len() - end);
    }
    let page = items[start.min(end)..end].to_vec();
    reply(
        200,
        json!({"kind": kind, "apiVersion": api_version, "metadata": metadata, "items": page}),
    )
}

pub(super) fn reply(status: u16, body: Value) -> Reply {
    Reply { status, body }
}

#[cfg(test)]
#[path = "../../tests/unit/memory.rs"]
mod tests;
