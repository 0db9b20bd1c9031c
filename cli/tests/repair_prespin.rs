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

/// The node's `Ready` condition set to `status` since 11:20.
fn not_ready(text: &str, status: &str) -> String {
    let out = text.replace(
        r#"{type: Ready, status: "True", lastTransitionTime: "2026-11-25T08:00:00Z"}"#,
        &format!(
            r#"{{type: Ready, status: "{status}", lastTransitionTime: "2026-11-25T11:20:00Z"}}"#
        ),
    );
    assert_ne!(out, text);
    out
}

#[test]
fn a_gone_replacement_restarts_a_ready_nodes_repair_and_repairs_one_that_runs_nothing() {
    let command = Some("unhealthy/replace/web-r");
    // The node runs its pods (Ready): they are not taken away before a new place is ready.
    let gone = actions("prespin-gone.yaml", &cluster(command, None, "False"));
    assert!(of(&gone, "repair").is_empty(), "{gone:#?}");
    assert_eq!(
        of(&gone, "abandon")[0]["why"],
        "the replacement is gone before it initialized"
    );
    // A node whose kubelet is gone runs nothing: it is repaired without the replacement.
    let dead = not_ready(&cluster(command, None, "False"), "Unknown");
    let dead = actions("prespin-gone-dead.yaml", &dead);
    assert_eq!(of(&dead, "repair").len(), 1, "{dead:#?}");
}

#[test]
fn a_recovered_node_keeps_running_and_its_unready_replacement_is_deleted() {
    let command = Some("unhealthy/replace/web-r");
    let healthy = actions(
        "prespin-healthy.yaml",
        &cluster(command, Some(false), "True"),
    );
    assert!(of(&healthy, "repair").is_empty(), "{healthy:#?}");
    let abandoned = of(&healthy, "abandon");
    assert_eq!(abandoned.len(), 1, "{healthy:#?}");
    assert_eq!(abandoned[0]["why"], "the node is healthy again");
    assert_eq!(of(&healthy, "deleteNodeClaim")[0]["nodeclaim"], "web-r");
    // The replacement goes before the command does: a tick cut off between the two leaves a
    // command whose replacement is gone, which the next tick abandons, never a replacement
    // that nothing names.
    let at = |kind: &str| healthy.iter().position(|a| a["action"] == kind).unwrap();
    assert!(at("deleteNodeClaim") < at("abandon"), "{healthy:#?}");

    // A condition that changes status (Ready False, then Unknown) restarts its toleration; the
    // node is no healthier, and its repair goes on once the replacement is ready.
    let flipped = not_ready(&cluster(command, Some(true), "True"), "Unknown").replace(
        r#"status: "Unknown", lastTransitionTime: "2026-11-25T11:20:00Z""#,
        r#"status: "Unknown", lastTransitionTime: "2026-11-25T11:59:00Z""#,
    );
    let flipped = actions("prespin-flipped.yaml", &flipped);
    assert_eq!(of(&flipped, "repair").len(), 1, "{flipped:#?}");
}

/// A NodePool at its limits has no room for a replacement: a node that runs its pods waits,
/// and says why; one that runs nothing is repaired, and its pods planned once it is gone.
#[test]
fn a_pool_at_its_limits_holds_a_ready_nodes_repair_and_not_a_dead_ones() {
    let limited = cluster(None, None, "False").replace(
        "    disruption: {consolidationPolicy",
        "    limits: {cpu: 2}\n    disruption: {consolidationPolicy",
    );
    let held = actions("prespin-limited.yaml", &limited);
    assert!(of(&held, "repair").is_empty(), "{held:#?}");
    assert!(of(&held, "startDisruption").is_empty(), "{held:#?}");
    let blocked = of(&held, "blocked");
    assert!(
        blocked[0]["reason"]
            .as_str()
            .unwrap()
            .starts_with("repair waits: its pods cannot all be placed first"),
        "{held:#?}"
    );
    let dead = actions("prespin-limited-dead.yaml", &not_ready(&limited, "Unknown"));
    assert_eq!(of(&dead, "repair").len(), 1, "{dead:#?}");
}

