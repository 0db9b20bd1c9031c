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

/// A NodePool whose EC2NodeClass is missing, beside one whose class's status lists subnets in
/// one zone only.
const UNREADY_AND_ZONED: &str = r#"
apiVersion: v1
kind: List
items:
- apiVersion: karpenter.sh/v1
  kind: NodePool
  metadata: {name: cheap}
  spec:
    weight: 90
    template:
      spec:
        nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: missing}
        requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [t4g.small]}
- apiVersion: karpenter.sh/v1
  kind: NodePool
  metadata: {name: zoned}
  spec:
    template:
      spec:
        nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: zoned}
        requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
- apiVersion: karpenter.k8s.aws/v1
  kind: EC2NodeClass
  metadata: {name: zoned}
  spec:
    role: node-role
    amiSelectorTerms: [{alias: al2023@latest}]
    subnetSelectorTerms: [{tags: {karpenter.sh/discovery: dev}}]
    securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: dev}}]
  status:
    subnets: [{id: subnet-1, zone: us-east-1b, zoneID: use1-az2}]
- apiVersion: v1
  kind: Pod
  metadata: {name: web, namespace: default}
  spec:
    containers:
    - name: app
      image: app
      resources:
        requests: {cpu: "1", memory: 1Gi}
"#;

#[test]
fn a_pool_without_its_class_launches_nothing_and_a_class_plans_only_in_its_subnets_zones() {
    let dump = write_temp("explain-unready.yaml", UNREADY_AND_ZONED);
    let args = ["--cluster", &dump, "--pod", "web", "--output", "json"];
    let out = fleetwright(&[&["explain"][..], &args].concat());
    assert_eq!(
        out.status.code(),
        Some(1),
        "a missing EC2NodeClass is bad input"
    );
    let e: Value = serde_json::from_slice(&out.stdout).unwrap();
    let pools = e["nodepools"].as_array().unwrap();
    let verdict = |name: &str| pools.iter().find(|p| p["nodepool"] == name).unwrap();
    assert_eq!(verdict("cheap")["compatible"], false);
    let reason = verdict("cheap")["reason"].as_str().unwrap();
    assert!(
        reason.contains("its EC2NodeClass \"missing\" is missing"),
        "{reason}"
    );
    let placement = e["placement"].as_str().unwrap();
    assert!(placement.contains("nodepool \"zoned\""), "{placement}");
    for q in e["cheapest"].as_array().unwrap() {
        assert_eq!(q["zone"], "us-east-1b", "{q}");
    }

    let plan = fleetwright(&["plan", "--cluster", &dump, "--output", "json"]);
    assert_eq!(plan.status.code(), Some(1));
    let p: Value = serde_json::from_slice(&plan.stdout).unwrap();
    let claims = p["nodeclaims"].as_array().unwrap();
    assert_eq!(claims.len(), 1);
    assert_eq!(claims[0]["nodepool"], "zoned");
    assert_eq!(claims[0]["zones"], serde_json::json!(["us-east-1b"]));
}

/// A Deployment's name given for its pods is answered with the name of a pod that stands for it.
#[test]
fn a_workload_name_given_for_a_pod_names_a_pod_that_stands_for_it() {
    let out = fleetwright(&[
        "explain",
        "--cluster",
        &common::fixture("deployments-only.yaml"),
        "--pod",
        "inflate",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "Deployment default/inflate stands for 2 pending pod(s): give --pod default/inflate-"
        ),
        "{err}"
    );
}

/// `explain` takes the instant to explain at as `plan` does, and names a bad one.
#[test]
fn explain_takes_the_instant_as_plan_does() {
    let dump = write_temp("explain-now.yaml", CLUSTER);
    let at = |now: &str| {
        let args = [
            "explain",
            "--cluster",
            &dump,
            "--pod",
            "shop/sg-pod",
            "--now",
            now,
        ];
        fleetwright(&args)
    };
    success(&at("2026-11-25T12:00:00Z"));
    let bad = at("noon");
    assert_eq!(bad.status.code(), Some(1), "{bad:?}");
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--now \"noon\" is not RFC 3339"));
}
