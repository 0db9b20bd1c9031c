//! Drift and repair: each node replaced on its own, one command each (budgets already applied).
//! A dynamic pool's node is replaced by what its pods need; a static pool's by its template's
//! node, staged first while the pool has room for it. A static pool at its `limits.nodes` has
//! none: with Karpenter's `TerminateFirstDrift` or `TerminateFirstRepair` gate (the pool's
//! [`TerminateFirst`](crate::model::TerminateFirst)) the node goes first and the pool's refill
//! takes the slot it frees; without it the node stays, reported blocked, as it does when the
//! pool's template launches nothing now (nothing would refill the slot).

use std::borrow::Cow;
use std::collections::BTreeMap;

use crate::catalog::Catalog;
use crate::labels::RESERVATION_ID;
use crate::model::{NodePool, Snapshot};
use crate::scheduler::static_claim;

use super::budget::{Budgets, Reason};
use super::candidates::Candidate;
use super::consolidation::{replacement_of, round4, simulate, Moved};
use super::static_drift::{staged, static_room, NoRoom};
use super::{Blocked, Command, Disruption, Replacement};

/// Karpenter's terminate-first reason for a static pool at its node limit.
pub const STATIC_AT_LIMIT: &str = "static-at-limit";

/// Expired, drifted and unhealthy nodes, one command each (budgets already applied).
pub(crate) fn replace_each(
    snapshot: &Snapshot,
    catalog: &Catalog,
    candidates: &[&Candidate],
    reason: Reason,
    now: i64,
    blocked: &mut Vec<Blocked>,
) -> Vec<Disruption> {
    let mut staged: BTreeMap<&str, i64> = BTreeMap::new();
    (candidates.iter())
        .filter_map(|c| plan_one(snapshot, catalog, (c, reason), &mut staged, now, blocked))
        .collect()
}

/// Drifted nodes in Karpenter's order, each within its pool's budget: empty nodes first (their
/// pods move nowhere, and nothing lands on a node about to go), and a node whose replacement
/// cannot be planned spends none of the budget, so the next one is tried.
pub(crate) fn replace_within(
    snapshot: &Snapshot,
    catalog: &Catalog,
    candidates: &[&Candidate],
    budgets: &Budgets,
    now: i64,
    blocked: &mut Vec<Blocked>,
) -> Vec<Disruption> {
    let reason = Reason::Drifted;
    let (empty, busy): (Vec<&Candidate>, Vec<&Candidate>) =
        candidates.iter().partition(|c| c.pods.is_empty());
    let mut left: BTreeMap<&str, usize> = BTreeMap::new();
    let mut staged: BTreeMap<&str, i64> = BTreeMap::new();
    let mut out = Vec::new();
    for c in empty.into_iter().chain(busy) {
        let n =
            (left.entry(c.pool.name.as_str())).or_insert_with(|| budgets.allowance(c.pool, reason));
        if *n == 0 {
            blocked.push(Blocked {
                node: c.node.name.clone(),
                reason: format!(
                    "{} disruption budget of NodePool {} allows no more nodes now",
                    reason.as_str(),
                    c.pool.name
                ),
            });
            continue;
        }
        if let Some(d) = plan_one(snapshot, catalog, (c, reason), &mut staged, now, blocked) {
            *n -= 1;
            out.push(d);
        }
    }
    out
}

/// One node's command, or None with the reason it is blocked recorded.
fn plan_one<'c>(
    snapshot: &Snapshot,
    catalog: &Catalog,
    (c, reason): (&'c Candidate, Reason),
    staged: &mut BTreeMap<&'c str, i64>,
    now: i64,
    blocked: &mut Vec<Blocked>,
) -> Option<Disruption> {
    let planned = match c.pool.replicas {
        Some(replicas) => {
            let staged = staged.entry(c.pool.name.as_str()).or_insert(0);
            replace_static(snapshot, catalog, (c, reason), (replicas, staged), now)
        }
        None => simulate(snapshot, catalog, &[c], now).map(Planned::Replace),
    };
    match planned {
        Ok(Planned::Replace(moved)) => Some(command(c, reason, moved)),
        Ok(Planned::TerminateFirst(refill)) => Some(terminate_first(c, reason, refill)),
        Err(why) => {
            blocked.push(Blocked {
                node: c.node.name.clone(),
                reason: format!("{}: {why}", reason.as_str()),
            });
            None
        }
    }
}

