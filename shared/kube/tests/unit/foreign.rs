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

fn pool(name: &str, class_ref: &str) -> String {
    format!(
        "- apiVersion: karpenter.sh/v1\n  kind: NodePool\n  metadata: {{name: {name}}}\n  spec:\n    template:\n      spec:\n        nodeClassRef: {class_ref}\n        requirements: []\n"
    )
}

/// A class reference in EC2NodeClass's group (or one a letter or two off), in Karpenter's own
/// group, or to the kind EC2NodeClass is a typo in a pool meant for Fleetwright: it stays in
/// the read, and its conversion names the field. Only a reference to another kind in another
/// group is another provider's, even one whose kind looks like ours (GCP's GCENodeClass).
#[test]
fn a_class_reference_near_ours_is_a_typo_not_another_providers() {
    let items = [
        pool(
            "auto",
            "{group: eks.amazonaws.com, kind: NodeClass, name: default}",
        ),
        pool(
            "kind-typo",
            "{group: karpenter.k8s.aws, kind: NodeClass, name: default}",
        ),
        pool(
            "group-typo",
            "{group: karpenter.sh, kind: EC2NodeClass, name: default}",
        ),
        pool(
            "core-group",
            "{group: karpenter.sh, kind: NodeClass, name: default}",
        ),
        pool(
            "versioned",
            "{group: karpenter.k8s.aws/v1, kind: EC2NodeClass, name: default}",
        ),
        pool(
            "gcp",
            "{group: karpenter.k8s.gcp, kind: GCENodeClass, name: default}",
        ),
        pool(
            "mixed",
            "{group: eks.amazonaws.com, kind: EC2NodeClass, name: default}",
        ),
    ];
    let yaml = format!("apiVersion: v1\nkind: List\nitems:\n{}", items.concat());
    let mut dump = crate::dump::parse(&yaml, "typos").expect("parses");
    let foreign: Vec<&str> = dump.foreign.pools.iter().map(String::as_str).collect();
    assert_eq!(foreign, ["auto", "gcp"]);
    let (snapshot, rejected) = crate::convert::take_snapshot_isolating(&mut dump);
    let planned: Vec<&str> = (snapshot.nodepools.iter())
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(planned, ["versioned"]);
    let named: Vec<String> = rejected
        .iter()
        .map(|r| format!("{}: {}", r.object(), r.error))
        .collect();
    for pool in ["kind-typo", "group-typo", "core-group", "mixed"] {
        let line = named.iter().find(|l| l.contains(pool));
        let line = line.unwrap_or_else(|| panic!("{pool} not named in {named:?}"));
        assert!(line.contains("nodeClassRef"), "{line}");
    }
}

/// An Auto Mode node whose NodeClaim (or Node) is being deleted is no room for a plan (read as
/// cordoned): consolidation must not move pods onto a node that is about to go. Its pods are not
/// planned ahead, as its own provider replaces it, and no command of Fleetwright's waits on them.
#[test]
fn room_on_another_providers_deleting_node_does_not_count() {
    let mut dump = crate::dump::parse(
        r#"
apiVersion: v1
kind: List
items:
- apiVersion: karpenter.sh/v1
  kind: NodeClaim
  metadata:
    name: general-purpose-abc
    labels: {karpenter.sh/nodepool: general-purpose}
    deletionTimestamp: "2026-01-01T00:00:00Z"
    finalizers: [karpenter.sh/termination]
  spec:
    nodeClassRef: {group: eks.amazonaws.com, kind: NodeClass, name: default}
    requirements: []
  status: {providerID: "aws:///us-east-1a/i-0aaa", nodeName: node-a}
- apiVersion: v1
  kind: Node
  metadata:
    name: node-a
    labels: {karpenter.sh/nodepool: general-purpose, eks.amazonaws.com/compute-type: auto}
  spec: {providerID: "aws:///us-east-1a/i-0aaa"}
  status:
    allocatable: {cpu: "4", memory: 16Gi, pods: "58"}
    conditions: [{type: Ready, status: "True"}]
- apiVersion: v1
  kind: Node
  metadata:
    name: node-b
    labels: {karpenter.sh/nodepool: general-purpose, eks.amazonaws.com/compute-type: auto}
  spec: {providerID: "aws:///us-east-1a/i-0bbb"}
  status:
    allocatable: {cpu: "4", memory: 16Gi, pods: "58"}
    conditions: [{type: Ready, status: "True"}]
- apiVersion: v1
  kind: Node
  metadata:
    name: node-c
    labels: {karpenter.sh/nodepool: general-purpose, eks.amazonaws.com/compute-type: auto}
    deletionTimestamp: "2026-01-01T00:00:00Z"
    finalizers: [eks.amazonaws.com/termination]
  spec: {providerID: "aws:///us-east-1a/i-0ccc"}
  status:
    allocatable: {cpu: "4", memory: 16Gi, pods: "58"}
    conditions: [{type: Ready, status: "True"}]
"#,
        "auto-mode-deleting",
    )
    .expect("parses");
    let (snapshot, rejected) = crate::convert::take_snapshot_isolating(&mut dump);
    assert!(rejected.is_empty(), "{rejected:?}");
    let cordoned: Vec<&str> = (snapshot.nodes.iter())
        .filter(|n| n.unschedulable)
        .map(|n| n.name.as_str())
        .collect();
    assert_eq!(cordoned, ["node-a", "node-c"]);
    assert!(snapshot.nodes.iter().all(|n| !n.deleting));
    // Their pods move for no decision of Fleetwright's: no command waits on them.
    let leaving = fleetwright_core::scheduler::moving::leaving_nodes(&snapshot);
    assert!(leaving.is_empty(), "{leaving:?}");
    let draining = fleetwright_core::scheduler::moving::draining_nodes(&snapshot);
    assert!(draining.is_empty(), "{draining:?}");
}
