//! Admission reviews, decided without I/O: reading an `admission.k8s.io/v1` AdmissionReview,
//! the always-allowing answer that echoes its `uid`, and whether the request is worth nudging
//! tick for: a pod created without a node (capacity to plan), or a Node created (a launched
//! node joining, to be registered so its pods can bind). The webhook function and
//! `fleetwright replay-event` both use these.

use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use kube::core::DynamicObject;
use serde_json::{json, Value};

/// The EventBridge detail-type of the nudge for a pending pod.
pub const PENDING_POD: &str = "Pending Pod";

/// The EventBridge detail-type of the nudge for a node that joined the cluster.
pub const NODE_JOINED: &str = "Node Joined";

/// Bodies above this are refused.
pub const MAX_BODY: usize = 1 << 20;

/// Reads a review's request; the error says why the body is not one.
pub fn read_request(body: &[u8]) -> Result<AdmissionRequest<DynamicObject>, String> {
    if body.len() > MAX_BODY {
        return Err("body is larger than 1 MiB".into());
    }
    let review: AdmissionReview<DynamicObject> = serde_json::from_slice(body)
        .map_err(|e| format!("not an admission.k8s.io/v1 AdmissionReview: {e}"))?;
    review
        .try_into()
        .map_err(|e| format!("AdmissionReview has no request: {e}"))
}

/// The answer: always allowed, never patched, with the request's `uid`.
pub fn allow(request: &AdmissionRequest<DynamicObject>) -> Value {
    serde_json::to_value(AdmissionResponse::from(request).into_review()).unwrap_or(Value::Null)
}

/// For a pod created without `spec.nodeName`, the detail of the `Pending Pod` nudge: namespace,
/// name and uid only. A dry-run request never nudges: the webhook is registered with
/// `sideEffects: NoneOnDryRun`.
pub fn pending_pod(request: &AdmissionRequest<DynamicObject>) -> Option<Value> {
    let pod = request.kind.group.is_empty() && request.kind.kind == "Pod";
    let node = request
        .object
        .as_ref()
        .and_then(|o| o.data.pointer("/spec/nodeName"))
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty());
    (pod && request.operation == Operation::Create && node.is_none() && !request.dry_run)
        .then(|| json!({"namespace": request.namespace, "name": request.name, "uid": request.uid}))
}

/// For a Node created (a kubelet registering), the detail of the `Node Joined` nudge: its name
/// and the request's uid. The tick registers the node it launched as soon as it reads it, and
/// the pods waiting for it can bind only after that; without a nudge they would wait for the
/// schedule. A dry run never nudges.
pub fn joined_node(request: &AdmissionRequest<DynamicObject>) -> Option<Value> {
    let node = request.kind.group.is_empty() && request.kind.kind == "Node";
    (node && request.operation == Operation::Create && !request.dry_run)
        .then(|| json!({"name": request.name, "uid": request.uid}))
}

#[cfg(test)]
#[path = "../tests/unit/admission.rs"]
mod tests;
