//! Node repair, as Karpenter v1.15's repair with the AWS provider's reason-aware repair
//! policies (off unless `FLEETWRIGHT_NODE_REPAIR` is set, as Karpenter's `NodeRepair` feature
//! gate is): a node whose `Ready` condition has been `False` or `Unknown` for 30 minutes, or
//! whose node-monitoring-agent condition has been `False` past its policy's toleration
//! (`AcceleratedHardwareReady` 10 minutes for the GPU XID codes the AWS provider names, 30 for
//! any other reason; `StorageReady`, `NetworkingReady`, `KernelReady`, `ContainerRuntimeReady`
//! 30 minutes), has its NodeClaim deleted. Repair is paced by the NodePool's disruption budgets
//! under the reason `Unhealthy` (the nodes it may take at once, with those already being
//! disrupted counted), the nodes unhealthy longest first; `karpenter.sh/do-not-repair` on the
//! Node or NodeClaim vetoes it. The pool's health is a guard as well: no repair while more
//! than 20 % of a NodePool's nodes (rounded up, at least one) are unhealthy, since a fault
//! that wide is the cluster's, not the node's.
//!
//! Each policy bounds the drain (10 minutes; 5 for the GPU XID codes): the NodeClaim's
//! termination timestamp is set that far ahead (sooner if its own `terminationGracePeriod`
//! ends first), so its pods are evicted through the Eviction API, PodDisruptionBudgets and
//! `do-not-disrupt` holding until then, and the pods still there are deleted after.
//!
//! [`NodeRepair::Reboot`] (`FLEETWRIGHT_REBOOT_FOR_REPAIR`, Karpenter's `RebootForRepair`)
//! reboots in place a node whose only due fault is one a reboot clears, at most twice in 24
//! hours ([`super::reboot`] carries the reboot out).
//!
//! [`NodeRepair::Legacy`] (`FLEETWRIGHT_LEGACY_NODE_REPAIR`, Karpenter's `--legacy-node-repair`)
//! keeps the node health controller of before v1.15: the seven policies with no reasons, no
//! budgets, and a node that is not Ready repaired forcefully (its pods deleted at once).
//! Pure: the dump and `now` in, actions out.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Timelike, Utc};
use fleetwright_core::disruption::budget::{self, Reason};
use fleetwright_core::labels::{NODEPOOL, TAINT_DISRUPTED, TAINT_REBOOTING};
use fleetwright_core::model::NodePool;
use fleetwright_crds::NodeClaim;
use fleetwright_kube::dump::ClusterDump;
use k8s_openapi::api::core::v1::{Node, NodeCondition};

use super::action::Action;
use super::claims::name_of;
use super::reboot::RebootStep;
pub use super::repair_policies::*;
use fleetwright_crds::conditions;

pub use super::in_progress::TERMINATION_TIMESTAMP;
/// On a Node or NodeClaim: never repair it (Karpenter v1.15).
pub const DO_NOT_REPAIR: &str = "karpenter.sh/do-not-repair";
/// The share of a NodePool's nodes that may be unhealthy with repair still going on.
pub const ALLOWED_UNHEALTHY_PERCENT: u32 = 20;

/// Whether repair is on, and which: Karpenter v1.15's (budgets, bounded drains), with its
/// `RebootForRepair` gate or without, or the node health controller of before it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NodeRepair {
    #[default]
    Off,
    On,
    /// On, and the faults a reboot clears are rebooted in place ([`super::reboot`]).
    Reboot,
    /// `--legacy-node-repair`: v1.14's policies and pacing (it never reboots).
    Legacy,
}

impl NodeRepair {
    /// From the three settings: repair on, the legacy controller asked for, and reboots.
    pub fn of(on: bool, legacy: bool, reboot: bool) -> Self {
        match (on, legacy, reboot) {
            (false, _, _) => NodeRepair::Off,
            (true, true, _) => NodeRepair::Legacy,
            (true, false, false) => NodeRepair::On,
            (true, false, true) => NodeRepair::Reboot,
        }
    }

    /// Whether repairs are paced by budgets (v1.15's repair).
    fn budgeted(self) -> bool {
        matches!(self, NodeRepair::On | NodeRepair::Reboot)
    }
}

