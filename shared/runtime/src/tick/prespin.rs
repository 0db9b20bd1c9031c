//! Repair's replacements launched before its node goes, as Karpenter v1.15's repair pre-spins
//! them: a repair of a node that holds pods starts as a command (`unhealthy/replace/<new
//! NodeClaims>`) that launches the capacity its pods need, taints the node
//! `karpenter.sh/disrupted` and waits; once every replacement has initialized, the node is
//! repaired as any other (its NodeClaim deleted, the drain bounded by the repair policy).
//!
//! A node whose pods fit on nodes that stay, or that holds none, is repaired at once. So is one
//! whose pods cannot all be planned before it goes (a NodePool at its limits, a static pool at
//! its node limit): Karpenter blocks such a repair unless its `TerminateFirstRepair` gate is on,
//! and leaves a broken node in place; Fleetwright repairs it, and plans its pods once it is gone.
//! A replacement that is gone, or late, does not hold a repair up either: the node is repaired
//! without it. A node healthy again before its replacements are ready keeps running: the
//! command is abandoned, and the replacements are left to consolidation.
//!
//! Pure: the dump, the snapshot and `now` in, actions out.

use chrono::{DateTime, Utc};
use fleetwright_core::disruption::{self, Command};
use fleetwright_core::{Catalog, Snapshot};
use fleetwright_crds::{conditions, NodeClaim};
use fleetwright_kube::dump::ClusterDump;

use super::action::Action;
use super::claims::has_condition;
use super::in_progress::{abandon, annotation, replacement_overdue, untainted};
use super::repair::{self, NodeRepair};

/// The command a repair waiting for its replacements carries, before their names.
pub const PRESPUN: &str = "unhealthy/replace";

/// Whether the NodeClaim's node is being repaired with its replacements launched first.
pub fn prespun(claim: &NodeClaim) -> bool {
    annotation(claim).is_some_and(|a| a.starts_with(PRESPUN))
}

/// Each [`Action::Repair`] of a node with pods to move, turned into a command that launches
/// their replacements first (see the module); the other actions as they are. `snapshot` is left
/// as the commands leave it (their nodes tainted, their pods moved), so the disruption decided
/// after counts them.
pub fn prespin(
    dump: &ClusterDump,
    snapshot: &mut Snapshot,
    catalog: &Catalog,
    actions: Vec<Action>,
    now: DateTime<Utc>,
) -> Vec<Action> {
    let mut out = Vec::new();
    for action in actions {
        let Action::Repair { node, .. } = &action else {
            out.push(action);
            continue;
        };
        match disruption::repair_command(snapshot, catalog, node, now.timestamp()) {
            Ok(command) if command.command == Command::Replace => {
                let Some(start) = super::disruption::start(dump, &command) else {
                    out.push(action);
                    continue;
                };
                out.push(Action::Disrupting {
                    command: "replace",
                    reason: disruption::Reason::Unhealthy.as_str(),
                    savings: command.savings,
                    replacements: (command.replacements.iter())
                        .map(|r| r.instance_types.clone())
                        .collect(),
                    nodes: command.nodes.clone(),
                });
                out.push(start);
                disruption::as_started(snapshot, &command);
            }
            Ok(_) => out.push(action),
            Err(why) => {
                tracing::info!(node = %node, "repairing without a replacement first: {why}");
                out.push(action);
            }
        }
    }
    out
}

/// Each repair waiting for its replacements, a step on: the node repaired once every
/// replacement has initialized (`initialized` names those this tick initialized), or when one
/// is gone or late; the command abandoned when the node is healthy again; else it waits.
/// Repairs already admitted take no budget place again.
pub fn continue_prespun(
    dump: &ClusterDump,
    claims: &[NodeClaim],
    initialized: &[String],
    now: DateTime<Utc>,
    mode: NodeRepair,
) -> Vec<Action> {
    claims
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .filter_map(|claim| {
            let names = annotation(claim)?.strip_prefix(PRESPUN)?;
            let names = names.trim_start_matches('/');
            let action = step(dump, claims, claim, names, initialized, now, mode);
            // A tick cut off between recording the command and tainting the node left the
            // taint to this one.
            let mut actions = match &action {
                Action::AwaitReplacement { .. } => untainted(dump, &[claim]),
                _ => Vec::new(),
            };
            actions.push(action);
            Some(actions)
        })
        .flatten()
        .collect()
}

fn step(
    dump: &ClusterDump,
    claims: &[NodeClaim],
    claim: &NodeClaim,
    names: &str,
    initialized: &[String],
    now: DateTime<Utc>,
    mode: NodeRepair,
) -> Action {
    let repair = match repair::repair_now(dump, claim, now, mode) {
        Ok(repair) => repair,
        Err(why) => return abandon(dump, &[claim], names, why),
    };
    let found = |r: &str| {
        claims
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(r))
    };
    let mut waiting = Vec::new();
    for r in names.split(',').filter(|n| !n.is_empty()) {
        let Some(replacement) = found(r) else {
            return repair;
        };
        let ready = has_condition(replacement, conditions::INITIALIZED)
            || initialized.iter().any(|n| n == r);
        if ready {
            continue;
        }
        if replacement_overdue(replacement, now).is_some() {
            return repair;
        }
        waiting.push(r);
    }
    match waiting.is_empty() {
        true => repair,
        false => Action::AwaitReplacement {
            replacement: waiting.join(","),
        },
    }
}
