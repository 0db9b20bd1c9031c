//! The tick's disruption phases, decided purely: they turn the core's disruption decisions
//! ([`fleetwright_core::disruption::plan`]) into [`Action`]s, one command at a time, across
//! ticks. The executor ([`super::execute`]) applies them.
//!
//! 1. A decision is confirmed before it is acted on. The first tick that decides a command
//!    stores it in the state ConfigMap; a tick at least [`CONFIRM_AFTER`] later that decides the
//!    same command carries it out.
//! 2. Carrying out a command starts by tainting the candidates `karpenter.sh/disrupted:NoSchedule`
//!    and annotating their NodeClaims with [`DISRUPTION_ANNOTATION`]. The replacement NodeClaims
//!    (one, or several for an N→M consolidation) are created too; the tick's launch step
//!    launches them.
//! 3. Later ticks wait until every replacement is initialized, then drain the candidates through the
//!    Eviction API (PodDisruptionBudgets are respected, and refused pods are retried on the next
//!    tick). When no evictable pod is left, they delete the NodeClaims. The deletion step then
//!    terminates the instances and removes the finalizers.
//! 4. If a replacement disappears before it initializes (a failed launch, say), the command is
//!    abandoned: the taints come off, the annotations go, and an Event says why. Replacements
//!    that did launch are left to consolidation, as any node with room is.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use fleetwright_core::disruption::{self, Command, Disruption};
use fleetwright_core::labels::TAINT_DISRUPTED;
use fleetwright_core::scheduler::INITIALIZATION_GRACE;
use fleetwright_core::{Catalog, Snapshot};
use fleetwright_kube::crds::NodeClaim;
use fleetwright_kube::dump::ClusterDump;
use fleetwright_kube::objects;
use k8s_openapi::api::core::v1::{Node, Pod};
use serde::{Deserialize, Serialize};

use super::action::Action;
use super::decide::{create, has_condition, name_of as name};

/// On a candidate's NodeClaim: `<reason>/<command>[/<replacement NodeClaim>[,<another>...]]`.
pub const DISRUPTION_ANNOTATION: &str = fleetwright_core::labels::DISRUPTION_COMMAND;
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
/// On a candidate's NodeClaim: `<pods left>@<RFC 3339>`, when the pods its drain has left last
/// changed.
pub const DRAIN_PROGRESS_ANNOTATION: &str = "fleetwright.io/drain-progress";
/// How long a replacement may take to initialize before its command is abandoned (the
/// candidates untainted), as Karpenter's orchestration gives up on a replacement.
pub const REPLACEMENT_TTL: Duration = Duration::minutes(10);
/// How long a drain may go without a pod leaving (evictions refused or failing) before its
/// command is abandoned, when no `terminationGracePeriod` will end it: a node is never left
/// cordoned for good by a disruption that cannot finish.
pub const DRAIN_STALL: Duration = Duration::minutes(10);

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
    for r in &d.replacements {
        message.push_str(&format!(
            ", replacement [{}]",
            first_five(&r.instance_types)
        ));
    }
    message
}