/// The repairs due at `now`: a [`Action::Repair`] for each managed node unhealthy past its
/// toleration in a pool healthy enough, within its pool's `Unhealthy` budget (the longest due
/// first; a node not yet initialized runs no workload to protect, so it needs no budget); a
/// [`Action::RepairBlocked`] for each held back by the pool's health, and an
/// [`Action::Blocked`] for each held back by the budget or `do-not-repair`. `pools` are the
/// NodePools as read (their budgets). [`NodeRepair::Legacy`] takes no budget.
pub fn repairs(
    dump: &ClusterDump,
    claims: &[NodeClaim],
    pools: &[NodePool],
    now: DateTime<Utc>,
    mode: NodeRepair,
) -> Vec<Action> {
    let mut due: Vec<(DateTime<Utc>, Action)> = claims
        .iter()
        // A NodeClaim already being disrupted (or a repair cut off before its delete) is the
        // command's to finish, as Karpenter leaves candidates already being disrupted.
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .filter(|c| super::in_progress::annotation(c).is_none())
        // A node being rebooted is the reboot's until it ends.
        .filter(|c| super::reboot::in_progress(c).is_none())
        // An expired NodeClaim is deleted this tick: the expiration's, not a repair's.
        .filter(|c| super::expiration::expires_at(c).is_none_or(|at| now < at))
        .filter_map(|claim| repair(dump, claim, now, mode))
        .collect();
    // A repair backing off after its replacements failed comes after every other, so that it
    // never holds the budget place a dead node's repair needs (the pre-spin holds it, if it
    // would launch replacements again).
    due.sort_by_key(|(at, action)| (backing_off(dump, claims, action, now, mode), *at));
    let mut left: BTreeMap<String, usize> = BTreeMap::new();
    let said = now.minute().is_multiple_of(5);
    due.into_iter()
        .map(|(_, action)| {
            let Some((nodeclaim, node, nodepool)) = repaired(&action) else {
                return action;
            };
            let budgeted = mode.budgeted() && initialized(claims, nodeclaim);
            if !budgeted {
                return action;
            }
            // A pool that did not read (or is gone) has no budgets to take: its nodes wait.
            if !pools.iter().any(|p| p.name == nodepool) {
                return Action::Blocked {
                    node: node.to_string(),
                    reason: format!(
                        "NodePool {nodepool} is not read this tick (invalid, or gone), so its budgets are unknown"
                    ),
                    changed: said,
                };
            }
            let n = left
                .entry(nodepool.to_string())
                .or_insert_with(|| allowance(dump, claims, pools, nodepool, now));
            if *n == 0 {
                return Action::Blocked {
                    node: node.to_string(),
                    reason: format!(
                        "unhealthy disruption budget of NodePool {nodepool} allows no more nodes now"
                    ),
                    changed: said,
                };
            }
            *n -= 1;
            action
        })
        .collect()
}

/// The NodeClaim, node and pool a repair or a reboot's commitment takes a budget place for.
/// Whether the repair is of a `Ready` node whose last pre-spun replacements failed, within its
/// backoff ([`super::repair_backoff`]). Only a repair that pre-spins (not a reboot, not the
/// legacy mode's) backs off; a node that is not `Ready` runs nothing to keep.
fn backing_off(
    dump: &ClusterDump,
    claims: &[NodeClaim],
    action: &Action,
    now: DateTime<Utc>,
    mode: NodeRepair,
) -> bool {
    let Action::Repair { nodeclaim, .. } = action else {
        return false;
    };
    let claim = claims
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some(nodeclaim.as_str()));
    let running = |c: &&NodeClaim| dump.node_of(c).is_some_and(ready);
    let held = claim.filter(|_| mode.budgeted()).filter(running);
    held.is_some_and(|c| super::repair_backoff::waits(c, now).is_some())
}

fn repaired(action: &Action) -> Option<(&str, &str, &str)> {
    match action {
        Action::Repair {
            nodeclaim,
            node,
            nodepool,
            ..
        }
        | Action::Reboot {
            nodeclaim,
            node,
            step: RebootStep::Commit { nodepool, .. },
        } => Some((nodeclaim, node, nodepool)),
        _ => None,
    }
}

/// Whether the named NodeClaim's `Initialized` condition is `True`.
fn initialized(claims: &[NodeClaim], name: &str) -> bool {
    claims
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some(name))
        .is_some_and(claim_initialized)
}

/// Whether the NodeClaim counts in its pool's budgets: initialized, or rebooting (a reboot
/// makes it uninitialized, and it still takes its place until the reboot ends).
fn claim_initialized(claim: &NodeClaim) -> bool {
    super::reboot::in_progress(claim).is_some()
        || claim.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == conditions::INITIALIZED && c.status == "True")
        })
}

