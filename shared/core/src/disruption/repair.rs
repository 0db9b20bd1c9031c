//! Where a repaired node's pods go, planned before the node goes: Karpenter v1.15's repair
//! pre-spins the replacements a workload-bearing node needs, so its pods move onto capacity
//! that is already there. Every pod of the node is planned, those a PodDisruptionBudget or
//! `karpenter.sh/do-not-disrupt` holds included: repair's bounded drain moves them too. Which
//! node to repair, and when, is the caller's (the tick's repair policies and budgets).

use crate::catalog::Catalog;
use crate::labels::{CAPACITY_SPOT, CAPACITY_TYPE};
use crate::model::Snapshot;

use super::budget::Reason;
use super::candidates::{pod_cost, Candidate, Prices};
use super::consolidation::replace_each;
use super::Disruption;

/// The command that repairs `node`: its pods planned over the cluster without it (and without
/// the nodes other commands are taking away), onto nodes that stay and onto new NodeClaims,
/// which launch first. A `Delete` when they all fit on nodes that stay, or when the node holds
/// none. Why its pods cannot all be placed, otherwise (the caller may repair without them).
pub fn repair_command(
    snapshot: &Snapshot,
    catalog: &Catalog,
    node: &str,
    now: i64,
) -> Result<Disruption, String> {
    let n = snapshot
        .nodes
        .iter()
        .find(|n| n.name == node)
        .ok_or_else(|| format!("node {node} is not in the snapshot"))?;
    let claim = snapshot
        .nodeclaims
        .iter()
        .find(|c| c.node_name.as_deref() == Some(node))
        .ok_or_else(|| format!("node {node} has no NodeClaim"))?;
    let pool = snapshot
        .nodepools
        .iter()
        .find(|p| p.name == claim.nodepool)
        .ok_or_else(|| format!("NodePool {} is not planned", claim.nodepool))?;
    let pods: Vec<_> = snapshot
        .pods
        .iter()
        .filter(|p| !p.terminal && !p.is_daemonset() && p.node_name.as_deref() == Some(node))
        .collect();
    let candidate = Candidate {
        node: n,
        claim,
        pool,
        price: Prices::new(catalog).of(&n.labels).unwrap_or(0.0),
        spot: n.labels.get(CAPACITY_TYPE).map(String::as_str) == Some(CAPACITY_SPOT),
        cost: pods.iter().map(|p| pod_cost(p)).sum(),
        pods,
        held: None,
    };
    let mut blocked = Vec::new();
    let mut commands = replace_each(
        snapshot,
        catalog,
        &[&candidate],
        Reason::Unhealthy,
        now,
        &mut blocked,
    );
    match commands.pop() {
        Some(command) => Ok(command),
        None => Err(blocked
            .pop()
            .map_or_else(|| "its pods could not be planned".into(), |b| b.reason)),
    }
}