/// Two repairs in one tick never count on the same room: the first takes it and is repaired
/// at once, the second launches its own replacement.
#[test]
fn two_repairs_in_one_tick_do_not_share_the_same_room() {
    let text = cluster(None, None, "False");
    let start = text
        .find("- apiVersion: karpenter.sh/v1\n  kind: NodeClaim")
        .unwrap();
    let end = text.find("- apiVersion: v1\n  kind: Pod").unwrap();
    let pod = &text[end..];
    let node = |n: u32, sick: bool| {
        let block = text[start..end]
            .replace("web-1", &format!("web-{n}"))
            .replace("web-node-1", &format!("web-node-{n}"))
            .replace("i-0w000000000000001", &format!("i-0w0000000000000{n:02}"));
        match sick {
            true => block,
            false => block.replace(
                r#"StorageReady, status: "False""#,
                r#"StorageReady, status: "True""#,
            ),
        }
    };
    // A second broken node like the first, a healthy empty one with room for one's pods, and
    // seven full ones (two of ten unhealthy keeps within the 20 % rule).
    let moved = |name: &str, node: u32, cpu: &str| {
        pod.replace("name: app,", &format!("name: {name},"))
            .replace(
                "nodeName: web-node-1",
                &format!("nodeName: web-node-{node}"),
            )
            .replace(r#"cpu: "1""#, &format!(r#"cpu: "{cpu}""#))
    };
    let full: String = (4..=10)
        .map(|n| node(n, false) + &moved(&format!("full-{n}"), n, "1500m"))
        .collect();
    let two = format!(
        "{}{}{}{full}{}{}",
        &text[..end],
        node(2, true),
        node(3, false),
        pod,
        moved("app2", 2, "1")
    )
    .replace(
        r#"budgets: [{nodes: "1"}]"#,
        r#"budgets: [{nodes: "100%"}]"#,
    );
    let actions = actions("prespin-two.yaml", &two);
    assert_eq!(of(&actions, "repair").len(), 1, "{actions:#?}");
    assert_eq!(of(&actions, "startDisruption").len(), 1, "{actions:#?}");
}

/// A `Ready` node whose replacements did not initialize is not repaired again at once: the
/// failure is recorded on its NodeClaim, and the next repair waits 10 minutes, doubling with
/// each failure in a row. A node that is not `Ready` runs nothing and never waits.
#[test]
fn a_ready_nodes_repair_whose_replacements_failed_backs_off() {
    // A replacement that did not initialize in 10 minutes is a failure of the repair; one that
    // is gone (deleted after insufficient capacity, say) says nothing about the next.
    let late = cluster(Some("unhealthy/replace/web-r"), Some(false), "False").replace(
        "creationTimestamp: \"2026-11-25T11:58:00Z\"",
        "creationTimestamp: \"2026-11-25T11:40:00Z\"",
    );
    let late = actions("backoff-late.yaml", &late);
    assert_eq!(of(&late, "abandon").len(), 1, "{late:#?}");
    let recorded = of(&late, "recordRepairFailure");
    assert_eq!(recorded.len(), 1, "{late:#?}");
    assert_eq!(recorded[0]["nodeclaim"], "web-1");
    assert_eq!(recorded[0]["mark"], "1@2026-11-25T12:00:00Z");
    let gone = actions(
        "backoff-gone.yaml",
        &cluster(Some("unhealthy/replace/web-r"), None, "False"),
    );
    assert!(of(&gone, "recordRepairFailure").is_empty(), "{gone:#?}");

    let marked = |mark: &str| {
        cluster(None, None, "False").replacen(
            "annotations: {}",
            &format!("annotations: {{fleetwright.io/repair-failed: \"{mark}\"}}"),
            1,
        )
    };
    let started = |name: &str, text: &str| of(&actions(name, text), "startDisruption").len();
    // The first failure five minutes ago: 10 minutes' backoff, so it waits, and says why.
    let waiting = actions("backoff-wait.yaml", &marked("1@2026-11-25T11:55:00Z"));
    assert!(of(&waiting, "startDisruption").is_empty(), "{waiting:#?}");
    let blocked = of(&waiting, "blocked");
    assert!(
        blocked.iter().any(|b| b["reason"]
            .as_str()
            .unwrap()
            .contains("did not initialize; it tries again at 2026-11-25T12:05:00Z")),
        "{waiting:#?}"
    );
    // Fifteen minutes after the first failure it tries again; after the second, it waits 20.
    assert_eq!(
        started("backoff-over.yaml", &marked("1@2026-11-25T11:45:00Z")),
        1
    );
    assert_eq!(
        started("backoff-second.yaml", &marked("2@2026-11-25T11:45:00Z")),
        0
    );
    // A record a day old is forgotten.
    assert_eq!(
        started("backoff-old.yaml", &marked("5@2026-11-24T11:00:00Z")),
        1
    );
    // A node that runs nothing is repaired whatever its record.
    let dead = not_ready(&marked("1@2026-11-25T11:59:00Z"), "Unknown");
    let dead = actions("backoff-dead.yaml", &dead);
    assert!(
        !of(&dead, "startDisruption").is_empty() || !of(&dead, "repair").is_empty(),
        "{dead:#?}"
    );
}
