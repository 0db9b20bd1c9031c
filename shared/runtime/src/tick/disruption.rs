//! The tick's disruption phases, decided purely: they turn the core's disruption decisions
//! ([`fleetwright_core::disruption::plan`]) into [`Action`]s, one command at a time, across
//! ticks. The executor ([`super::execute`]) applies them.
//!
//! 1. A decision is confirmed before it is acted on. The first tick that decides a command
//!    stores it in the state ConfigMap; a tick at least [`CONFIRM_AFTER`] later that decides the
//!    same command carries it out.
//! 2. Carrying out a command starts by tainting the candidates `karpenter.sh/disrupted:NoSchedule`
//!    and annotating their NodeClaims with [`DISRUPTION_ANNOTATION`]. A replacement NodeClaim is
//!    created too; the tick's launch step launches it.
//! 3. Later ticks wait until the replacement is initialized, then drain the candidates through the
//!    Eviction API (PodDisruptionBudgets are respected, and refused pods are retried on the next
//!    tick). When no evictable pod is left, they delete the NodeClaims. The deletion step then
//!    terminates the instances and removes the finalizers.
//! 4. If the replacement disappears before it initializes (a failed launch, say), the command is
//!    abandoned: the taints come off, the annotations go, and an Event says why.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use fleetwright_core::disruption::{self, Command, Disruption, DisruptionPlan};
use fleetwright_core::labels::TAINT_DISRUPTED;
use fleetwright_core::{Catalog, Snapshot};
use fleetwright_kube::crds::NodeClaim;
use fleetwright_kube::dump::ClusterDump;
use fleetwright_kube::objects;
use k8s_openapi::api::core::v1::{Node, Pod};
use serde::{Deserialize, Serialize};

use super::action::Action;
use super::decide::{create, has_condition, name_of as name};

/// On a candidate's NodeClaim: `<reason>/<command>[/<replacement NodeClaim>]`.
pub const DISRUPTION_ANNOTATION: &str = "fleetwright.io/disruption";
/// The state ConfigMap key of a decision waiting for confirmation.
pub const PENDING_KEY: &str = "pendingDisruption";
/// On a candidate's NodeClaim: when its drain started (RFC 3339). Its `terminationGracePeriod`
/// counts from here; at the deadline the pods still left are deleted.
pub const DRAIN_STARTED_ANNOTATION: &str = "fleetwright.io/drain-started";
/// The state ConfigMap key of the nodes last reported as blocked, with their reasons, so each
/// reason is evented once and not every minute.
pub const BLOCKED_KEY: &str = "blockedDisruptions";
/// How long a decision waits before it is confirmed and carried out.
pub const CONFIRM_AFTER: Duration = Duration::seconds(15);

/// A decision waiting for confirmation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingDisruption {
    /// What the command is: `<reason>/<command>:<nodes>`.
    pub key: String,
    pub decided_at: DateTime<Utc>,
}

fn command_key(d: &Disruption) -> String {
    format!(
        "{}/{}:{}",
        d.reason.as_str(),
        command_name(d.command),
        d.nodes.join(",")
    )
}

/// `Disrupting Node: Underutilized/Replace, savings $0.2100/h, replacement [m5.large, …]`.
fn taken_message(d: &Disruption) -> String {
    let mut message = format!(
        "Disrupting Node: {}/{}, savings ${:.4}/h",
        d.reason.as_str(),
        command_name(d.command),
        d.savings
    );
    if let Some(r) = &d.replacement {
        message.push_str(&format!(", replacement [{}]", r.instance_types.join(", ")));
    }
    message
}

/// When a drain that started at `started` must end: its `terminationGracePeriod` later (None
/// when the NodeClaim has none, or an unreadable one: then the drain waits for evictions).
fn grace_deadline(claim: &NodeClaim, started: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let text = claim.spec.termination_grace_period.as_deref()?;
    let seconds = fleetwright_kube::convert::duration_seconds(text).ok()??;
    Some(started + Duration::seconds(seconds))
}

/// The NodeClaims of the named nodes.
fn claims_of<'a>(dump: &'a ClusterDump, nodes: &[String]) -> Vec<&'a NodeClaim> {
    dump.nodeclaims
        .iter()
        .filter(|c| {
            c.status
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .is_some_and(|n| nodes.iter().any(|x| x == n))
        })
        .collect()
}

