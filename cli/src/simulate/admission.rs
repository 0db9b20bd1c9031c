//! The admission webhook as a simulation calls it: the AdmissionReview the API server sends for
//! a pod's or a Node's creation, which Node creations the configuration `fleetwright manifests`
//! prints sends at all, and the call itself.

use chrono::{DateTime, Utc};
use fleetwright_runtime::webhook::Webhook;
use serde_json::{json, Value};
use tracing::warn;

use fleetwright_runtime::world::QueuedNudges;

/// The review of a pod or Node CREATE, as the API server sends it (a Node from its kubelet).
pub fn admission_review(object: &Value) -> Value {
    let node = object["kind"] == "Node";
    let (kind, resource) = if node {
        ("Node", "nodes")
    } else {
        ("Pod", "pods")
    };
    let user = if node {
        format!(
            "system:node:{}",
            object["metadata"]["name"].as_str().unwrap_or_default()
        )
    } else {
        "system:serviceaccount:kube-system:replicaset-controller".into()
    };
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": format!("review-{}", object["metadata"]["uid"].as_str().unwrap_or_default()),
            "kind": {"group": "", "version": "v1", "kind": kind},
            "resource": {"group": "", "version": "v1", "resource": resource},
            "name": object["metadata"]["name"], "namespace": object["metadata"]["namespace"],
            "operation": "CREATE", "object": object,
            "userInfo": {"username": user},
            "dryRun": false}})
}

/// Whether the webhook configuration `fleetwright manifests` prints sends this Node's CREATE:
/// a node of a NodePool.
pub fn node_reviewed(node: &Value) -> bool {
    node["metadata"]["labels"][fleetwright_core::labels::NODEPOOL].is_string()
}

/// A created pod or Node goes through the admission webhook, as the API server sends it.
pub async fn admit(webhook: &Webhook<QueuedNudges>, pod: &Value, now: DateTime<Utc>) {
    let review = admission_review(pod);
    let answer = webhook
        .handle("/admit", review.to_string().as_bytes(), now)
        .await;
    if answer.status != 200 {
        warn!(target: "simulate::webhook", status = answer.status, "the webhook refused a review");
    }
}
