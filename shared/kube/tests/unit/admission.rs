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
    let err = read_request(br#"{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}"#)
        .unwrap_err();
    assert!(err.contains("no request"), "{err}");
    assert!(read_request(&vec![b' '; MAX_BODY + 1])
        .unwrap_err()
        .contains("1 MiB"));
}