fn command_name(c: Command) -> &'static str {
    match c {
        Command::Delete => "delete",
        Command::Replace => "replace",
    }
}

/// The reason of the disruption command a NodeClaim is annotated with (`underutilized`, ...).
pub(crate) fn reason_of(claim: &NodeClaim) -> Option<&str> {
    annotation(claim).and_then(|a| a.split('/').next())
}

fn annotation(claim: &NodeClaim) -> Option<&str> {
    claim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DISRUPTION_ANNOTATION))
        .map(String::as_str)
}

pub(crate) fn uncordoned(node: &Node) -> Option<Node> {
    let taints = node.spec.as_ref()?.taints.as_ref()?;
    if !taints.iter().any(|t| t.key == TAINT_DISRUPTED) {
        return None;
    }
    let mut out = node.clone();
    if let Some(spec) = out.spec.as_mut() {
        spec.taints = Some(
            taints
                .iter()
                .filter(|t| t.key != TAINT_DISRUPTED)
                .cloned()
                .collect(),
        );
    }
    Some(out)
}

pub(crate) fn with_annotation(value: Option<String>) -> impl Fn(&NodeClaim) -> Option<NodeClaim> {
    move |claim: &NodeClaim| {
        let mut out = claim.clone();
        let annotations = out
            .metadata
            .annotations
            .get_or_insert_with(Default::default);
        match &value {
            Some(v) if annotations.get(DISRUPTION_ANNOTATION) != Some(v) => {
                annotations.insert(DISRUPTION_ANNOTATION.into(), v.clone());
            }
            None if annotations.contains_key(DISRUPTION_ANNOTATION) => {
                annotations.remove(DISRUPTION_ANNOTATION);
            }
            _ => return None,
        }
        Some(out)
    }
}

/// Every command in progress, one step on: wait for its replacement, abandon it if the
/// replacement is gone, or drain its candidates and delete the drained ones. `initialized`
/// names the NodeClaims this tick has just initialized.
pub fn continue_commands(
    dump: &ClusterDump,
    claims: &[NodeClaim],
    initialized: &[String],
    now: DateTime<Utc>,
) -> Vec<Action> {
    let mut commands: BTreeMap<&str, Vec<&NodeClaim>> = BTreeMap::new();
    for claim in claims
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
    {
        if let Some(value) = annotation(claim) {
            commands.entry(value).or_default().push(claim);
        }
    }
    commands
        .into_iter()
        .flat_map(|(value, in_progress)| {
            continue_command(dump, claims, value, &in_progress, initialized, now)
        })
        .collect()
}

fn continue_command(
    dump: &ClusterDump,
    claims: &[NodeClaim],
    value: &str,
    in_progress: &[&NodeClaim],
    initialized: &[String],
    now: DateTime<Utc>,
) -> Vec<Action> {
    let mut actions = Vec::new();
    if let Some(replacement) = value.split('/').nth(2) {
        match claims
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(replacement))
        {
            None => return vec![abandon(dump, in_progress, replacement)],
            Some(c)
                if !has_condition(c, "Initialized")
                    && !initialized.iter().any(|n| n == replacement) =>
            {
                actions.extend(untainted(dump, in_progress));
                actions.push(Action::AwaitReplacement {
                    replacement: replacement.to_string(),
                });
                return actions;
            }
            Some(_) => {}
        }
    }
    actions.extend(untainted(dump, in_progress));
    actions.extend(drain_and_delete(dump, in_progress, now));
    actions
}

/// A [`Action::Cordon`] for each candidate whose node lacks the disrupted taint: a command is
/// recorded on the NodeClaims before their nodes are tainted, so a tick cut off between the
/// two leaves the taint to the next.
fn untainted(dump: &ClusterDump, in_progress: &[&NodeClaim]) -> Vec<Action> {
    in_progress
        .iter()
        .filter_map(|c| dump.node_of(c))
        .filter(|node| {
            !node
                .spec
                .as_ref()
                .and_then(|s| s.taints.as_ref())
                .is_some_and(|t| t.iter().any(|t| t.key == TAINT_DISRUPTED))
        })
        .map(|node| Action::Cordon {
            node: node.metadata.name.clone().unwrap_or_default(),
        })
        .collect()
}

