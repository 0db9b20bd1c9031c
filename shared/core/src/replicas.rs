//! Static NodePools (`spec.replicas`, Karpenter's static capacity): which NodeClaims to create
//! to bring each pool up to its replicas (within `limits.nodes`), and which to delete above them.
//! A static pool launches for its replicas, never for pending pods, and its nodes are never
//! consolidated (see the scheduler and [`crate::disruption`]); drift and expiry still replace
//! them one for one. Scaling down bypasses the disruption budgets, as in Karpenter; the drain
//! that follows still respects PodDisruptionBudgets. Pure: decisions as data.

use std::cmp::Reverse;

use serde::Serialize;

use crate::catalog::Catalog;
use crate::labels::{DO_NOT_DISRUPT, TAINT_DISRUPTED};
use crate::model::{NodeClaim, NodePool, Protection, Snapshot};
use crate::plan::NewNodeClaim;
use crate::scheduler::static_claim;

/// What the static pools need now.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaPlan {
    /// NodeClaims to create, each from its pool's template.
    pub create: Vec<NewNodeClaim>,
    /// NodeClaims to delete (names), the pool being above its replicas.
    pub delete: Vec<String>,
    /// Pools that cannot reach their replicas, and why.
    pub short: Vec<(String, String)>,
}

/// Decides, for every static pool of the snapshot, what brings it to its replicas.
pub fn plan(snapshot: &Snapshot, catalog: &Catalog, now: i64) -> ReplicaPlan {
    let mut out = ReplicaPlan::default();
    for pool in snapshot.nodepools.iter().filter(|p| !p.deleting) {
        let Some(replicas) = pool.replicas else {
            continue;
        };
        let claims: Vec<&NodeClaim> = snapshot
            .nodeclaims
            .iter()
            .filter(|c| c.nodepool == pool.name && !c.deleting)
            .collect();
        let active: Vec<&NodeClaim> = claims
            .iter()
            .copied()
            .filter(|c| !leaving(snapshot, c))
            .collect();
        let count = active.len() as i64;
        // `limits.nodes` counts the deleting NodeClaims too: their instances still run.
        let total = snapshot
            .nodeclaims
            .iter()
            .filter(|c| c.nodepool == pool.name)
            .count() as i64;
        if count < replicas {
            scale_up(snapshot, catalog, pool, replicas - count, total, &mut out);
        } else if count > replicas {
            out.delete.extend(scale_down(
                snapshot,
                active,
                (count - replicas) as usize,
                now,
            ));
        }
    }
    out
}

/// A NodeClaim whose node a disruption command is taking away (tainted
/// `karpenter.sh/disrupted`, or carrying the command before a cut-off tick tainted it): its
/// replacement stands in for it.
fn leaving(snapshot: &Snapshot, claim: &NodeClaim) -> bool {
    if claim
        .annotations
        .contains_key(crate::labels::DISRUPTION_COMMAND)
    {
        return true;
    }
    claim.node_name.as_deref().is_some_and(|name| {
        snapshot
            .nodes
            .iter()
            .any(|n| n.name == name && n.taints.iter().any(|t| t.key == TAINT_DISRUPTED))
    })
}

fn scale_up(
    snapshot: &Snapshot,
    catalog: &Catalog,
    pool: &NodePool,
    missing: i64,
    total: i64,
    out: &mut ReplicaPlan,
) {
    let limit = pool
        .limits
        .as_ref()
        .and_then(|l| l.extended.get("nodes").copied())
        .unwrap_or(i64::MAX);
    let allowed = missing.min(limit.saturating_sub(total)).max(0);
    if allowed < missing {
        out.short.push((
            pool.name.clone(),
            format!("limits.nodes {limit} leaves room for {allowed} of {missing} more"),
        ));
    }
    if allowed == 0 {
        return;
    }
    match static_claim(snapshot, catalog, pool) {
        Some(claim) => out
            .create
            .extend(std::iter::repeat_n(claim, allowed as usize)),
        None => out.short.push((
            pool.name.clone(),
            "no instance type of the catalog meets its requirements".into(),
        )),
    }
}

/// The `excess` NodeClaims that cost least to take away: not yet a node first, then those
/// whose node no `karpenter.sh/do-not-disrupt` protects, with the fewest pods, newest first.
fn scale_down(
    snapshot: &Snapshot,
    mut active: Vec<&NodeClaim>,
    excess: usize,
    now: i64,
) -> Vec<String> {
    let cost = |c: &NodeClaim| {
        let node = c.node_name.as_deref();
        let pods: Vec<_> = snapshot
            .pods
            .iter()
            .filter(|p| p.node_name.as_deref() == node && node.is_some())
            .filter(|p| !p.is_daemonset() && !p.terminal)
            .collect();
        let protected = pods.iter().any(|p| p.do_not_disrupt.holds(now))
            || Protection::from_annotation(
                c.annotations.get(DO_NOT_DISRUPT).map(String::as_str),
                c.created,
            )
            .holds(now);
        (
            node.is_some(),
            protected,
            pods.len(),
            Reverse(c.created),
            c.name.clone(),
        )
    };
    active.sort_by_cached_key(|c| cost(c));
    active
        .into_iter()
        .take(excess)
        .map(|c| c.name.clone())
        .collect()
}
