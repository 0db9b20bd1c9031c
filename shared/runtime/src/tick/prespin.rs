//! Repair's replacements launched before its node goes, as Karpenter v1.15's repair pre-spins
//! them: a repair of a node that holds pods starts as a command (`unhealthy/replace/<new
//! NodeClaims>`) that launches the capacity its pods need, taints the node
//! `karpenter.sh/disrupted` and waits; once every replacement has initialized, the node is
//! repaired as any other (its NodeClaim deleted, the drain bounded by the repair policy).
//!
//! A node whose pods fit on initialized nodes that stay, or that holds none, is repaired at
//! once; each such repair takes its room before the next is planned. One command launches
//! replacements per tick (Karpenter's one command per pass: a second would plan against limits
//! the first has not yet used; the NodeClaims the tick provisioned are counted as in flight);
//! the others wait for a later tick, as does a repair whose pods would count on capacity not
//! yet initialized.
//!
//! A node that is `Ready` runs its pods, so its repair never takes them away before their new
//! place is ready: when they cannot all be planned first (a NodePool at its limits, a static
//! pool at its node limit, unless the `TerminateFirstRepair` gate lets that one go first, a pod
//! no pool takes) the repair waits and says why, and when a replacement is gone or late the
//! command is abandoned, to be planned afresh. A node that is not `Ready` runs nothing: it is
//! repaired without replacements in those cases, whatever the gate says, and its pods planned
//! once it is gone. A node healthy
//! again (or marked `do-not-repair`, or in a pool now more than 20 % unhealthy) before its
//! replacements are ready keeps running: the command is abandoned, and the replacements that
//! have not initialized are deleted.
//!
//! Pure: the dump, the snapshot and `now` in, actions out.

use chrono::{DateTime, Timelike, Utc};
use fleetwright_core::disruption::{self, Command, Disruption, RepairPlan};
use fleetwright_core::{Catalog, Snapshot};
use fleetwright_crds::{conditions, NodeClaim};
use fleetwright_kube::dump::ClusterDump;

use super::action::Action;
use super::claims::{has_condition, name_of};
use super::in_progress::{abandon, annotation, replacement_overdue, untainted};
use super::repair::{self, NodeRepair};
use super::repair_backoff;

/// The command a repair waiting for its replacements carries, before their names.
pub const PRESPUN: &str = "unhealthy/replace";

/// Why a pre-spun repair is abandoned when one of its replacements is gone.
const GONE: &str = "the replacement is gone before it initialized";

/// Whether the NodeClaim's node is being repaired with its replacements launched first.
pub fn prespun(claim: &NodeClaim) -> bool {
    annotation(claim).is_some_and(|a| a.starts_with(PRESPUN))
}

/// Each [`Action::Repair`] of a node with pods to move, planned as the module says: at once,
/// as a command that launches replacements first, or held for a later tick with the reason.
/// `snapshot` holds the NodeClaims this tick created (in flight), and is left as the repairs
/// leave it (their nodes tainted, their pods moved), so the disruption decided after counts
/// them.
pub fn prespin(
    dump: &ClusterDump,
    (snapshot, catalog): (&mut Snapshot, &Catalog),
    actions: Vec<Action>,
    now: DateTime<Utc>,
) -> Vec<Action> {
    let mut launching = false;
    let mut out = Vec::new();
    for action in actions {
        let Action::Repair { node, .. } = &action else {
            out.push(action);
            continue;
        };
        let ready = ready(dump, node);
        let held = |reason: String| Action::Blocked {
            node: node.clone(),
            reason: format!("repair waits: {reason}"),
            changed: now.minute().is_multiple_of(5),
        };
        let claim = dump.nodeclaims.iter().find(|c| {
            c.status.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node.as_str())
        });
        let backoff = claim
            .filter(|_| ready)
            .and_then(|c| repair_backoff::waits(c, now));
        match disruption::repair_command(snapshot, catalog, node, now.timestamp()) {
            // Its last replacements failed: it launches none again before its backoff ends (a
            // repair that needs none goes ahead).
            RepairPlan::Go(command) if command.command == Command::Replace && backoff.is_some() => {
                out.push(held(backoff.unwrap_or_default()))
            }
            RepairPlan::Go(command) if command.command == Command::Replace => {
                let start = super::disruption::start(dump, &command);
                match start {
                    Some(start) if !launching => {
                        out.extend(started(&command, start));
                        disruption::as_started(snapshot, &command);
                        launching = true;
                    }
                    Some(_) => out.push(held(
                        "one repair launches replacements per tick; its turn is a later one".into(),
                    )),
                    None => out.push(held("its replacement's NodePool is gone".into())),
                }
            }
            RepairPlan::Go(command) => {
                if let Some(first) = command.terminate_first {
                    tracing::info!(node = %node, terminate_first = first, "repairing the node before its replacement: its static NodePool is at its node limit, and its refill takes the slot the node frees");
                }
                disruption::as_started(snapshot, &command);
                out.push(action);
            }
            RepairPlan::Wait(why) => out.push(held(why)),
            RepairPlan::Unplaceable(why) if ready => {
                out.push(held(format!("its pods cannot all be placed first: {why}")))
            }
            RepairPlan::Unplaceable(why) => {
                tracing::info!(node = %node, "repairing a node that is not ready without replacements first: {why}");
                out.push(action);
            }
        }
    }
    out
}