/// How many more of the pool's nodes repair may take now: its budgets for `Unhealthy`, over its
/// initialized nodes, less those already going (see [`going`]), as Karpenter counts a pool's
/// nodes for budgets (an uninitialized node neither needs nor takes a place). A pool not read
/// (gone) allows none.
fn allowance(
    dump: &ClusterDump,
    claims: &[NodeClaim],
    pools: &[NodePool],
    pool: &str,
    now: DateTime<Utc>,
) -> usize {
    let Some(pool_spec) = pools.iter().find(|p| p.name == pool) else {
        return 0;
    };
    let initialized: std::collections::BTreeSet<&str> = claims
        .iter()
        .filter(|c| claim_initialized(c))
        .filter_map(|c| c.status.as_ref()?.node_name.as_deref())
        .collect();
    let nodes: Vec<&Node> = pool_nodes(dump, pool)
        .into_iter()
        .filter(|n| initialized.contains(n.metadata.name.as_deref().unwrap_or_default()))
        .collect();
    let going = going(claims, now);
    let disrupting = nodes
        .iter()
        .filter(|n| leaving(n) || n.metadata.name.as_ref().is_some_and(|m| going.contains(m)))
        .count();
    budget::allowed(
        pool_spec,
        Reason::Unhealthy,
        nodes.len(),
        disrupting,
        now.timestamp(),
    )
}

/// The nodes of NodeClaims already going though their node may not show it yet: deleted,
/// carrying a disruption command, or expiring now (the tick deletes it this minute).
fn going(claims: &[NodeClaim], now: DateTime<Utc>) -> std::collections::BTreeSet<String> {
    claims
        .iter()
        .filter(|c| {
            c.metadata.deletion_timestamp.is_some()
                || super::in_progress::annotation(c).is_some()
                || super::reboot::in_progress(c).is_some()
                || super::expiration::expires_at(c).is_some_and(|at| now >= at)
        })
        .filter_map(|c| c.status.as_ref().and_then(|s| s.node_name.clone()))
        .collect()
}

/// Whether the node is already going or being disrupted: deleted, tainted by a disruption or
/// a deletion, or fenced for a reboot.
fn leaving(node: &Node) -> bool {
    node.metadata.deletion_timestamp.is_some()
        || node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .is_some_and(|t| {
                t.iter()
                    .any(|t| t.key == TAINT_DISRUPTED || t.key == TAINT_REBOOTING)
            })
}

/// Whether `karpenter.sh/do-not-repair: "true"` is on these annotations.
fn vetoed(annotations: Option<&std::collections::BTreeMap<String, String>>) -> bool {
    annotations
        .and_then(|a| a.get(DO_NOT_REPAIR))
        .is_some_and(|v| v == "true")
}

fn repair(
    dump: &ClusterDump,
    claim: &NodeClaim,
    now: DateTime<Utc>,
    mode: NodeRepair,
) -> Option<(DateTime<Utc>, Action)> {
    let node = dump.node_of(claim)?;
    let due = due_repair(node, mode, super::reboot::finished_at(claim), now)?;
    let node_name = node.metadata.name.clone().unwrap_or_default();
    let on_node = vetoed(node.metadata.annotations.as_ref());
    if on_node || vetoed(claim.metadata.annotations.as_ref()) {
        let reason = match on_node {
            true => format!("node has {DO_NOT_REPAIR}"),
            false => format!("nodeclaim {} has {DO_NOT_REPAIR}", name_of(claim)),
        };
        let changed = now.minute().is_multiple_of(5);
        return Some((
            due.at,
            Action::Blocked {
                node: node_name,
                reason,
                changed,
            },
        ));
    }
    let pool = nodepool_of(claim);
    let (unhealthy, total) = pool_health(dump, &pool);
    if unhealthy > allowed_unhealthy(total) {
        let blocked = Action::RepairBlocked {
            node: node_name,
            nodepool: pool,
            unhealthy,
            nodes: total,
            said: now.minute().is_multiple_of(5),
        };
        return Some((due.at, blocked));
    }
    if due.reboot && super::reboot::recent(claim, now) < super::reboot::BEFORE_REPLACEMENT {
        // The NodeClaim's own grace, when it ends first, bounds the reboot's drain too.
        let grace = super::in_progress::grace_deadline(claim, now)
            .map_or(due.drain, |own| (own - now).min(due.drain));
        let commit = super::reboot::commit(claim, node_name, pool, due.condition, grace, now);
        return Some((due.at, commit));
    }
    Some((due.at, repair_action(dump, claim, node, due, now, mode)))
}

