use super::*;
use crate::tick::in_progress::{
    annotation, continue_commands, drain_started, uncordoned, with_annotation,
};
use fleetwright_core::labels::TAINT_DISRUPTED;
use fleetwright_crds::NodeClaim;
use k8s_openapi::api::core::v1::{Node, NodeSpec, Taint};

#[test]
fn uncordoning_removes_only_the_disrupted_taint() {
    let taint = |key: &str| Taint {
        key: key.into(),
        effect: "NoSchedule".into(),
        ..Default::default()
    };
    let node = Node {
        spec: Some(NodeSpec {
            taints: Some(vec![taint(TAINT_DISRUPTED), taint("team")]),
            ..Default::default()
        }),
        ..Default::default()
    };
    let out = uncordoned(&node).unwrap();
    let keys: Vec<String> = out
        .spec
        .unwrap()
        .taints
        .unwrap()
        .into_iter()
        .map(|t| t.key)
        .collect();
    assert_eq!(keys, ["team"]);
    assert!(uncordoned(&Node::default()).is_none());
}

/// An abandoned command takes its drain's start with it: a later command on the node must
/// not find its grace period already over.
#[test]
fn abandoning_a_command_forgets_when_its_drain_started() {
    let mut claim = NodeClaim::new("c", Default::default());
    claim.metadata.annotations = Some(
        [
            (
                DISRUPTION_ANNOTATION.to_string(),
                "drifted/replace/r".to_string(),
            ),
            (
                DRAIN_STARTED_ANNOTATION.to_string(),
                "2026-11-01T00:00:00Z".to_string(),
            ),
        ]
        .into(),
    );
    let cleared = with_annotation(None)(&claim).unwrap();
    assert_eq!(drain_started(&cleared), None);
    assert_eq!(annotation(&cleared), None);
    let mut stale = NodeClaim::new("c", Default::default());
    stale.metadata.annotations = Some(
        [(
            DRAIN_STARTED_ANNOTATION.to_string(),
            "2026-11-01T00:00:00Z".to_string(),
        )]
        .into(),
    );
    let next = with_annotation(Some("underutilized/delete".into()))(&stale).unwrap();
    assert_eq!(drain_started(&next), None);
}

#[test]
fn annotations_are_set_once_and_removed() {
    let claim = NodeClaim::new("c", Default::default());
    let set = with_annotation(Some("empty/delete".into()))(&claim).unwrap();
    assert_eq!(annotation(&set), Some("empty/delete"));
    assert!(with_annotation(Some("empty/delete".into()))(&set).is_none());
    let cleared = with_annotation(None)(&set).unwrap();
    assert_eq!(annotation(&cleared), None);
}

/// A tick cut off between recording a command on a NodeClaim and tainting its node: the next
/// tick taints the node before it goes on, so no command runs on a schedulable node and no
/// node stays tainted without a command.
#[test]
fn a_command_whose_node_was_left_untainted_is_tainted_first() {
    let dump = delete_command("spec: {providerID: \"aws:///us-east-1a/i-0aaa\"}", "");
    let now = Utc::now();
    let actions = continue_commands(&dump, &dump.nodeclaims, &[], now);
    assert!(
        matches!(actions.first(), Some(Action::Cordon { node }) if node == "node-old"),
        "{actions:?}"
    );
    assert!(
        actions.iter().any(
            |a| matches!(a, Action::DrainDisrupted { nodeclaim, .. } if nodeclaim == "default-old")
        ),
        "{actions:?}"
    );
}

/// An N→M command (two replacements) drains only once both are initialized, waits while
/// one is not, and is abandoned when one is gone.
#[test]
fn a_command_with_two_replacements_waits_for_both_and_is_abandoned_without_one() {
    let dump = |second: &str| {
        fleetwright_kube::dump::parse(
                &format!(
                    r#"
apiVersion: v1
kind: List
items:
- apiVersion: karpenter.sh/v1
  kind: NodeClaim
  metadata:
    name: default-old
    annotations: {{fleetwright.io/disruption: "underutilized/replace/default-r1,default-r2"}}
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
- apiVersion: karpenter.sh/v1
  kind: NodeClaim
  metadata: {{name: default-r1}}
  spec:
    nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
    requirements: []
  status:
    conditions: [{{type: Initialized, status: "True", reason: Initialized, lastTransitionTime: "2026-11-24T10:00:00Z", message: ""}}]
{second}
"#
                ),
                "two replacements",
            )
            .unwrap()
    };
    let now = Utc::now();
    let r2_starting = "- apiVersion: karpenter.sh/v1\n  kind: NodeClaim\n  metadata: {name: default-r2}\n  spec:\n    nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n    requirements: []\n";
    let waiting = dump(r2_starting);
    let actions = continue_commands(&waiting, &waiting.nodeclaims, &[], now);
    assert!(
        matches!(actions.as_slice(), [Action::AwaitReplacement { replacement }] if replacement == "default-r2"),
        "{actions:?}"
    );
    let actions = continue_commands(&waiting, &waiting.nodeclaims, &["default-r2".into()], now);
    assert!(
        actions.iter().any(
            |a| matches!(a, Action::DrainDisrupted { nodeclaim, .. } if nodeclaim == "default-old")
        ),
        "{actions:?}"
    );
    let gone = dump("");
    let actions = continue_commands(&gone, &gone.nodeclaims, &[], now);
    assert!(
        matches!(actions.as_slice(), [Action::Abandon { replacement, .. }] if replacement == "default-r1,default-r2"),
        "{actions:?}"
    );
}

