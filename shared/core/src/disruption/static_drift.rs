//! Drift and repair replacement in static NodePools: one node launched for each drifted or
//! unhealthy one, from the pool's template, and only while the pool is at its replicas and below
//! its `limits.nodes`.

use crate::catalog::Catalog;
use crate::labels::DISRUPTION_COMMAND;
use crate::model::{NodeClaim, NodePool, Snapshot};
use crate::plan::NewNodeClaim;
use crate::requirements::{Operator, Requirement, Requirements};
use crate::scheduler::static_claim;

use super::candidates::Candidate;

/// Why a static pool cannot stage a replacement now, in words.
pub(super) enum NoRoom {
    /// It is above its replicas: its scale-down goes first.
    ScalingDown(String),
    /// It is at its `limits.nodes`.
    AtLimit(String),
}

/// Whether a static pool may stage one more replacement, `staged` being staged already by this
/// plan: not while it is above its replicas (a scale-down goes first), and not past its
/// `limits.nodes`, counting every NodeClaim it has (in flight, leaving and deleting ones too:
/// their instances still run), as Karpenter's static drift counts them. A pool at its limit
/// keeps its drifted nodes, each reported blocked, rather than run one node over the limit.
pub(super) fn static_room(
    snapshot: &Snapshot,
    pool: &NodePool,
    replicas: i64,
    staged: i64,
) -> Result<(), NoRoom> {
    let all: Vec<&NodeClaim> = snapshot
        .nodeclaims
        .iter()
        .filter(|c| c.nodepool == pool.name)
        .collect();
    let staying = all
        .iter()
        .filter(|c| !c.deleting && !c.annotations.contains_key(DISRUPTION_COMMAND))
        .count() as i64;
    if staying > replicas {
        return Err(NoRoom::ScalingDown(format!(
            "static NodePool is above its {replicas} replica(s); its scale-down goes first"
        )));
    }
    let limit = pool.limits.as_ref().and_then(|l| l.extended.get("nodes"));
    match limit {
        Some(&limit) if all.len() as i64 + staged >= limit => Err(NoRoom::AtLimit(format!(
            "static NodePool is at its node limit (limits.nodes {limit}) and cannot stage a replacement"
        ))),
        _ => Ok(()),
    }
}

/// The replacement a static pool's drifted node gets (its template's node), and the snapshot
/// with it in flight, for the candidate's pods to be placed on.
pub(super) fn staged(
    snapshot: &Snapshot,
    catalog: &Catalog,
    c: &Candidate,
    now: i64,
) -> Result<(NewNodeClaim, Snapshot), String> {
    let claim = static_claim(snapshot, catalog, c.pool)
        .ok_or_else(|| format!("no instance type of nodepool {:?} is left", c.pool.name))?;
    let mut with = snapshot.clone();
    with.nodeclaims.push(in_flight(
        &claim,
        &format!("{}-replacement", c.claim.name),
        now,
    ));
    Ok((claim, with))
}

/// A planned NodeClaim as the scheduler sees one that is launching.
fn in_flight(planned: &NewNodeClaim, name: &str, now: i64) -> NodeClaim {
    let mut requirements = Requirements::new();
    for r in &planned.requirements {
        if let Some(req) =
            Operator::parse(&r.operator).and_then(|op| Requirement::new(&r.key, op, &r.values).ok())
        {
            requirements.add(req);
        }
    }
    NodeClaim {
        name: name.to_string(),
        nodepool: planned.nodepool.clone(),
        requirements,
        labels: planned.labels.clone(),
        taints: planned.taints.clone(),
        created: now,
        ..Default::default()
    }
}
