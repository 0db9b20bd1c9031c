//! The interruption decisions, tested on small dumps: every kind recognised, malformed events
//! named, and the actions each kind decides.

use super::*;

use serde_json::json;

fn event(source: &str, detail_type: &str, detail: Value) -> Result<Option<Message>, String> {
    parse(Envelope {
        id: "e-1",
        source,
        detail_type,
        detail: &detail,
    })
}

#[test]
fn every_kind_is_recognised() {
    let spot = (event(
        "aws.ec2",
        "EC2 Spot Instance Interruption Warning",
        json!({"instance-id": "i-1", "instance-action": "terminate"}),
    ))
    .unwrap()
    .unwrap();
    assert_eq!(
        (spot.kind, spot.instance_ids),
        (Kind::SpotInterruption, vec!["i-1".to_string()])
    );
    let stopping = (event(
        "aws.ec2",
        "EC2 Instance State-change Notification",
        json!({"instance-id": "i-2", "state": "stopping"}),
    ))
    .unwrap()
    .unwrap();
    assert_eq!(stopping.kind, Kind::StateChange("stopping".into()));
    assert!((event(
        "aws.ec2",
        "EC2 Instance State-change Notification",
        json!({"instance-id": "i-2", "state": "running"})
    ))
    .unwrap()
    .is_none());
    let health = (event("aws.health", "AWS Health Event", json!({"service": "EC2", "eventTypeCategory": "scheduledChange", "affectedEntities": [{"entityValue": "i-3"}, {"entityValue": "i-4"}]}))).unwrap().unwrap();
    assert_eq!(health.instance_ids, vec!["i-3", "i-4"]);
    assert!((event(
        "aws.health",
        "AWS Health Event",
        json!({"service": "RDS", "eventTypeCategory": "scheduledChange", "affectedEntities": []})
    ))
    .unwrap()
    .is_none());
    let cr = (event(
        "aws.ec2",
        "EC2 Capacity Reservation Instance Interruption Warning",
        json!({"instance-id": "i-5"}),
    ))
    .unwrap()
    .unwrap();
    assert_eq!(cr.kind, Kind::CapacityReservationInterruption);
}

#[test]
fn malformed_events_say_what_is_missing() {
    let err = (event(
        "aws.ec2",
        "EC2 Spot Instance Interruption Warning",
        json!({}),
    ))
    .unwrap_err();
    assert!(err.contains("detail.instance-id"), "{err}");
    let err = (event("aws.s3", "Object Created", json!({}))).unwrap_err();
    assert!(err.contains("unsupported event"), "{err}");
}

fn dump(cordoned: bool, deleting: bool) -> ClusterDump {
    let taints = if cordoned {
        r#"taints: [{key: karpenter.sh/disrupted, effect: NoSchedule}]"#
    } else {
        "{}"
    };
    let deletion = if deleting {
        "deletionTimestamp: \"2026-11-22T10:00:00Z\""
    } else {
        ""
    };
    let yaml = format!(
        r#"
apiVersion: v1
kind: List
items:
- apiVersion: karpenter.sh/v1
  kind: NodeClaim
  metadata:
    name: default-a
    {deletion}
    labels: {{karpenter.sh/nodepool: default, node.kubernetes.io/instance-type: m5.large, topology.kubernetes.io/zone: us-east-1a, karpenter.sh/capacity-type: spot}}
  spec:
    nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
    requirements: []
  status: {{providerID: "aws:///us-east-1a/i-1", nodeName: node-a}}
- apiVersion: v1
  kind: Node
  metadata: {{name: node-a}}
  spec:
    {spec}
- apiVersion: v1
  kind: Pod
  metadata: {{name: web, namespace: shop}}
  spec: {{nodeName: node-a, containers: [{{name: c, image: nginx}}]}}
- apiVersion: v1
  kind: Pod
  metadata:
    name: keep
    namespace: shop
    annotations: {{karpenter.sh/do-not-disrupt: "true"}}
  spec: {{nodeName: node-a, containers: [{{name: c, image: nginx}}]}}
- apiVersion: v1
  kind: Pod
  metadata:
    name: was-kept
    namespace: shop
    creationTimestamp: "2026-11-22T09:00:00Z"
    annotations: {{karpenter.sh/do-not-disrupt: "10m"}}
  spec: {{nodeName: node-a, containers: [{{name: c, image: nginx}}]}}
- apiVersion: v1
  kind: Pod
  metadata:
    name: agent
    namespace: kube-system
    ownerReferences: [{{apiVersion: apps/v1, kind: DaemonSet, name: agent, uid: d-1, controller: true}}]
  spec: {{nodeName: node-a, containers: [{{name: c, image: agent}}]}}
"#,
        spec = if cordoned {
            taints.to_string()
        } else {
            "{}".to_string()
        }
    );
    crate::dump::parse(&yaml, "test.yaml").unwrap()
}

