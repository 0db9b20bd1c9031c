use super::*;

#[test]
fn a_node_class_becomes_a_kwok_node_class_that_joins_as_late_as_the_simulated_kubelets() {
    let class = json!({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": "bottlerocket", "labels": {"a": "b"}}, "spec": {"amiFamily": "Bottlerocket"}});
    let kwok = translate(&class);
    assert_eq!(kwok["kind"], KWOK_CLASS);
    assert_eq!(kwok["metadata"]["name"], "bottlerocket");
    assert_eq!(kwok["metadata"]["labels"]["a"], "b");
    assert_eq!(
        kwok["spec"]["nodeRegistrationDelay"],
        format!("{}s", JOIN_AFTER.num_seconds())
    );
    let pool = json!({"kind": "NodePool", "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "bottlerocket"},
            "requirements": []}}}});
    let reference = &translate(&pool)["spec"]["template"]["spec"]["nodeClassRef"];
    assert_eq!(
        *reference,
        json!({"group": KWOK_GROUP, "kind": KWOK_CLASS, "name": "bottlerocket"})
    );
    let deployment = json!({"kind": "Deployment", "metadata": {"name": "x"}});
    assert_eq!(translate(&deployment), deployment);
}
