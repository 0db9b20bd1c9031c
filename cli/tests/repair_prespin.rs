//! Repair launches a node's replacements before the node goes, as Karpenter v1.15's repair
//! pre-spins them, seen through `plan --actions --node-repair` (the tick's own state machine):
//! the command that starts it, the wait, the repair once the replacement is ready, and the
//! repair given up when the node recovers first.

mod common;

use common::{fleetwright, write_temp};
use serde_json::Value;

const NOW: &str = "2026-11-25T12:00:00Z";

/// A pool with one node whose disk has been bad (StorageReady False) for 40 minutes, holding a
/// pod no other node has room for. `annotation` is the command its NodeClaim carries, and
/// `replacement` the replacement NodeClaim (`initialized` or not) the dump holds, if any.
fn cluster(annotation: Option<&str>, replacement: Option<bool>, storage: &str) -> String {
    let mut out = format!(
        r#"apiVersion: v1
kind: List
items:
- apiVersion: karpenter.k8s.aws/v1
  kind: EC2NodeClass
  metadata: {{name: default}}
  spec:
    role: node-role
    amiSelectorTerms: [{{alias: al2023@latest}}]
    subnetSelectorTerms: [{{tags: {{karpenter.sh/discovery: dev}}}}]
    securityGroupSelectorTerms: [{{tags: {{karpenter.sh/discovery: dev}}}}]
- apiVersion: karpenter.sh/v1
  kind: NodePool
  metadata: {{name: web}}
  spec:
    disruption: {{consolidationPolicy: WhenEmpty, consolidateAfter: 1h, budgets: [{{nodes: "1"}}]}}
    template:
      spec:
        nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
        requirements: [{{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}]
- apiVersion: karpenter.sh/v1
  kind: NodeClaim
  metadata:
    name: web-1
    creationTimestamp: "2026-11-25T08:00:00Z"
    labels: {{karpenter.sh/nodepool: web, node.kubernetes.io/instance-type: m5.large, karpenter.sh/capacity-type: on-demand, topology.kubernetes.io/zone: us-east-1a}}
    annotations: {{{annotations}}}
  spec:
    nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
    requirements: []
  status:
    providerID: aws:///us-east-1a/i-0w000000000000001
    nodeName: web-node-1
    capacity: {{cpu: "2", memory: 8Gi, pods: "29"}}
    allocatable: {{cpu: 1930m, memory: 7Gi, pods: "29"}}
    conditions: [{{type: Launched, status: "True"}}, {{type: Registered, status: "True"}}, {{type: Initialized, status: "True"}}]
- apiVersion: v1
  kind: Node
  metadata: {{name: web-node-1, creationTimestamp: "2026-11-25T08:00:00Z", labels: {{karpenter.sh/nodepool: web, karpenter.sh/registered: "true", karpenter.sh/initialized: "true", node.kubernetes.io/instance-type: m5.large, karpenter.sh/capacity-type: on-demand, topology.kubernetes.io/zone: us-east-1a, kubernetes.io/arch: amd64, kubernetes.io/os: linux, kubernetes.io/hostname: web-node-1}}}}
  spec: {{providerID: aws:///us-east-1a/i-0w000000000000001}}
  status:
    allocatable: {{cpu: 1930m, memory: 7Gi, pods: "29"}}
    capacity: {{cpu: "2", memory: 8Gi, pods: "29"}}
    conditions: [{{type: Ready, status: "True", lastTransitionTime: "2026-11-25T08:00:00Z"}}, {{type: StorageReady, status: "{storage}", lastTransitionTime: "2026-11-25T11:20:00Z"}}]
- apiVersion: v1
  kind: Pod
  metadata: {{name: app, namespace: default, ownerReferences: [{{apiVersion: apps/v1, kind: ReplicaSet, name: app-1, uid: u1, controller: true}}]}}
  spec:
    nodeName: web-node-1
    containers: [{{name: app, image: app, resources: {{requests: {{cpu: "1", memory: 1Gi}}}}}}]
  status: {{phase: Running}}
"#,
        annotations = annotation
            .map(|a| format!("fleetwright.io/disruption: {a}"))
            .unwrap_or_default(),
    );
    if let Some(initialized) = replacement {
        let status = if initialized { "True" } else { "False" };
        out.push_str(&format!(
            r#"- apiVersion: karpenter.sh/v1
  kind: NodeClaim
  metadata:
    name: web-r
    creationTimestamp: "2026-11-25T11:58:00Z"
    labels: {{karpenter.sh/nodepool: web, node.kubernetes.io/instance-type: m5.large, karpenter.sh/capacity-type: on-demand, topology.kubernetes.io/zone: us-east-1a}}
  spec:
    nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
    requirements: []
  status:
    providerID: aws:///us-east-1a/i-0w000000000000002
    conditions: [{{type: Launched, status: "True"}}, {{type: Initialized, status: "{status}"}}]
"#
        ));
    }
    out
}

/// The tick's actions on a cluster, by kind.
fn actions(name: &str, text: &str) -> Vec<Value> {
    let out = fleetwright(&[
        "plan",
        "--actions",
        "--node-repair",
        "--cluster",
        &write_temp(name, text),
        "--now",
        NOW,
        "--output",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    plan["actions"].as_array().unwrap().clone()
}

fn of<'a>(actions: &'a [Value], kind: &str) -> Vec<&'a Value> {
    actions.iter().filter(|a| a["action"] == kind).collect()
}

#[test]
fn a_repair_launches_the_replacement_its_pods_need_before_the_node_goes() {
    let actions = actions("prespin-start.yaml", &cluster(None, None, "False"));
    assert!(of(&actions, "repair").is_empty(), "{actions:#?}");
    let started = of(&actions, "startDisruption");
    assert_eq!(started.len(), 1, "{actions:#?}");
    assert_eq!(started[0]["command"], "unhealthy/replace");
    assert_eq!(started[0]["candidates"][0][0], "web-node-1");
    let replacements = started[0]["replacements"].as_array().unwrap();
    assert_eq!(replacements.len(), 1, "{actions:#?}");
    assert_eq!(replacements[0]["nodepool"], "web");
    // Launched in the same tick, not a tick later.
    assert_eq!(of(&actions, "launch").len(), 1, "{actions:#?}");
}

#[test]
fn a_prespun_repair_waits_for_its_replacement_then_repairs_with_the_policy_bound() {
    let command = Some("unhealthy/replace/web-r");
    let waiting = actions("prespin-wait.yaml", &cluster(command, Some(false), "False"));
    assert!(of(&waiting, "repair").is_empty(), "{waiting:#?}");
    assert_eq!(
        of(&waiting, "awaitReplacement")[0]["replacement"],
        "web-r",
        "{waiting:#?}"
    );
    // No drift-style drain of the node while it waits: repair carries its own command. The
    // node lacks the command's taint (a tick cut off before it was written): it gets it.
    assert!(of(&waiting, "drainDisrupted").is_empty(), "{waiting:#?}");
    assert_eq!(
        of(&waiting, "cordon")[0]["node"],
        "web-node-1",
        "{waiting:#?}"
    );

    let ready = actions("prespin-ready.yaml", &cluster(command, Some(true), "False"));
    let repaired = of(&ready, "repair");
    assert_eq!(repaired.len(), 1, "{ready:#?}");
    assert_eq!(repaired[0]["nodeclaim"], "web-1");
    // StorageReady's policy bounds the drain to 10 minutes.
    assert_eq!(repaired[0]["terminateAt"], "2026-11-25T12:10:00Z");
}

#[test]
fn a_replacement_that_is_gone_does_not_hold_the_repair_and_a_recovered_node_keeps_running() {
    let command = Some("unhealthy/replace/web-r");
    let gone = actions("prespin-gone.yaml", &cluster(command, None, "False"));
    assert_eq!(of(&gone, "repair").len(), 1, "{gone:#?}");

    let healthy = actions(
        "prespin-healthy.yaml",
        &cluster(command, Some(false), "True"),
    );
    assert!(of(&healthy, "repair").is_empty(), "{healthy:#?}");
    let abandoned = of(&healthy, "abandon");
    assert_eq!(abandoned.len(), 1, "{healthy:#?}");
    assert_eq!(abandoned[0]["why"], "the node is healthy again");
}
