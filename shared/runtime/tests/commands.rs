//! Disruption commands that cannot finish give up instead of leaving their nodes cordoned for
//! good: a replacement that never initializes, and a drain that makes no progress with no grace
//! period to end it. Decided purely over a cluster dump.

use chrono::{DateTime, Duration, Utc};
use fleetwright_runtime::tick::in_progress::{continue_commands, DRAIN_STALL, REPLACEMENT_TTL};
use fleetwright_runtime::tick::Action;

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .unwrap()
        .with_timezone(&Utc)
}

/// A candidate under `annotations`, its tainted node with one pod, and (when `replacement`)
/// a replacement created at 12:00 that registered and is not initialized.
fn dump(annotations: &str, replacement: bool) -> fleetwright_kube::dump::ClusterDump {
    let replacement = if replacement {
        r#"
- apiVersion: karpenter.sh/v1
  kind: NodeClaim
  metadata: {name: web-r1, creationTimestamp: "2026-11-23T12:00:00Z"}
  spec:
    nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
    requirements: []
  status:
    providerID: "aws:///us-east-1a/i-0bbb"
    nodeName: node-r1
    conditions: [{type: Registered, status: "True", reason: Registered, lastTransitionTime: "2026-11-23T12:01:00Z", message: ""}]
"#
    } else {
        ""
    };
    let text = format!(
        r#"
apiVersion: v1
kind: List
items:
- apiVersion: karpenter.sh/v1
  kind: NodeClaim
  metadata:
    name: web-old
    annotations: {annotations}
  spec:
    nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
    requirements: []
  status: {{providerID: "aws:///us-east-1a/i-0aaa", nodeName: node-old}}
- apiVersion: v1
  kind: Node
  metadata: {{name: node-old}}
  spec:
    providerID: "aws:///us-east-1a/i-0aaa"
    taints: [{{key: karpenter.sh/disrupted, effect: NoSchedule}}]
- apiVersion: v1
  kind: Pod
  metadata:
    name: guarded
    namespace: shop
    ownerReferences: [{{apiVersion: apps/v1, kind: ReplicaSet, name: web, uid: rs, controller: true}}]
  spec:
    nodeName: node-old
    containers: [{{name: c, image: nginx}}]
  status: {{phase: Running}}
{replacement}"#
    );
    fleetwright_kube::dump::parse(&text, "commands").unwrap()
}

fn abandoned(actions: &[Action]) -> Option<&str> {
    actions.iter().find_map(|a| match a {
        Action::Abandon { why, .. } => Some(why.as_str()),
        _ => None,
    })
}

#[test]
fn a_replacement_that_never_initializes_abandons_its_command() {
    let cluster = dump(
        r#"{"fleetwright.io/disruption": "underutilized/replace/web-r1"}"#,
        true,
    );
    let created = at("2026-11-23T12:00:00Z");
    let waiting = continue_commands(
        &cluster,
        &cluster.nodeclaims,
        &[],
        created + Duration::minutes(5),
    );
    assert!(
        matches!(waiting.as_slice(), [Action::AwaitReplacement { .. }]),
        "{waiting:?}"
    );
    let late = continue_commands(
        &cluster,
        &cluster.nodeclaims,
        &[],
        created + REPLACEMENT_TTL,
    );
    let why = abandoned(&late).unwrap_or_else(|| panic!("{late:?}"));
    assert!(why.contains("did not initialize"), "{why}");
}

/// A replacement that registered and has not initialized within the scheduler's initialization
/// grace is given up on then, not only at the TTL: the scheduler no longer counts on it, and
/// the candidates are not kept cordoned for it. One that has not registered waits for the TTL.
#[test]
fn a_replacement_registered_past_the_initialization_grace_abandons_its_command() {
    use fleetwright_core::scheduler::INITIALIZATION_GRACE;
    let mut cluster = dump(
        r#"{"fleetwright.io/disruption": "underutilized/replace/web-r1"}"#,
        true,
    );
    let registered = at("2026-11-23T12:01:00Z");
    let grace = Duration::seconds(INITIALIZATION_GRACE);
    let decide = |cluster: &fleetwright_kube::dump::ClusterDump, now| {
        continue_commands(cluster, &cluster.nodeclaims, &[], now)
    };
    let before = decide(&cluster, registered + grace - Duration::seconds(1));
    assert!(abandoned(&before).is_none(), "{before:?}");
    let after = decide(&cluster, registered + grace);
    let why = abandoned(&after).unwrap_or_else(|| panic!("{after:?}"));
    assert!(why.contains("registered and did not initialize"), "{why}");
    for claim in &mut cluster.nodeclaims {
        if let Some(status) = claim.status.as_mut() {
            status.conditions.clear();
        }
    }
    let unregistered = decide(&cluster, registered + grace);
    assert!(
        matches!(unregistered.as_slice(), [Action::AwaitReplacement { .. }]),
        "{unregistered:?}"
    );
}

#[test]
fn a_drain_that_makes_no_progress_abandons_its_command() {
    let started = at("2026-11-23T12:00:00Z");
    let fresh = dump(
        r#"{"fleetwright.io/disruption": "underutilized/delete", "fleetwright.io/drain-started": "2026-11-23T12:00:00Z", "fleetwright.io/drain-progress": "1@2026-11-23T12:00:00Z"}"#,
        false,
    );
    let early = continue_commands(
        &fresh,
        &fresh.nodeclaims,
        &[],
        started + Duration::minutes(3),
    );
    assert!(abandoned(&early).is_none(), "{early:?}");
    assert!(
        early
            .iter()
            .any(|a| matches!(a, Action::DrainDisrupted { .. })),
        "{early:?}"
    );
    let stalled = continue_commands(&fresh, &fresh.nodeclaims, &[], started + DRAIN_STALL);
    let why = abandoned(&stalled).unwrap_or_else(|| panic!("{stalled:?}"));
    assert!(why.contains("no progress"), "{why}");

    // A drain whose pods left changed since the mark is making progress.
    let moving = dump(
        r#"{"fleetwright.io/disruption": "underutilized/delete", "fleetwright.io/drain-started": "2026-11-23T12:00:00Z", "fleetwright.io/drain-progress": "3@2026-11-23T12:00:00Z"}"#,
        false,
    );
    let later = continue_commands(&moving, &moving.nodeclaims, &[], started + DRAIN_STALL);
    assert!(abandoned(&later).is_none(), "{later:?}");
}
