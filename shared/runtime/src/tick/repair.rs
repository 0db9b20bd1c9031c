//! Node repair, as Karpenter's node health controller with the AWS provider's repair policies
//! (off unless `FLEETWRIGHT_NODE_REPAIR` is set, as Karpenter's `NodeRepair` feature gate is):
//! a node whose `Ready` condition has been `False` or `Unknown` for 30 minutes, or whose
//! node-monitoring-agent condition (`AcceleratedHardwareReady` 10 minutes, `StorageReady`,
//! `NetworkingReady`, `KernelReady`, `ContainerRuntimeReady` 30 minutes) has been `False` that
//! long, has its NodeClaim deleted. As in Karpenter v1.15, repair is paced by the NodePool's
//! disruption budgets under the reason `Unhealthy` (the nodes it may take at once, with those
//! already being disrupted counted), the nodes unhealthy longest first; `karpenter.sh/do-not-repair`
//! on the Node or NodeClaim vetoes it. The pool's health is a guard as well: no repair while
//! more than 20 % of a NodePool's nodes (rounded up, at least one) are unhealthy, since a fault
//! that wide is the cluster's, not the node's.
//!
//! A node that is not Ready (its kubelet is gone or broken) is repaired forcefully, as Karpenter
//! does: its NodeClaim's termination timestamp is set to now, so the deletion deletes its pods
//! instead of waiting on evictions that cannot complete. A Ready node with a failed
//! monitoring-agent condition is drained as any deleted NodeClaim is, through the Eviction API
//! (PodDisruptionBudgets and `do-not-disrupt` hold until its `terminationGracePeriod`): its pods
//! still run, so they get their graceful shutdown. Pure: the dump and `now` in, actions out.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Timelike, Utc};
use fleetwright_core::disruption::budget::{self, Reason};
use fleetwright_core::labels::{NODEPOOL, TAINT_DISRUPTED};
use fleetwright_core::model::NodePool;
use fleetwright_crds::NodeClaim;
use fleetwright_kube::dump::ClusterDump;
use k8s_openapi::api::core::v1::{Node, NodeCondition};

use super::action::Action;
use super::claims::name_of;
use fleetwright_crds::conditions;

/// On a NodeClaim: when its drain's grace is over (RFC 3339), as Karpenter writes it. The
/// deletion deletes the pods left on the node from then on.
pub const TERMINATION_TIMESTAMP: &str = "karpenter.sh/nodeclaim-termination-timestamp";
/// On a Node or NodeClaim: never repair it (Karpenter v1.15).
pub const DO_NOT_REPAIR: &str = "karpenter.sh/do-not-repair";
/// The share of a NodePool's nodes that may be unhealthy with repair still going on.
pub const ALLOWED_UNHEALTHY_PERCENT: u32 = 20;

/// One repair policy: a node condition, the status that is unhealthy, and how long it is
/// tolerated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RepairPolicy {
    pub condition: &'static str,
    pub status: &'static str,
    pub toleration: Duration,
}

const fn policy(condition: &'static str, status: &'static str, minutes: i64) -> RepairPolicy {
    RepairPolicy {
        condition,
        status,
        toleration: Duration::minutes(minutes),
    }
}

/// The AWS provider's repair policies (Karpenter v1.14): the kubelet's `Ready`, and the EKS
/// node monitoring agent's conditions.
pub const POLICIES: [RepairPolicy; 7] = [
    policy(conditions::READY, "False", 30),
    policy(conditions::READY, "Unknown", 30),
    policy("AcceleratedHardwareReady", "False", 10),
    policy("StorageReady", "False", 30),
    policy("NetworkingReady", "False", 30),
    policy("KernelReady", "False", 30),
    policy("ContainerRuntimeReady", "False", 30),
];