/// The [`Action::Repair`] of a node whose repair is due.
fn repair_action(
    dump: &ClusterDump,
    claim: &NodeClaim,
    node: &Node,
    due: Due,
    now: DateTime<Utc>,
    mode: NodeRepair,
) -> Action {
    let terminate_at = match (mode, ready(node)) {
        // The repair of before v1.15: a node not Ready at once, a Ready one by its own grace.
        (NodeRepair::Legacy, true) => None,
        (NodeRepair::Legacy, false) => Some(now),
        // The NodeClaim's own grace, when it ends first, as Karpenter takes the shorter.
        _ => Some(
            super::in_progress::grace_deadline(claim, now)
                .map_or(now + due.drain, |own| own.min(now + due.drain)),
        ),
    };
    let mut disrupted = super::disrupted::of(dump, claim, "unhealthy");
    disrupted.termination_mode = super::disrupted::repair_mode(claim, terminate_at, now);
    Action::Repair {
        nodeclaim: name_of(claim),
        node: node.metadata.name.clone().unwrap_or_default(),
        nodepool: nodepool_of(claim),
        condition: due.condition,
        terminate_at,
        disrupted,
    }
}

/// The repair of a node admitted earlier (its replacements launched first), now: the
/// [`Action::Repair`], or why it no longer goes ahead (the node is healthy again, or has been
/// marked `karpenter.sh/do-not-repair` since).
pub(crate) fn repair_now(
    dump: &ClusterDump,
    claim: &NodeClaim,
    now: DateTime<Utc>,
    mode: NodeRepair,
) -> Result<Action, &'static str> {
    let node = dump.node_of(claim).ok_or("its node is gone")?;
    if vetoed(node.metadata.annotations.as_ref()) || vetoed(claim.metadata.annotations.as_ref()) {
        return Err("it has been marked karpenter.sh/do-not-repair since");
    }
    // A condition that changed status (Ready False to Unknown) starts its toleration again, but
    // the node is no healthier: only a node with no unhealthy condition left is spared.
    if !unhealthy(node) {
        return Err("the node is healthy again");
    }
    let (sick, total) = pool_health(dump, &nodepool_of(claim));
    if sick > allowed_unhealthy(total) {
        return Err("more than 20 % of its NodePool's nodes are unhealthy now");
    }
    let due =
        due_repair(node, mode, super::reboot::finished_at(claim), now).unwrap_or_else(|| Due {
            at: now,
            condition: conditions(node)
                .find(|c| {
                    POLICIES
                        .iter()
                        .any(|p| p.condition == c.type_ && p.status == c.status)
                })
                .map(|c| format!("{}={}", c.type_, c.status))
                .unwrap_or_default(),
            drain: FALLBACK.drain,
            reboot: false,
        });
    Ok(repair_action(dump, claim, node, due, now, mode))
}

/// The NodePool a NodeClaim is labelled with.
fn nodepool_of(claim: &NodeClaim) -> String {
    claim
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(NODEPOOL))
        .cloned()
        .unwrap_or_default()
}

/// A node's repair once one of its policies is due: when the first became due, the condition
/// it names, the shortest drain of the policies due, and whether a reboot is what they call for
/// (every policy due reboots, and reboots are on: a replacing one is the more disruptive).
struct Due {
    at: DateTime<Utc>,
    condition: String,
    drain: Duration,
    reboot: bool,
}

