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
mod tests {
    use super::*;

    fn review(operation: &str, kind: &str, spec: Value) -> Vec<u8> {
        review_with(operation, kind, spec, false)
    }

    fn review_with(operation: &str, kind: &str, spec: Value, dry_run: bool) -> Vec<u8> {
        serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u-1", "kind": {"group": "", "version": "v1", "kind": kind},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "name": "web", "namespace": "shop", "operation": operation,
                "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
                "object": {"apiVersion": "v1", "kind": kind, "metadata": {"name": "web", "namespace": "shop"}, "spec": spec},
                "dryRun": dry_run}}))
        .unwrap()
    }

    #[test]
    fn an_unscheduled_pod_create_is_a_pending_pod_and_is_allowed() {
        let request = read_request(&review("CREATE", "Pod", json!({"containers": []}))).unwrap();
        assert_eq!(
            pending_pod(&request),
            Some(json!({"namespace": "shop", "name": "web", "uid": "u-1"}))
        );
        let answer = allow(&request);
        assert_eq!(answer["response"]["allowed"], true);
        assert_eq!(answer["response"]["uid"], "u-1");
        assert!(answer["response"].get("patch").is_none());
    }

    #[test]
    fn bound_pods_updates_dry_runs_and_other_kinds_are_not_pending_pods() {
        let bound = review("CREATE", "Pod", json!({"nodeName": "node-a"}));
        let update = review("UPDATE", "Pod", json!({}));
        let other = review("CREATE", "ConfigMap", json!({}));
        let dry_run = review_with("CREATE", "Pod", json!({"containers": []}), true);
        for body in [bound, update, other, dry_run] {
            assert_eq!(pending_pod(&read_request(&body).unwrap()), None);
        }
    }

    #[test]
    fn a_node_created_joined_and_nothing_else_did() {
        let created = read_request(&review("CREATE", "Node", json!({}))).unwrap();
        assert_eq!(
            joined_node(&created),
            Some(json!({"name": "web", "uid": "u-1"}))
        );
        assert_eq!(pending_pod(&created), None);
        let update = review("UPDATE", "Node", json!({}));
        let dry_run = review_with("CREATE", "Node", json!({}), true);
        let pod = review("CREATE", "Pod", json!({"containers": []}));
        for body in [update, dry_run, pod] {
            assert_eq!(joined_node(&read_request(&body).unwrap()), None);
        }
    }

    #[test]
    fn garbage_and_oversized_bodies_are_refused_with_a_reason() {
        assert!(read_request(b"garbage")
            .unwrap_err()
            .contains("AdmissionReview"));
        let err =
            read_request(br#"{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}"#)
                .unwrap_err();
        assert!(err.contains("no request"), "{err}");
        assert!(read_request(&vec![b' '; MAX_BODY + 1])
            .unwrap_err()
            .contains("1 MiB"));
    }
}
