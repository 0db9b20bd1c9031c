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
use super::replace::replace_each;
use super::Disruption;

/// What repairing a node takes first.
#[derive(Clone, Debug, PartialEq)]
pub enum RepairPlan {
    /// The command: its replacements launch first (a `Replace`), or none is needed (a
    /// `Delete`: its pods fit on initialized nodes that stay, or it holds none).
    Go(Box<Disruption>),
    /// Its pods would land on capacity that has not initialized yet: the repair waits for it,
    /// as Karpenter never counts on an uninitialized node.
    Wait(String),
    /// Its pods cannot all be placed before it goes (limits, a static pool at its node limit,
    /// a pod no pool can take): why.
    Unplaceable(String),
}

/// How the node's repair is planned: its pods placed over the cluster without it (and without
/// the nodes other commands are taking away), onto nodes that stay and onto new NodeClaims. Pods
/// already leaving (being deleted, StatefulSet pods aside, whose names come back) and mirror
/// pods need no place ([`crate::model::Pod::needs_place`]), as when a drain's deadline moves
/// them. Its DaemonSet pods stay as they are: the plan reads them as the node's DaemonSet
/// overhead.
pub fn repair_command(snapshot: &Snapshot, catalog: &Catalog, node: &str, now: i64) -> RepairPlan {
    let mut sim = snapshot.clone();
    for pod in sim.pods.iter_mut() {
        let leaving = !pod.needs_place() && !pod.is_daemonset();
        if pod.node_name.as_deref() == Some(node) && leaving {
            pod.terminal = true;
        }
    }
    let command = match plan_command(&sim, catalog, node, now) {
        Ok(command) => command,
        Err(why) => return RepairPlan::Unplaceable(why),
    };
    let uninitialized = command
        .moves
        .iter()
        .find(|(_, target)| !initialized(snapshot, target));
    match uninitialized {
        Some((pod, target)) => RepairPlan::Wait(format!(
            "pod {pod} would move onto {target}, which has not initialized yet"
        )),
        None => RepairPlan::Go(Box::new(command)),
    }
}

/// The repair's command as drift plans a replacement: `replace_each` under reason `Unhealthy`.
fn plan_command(
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
    let price = Prices::new(catalog).of(&n.labels);
    let candidate = Candidate {
        node: n,
        claim,
        pool,
        price: price.unwrap_or(0.0),
        priced: price.is_some(),
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

/// Whether pods may count on `target`: a ready node whose NodeClaim (if it has one) has
/// initialized.
fn initialized(snapshot: &Snapshot, target: &str) -> bool {
    let ready = snapshot.nodes.iter().any(|n| n.name == target && n.ready);
    let claim = snapshot
        .nodeclaims
        .iter()
        .find(|c| c.node_name.as_deref() == Some(target));
    ready && claim.is_none_or(|c| c.initialized)
}