/// The node's repair if a policy is due at `now` (see [`matches`]). A node that has just
/// rebooted (`not_before`) waits each toleration out again from then, as its conditions may
/// not have caught up with the new boot yet.
fn due_repair(
    node: &Node,
    mode: NodeRepair,
    not_before: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Option<Due> {
    let due: Vec<(&NodeCondition, &RepairPolicy, DateTime<Utc>)> = matches(node, mode)
        .into_iter()
        .map(|(c, p, at)| (c, p, not_before.map_or(at, |t| at.max(t + p.toleration))))
        .filter(|(_, _, at)| *at <= now)
        .collect();
    let (condition, _, at) = due.iter().min_by_key(|(_, _, at)| *at)?;
    let reboot =
        mode == NodeRepair::Reboot && due.iter().all(|(_, p, _)| p.action == RepairAction::Reboot);
    Some(Due {
        at: *at,
        condition: format!("{}={}", condition.type_, condition.status),
        drain: due.iter().map(|(_, p, _)| p.drain).min()?,
        reboot,
    })
}

/// Each of the node's conditions that a policy names, with the policies that take its reason
/// (the fallback when none does) and when each is due: its last transition plus the policy's
/// toleration. A node cannot have been unhealthy for longer than it has existed: a condition
/// without a transition time (a kubelet still registering writes `Ready=False` so) counts
/// from the Node's creation, and with neither known nothing is due.
fn matches(
    node: &Node,
    mode: NodeRepair,
) -> Vec<(&NodeCondition, &'static RepairPolicy, DateTime<Utc>)> {
    let seconds = |t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time| {
        DateTime::from_timestamp(t.0.as_second(), 0)
    };
    let created = node.metadata.creation_timestamp.as_ref().and_then(seconds);
    let mut out = Vec::new();
    for c in conditions(node) {
        let changed = c.last_transition_time.as_ref().and_then(seconds);
        let since = match (changed, created) {
            (Some(changed), Some(created)) => changed.max(created),
            (known, None) | (None, known) => match known {
                Some(known) => known,
                None => continue,
            },
        };
        for p in policies_for(c, mode) {
            out.push((c, p, since + p.toleration));
        }
    }
    out
}

/// The policies that take this condition: those naming its type and status whose reasons
/// take its reason, or the fallback when they name it and none does.
fn policies_for(c: &NodeCondition, mode: NodeRepair) -> Vec<&'static RepairPolicy> {
    let set: &'static [RepairPolicy] = match mode {
        NodeRepair::Legacy => &LEGACY_POLICIES,
        _ => &POLICIES,
    };
    let named = |p: &&RepairPolicy| p.condition == c.type_ && p.status == c.status;
    let reason = c.reason.as_deref().unwrap_or_default();
    let taken: Vec<&RepairPolicy> = set
        .iter()
        .filter(named)
        .filter(|p| p.reasons.take(reason))
        .collect();
    if taken.is_empty() && set.iter().any(|p| named(&p)) {
        return vec![&FALLBACK];
    }
    taken
}

fn conditions(node: &Node) -> impl Iterator<Item = &NodeCondition> {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
}

/// Whether the node's `Ready` condition is `True`: its pods are running, so a repair never
/// takes them away before their new place is ready.
pub(crate) fn ready(node: &Node) -> bool {
    conditions(node).any(|c| c.type_ == conditions::READY && c.status == "True")
}

/// Whether any repair policy's condition holds on the node, however briefly (Karpenter's
/// breaker counts a node so, whatever the reason).
pub fn unhealthy(node: &Node) -> bool {
    conditions(node).any(|c| {
        POLICIES
            .iter()
            .any(|p| p.condition == c.type_ && p.status == c.status)
    })
}

/// The pool's unhealthy nodes and all its nodes (the nodes labelled with it).
fn pool_health(dump: &ClusterDump, pool: &str) -> (usize, usize) {
    // A node still starting (its NodeClaim, found by provider id as registration may not have
    // linked them yet, not initialized) reports Ready False while its kubelet comes up: that is
    // no failure, and it is no member of the pool's health yet.
    let starting = |n: &Node| {
        let id = n.spec.as_ref().and_then(|s| s.provider_id.as_deref());
        id.is_some()
            && dump.nodeclaims.iter().any(|c| {
                c.status.as_ref().and_then(|s| s.provider_id.as_deref()) == id
                    && !claim_initialized(c)
            })
    };
    let nodes: Vec<&Node> = pool_nodes(dump, pool)
        .into_iter()
        .filter(|n| !starting(n))
        .collect();
    let sick = nodes.iter().filter(|n| unhealthy(n)).count();
    (sick, nodes.len())
}

/// The nodes labelled with the pool.
fn pool_nodes<'a>(dump: &'a ClusterDump, pool: &str) -> Vec<&'a Node> {
    dump.nodes
        .iter()
        .filter(|n| {
            n.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(NODEPOOL))
                .is_some_and(|p| p == pool)
        })
        .collect()
}

/// How many of `total` nodes may be unhealthy with repair going on: 20 %, rounded up, as a
/// PodDisruptionBudget's percentages round (three nodes allow one).
pub fn allowed_unhealthy(total: usize) -> usize {
    (total * ALLOWED_UNHEALTHY_PERCENT as usize).div_ceil(100)
}

/// When the NodeClaim's termination timestamp says its grace is over, if it says. The timestamp
/// belongs to the repair that wrote it: it holds only while the NodeClaim is still marked
/// `unhealthy`, so one left behind by a repair that never went through cannot cut short the
/// drain of a later deletion.
pub fn termination_timestamp(claim: &NodeClaim) -> Option<DateTime<Utc>> {
    let annotations = claim.metadata.annotations.as_ref()?;
    let command = annotations.get(super::in_progress::DISRUPTION_ANNOTATION)?;
    if !command.starts_with("unhealthy/") {
        return None;
    }
    let text = annotations.get(TERMINATION_TIMESTAMP)?;
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

#[cfg(test)]
#[path = "../../tests/unit/tick/repair.rs"]
mod tests;