/// The first five of a list and how many others, as Karpenter prints instance types.
fn first_five(types: &[String]) -> String {
    let shown = types.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
    match types.len().saturating_sub(5) {
        0 => shown,
        n => format!("{shown} and {n} other(s)"),
    }
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

/// Sets (or with None removes) the command a NodeClaim carries. A drain's start belongs to the
/// command it started under, so it goes whenever the command changes: a later command's
/// `terminationGracePeriod` must count from its own drain, not from an abandoned one.
pub(crate) fn with_annotation(value: Option<String>) -> impl Fn(&NodeClaim) -> Option<NodeClaim> {
    move |claim: &NodeClaim| {
        let mut out = claim.clone();
        let annotations = out
            .metadata
            .annotations
            .get_or_insert_with(Default::default);
        let stale_drain = annotations.remove(DRAIN_STARTED_ANNOTATION).is_some()
            | annotations.remove(DRAIN_PROGRESS_ANNOTATION).is_some();
        match &value {
            Some(v) if annotations.get(DISRUPTION_ANNOTATION) != Some(v) => {
                annotations.insert(DISRUPTION_ANNOTATION.into(), v.clone());
            }
            None if annotations.contains_key(DISRUPTION_ANNOTATION) => {
                annotations.remove(DISRUPTION_ANNOTATION);
            }
            None if stale_drain => {}
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
    if let Some(names) = value.split('/').nth(2) {
        let replacements: Vec<&str> = names.split(',').filter(|n| !n.is_empty()).collect();
        let found = |r: &str| {
            claims
                .iter()
                .find(|c| c.metadata.name.as_deref() == Some(r))
        };
        if replacements.iter().any(|r| found(r).is_none()) {
            let why = "the replacement is gone before it initialized";
            return vec![abandon(dump, in_progress, names, why)];
        }
        let waiting: Vec<&str> = replacements
            .iter()
            .copied()
            .filter(|r| {
                found(r).is_some_and(|c| {
                    !has_condition(c, "Initialized") && !initialized.iter().any(|n| n == r)
                })
            })
            .collect();
        let overdue = waiting
            .iter()
            .filter_map(|r| found(r))
            .find_map(|c| replacement_overdue(c, now));
        if let Some(why) = overdue {
            return vec![abandon(dump, in_progress, names, why)];
        }
        if !waiting.is_empty() {
            actions.extend(untainted(dump, in_progress));
            actions.push(Action::AwaitReplacement {
                replacement: waiting.join(","),
            });
            return actions;
        }
    }
    let drains = drain_and_delete(dump, in_progress, now);
    if let Some(stalled) = drains.iter().find_map(stalled) {
        let why = format!("the drain of {stalled} made no progress for 10m");
        return vec![abandon(dump, in_progress, "", &why)];
    }
    actions.extend(untainted(dump, in_progress));
    actions.extend(drains);
    actions
}

/// Why a replacement that has not initialized is given up on, if it is: it registered
/// [`INITIALIZATION_GRACE`] ago (the scheduler no longer counts on it either), or it was created
/// [`REPLACEMENT_TTL`] ago.
fn replacement_overdue(claim: &NodeClaim, now: DateTime<Utc>) -> Option<&'static str> {
    let registered = condition_since(claim, "Registered");
    if registered.is_some_and(|t| (now - t).num_seconds() >= INITIALIZATION_GRACE) {
        return Some("the replacement registered and did not initialize within 5m");
    }
    created_at(claim)
        .is_some_and(|t| now - t >= REPLACEMENT_TTL)
        .then_some("the replacement did not initialize within 10m")
}

/// When a NodeClaim's condition `type_` last turned True.
fn condition_since(claim: &NodeClaim, type_: &str) -> Option<DateTime<Utc>> {
    let c = claim
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_ && c.status == "True")?;
    let t = DateTime::parse_from_rfc3339(c.last_transition_time.as_deref()?).ok()?;
    Some(t.with_timezone(&Utc))
}

/// When a NodeClaim was created.
fn created_at(claim: &NodeClaim) -> Option<DateTime<Utc>> {
    let t = claim.metadata.creation_timestamp.as_ref()?;
    DateTime::from_timestamp(t.0.as_second(), 0)
}

/// The node of a drain that has left the same pods for [`DRAIN_STALL`] and that no grace period
/// will end.
fn stalled(action: &Action) -> Option<&str> {
    let Action::DrainDisrupted {
        node,
        progress,
        grace_over,
        stalled_since,
        ..
    } = action
    else {
        return None;
    };
    (progress.is_none() && !grace_over && stalled_since.is_some_and(|s| s >= DRAIN_STALL))
        .then_some(node.as_str())
}

/// A [`Action::Cordon`] for each candidate whose node lacks the disrupted taint: a command is
/// recorded on the NodeClaims before their nodes are tainted, so a tick cut off between the
/// two leaves the taint to the next. (A NodeClaim deleted by hand, or by a static pool's scale
/// down, is cordoned this way before its drain, as Karpenter's termination does.)
pub(crate) fn untainted(dump: &ClusterDump, in_progress: &[&NodeClaim]) -> Vec<Action> {
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

fn abandon(dump: &ClusterDump, in_progress: &[&NodeClaim], replacement: &str, why: &str) -> Action {
    Action::Abandon {
        replacement: replacement.to_string(),
        why: why.to_string(),
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
            let deadline = grace_deadline(claim, started);
            // A pod shutting down (it has a deletion timestamp) is on its way: only the pods
            // not yet leaving measure a drain's progress.
            let staying = pods
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .count();
            let last = drain_progress(claim);
            let changed = last.is_none_or(|(left, _)| left != staying);
            Action::DrainDisrupted {
                nodeclaim: name(claim),
                node: node_name,
                mark_started: recorded.is_none().then_some(now),
                grace_over: deadline.is_some_and(|d| now >= d),
                progress: changed.then(|| progress_mark(staying, now)),
                stalled_since: match (changed, deadline) {
                    (false, None) => last.map(|(_, at)| now - at),
                    _ => None,
                },
                pods,
            }
        })
        .collect()
}

/// The pods a claim's drain had left when they last changed, and when.
fn drain_progress(claim: &NodeClaim) -> Option<(usize, DateTime<Utc>)> {
    let value = claim
        .metadata
        .annotations
        .as_ref()?
        .get(DRAIN_PROGRESS_ANNOTATION)?;
    let (left, at) = value.split_once('@')?;
    let at = DateTime::parse_from_rfc3339(at).ok()?.with_timezone(&Utc);
    Some((left.parse().ok()?, at))
}

fn progress_mark(left: usize, now: DateTime<Utc>) -> String {
    format!(
        "{left}@{}",
        now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    )
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

/// What the disruptions are, decided over what was read: the commands decided this tick
/// (`<reason>/<command>:<nodes>`, in order) and the actions.
#[derive(Debug, Default)]
pub struct Decided {
    pub keys: Vec<String>,
    pub actions: Vec<Action>,
}

/// The decisions waiting for confirmation, as the state ConfigMap holds them (a list; one
/// object or `null` before several commands were decided at once).
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum StoredPending {
    Many(Vec<PendingDisruption>),
    One(PendingDisruption),
}

impl StoredPending {
    pub fn into_vec(self) -> Vec<PendingDisruption> {
        match self {
            StoredPending::Many(v) => v,
            StoredPending::One(p) => vec![p],
        }
    }
}

/// Carries out each decision waiting at least [`CONFIRM_AFTER`] (`pending`) that still holds
/// ([`disruption::validate`], with fresh replacements), then decides what comes next over the
/// cluster as those leave it ([`disruption::plan_sequence`]): each of those commands waits for
/// confirmation (keeping its first decision time when it was already waiting). The blocked
/// candidates are reported.
/// `snapshot` is left as the commands decided leave it.
pub fn decide(
    dump: &ClusterDump,
    snapshot: &mut Snapshot,
    catalog: &Catalog,
    said: &BTreeMap<String, String>,
    pending: &[PendingDisruption],
    now: DateTime<Utc>,
) -> Decided {
    let sim = snapshot;
    let mut taken = Vec::new();
    let mut keys = Vec::new();
    for p in pending
        .iter()
        .filter(|p| now - p.decided_at >= CONFIRM_AFTER)
    {
        let Some((reason, nodes)) = parse_key(&p.key) else {
            continue;
        };
        match disruption::validate(sim, catalog, now.timestamp(), reason, &nodes) {
            Ok(command) => {
                taken.extend(carry_out(dump, &command, now));
                disruption::as_started(sim, &command);
                keys.push(command_key(&command));
            }
            Err(why) => taken.push(Action::Invalidated {
                command: p.key.clone(),
                reason: why,
            }),
        }
    }
    let plan = disruption::plan_sequence(sim, catalog, now.timestamp());
    let mut actions = report_blocked(dump, &plan.blocked, said);
    actions.extend(plan.scores.iter().map(|s| Action::Scored {
        nodepool: s.nodepool.clone(),
        nodes: s.nodes.clone(),
        score: s.score,
        approved: s.approved,
    }));
    actions.extend(taken);
    let mut waiting = Vec::new();
    for command in &plan.disruptions {
        let key = command_key(command);
        let earlier = pending.iter().find(|p| p.key == key);
        actions.push(Action::ConfirmLater {
            command: key.clone(),
            savings: command.savings,
            next: !keys.is_empty(),
        });
        waiting.push(PendingDisruption {
            key: key.clone(),
            decided_at: earlier.map_or(now, |p| p.decided_at),
        });
        keys.push(key);
    }
    actions.push(Action::SavePending { pending: waiting });
    Decided { keys, actions }
}

/// The reason and nodes of a command key (`<reason>/<command>:<nodes>`).
fn parse_key(key: &str) -> Option<(disruption::Reason, Vec<String>)> {
    let (head, nodes) = key.split_once(':')?;
    let reason = disruption::Reason::parse(head.split('/').next()?)?;
    Some((reason, nodes.split(',').map(str::to_string).collect()))
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
            changed: said.get(&b.node) != Some(&b.reason),
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
    let mut actions = vec![Action::Disrupting {
        command: command_name(first.command),
        reason: first.reason.as_str(),
        savings: first.savings,
        replacements: first
            .replacements
            .iter()
            .map(|r| r.instance_types.clone())
            .collect(),
        nodes: first.nodes.clone(),
    }];
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
    if first.replacements.is_empty() {
        let claims = claims_of(dump, &first.nodes);
        actions.extend(drain_and_delete(dump, &claims, now));
    }
    actions
}

/// Creates the replacements, then taints and annotates the candidates. A replacement that
/// cannot be built (its NodePool is gone) starts nothing.
fn start(dump: &ClusterDump, command: &Disruption) -> Option<Action> {
    let replacements = command
        .replacements
        .iter()
        .map(|r| create(dump, &r.nodeclaim))
        .collect::<Option<Vec<Action>>>()?;
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
        replacements,
        candidates,
    })
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
            actions
                .iter()
                .any(|a| matches!(a, Action::DrainDisrupted { nodeclaim, .. } if nodeclaim == "default-old")),
            "{actions:?}"
        );
        let gone = dump("");
        let actions = continue_commands(&gone, &gone.nodeclaims, &[], now);
        assert!(
            matches!(actions.as_slice(), [Action::Abandon { replacement, .. }] if replacement == "default-r1,default-r2"),
            "{actions:?}"
        );
    }
}
