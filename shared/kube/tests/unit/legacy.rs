//! Legacy conversion against Karpenter's v1alpha5/v1alpha1 and v1beta1 examples.

use super::node_classes::selector_terms;
use super::*;

#[test]
fn durations_use_the_largest_whole_unit() {
    assert_eq!(duration(2_592_000), "720h");
    assert_eq!(duration(60), "1m");
    assert_eq!(duration(30), "30s");
    assert_eq!(duration(0), "0s");
}

#[test]
fn selectors_become_terms() {
    assert_eq!(
        selector_terms(&json!({"karpenter.sh/discovery": "dev"})),
        json!([{"tags": {"karpenter.sh/discovery": "dev"}}])
    );
    assert_eq!(
        selector_terms(&json!({"aws-ids": "subnet-1, subnet-2"})),
        json!([{"id": "subnet-1"}, {"id": "subnet-2"}])
    );
    assert_eq!(
        selector_terms(&json!({"aws::name": "my-ami-*", "aws::owners": "self,amazon"})),
        json!([{"name": "my-ami-*", "owner": "self"}, {"name": "my-ami-*", "owner": "amazon"}])
    );
}

#[test]
fn v1beta1_pools_move_expiry_rename_the_policy_and_carry_kubelet_to_the_class() {
    let objects = vec![
        json!({"apiVersion": "karpenter.k8s.aws/v1beta1", "kind": "EC2NodeClass",
               "metadata": {"name": "default"},
               "spec": {"amiFamily": "AL2023", "role": "node-role",
                        "subnetSelectorTerms": [{"tags": {"a": "b"}}],
                        "securityGroupSelectorTerms": [{"tags": {"a": "b"}}]}}),
        json!({"apiVersion": "karpenter.sh/v1beta1", "kind": "NodePool",
               "metadata": {"name": "default"},
               "spec": {"template": {"spec": {
                            "nodeClassRef": {"apiVersion": "karpenter.k8s.aws/v1beta1", "kind": "EC2NodeClass", "name": "default"},
                            "requirements": [], "kubelet": {"maxPods": 20}}},
                        "disruption": {"consolidationPolicy": "WhenUnderutilized", "expireAfter": "168h"}}}),
    ];
    let out = convert(&objects);
    assert!(out.notes.is_empty(), "{:?}", out.notes);
    let pool = &out.nodepools[0];
    assert_eq!(pool["apiVersion"], "karpenter.sh/v1");
    assert_eq!(pool["spec"]["template"]["spec"]["expireAfter"], "168h");
    assert_eq!(
        pool["spec"]["template"]["spec"]["nodeClassRef"],
        json!({"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"})
    );
    assert!(pool["spec"]["template"]["spec"].get("kubelet").is_none());
    assert_eq!(
        pool["spec"]["disruption"],
        json!({"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"})
    );
    let class = &out.nodeclasses[0];
    assert_eq!(class["spec"]["kubelet"], json!({"maxPods": 20}));
    assert_eq!(
        class["spec"]["amiSelectorTerms"],
        json!([{"alias": "al2023@latest"}])
    );
}

#[test]
fn unknown_legacy_fields_are_reported_with_their_path() {
    let objects = vec![
        json!({"apiVersion": "karpenter.sh/v1alpha5", "kind": "Provisioner",
        "metadata": {"name": "p"},
        "spec": {"providerRef": {"name": "x"}, "futureField": 1,
                 "limits": {"resources": {"cpu": "10"}, "other": 2},
                 "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
                                  {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}]}}),
    ];
    let out = convert(&objects);
    let fields: Vec<&str> = out.notes.iter().map(|n| n.field.as_str()).collect();
    assert_eq!(fields, ["spec.limits.other", "spec.futureField"]);
    assert!(out.notes[0]
        .to_string()
        .starts_with("Provisioner p: spec.limits.other: unknown key"));
}

/// A misspelt key of a v1beta1 NodePool or EC2NodeClass is carried into its v1 form, where no
/// field reads it: it is noted as unknown, so `plan` warns and `--strict` refuses, as for a v1
/// object.
#[test]
fn a_misspelt_key_of_a_v1beta1_object_is_noted() {
    let pool = json!({"apiVersion": "karpenter.sh/v1beta1", "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {"template": {"spec": {"nodeClassRef": {"apiVersion": "karpenter.k8s.aws/v1beta1",
                "kind": "EC2NodeClass", "name": "default"},
            "requirments": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}]}},
            "limit": {"cpu": "20"},
            "disruption": {"consolidationPolicy": "WhenUnderutilized", "expireAfter": "168h"}}});
    let class = json!({"apiVersion": "karpenter.k8s.aws/v1beta1", "kind": "EC2NodeClass",
        "metadata": {"name": "default"},
        "spec": {"amiFamily": "AL2023", "role": "R", "subnetSelectorTerm": [{"tags": {"a": "b"}}],
            "subnetSelectorTerms": [{"tags": {"a": "b"}}],
            "securityGroupSelectorTerms": [{"tags": {"a": "b"}}]}});
    let converted = convert(&[pool, class]);
    let unknown: Vec<String> = (converted.notes.iter())
        .filter(|n| n.kind == NoteKind::Unknown)
        .map(|n| format!("{} {}", n.object, n.field))
        .collect();
    assert_eq!(
        unknown,
        [
            "EC2NodeClass default spec.subnetSelectorTerm",
            "NodePool default spec.limit",
            "NodePool default spec.template.spec.requirments",
        ]
    );
}