/// How a node goes: its replacements first, or (terminate-first) before any, its refill
/// costing this much an hour.
enum Planned {
    Replace(Moved),
    TerminateFirst(f64),
}

/// A static pool's node replaced by its template's node (the pool keeps its replicas), the
/// candidate's pods placed with that node in flight; or, at the pool's node limit and with the
/// gate on, deleted first.
fn replace_static(
    snapshot: &Snapshot,
    catalog: &Catalog,
    (c, reason): (&Candidate, Reason),
    (replicas, staged_here): (i64, &mut i64),
    now: i64,
) -> Result<Planned, String> {
    match static_room(snapshot, c.pool, replicas, *staged_here) {
        Ok(()) => {
            *staged_here += 1;
            let (claim, with) = staged(snapshot, catalog, c, now)?;
            let mut moved = simulate(&with, catalog, &[c], now)?;
            moved.claims.insert(0, claim);
            Ok(Planned::Replace(moved))
        }
        // As Karpenter's, only a pool with no room at all terminates first: one that stages a
        // replacement in this plan replaces its other nodes later, one at a time.
        Err(NoRoom::AtLimit(why)) if *staged_here == 0 && terminates_first(c.pool, reason) => {
            // Beyond Karpenter, which asks only that the pool be ready: a template that
            // launches nothing now (a requirement mistyped in the very change that drifted the
            // node) would empty the pool node by node, so its nodes stay.
            match static_claim(&credited(snapshot, c), catalog, c.pool) {
                Some(refill) => Ok(Planned::TerminateFirst(refill.price)),
                None => Err(format!(
                    "{why}, and its template launches no instance type now, so nothing would refill it"
                )),
            }
        }
        Err(NoRoom::AtLimit(why) | NoRoom::ScalingDown(why)) => Err(why),
    }
}

/// The snapshot with the capacity reservation the candidate runs in given its slot back, as
/// Karpenter credits it: a static pool sized to its reservation keeps it full, and the slot the
/// node frees is the one its refill launches into.
fn credited<'s>(snapshot: &'s Snapshot, c: &Candidate) -> Cow<'s, Snapshot> {
    let Some(id) = c.node.labels.get(RESERVATION_ID) else {
        return Cow::Borrowed(snapshot);
    };
    let mut out = snapshot.clone();
    for class in out.node_classes.values_mut() {
        for r in class.reservations.iter_mut().filter(|r| &r.id == id) {
            r.available += 1;
        }
    }
    Cow::Owned(out)
}

/// Whether the pool's gate for `reason` lets its node go before a replacement. A deleting pool
/// is never refilled, so its node would leave its pods nowhere to go.
fn terminates_first(pool: &NodePool, reason: Reason) -> bool {
    let gate = match reason {
        Reason::Drifted => pool.terminate_first.drift,
        Reason::Unhealthy => pool.terminate_first.repair,
        _ => false,
    };
    gate && !pool.deleting
}

/// The command that replaces `c` as `moved` plans.
fn command(c: &Candidate, reason: Reason, moved: Moved) -> Disruption {
    let replacements: Vec<Replacement> = moved.claims.into_iter().map(replacement_of).collect();
    let cost: f64 = replacements.iter().map(|r| r.price).sum();
    Disruption {
        command: if replacements.is_empty() {
            Command::Delete
        } else {
            Command::Replace
        },
        reason,
        nodes: vec![c.node.name.clone()],
        replacement: (replacements.len() == 1).then(|| replacements[0].clone()),
        replacements,
        savings: round4(c.price - cost),
        moves: moved.onto,
        terminate_first: None,
    }
}

/// The delete-only command of a static pool at its node limit: its pods wait for the refill
/// (or fit elsewhere), which costs `refill` an hour.
fn terminate_first(c: &Candidate, reason: Reason, refill: f64) -> Disruption {
    Disruption {
        command: Command::Delete,
        reason,
        nodes: vec![c.node.name.clone()],
        replacement: None,
        replacements: Vec::new(),
        savings: round4(c.price - refill),
        moves: Vec::new(),
        terminate_first: Some(STATIC_AT_LIMIT),
    }
}