fn abandon(dump: &ClusterDump, in_progress: &[&NodeClaim], replacement: &str) -> Action {
    Action::Abandon {
        replacement: replacement.to_string(),
        candidates: in_progress
            .iter()
            .map(|c| {
                let node = dump.node_of(c).and_then(|n| n.metadata.name.clone());
                (name(c), c.metadata.uid.clone(), node)
            })
            .collect(),
    }
}

/// Drains the candidates' nodes; their NodeClaims go once nothing evictable is left (or their
/// `terminationGracePeriod` is over). A candidate with no node is deleted at once.
fn drain_and_delete(
    dump: &ClusterDump,
    in_progress: &[&NodeClaim],
    now: DateTime<Utc>,
) -> Vec<Action> {
    in_progress
        .iter()
        .map(|claim| {
            let Some(node) = dump.node_of(claim) else {
                return Action::DeleteNodeClaim {
                    nodeclaim: name(claim),
                };
            };
            let node_name = node.metadata.name.clone().unwrap_or_default();
            let pods: Vec<Pod> = dump
                .pods_on(&node_name)
                .into_iter()
                .filter(|p| !objects::skipped_by_drain(p))
                .collect();
            let recorded = drain_started(claim);
            let started = recorded.unwrap_or(now);
            Action::DrainDisrupted {
                nodeclaim: name(claim),
                node: node_name,
                pods,
                mark_started: recorded.is_none().then_some(now),
                grace_over: grace_deadline(claim, started).is_some_and(|d| now >= d),
            }
        })
        .collect()
}

/// When the claim's drain started, if it has.
fn drain_started(claim: &NodeClaim) -> Option<DateTime<Utc>> {
    claim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DRAIN_STARTED_ANNOTATION))
        .and_then(|v| DateTime::parse_from_rfc3339(v).ok())
        .map(|t| t.with_timezone(&Utc))
}

/// What the next disruption is, decided over what was read: the plan, the blocked reasons
/// already evented (`said`), and the decision waiting for confirmation (`pending`).
#[derive(Debug, Default)]
pub struct Decided {
    /// The command decided (`<reason>/<command>:<nodes>`), if any.
    pub key: Option<String>,
    pub actions: Vec<Action>,
}

/// Reports the blocked candidates, then decides the first command: remembered for
/// confirmation, or (confirmed) started, with the next one decided behind it.
pub fn decide(
    dump: &ClusterDump,
    snapshot: &mut Snapshot,
    catalog: &Catalog,
    plan: DisruptionPlan,
    said: &BTreeMap<String, String>,
    pending: Option<&PendingDisruption>,
    now: DateTime<Utc>,
) -> Decided {
    let mut actions = report_blocked(dump, &plan.blocked, said);
    let Some(first) = plan.disruptions.into_iter().next() else {
        actions.push(Action::SavePending { pending: None });
        return Decided { key: None, actions };
    };
    let key = command_key(&first);
    let confirmed = pending.is_some_and(|p| p.key == key && now - p.decided_at >= CONFIRM_AFTER);
    if !confirmed {
        let decided_at = match pending {
            Some(p) if p.key == key => p.decided_at,
            _ => now,
        };
        actions.push(Action::ConfirmLater {
            command: key.clone(),
            savings: first.savings,
            next: false,
        });
        actions.push(Action::SavePending {
            pending: Some(PendingDisruption {
                key: key.clone(),
                decided_at,
            }),
        });
        return Decided {
            key: Some(key),
            actions,
        };
    }
    actions.extend(carry_out(dump, &first, now));
    actions.extend(decide_next(snapshot, catalog, &first, now));
    Decided {
        key: Some(key),
        actions,
    }
}

/// Logs every candidate left alone, and events it once per reason (`said`: the reasons last
/// reported).
fn report_blocked(
    dump: &ClusterDump,
    blocked: &[disruption::Blocked],
    said: &BTreeMap<String, String>,
) -> Vec<Action> {
    let mut actions: Vec<Action> = blocked
        .iter()
        .map(|b| Action::Blocked {
            node: b.node.clone(),
            reason: b.reason.clone(),
        })
        .collect();
    let current: BTreeMap<String, String> = blocked
        .iter()
        .map(|b| (b.node.clone(), b.reason.clone()))
        .collect();
    for (node, reason) in &current {
        if said.get(node) != Some(reason) {
            actions.push(node_event(
                dump,
                node,
                "DisruptionBlocked",
                format!("Cannot disrupt Node: {reason}"),
            ));
        }
    }
    if said != &current {
        actions.push(Action::SaveBlocked { blocked: current });
    }
    actions
}

