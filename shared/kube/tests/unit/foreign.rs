use super::*;

fn auto_mode_dump() -> ClusterDump {
    crate::dump::parse(
        r#"
apiVersion: v1
kind: List
items:
- apiVersion: karpenter.sh/v1
  kind: NodePool
  metadata: {name: general-purpose}
  spec:
    template:
      spec:
        nodeClassRef: {group: eks.amazonaws.com, kind: NodeClass, name: default}
        requirements: []
- apiVersion: karpenter.sh/v1
  kind: NodeClaim
  metadata:
    name: general-purpose-abc
    labels: {karpenter.sh/nodepool: general-purpose}
  spec:
    nodeClassRef: {group: eks.amazonaws.com, kind: NodeClass, name: default}
    requirements: []
  status: {providerID: "aws:///us-east-1a/i-0aaa", nodeName: node-a}
- apiVersion: karpenter.sh/v1
  kind: NodeClaim
  metadata:
    name: default-xyz
    labels: {karpenter.sh/nodepool: default}
  spec:
    nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
    requirements: []
  status: {providerID: "aws:///us-east-1a/i-0bbb", nodeName: node-b}
"#,
        "auto-mode",
    )
    .expect("parses")
}

fn node(name: &str, labels: &[(&str, &str)]) -> Node {
    let mut n = Node::default();
    n.metadata.name = Some(name.into());
    let labels = labels.iter().map(|(k, v)| (k.to_string(), v.to_string()));
    n.metadata.labels = Some(labels.collect());
    n
}

/// Another provider's NodeClaims leave the read; its nodes and instances are known as its own,
/// by NodeClaim, by pool, by provider ID, or by Auto Mode's label; Fleetwright's are not.
#[test]
fn another_providers_objects_are_left_out_and_known_by_name() {
    let dump = auto_mode_dump();
    let names: Vec<_> = (dump.nodeclaims.iter())
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    assert_eq!(names, ["default-xyz"]);
    let f = &dump.foreign;
    assert!(f.has_node(&node("node-a", &[])));
    assert!(f.has_node(&node("x", &[("karpenter.sh/nodepool", "general-purpose")])));
    assert!(f.has_node(&node("y", &[("eks.amazonaws.com/compute-type", "auto")])));
    assert!(!f.has_node(&node("node-b", &[("karpenter.sh/nodepool", "default")])));
    let tags = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    assert!(f.has_instance("i-0aaa", &tags(&[])));
    assert!(f.has_instance(
        "i-0ccc",
        &tags(&[("karpenter.sh/nodeclaim", "general-purpose-abc")])
    ));
    assert!(f.has_instance(
        "i-0ddd",
        &tags(&[("karpenter.sh/nodepool", "general-purpose")])
    ));
    assert!(!f.has_instance("i-0bbb", &tags(&[("karpenter.sh/nodepool", "default")])));
}
