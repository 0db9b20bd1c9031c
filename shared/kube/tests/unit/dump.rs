use super::*;

#[test]
fn reads_a_list_and_a_stream() {
    let list = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: a, namespace: default}\n  spec: {containers: [{name: c}]}\n";
    assert_eq!(parse(list, "t").unwrap().pods.len(), 1);
    let stream = "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c}]}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: n}\n---\nkind: ConfigMap\nmetadata: {name: x}\n";
    let dump = parse(stream, "t").unwrap();
    assert_eq!((dump.pods.len(), dump.nodes.len()), (1, 1));
    assert_eq!(dump.skipped, vec![("ConfigMap".to_string(), 1)]);
    assert_eq!(dump.ca_bundle, None);
    let with_ca = "kind: ConfigMap\nmetadata: {name: kube-root-ca.crt, namespace: karpenter}\ndata: {ca.crt: \"PEM\\n\"}\n";
    assert_eq!(
        parse(with_ca, "t").unwrap().ca_bundle.as_deref(),
        Some("UEVNCg==")
    );
    let without = "kind: ConfigMap\nmetadata: {name: kube-root-ca.crt}\ndata: {}\n";
    let rejected = parse(without, "t").unwrap().rejected;
    let err = &rejected[0].error;
    assert!(
        err.contains("kube-root-ca.crt") && err.contains("data.ca.crt"),
        "{err}"
    );
}

/// An object that does not read is named with its field and left out; the others still read.
#[test]
fn bad_field_is_named() {
    let bad = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: default}\nspec:\n  weight: heavy\n---\napiVersion: v1\nkind: Node\nmetadata: {name: n}\nstatus: {conditions: [{type: Ready, status: \"True\", lastTransitionTime: \"2026-08-22 09:20:00\"}]}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: good}\n";
    let dump = parse(bad, "t").unwrap();
    let errors: Vec<&str> = dump.rejected.iter().map(|r| r.error.as_str()).collect();
    assert!(errors[0].contains("NodePool default"), "{errors:?}");
    assert!(errors[0].contains("spec.weight"), "{errors:?}");
    assert_eq!(dump.rejected[1].object(), "Node n", "{errors:?}");
    assert!(errors[1].contains("lastTransitionTime"), "{errors:?}");
    assert_eq!(dump.nodes.len(), 1);
}

/// A live read keeps a pod's own grace period: a drain with a deadline deletes the pod that
/// long before it, so the pod gets its full shutdown.
#[test]
fn a_slim_pod_keeps_its_grace_period() {
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "trainer", "namespace": "ml"},
        "spec": {"nodeName": "n1", "terminationGracePeriodSeconds": 120,
            "containers": [{"name": "c", "image": "pause"}]},
    }))
    .unwrap();
    let back = SlimPod::new(pod).to_pod();
    let spec = back.spec.unwrap();
    assert_eq!(spec.termination_grace_period_seconds, Some(120));
    assert_eq!(spec.node_name.as_deref(), Some("n1"));
}

/// A live read keeps the tolerations a drain's fence may meet, so a pod that tolerates
/// `karpenter.sh/disrupted` is left by the tick's drains as by a full read's; the `NoExecute`
/// ones admission adds to every pod are not kept.
#[test]
fn a_slim_pod_keeps_its_no_schedule_tolerations() {
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "agent", "namespace": "ops"},
        "spec": {"nodeName": "n1", "containers": [], "tolerations": [
            {"operator": "Exists"},
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 300}]},
    }))
    .unwrap();
    let back = SlimPod::new(pod).to_pod();
    let kept = back.spec.as_ref().unwrap().tolerations.clone().unwrap();
    assert_eq!(kept.len(), 1);
    assert!(crate::objects::left_by_drain(
        &back,
        fleetwright_core::labels::TAINT_DISRUPTED
    ));
    let plain: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"nodeName": "n1", "containers": []},
    }))
    .unwrap();
    assert_eq!(SlimPod::new(plain).to_pod().spec.unwrap().tolerations, None);
}

/// A slim pod keeps its start, from which a `do-not-disrupt` duration counts at the drain: a
/// pod that waited long for a node is protected from when it started, not from its creation.
#[test]
fn a_slim_pod_keeps_its_start_time() {
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "job-0", "namespace": "shop", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"nodeName": "n1", "containers": []},
        "status": {"phase": "Running", "startTime": "2026-01-01T00:30:00Z"},
    }))
    .unwrap();
    let back = SlimPod::new(pod.clone()).to_pod();
    assert_eq!(
        back.status.and_then(|s| s.start_time),
        pod.status.and_then(|s| s.start_time)
    );
}

/// A bound pod that does not read is named, and a stand-in holds its node: bound there,
/// requesting nothing, annotated do-not-disrupt, so nothing drains or disrupts past it. One
/// bound nowhere is only left out.
#[test]
fn a_bound_pod_that_does_not_read_holds_its_node() {
    let text = r#"
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Pod
  metadata: {name: batch-0, namespace: shop, creationTimestamp: yesterday}
  spec: {nodeName: node-a, containers: [{name: c}]}
- apiVersion: v1
  kind: Pod
  metadata: {name: pending-0, namespace: shop, creationTimestamp: yesterday}
  spec: {containers: [{name: c}]}
"#;
    let dump = parse(text, "t").unwrap();
    let rejected: Vec<String> = dump.rejected.iter().map(|r| r.object()).collect();
    assert_eq!(rejected, ["Pod shop/batch-0", "Pod shop/pending-0"]);
    assert_eq!(dump.pods.len(), 1, "{:?}", dump.pods);
    let stand_in = &dump.pods[0];
    assert_eq!(stand_in.metadata.name.as_deref(), Some("batch-0"));
    assert_eq!(
        stand_in.spec.as_ref().and_then(|s| s.node_name.as_deref()),
        Some("node-a")
    );
    assert!(crate::objects::do_not_disrupt_holds(stand_in, i64::MAX));
    let (snapshot, _) = crate::convert::take_snapshot_isolating(&mut dump.clone());
    assert_eq!(snapshot.pods.len(), 1);
    assert!(snapshot.pods[0].requests.cpu == 0 && snapshot.pods[0].do_not_disrupt.holds(0));
}