fn node_event(dump: &ClusterDump, node: &str, reason: &str, message: String) -> Action {
    let uid = dump
        .nodes
        .iter()
        .find(|n| n.metadata.name.as_deref() == Some(node))
        .and_then(|n| n.metadata.uid.clone());
    Action::NodeEvent {
        node: node.to_string(),
        uid,
        reason: reason.to_string(),
        message,
    }
}

/// A confirmed command: forget the pending decision, event the nodes, start the command, and
/// with no replacement to wait for, drain at once (as Karpenter's would).
fn carry_out(dump: &ClusterDump, first: &Disruption, now: DateTime<Utc>) -> Vec<Action> {
    let mut actions = vec![
        Action::Disrupting {
            command: command_name(first.command),
            reason: first.reason.as_str(),
            savings: first.savings,
            replacement: first.replacement.as_ref().map(|r| r.instance_types.clone()),
            nodes: first.nodes.clone(),
        },
        Action::SavePending { pending: None },
    ];
    let message = taken_message(first);
    for node in &first.nodes {
        actions.push(node_event(
            dump,
            node,
            "DisruptionTerminating",
            message.clone(),
        ));
    }
    actions.extend(start(dump, first));
    if first.replacement.is_none() {
        let claims = claims_of(dump, &first.nodes);
        actions.extend(drain_and_delete(dump, &claims, now));
    }
    actions
}

/// Creates the replacement, then taints and annotates the candidates. A replacement that
/// cannot be built (its NodePool is gone) starts nothing.
fn start(dump: &ClusterDump, command: &Disruption) -> Option<Action> {
    let replacement = match &command.replacement {
        Some(r) => Some(Box::new(create(dump, &r.nodeclaim)?)),
        None => None,
    };
    let candidates = command
        .nodes
        .iter()
        .filter_map(|node| {
            let claim = dump.nodeclaims.iter().find(|c| {
                c.status.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node.as_str())
            })?;
            Some((node.clone(), name(claim)))
        })
        .collect();
    Some(Action::StartDisruption {
        command: format!(
            "{}/{}",
            command.reason.as_str(),
            command_name(command.command)
        ),
        replacement,
        candidates,
    })
}

/// With `started` under way, decides the command after it now, so that it can be confirmed on
/// the next tick instead of decided there.
fn decide_next(
    snapshot: &mut Snapshot,
    catalog: &Catalog,
    started: &Disruption,
    now: DateTime<Utc>,
) -> Vec<Action> {
    for node in snapshot
        .nodes
        .iter_mut()
        .filter(|n| started.nodes.contains(&n.name))
    {
        node.taints.push(fleetwright_core::model::Taint {
            key: TAINT_DISRUPTED.into(),
            value: String::new(),
            effect: fleetwright_core::model::TaintEffect::NoSchedule,
        });
    }
    let plan = disruption::plan(snapshot, catalog, now.timestamp());
    let Some(next) = plan.disruptions.first() else {
        return Vec::new();
    };
    let key = command_key(next);
    vec![
        Action::ConfirmLater {
            command: key.clone(),
            savings: next.savings,
            next: true,
        },
        Action::SavePending {
            pending: Some(PendingDisruption {
                key,
                decided_at: now,
            }),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeSpec, Taint};

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
        let dump = fleetwright_kube::dump::parse(
            r#"
apiVersion: v1
kind: List
items:
- apiVersion: karpenter.sh/v1
  kind: NodeClaim
  metadata:
    name: default-old
    annotations: {fleetwright.io/disruption: underutilized/delete}
  spec:
    nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
    requirements: []
  status: {providerID: "aws:///us-east-1a/i-0aaa", nodeName: node-old}
- apiVersion: v1
  kind: Node
  metadata: {name: node-old}
  spec: {providerID: "aws:///us-east-1a/i-0aaa"}
"#,
            "cut-off",
        )
        .unwrap();
        let now = Utc::now();
        let actions = continue_commands(&dump, &dump.nodeclaims, &[], now);
        assert!(
            matches!(actions.first(), Some(Action::Cordon { node }) if node == "node-old"),
            "{actions:?}"
        );
        assert!(
            actions
                .iter()
                .any(|a| matches!(a, Action::DrainDisrupted { nodeclaim, .. } if nodeclaim == "default-old")),
            "{actions:?}"
        );
    }
}