/// The repairs due at `now`: a [`Action::Repair`] for each managed node unhealthy past its
/// toleration in a pool healthy enough, within its pool's `Unhealthy` budget (the longest due
/// first); a [`Action::RepairBlocked`] for each held back by the pool's health, and an
/// [`Action::Blocked`] for each held back by the budget or `do-not-repair`. `pools` are the
/// NodePools as read (their budgets).
pub fn repairs(
    dump: &ClusterDump,
    claims: &[NodeClaim],
    pools: &[NodePool],
    now: DateTime<Utc>,
) -> Vec<Action> {
    let mut due: Vec<(DateTime<Utc>, Action)> = claims
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .filter_map(|claim| repair(dump, claim, now))
        .collect();
    due.sort_by_key(|(at, _)| *at);
    let mut left: BTreeMap<String, usize> = BTreeMap::new();
    let said = now.minute().is_multiple_of(5);
    due.into_iter()
        .map(|(_, action)| {
            let Action::Repair { node, nodepool, .. } = &action else {
                return action;
            };
            let n = left
                .entry(nodepool.clone())
                .or_insert_with(|| allowance(dump, claims, pools, nodepool, now));
            if *n == 0 {
                return Action::Blocked {
                    node: node.clone(),
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

/// How many more of the pool's nodes repair may take now: its budgets for `Unhealthy`, less
/// the nodes already going (see [`going`]). A pool not read (gone) allows none.
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
    let nodes = pool_nodes(dump, pool);
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
                || super::expiration::expires_at(c).is_some_and(|at| now >= at)
        })
        .filter_map(|c| c.status.as_ref().and_then(|s| s.node_name.clone()))
        .collect()
}

/// Whether the node is already going: deleted, or tainted by a disruption or a deletion.
fn leaving(node: &Node) -> bool {
    node.metadata.deletion_timestamp.is_some()
        || node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .is_some_and(|t| t.iter().any(|t| t.key == TAINT_DISRUPTED))
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
) -> Option<(DateTime<Utc>, Action)> {
    let node = dump.node_of(claim)?;
    let (condition, due) = unhealthy_since(node)?;
    if now < due {
        return None;
    }
    let node_name = node.metadata.name.clone().unwrap_or_default();
    if vetoed(node.metadata.annotations.as_ref()) || vetoed(claim.metadata.annotations.as_ref()) {
        let reason = format!("node has {DO_NOT_REPAIR}");
        let changed = now.minute().is_multiple_of(5);
        return Some((
            due,
            Action::Blocked {
                node: node_name,
                reason,
                changed,
            },
        ));
    }
    let pool = claim
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(NODEPOOL))
        .cloned()
        .unwrap_or_default();
    let (unhealthy, total) = pool_health(dump, &pool);
    if unhealthy > allowed_unhealthy(total) {
        let blocked = Action::RepairBlocked {
            node: node_name,
            nodepool: pool,
            unhealthy,
            nodes: total,
            said: now.minute().is_multiple_of(5),
        };
        return Some((due, blocked));
    }
    let action = Action::Repair {
        nodeclaim: name_of(claim),
        node: node_name,
        nodepool: pool,
        condition: format!("{}={}", condition.type_, condition.status),
        forceful: !ready(node),
    };
    Some((due, action))
}

/// The node's unhealthy condition that is due first, and when it is due (its last transition
/// plus the policy's toleration). A node cannot have been unhealthy for longer than it has
/// existed: a condition without a transition time (a kubelet still registering writes
/// `Ready=False` so) counts from the Node's creation, and with neither known nothing is due.
fn unhealthy_since(node: &Node) -> Option<(&NodeCondition, DateTime<Utc>)> {
    let seconds = |t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time| {
        DateTime::from_timestamp(t.0.as_second(), 0)
    };
    let created = node.metadata.creation_timestamp.as_ref().and_then(seconds);
    POLICIES
        .iter()
        .filter_map(|p| {
            let c = matching(node, p)?;
            let changed = c.last_transition_time.as_ref().and_then(seconds);
            let since = match (changed, created) {
                (Some(changed), Some(created)) => changed.max(created),
                (known, None) | (None, known) => known?,
            };
            Some((c, since + p.toleration))
        })
        .min_by_key(|(_, due)| *due)
}

fn matching<'a>(node: &'a Node, policy: &RepairPolicy) -> Option<&'a NodeCondition> {
    conditions(node).find(|c| c.type_ == policy.condition && c.status == policy.status)
}

fn conditions(node: &Node) -> impl Iterator<Item = &NodeCondition> {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
}

/// Whether the node's `Ready` condition is `True`.
fn ready(node: &Node) -> bool {
    conditions(node).any(|c| c.type_ == conditions::READY && c.status == "True")
}

/// Whether any repair policy's condition holds on the node, however briefly.
pub fn unhealthy(node: &Node) -> bool {
    POLICIES.iter().any(|p| matching(node, p).is_some())
}

/// The pool's unhealthy nodes and all its nodes (the nodes labelled with it).
fn pool_health(dump: &ClusterDump, pool: &str) -> (usize, usize) {
    let nodes = pool_nodes(dump, pool);
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

/// When the NodeClaim's termination timestamp says its grace is over, if it says.
pub fn termination_timestamp(claim: &NodeClaim) -> Option<DateTime<Utc>> {
    let text = claim
        .metadata
        .annotations
        .as_ref()?
        .get(TERMINATION_TIMESTAMP)?;
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

#[cfg(test)]
#[path = "../../tests/unit/tick/repair.rs"]
mod tests;