/// An hour after the dump's pods were made.
fn now() -> Timestamp {
    "2026-11-22T10:00:00Z".parse().unwrap()
}

fn message(kind: Kind, ids: &[&str]) -> Message {
    Message {
        id: "m".into(),
        kind,
        instance_ids: ids.iter().map(|s| s.to_string()).collect(),
    }
}

#[test]
fn a_spot_warning_decides_cordon_drain_unavailable_delete_and_leaves_termination_to_the_tick() {
    let out = decide(
        &dump(false, false),
        &message(Kind::SpotInterruption, &["i-1", "i-other"]),
        RebalanceAction::Event,
        now(),
    );
    let kinds: Vec<String> = out[0]
        .actions
        .iter()
        .map(|a| {
            serde_json::to_value(a).unwrap()["action"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "recordEvent",
            "cordon",
            "drain",
            "markUnavailable",
            "deleteNodeClaim"
        ]
    );
    assert!(
        out[0].actions.contains(&Action::Drain {
            node: "node-a".into(),
            pods: vec!["shop/web".into(), "shop/was-kept".into()],
            held: vec!["shop/keep".into()],
        }),
        "DaemonSet pods are not drained, and a do-not-disrupt pod is held, not evicted, until \
         its duration is over: {:?}",
        out[0].actions
    );
    assert!(
        matches!(&out[1].actions[..], [Action::Ignore { .. }]),
        "instances of other clusters are ignored"
    );
}

#[test]
fn duplicates_and_rebalances_decide_no_disruption() {
    let again = decide(
        &dump(true, true),
        &message(Kind::SpotInterruption, &["i-1"]),
        RebalanceAction::Event,
        now(),
    );
    assert!(
        again[0].actions.iter().all(|a| matches!(
            a,
            Action::RecordEvent { .. } | Action::MarkUnavailable { .. }
        )),
        "{:?}",
        again[0].actions
    );
    let rebalance = decide(
        &dump(false, false),
        &message(Kind::RebalanceRecommendation, &["i-1"]),
        RebalanceAction::Event,
        now(),
    );
    assert!(matches!(
        &rebalance[0].actions[..],
        [Action::RecordEvent { .. }]
    ));
    let drain = decide(
        &dump(false, false),
        &message(Kind::RebalanceRecommendation, &["i-1"]),
        RebalanceAction::Drain,
        now(),
    );
    assert!(drain[0]
        .actions
        .iter()
        .any(|a| matches!(a, Action::Drain { .. })));
    assert!(
        !drain[0]
            .actions
            .iter()
            .any(|a| matches!(a, Action::MarkUnavailable { .. })),
        "only spot warnings mark offerings unavailable"
    );
}

#[test]
fn a_duplicate_decided_over_the_assumed_dump_does_nothing_new() {
    let mut dump = dump(false, false);
    let message = message(Kind::SpotInterruption, &["i-1"]);
    let first = decide(&dump, &message, RebalanceAction::Event, now());
    assume(&mut dump, &first[0], Timestamp::UNIX_EPOCH);
    let again = decide(&dump, &message, RebalanceAction::Event, now());
    assert!(
        again[0].actions.iter().all(|a| matches!(
            a,
            Action::RecordEvent { .. } | Action::MarkUnavailable { .. }
        )),
        "{:?}",
        again[0].actions
    );
}

#[test]
fn a_spot_warning_drains_a_node_a_disruption_already_tainted() {
    let out = decide(
        &dump(true, false),
        &message(Kind::SpotInterruption, &["i-1"]),
        RebalanceAction::Event,
        now(),
    );
    let actions = &out[0].actions;
    assert!(
        actions.contains(&Action::Drain {
            node: "node-a".into(),
            pods: vec!["shop/web".into(), "shop/was-kept".into()],
            held: vec!["shop/keep".into()],
        }),
        "{actions:?}"
    );
    assert!(!actions.iter().any(|a| matches!(a, Action::Cordon { .. })));
    assert!(actions.contains(&Action::DeleteNodeClaim {
        nodeclaim: "default-a".into()
    }));
}

#[test]
fn state_changes_and_health_events_delete_the_nodeclaim_as_karpenter_does() {
    for kind in [
        Kind::StateChange("stopping".into()),
        Kind::ScheduledChange,
        Kind::CapacityReservationInterruption,
    ] {
        let out = decide(
            &dump(false, false),
            &message(kind.clone(), &["i-1"]),
            RebalanceAction::Event,
            now(),
        );
        let actions = &out[0].actions;
        assert!(
            actions.iter().any(|a| matches!(a, Action::Drain { .. }))
                && actions.contains(&Action::DeleteNodeClaim {
                    nodeclaim: "default-a".into()
                }),
            "{kind:?}: {actions:?}"
        );
    }
}
