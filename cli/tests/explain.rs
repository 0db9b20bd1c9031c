//! `fleetwright explain` through the built binary: a pod that requests
//! `vpc.amazonaws.com/pod-eni` against a pool of types without it, next to a pool that fits.

mod common;

use common::{fleetwright, success, write_temp};
use serde_json::Value;

const CLUSTER: &str = r#"
apiVersion: v1
kind: List
items:
- apiVersion: karpenter.sh/v1
  kind: NodePool
  metadata: {name: burstable}
  spec:
    weight: 50
    template:
      spec:
        nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
        requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [t3.large, t3.xlarge]}
- apiVersion: karpenter.sh/v1
  kind: NodePool
  metadata: {name: general}
  spec:
    template:
      spec:
        nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
        requirements:
        - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m]}
        - {key: karpenter.k8s.aws/instance-generation, operator: Gt, values: ["5"]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
- apiVersion: karpenter.k8s.aws/v1
  kind: EC2NodeClass
  metadata: {name: default}
  spec:
    role: node-role
    amiSelectorTerms: [{alias: al2023@latest}]
    subnetSelectorTerms: [{tags: {karpenter.sh/discovery: dev}}]
    securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: dev}}]
- apiVersion: v1
  kind: Pod
  metadata: {name: sg-pod, namespace: shop}
  spec:
    containers:
    - name: app
      image: app
      resources:
        requests: {cpu: 500m, memory: 1Gi, vpc.amazonaws.com/pod-eni: "1"}
        limits: {vpc.amazonaws.com/pod-eni: "1"}
  status:
    phase: Pending
    conditions: [{type: PodScheduled, status: "False", reason: Unschedulable}]
"#;

#[test]
fn a_pod_eni_pod_is_refused_by_the_pool_without_it_and_placed_by_the_other() {
    let dump = write_temp("explain.yaml", CLUSTER);
    let out = fleetwright(&[
        "explain",
        "--cluster",
        &dump,
        "--pod",
        "shop/sg-pod",
        "--output",
        "json",
    ]);
    let e: Value = serde_json::from_str(&success(&out)).unwrap();
    let pools = e["nodepools"].as_array().unwrap();
    let verdict = |name: &str| pools.iter().find(|p| p["nodepool"] == name).unwrap();

    let burstable = verdict("burstable");
    assert_eq!(burstable["compatible"], false);
    let reason = burstable["reason"].as_str().unwrap();
    assert!(reason.contains("vpc.amazonaws.com/pod-eni=1"), "{reason}");
    assert!(reason.contains("t3.large, t3.xlarge"), "{reason}");
    assert!(reason.contains("provide none"), "{reason}");

    let general = verdict("general");
    assert_eq!(general["compatible"], true);
    let cheapest = e["cheapest"].as_array().unwrap();
    assert_eq!(cheapest.len(), 3);
    let prices: Vec<f64> = cheapest
        .iter()
        .map(|q| q["price"].as_f64().unwrap())
        .collect();
    assert!(prices.windows(2).all(|w| w[0] <= w[1]), "{prices:?}");
    for q in cheapest {
        let t = q["instanceType"].as_str().unwrap();
        assert!(t.starts_with('c') || t.starts_with('m'), "{t}");
        assert_eq!(q["capacityType"], "on-demand");
    }
    let placement = e["placement"].as_str().unwrap();
    assert!(placement.contains("nodepool \"general\""), "{placement}");

    let table = success(&fleetwright(&[
        "explain",
        "--cluster",
        &dump,
        "--pod",
        "shop/sg-pod",
    ]));
    assert!(table.contains("burstable"), "{table}");
    assert!(
        table.contains("cheapest instance types that would fit:\n  1. "),
        "{table}"
    );
    assert!(table.contains("scheduler: a new NodeClaim"), "{table}");
}

#[test]
fn an_unknown_pod_fails_naming_it() {
    let dump = write_temp("explain-missing.yaml", CLUSTER);
    let out = fleetwright(&["explain", "--cluster", &dump, "--pod", "shop/nope"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("shop/nope"));
}