/// The repairs when the instance types could not be read, so no replacement can be planned: a
/// node that is not `Ready` runs nothing and is repaired; a `Ready` one waits for a tick that
/// reads them.
pub fn without_catalog(
    dump: &ClusterDump,
    actions: Vec<Action>,
    now: DateTime<Utc>,
) -> Vec<Action> {
    actions
        .into_iter()
        .map(|action| match &action {
            Action::Repair { node, .. } if ready(dump, node) => Action::Blocked {
                node: node.clone(),
                reason: "repair waits: the instance types could not be read to plan its pods"
                    .into(),
                changed: now.minute().is_multiple_of(5),
            },
            _ => action,
        })
        .collect()
}

/// Whether the named node's `Ready` condition is `True`.
fn ready(dump: &ClusterDump, node: &str) -> bool {
    dump.nodes
        .iter()
        .find(|n| n.metadata.name.as_deref() == Some(node))
        .is_some_and(repair::ready)
}

/// The log line of a started repair command, and the command.
fn started(command: &Disruption, start: Action) -> [Action; 2] {
    [
        Action::Disrupting {
            command: "replace",
            reason: disruption::Reason::Unhealthy.as_str(),
            savings: command.savings,
            replacements: (command.replacements.iter())
                .map(|r| r.instance_types.clone())
                .collect(),
            nodes: command.nodes.clone(),
        },
        start,
    ]
}

/// Each repair waiting for its replacements, a step on (see the module). `initialized` names
/// the NodeClaims this tick initialized, and `unreadable` those the read could not take (a
/// replacement among them is not gone). Repairs already admitted take no budget place again.
pub fn continue_prespun(
    dump: &ClusterDump,
    claims: &[NodeClaim],
    (initialized, unreadable): (&[String], &[String]),
    now: DateTime<Utc>,
    mode: NodeRepair,
) -> Vec<Action> {
    claims
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .filter_map(|claim| {
            let names = annotation(claim)?.strip_prefix(PRESPUN)?;
            let names = names.trim_start_matches('/');
            let step = Step {
                dump,
                claims,
                claim,
                names,
                ready: (initialized, unreadable),
            };
            Some(step.next(now, mode))
        })
        .flatten()
        .collect()
}

/// One repair waiting for its replacements.
struct Step<'a> {
    dump: &'a ClusterDump,
    claims: &'a [NodeClaim],
    claim: &'a NodeClaim,
    names: &'a str,
    ready: (&'a [String], &'a [String]),
}

impl Step<'_> {
    fn next(&self, now: DateTime<Utc>, mode: NodeRepair) -> Vec<Action> {
        let repair = match repair::repair_now(self.dump, self.claim, now, mode) {
            Ok(repair) => repair,
            Err(why) => return self.give_up(why, None),
        };
        let node_ready = self.dump.node_of(self.claim).is_some_and(repair::ready);
        match self.waiting(now) {
            Ok(waiting) if waiting.is_empty() => vec![repair],
            Ok(waiting) => {
                // A tick cut off between recording the command and tainting the node left the
                // taint to this one.
                let mut out = untainted(self.dump, &[self.claim]);
                out.push(Action::AwaitReplacement {
                    replacement: waiting.join(","),
                });
                out
            }
            // A node that runs its pods keeps them until a new place is ready: planned afresh,
            // after a backoff when the replacements did not initialize in time (one that is
            // gone, deleted after insufficient capacity or an interruption, says nothing about
            // the next).
            Err(why) if node_ready => self.give_up(why, (why != GONE).then_some(now)),
            Err(_) => vec![repair],
        }
    }

    /// The replacements not yet initialized, or why one never will be (gone, or late).
    fn waiting(&self, now: DateTime<Utc>) -> Result<Vec<&str>, &'static str> {
        let (initialized, unreadable) = self.ready;
        let mut waiting = Vec::new();
        for r in self.replacements() {
            // A replacement being deleted (interrupted, say) is no place for the pods.
            let found = self
                .found(r)
                .filter(|c| c.metadata.deletion_timestamp.is_none());
            let Some(replacement) = found else {
                if self.found(r).is_none() && unreadable.iter().any(|u| u == r) {
                    waiting.push(r);
                    continue;
                }
                return Err(GONE);
            };
            if has_condition(replacement, conditions::INITIALIZED)
                || initialized.iter().any(|n| n == r)
            {
                continue;
            }
            if let Some(why) = replacement_overdue(replacement, now) {
                return Err(why);
            }
            waiting.push(r);
        }
        Ok(waiting)
    }

    /// The command abandoned, and the replacements that have not initialized deleted: they
    /// were launched for this repair alone. When the replacements failed (`failed_at`), the
    /// failure is recorded for the next repair's backoff.
    fn give_up(&self, why: &str, failed_at: Option<DateTime<Utc>>) -> Vec<Action> {
        // The replacements go first: a tick cut off after them finds them gone and abandons
        // the command; one cut off after the abandon would leave them with nothing naming them.
        let mut out = Vec::new();
        let (initialized, _) = self.ready;
        for r in self.replacements() {
            let unready = self.found(r).is_some_and(|c| {
                !has_condition(c, conditions::INITIALIZED) && !initialized.iter().any(|n| n == r)
            });
            if unready {
                out.push(Action::DeleteNodeClaim {
                    nodeclaim: r.to_string(),
                });
            }
        }
        if let Some(mark) = failed_at.and_then(|now| repair_backoff::next_mark(self.claim, now)) {
            out.push(Action::RecordRepairFailure {
                nodeclaim: name_of(self.claim),
                mark,
            });
        }
        out.push(abandon(self.dump, &[self.claim], self.names, why));
        out
    }

    fn replacements(&self) -> impl Iterator<Item = &str> {
        self.names.split(',').filter(|n| !n.is_empty())
    }

    fn found(&self, name: &str) -> Option<&NodeClaim> {
        self.claims
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(name))
    }
}