/// A replacement created for a command that no candidate carries (the tick was cut off between
/// creating it and recording the command) is deleted before it launches; one its candidate's
/// command names launches, and one whose candidate is gone is ordinary capacity.
#[test]
fn a_replacement_no_command_names_is_deleted_before_it_launches() {
    let claim = |name: &str, annotations: &str| {
        format!("- apiVersion: karpenter.sh/v1\n  kind: NodeClaim\n  metadata: {{name: {name}, annotations: {{{annotations}}}}}\n  spec:\n    nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}\n    requirements: []\n")
    };
    let claims = |items: &[String]| {
        let text = format!("apiVersion: v1\nkind: List\nitems:\n{}", items.join(""));
        fleetwright_kube::dump::parse(&text, "orphans")
            .unwrap()
            .nodeclaims
    };
    let replacement = |name: &str, whose: &str| {
        claim(
            name,
            &format!("fleetwright.io/replacement-for: \"{whose}\""),
        )
    };
    let launched_or_dropped = |items: &[String]| -> Vec<String> {
        crate::tick::provision::unlaunched(&claims(items))
            .iter()
            .map(|a| match a {
                Action::Launch { nodeclaim, .. } => format!("launch {nodeclaim}"),
                Action::DropReplacement { nodeclaim, .. } => format!("drop {nodeclaim}"),
                other => format!("{other:?}"),
            })
            .collect()
    };
    let commanded = claim("old", "fleetwright.io/disruption: \"drifted/replace/r1\"");
    let bare = claim("old", "");
    let out = launched_or_dropped(&[commanded.clone(), replacement("r1", "old")]);
    assert_eq!(out, ["launch old", "launch r1"]);
    let out = launched_or_dropped(&[bare.clone(), replacement("r1", "old")]);
    assert_eq!(out, ["drop r1", "launch old"]);
    // The candidate carries a later command that names other replacements.
    let other = claim("old", "fleetwright.io/disruption: \"drifted/replace/r2\"");
    let out = launched_or_dropped(&[other, replacement("r1", "old"), replacement("r2", "old")]);
    assert_eq!(out, ["drop r1", "launch old", "launch r2"]);
    let out = launched_or_dropped(&[replacement("r1", "old")]);
    assert_eq!(out, ["launch r1"]);
    let out = launched_or_dropped(&[claim("r1", "")]);
    assert_eq!(out, ["launch r1"]);
}

/// A node blocked by more than one method keeps its first reason in its Event and the saved
/// list: a drifted node whose replacement cannot be planned says so, not that it cannot be
/// consolidated.
#[test]
fn a_nodes_event_gives_its_first_blocked_reason() {
    let blocked = |reason: &str| disruption::Blocked {
        node: "n1".into(),
        reason: reason.into(),
    };
    let list = [
        blocked("Drifted: no instance type fits its pods"),
        blocked("Underutilized: no cheaper instance type fits"),
    ];
    let actions = report_blocked(&ClusterDump::default(), &list, &BTreeMap::new());
    let events: Vec<&String> = (actions.iter())
        .filter_map(|a| match a {
            Action::NodeEvent { message, .. } => Some(message),
            _ => None,
        })
        .collect();
    assert_eq!(
        events,
        ["Cannot disrupt Node: Drifted: no instance type fits its pods"]
    );
    let saved = actions.iter().find_map(|a| match a {
        Action::SaveBlocked { blocked } => Some(blocked),
        _ => None,
    });
    assert_eq!(
        saved.and_then(|b| b.get("n1")).map(String::as_str),
        Some("Drifted: no instance type fits its pods")
    );
}

/// A command's drain evicts the node's pods but one `do-not-disrupt` holds: that one is listed
/// apart (a dry run and `plan --actions` show it kept, not evicted) and the drain waits for it.
#[test]
fn a_drain_lists_its_do_not_disrupt_pods_apart() {
    let tainted = "spec:\n    providerID: \"aws:///us-east-1a/i-0aaa\"\n    taints: [{key: karpenter.sh/disrupted, effect: NoSchedule}]";
    let pods = r#"
- apiVersion: v1
  kind: Pod
  metadata: {name: web, namespace: shop}
  spec: {nodeName: node-old, containers: [{name: c, image: nginx}]}
- apiVersion: v1
  kind: Pod
  metadata:
    name: keep
    namespace: shop
    annotations: {karpenter.sh/do-not-disrupt: "true"}
  spec: {nodeName: node-old, containers: [{name: c, image: nginx}]}
"#;
    let dump = delete_command(tainted, pods);
    let actions = continue_commands(&dump, &dump.nodeclaims, &[], Utc::now());
    let drain = actions
        .iter()
        .find(|a| matches!(a, Action::DrainDisrupted { .. }))
        .map(|a| serde_json::to_value(a).unwrap());
    let drain = drain.unwrap_or_else(|| panic!("{actions:?}"));
    assert_eq!(drain["pods"], serde_json::json!(["shop/web"]));
    assert_eq!(drain["held"], serde_json::json!(["shop/keep"]));
}

/// A NodeClaim whose node an `underutilized/delete` command takes, its Node with `node_spec`
/// (`spec: …`), and `more` objects.
fn delete_command(node_spec: &str, more: &str) -> fleetwright_kube::dump::ClusterDump {
    let yaml = format!(
        r#"
apiVersion: v1
kind: List
items:
- apiVersion: karpenter.sh/v1
  kind: NodeClaim
  metadata:
    name: default-old
    annotations: {{fleetwright.io/disruption: underutilized/delete}}
  spec:
    nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
    requirements: []
  status: {{providerID: "aws:///us-east-1a/i-0aaa", nodeName: node-old}}
- apiVersion: v1
  kind: Node
  metadata: {{name: node-old}}
  {node_spec}
{more}"#
    );
    fleetwright_kube::dump::parse(&yaml, "command").unwrap()
}
