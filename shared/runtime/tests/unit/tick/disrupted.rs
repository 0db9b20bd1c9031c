use super::*;

const CLUSTER: &str = r#"
apiVersion: v1
kind: List
items:
- apiVersion: karpenter.sh/v1
  kind: NodePool
  metadata: {name: web}
  spec:
    template:
      spec:
        nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
        requirements: []
    disruption: {consolidationPolicy: WhenEmpty}
- apiVersion: karpenter.sh/v1
  kind: NodeClaim
  metadata:
    name: web-a
    labels: {karpenter.sh/nodepool: web, karpenter.sh/capacity-type: spot}
  spec:
    nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
    requirements: []
    terminationGracePeriod: 1h
  status: {providerID: "aws:///us-east-1a/i-0aaa", nodeName: node-a, imageID: ami-1}
- apiVersion: v1
  kind: Pod
  metadata: {name: app, namespace: default}
  spec: {nodeName: node-a, containers: [{name: c, image: x}]}
- apiVersion: v1
  kind: Pod
  metadata:
    name: agent
    namespace: kube-system
    ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: agent, uid: u1}]
  spec: {nodeName: node-a, containers: [{name: c, image: x}]}
- apiVersion: v1
  kind: Pod
  metadata:
    name: static
    namespace: kube-system
    annotations: {kubernetes.io/config.mirror: abc}
  spec: {nodeName: node-a, containers: [{name: c, image: x}]}
- apiVersion: v1
  kind: Pod
  metadata: {name: job, namespace: default}
  spec: {nodeName: node-a, containers: [{name: c, image: x}]}
  status: {phase: Succeeded}
"#;

fn dump() -> ClusterDump {
    fleetwright_kube::dump::parse(CLUSTER, "disrupted").expect("parses")
}

/// Karpenter's labels: the pool and capacity type from the NodeClaim, the policy only for a
/// consolidation, the mode from its `terminationGracePeriod`, and only the pods that must move.
#[test]
fn a_disrupted_nodeclaim_carries_karpenters_labels_and_its_pods_that_move() {
    let dump = dump();
    let claim = &dump.nodeclaims[0];
    let empty = of(&dump, claim, "empty");
    assert_eq!(
        empty,
        Disrupted {
            nodepool: "web".into(),
            capacity_type: "spot".into(),
            consolidation_policy: "when_empty".into(),
            termination_mode: EVENTUAL,
            pods: 1,
            image_id: "ami-1".into(),
        }
    );
    assert_eq!(of(&dump, claim, "drifted").consolidation_policy, "");
    let mut m = Metrics::default();
    record(&mut m, "empty", &empty);
    record(&mut m, "drifted", &of(&dump, claim, "drifted"));
    let total = |name, labels: &[(&str, &str)]| m.sum_by(name, labels);
    assert_eq!(total(metrics::NODECLAIMS_DISRUPTED, &[]), 2.0);
    assert_eq!(
        total(
            metrics::NODECLAIMS_DISRUPTED,
            &[("reason", "empty"), ("consolidation_policy", "when_empty")]
        ),
        1.0
    );
    assert_eq!(
        total(
            metrics::PODS_DISRUPTION_INITIATED,
            &[("nodepool", "web"), ("termination_mode", "eventual")]
        ),
        2.0
    );
}

#[test]
fn the_termination_mode_follows_the_grace_period_and_a_repair_its_bound() {
    let mut claim = dump().nodeclaims[0].clone();
    let now: DateTime<Utc> = "2026-11-25T12:00:00Z".parse().unwrap();
    assert_eq!(termination_mode(&claim), EVENTUAL);
    claim.spec.termination_grace_period = Some("0s".into());
    assert_eq!(termination_mode(&claim), FORCEFUL);
    claim.spec.termination_grace_period = None;
    assert_eq!(termination_mode(&claim), GRACEFUL);
    assert_eq!(repair_mode(&claim, Some(now), now), FORCEFUL);
    let later = now + chrono::Duration::minutes(10);
    assert_eq!(repair_mode(&claim, Some(later), now), EVENTUAL);
    assert_eq!(repair_mode(&claim, None, now), GRACEFUL);
}

#[test]
fn a_pool_without_a_policy_consolidates_when_empty_or_underutilized() {
    let mut dump = dump();
    dump.nodepools[0].spec.disruption = None;
    let claim = dump.nodeclaims[0].clone();
    assert_eq!(
        of(&dump, &claim, "underutilized").consolidation_policy,
        "when_empty_or_underutilized"
    );
}
