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

use chrono::{DateTime, Utc};
use fleetwright_core::disruption::{self, Command, Disruption};
use fleetwright_core::{Catalog, Snapshot};
use fleetwright_crds::NodeClaim;
use fleetwright_kube::dump::ClusterDump;
use serde::Deserialize;

use super::action::Action;
use super::claims::name_of as name;
use super::provision::create;

use super::in_progress::{claims_of, drain_and_delete, REPLACEMENT_FOR};
pub use super::in_progress::{
    BLOCKED_KEY, CONFIRM_AFTER, DISRUPTION_ANNOTATION, DRAIN_PROGRESS_ANNOTATION, DRAIN_STALL,
    DRAIN_STARTED_ANNOTATION, PENDING_KEY, REPLACEMENT_TTL,
};

pub use super::action::PendingDisruption;

fn command_key(d: &Disruption) -> String {
    format!(
        "{}/{}:{}",
        d.reason.as_str(),
        command_name(d),
        d.nodes.join(",")
    )
}

/// `Disrupting Node: Underutilized/Replace, savings $0.2100/h, replacement [m5.large, …]`.
fn taken_message(d: &Disruption) -> String {
    let mut message = format!(
        "Disrupting Node: {}/{}, savings ${:.4}/h",
        d.reason.as_str(),
        command_name(d),
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

/// Karpenter's decision name: `delete`, `replace`, or `terminate-first` for a delete-only
/// command whose node goes before its static pool refills the slot.
fn command_name(d: &Disruption) -> &'static str {
    match (d.command, d.terminate_first) {
        (_, Some(_)) => "terminate-first",
        (Command::Delete, None) => "delete",
        (Command::Replace, None) => "replace",
    }
}

/// How soon, at the least, the tick follows up on a half-empty node waiting out its pool's
/// `consolidateAfter`. On a busy cluster some node's pods change every few seconds, and so its
/// wait restarts: this keeps such a cluster's tick to two runs a minute at most, while a node a
/// load drop left is still looked at within half a minute instead of at the schedule.
pub const UNDERUSED_FOLLOW_UP: chrono::Duration = chrono::Duration::seconds(30);

/// What the disruptions are, decided over what was read: the commands decided this tick
/// (`<reason>/<command>:<nodes>`, in order) and the actions.
#[derive(Debug, Default)]
pub struct Decided {
    pub keys: Vec<String>,
    /// The commands carried out this tick (among `keys`).
    pub started: Vec<String>,
    pub actions: Vec<Action>,
    /// How soon an empty node waits out its pool's `consolidateAfter`, when one does; a
    /// half-empty one's no sooner than [`UNDERUSED_FOLLOW_UP`] from now.
    pub empty_settles_in: Option<chrono::Duration>,
    /// How soon a decision made (or first made) less than [`CONFIRM_AFTER`] ago can be
    /// confirmed; none for decisions whose wait is over (one that failed its validation and was
    /// decided again waits for the schedule, not for a follow-up).
    pub confirm_in: Option<chrono::Duration>,
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
    let mut started = Vec::new();
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
                started.push(command_key(&command));
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
    // A decision not yet due that the plan no longer makes is dropped, and said so (Karpenter:
    // "abandoning ... command is no longer valid").
    let planned: Vec<String> = plan.disruptions.iter().map(command_key).collect();
    for p in pending
        .iter()
        .filter(|p| now - p.decided_at < CONFIRM_AFTER)
    {
        if !planned.contains(&p.key) {
            actions.push(Action::Invalidated {
                command: p.key.clone(),
                reason:
                    "the cluster changed before its confirmation, and the plan no longer makes it"
                        .into(),
            });
        }
    }
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
    let in_seconds = |at: i64| chrono::Duration::seconds(at - now.timestamp());
    let underused = (plan.underused_settles_at.map(in_seconds)).map(|d| d.max(UNDERUSED_FOLLOW_UP));
    let empty_settles_in = plan
        .empty_settles_at
        .map(in_seconds)
        .into_iter()
        .chain(underused)
        .min();
    let confirm_in = waiting
        .iter()
        .map(|p| p.decided_at + CONFIRM_AFTER - now)
        .filter(|wait| *wait > chrono::Duration::zero())
        .min();
    actions.push(Action::SavePending { pending: waiting });
    Decided {
        keys,
        started,
        actions,
        empty_settles_in,
        confirm_in,
    }
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
    // A node's first reason is the one its Event gives: the methods run in Karpenter's order,
    // so a drifted node held back says why its drift waits, not why it is not consolidated.
    let mut current: BTreeMap<String, String> = BTreeMap::new();
    for b in blocked {
        (current.entry(b.node.clone())).or_insert_with(|| b.reason.clone());
    }
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
        command: command_name(first),
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
pub(super) fn start(dump: &ClusterDump, command: &Disruption) -> Option<Action> {
    let claims: Vec<(&String, &NodeClaim)> = (command.nodes.iter())
        .filter_map(|node| {
            let claim = dump.nodeclaims.iter().find(|c| {
                c.status.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node.as_str())
            })?;
            Some((node, claim))
        })
        .collect();
    let candidates: Vec<(String, String)> = (claims.iter())
        .map(|(node, claim)| ((*node).clone(), name(claim)))
        .collect();
    let reason = command.reason.as_str();
    let disrupted = (claims.iter())
        .map(|(_, claim)| super::disrupted::of(dump, claim, reason))
        .collect();
    let whose = (candidates.iter().map(|(_, claim)| claim.as_str()))
        .collect::<Vec<_>>()
        .join(",");
    let mut replacements = command
        .replacements
        .iter()
        .map(|r| create(dump, &r.nodeclaim))
        .collect::<Option<Vec<Action>>>()?;
    for r in &mut replacements {
        if let Action::CreateNodeClaim { claim, .. } = r {
            (claim.metadata.annotations.get_or_insert_default())
                .insert(REPLACEMENT_FOR.to_string(), whose.clone());
        }
    }
    Some(Action::StartDisruption {
        command: format!("{reason}/{}", command_name(command)),
        replacements,
        candidates,
        disrupted,
    })
}

#[cfg(test)]
#[path = "../../tests/unit/tick/disruption.rs"]
mod tests;
