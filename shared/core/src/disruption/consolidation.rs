//! Commands: deleting empty nodes, replacing expired or drifted ones, and consolidation (multi-node
//! first, then single nodes), each checked by re-running the scheduler over the cluster without
//! the candidates.

use std::collections::{BTreeMap, BTreeSet};

use crate::catalog::Catalog;
use crate::labels::{CAPACITY_SPOT, CAPACITY_TYPE, INSTANCE_TYPE, ZONE};
use crate::model::Snapshot;
use crate::plan::NewNodeClaim;
use crate::scheduler::{schedule, ScheduleOptions};

use super::budget::{Budgets, Reason};
use super::candidates::{disrupting, pdb_blocks, Candidate, Prices};
use super::{Blocked, Command, Disruption, Replacement, MAX_MULTI_NODE, MIN_SPOT_OPTIONS};

pub(crate) fn delete_all(candidates: &[&Candidate], reason: Reason) -> Vec<Disruption> {
    if candidates.is_empty() {
        return Vec::new();
    }
    vec![Disruption {
        command: Command::Delete,
        reason,
        nodes: candidates.iter().map(|c| c.node.name.clone()).collect(),
        replacement: None,
        savings: round4(candidates.iter().map(|c| c.price).sum()),
    }]
}

pub(crate) fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

/// What scheduling the candidates' pods elsewhere gives: the new NodeClaims needed, or why the
/// pods cannot move.
pub(crate) fn simulate(
    snapshot: &Snapshot,
    catalog: &Catalog,
    candidates: &[&Candidate],
    now: i64,
) -> Result<Vec<NewNodeClaim>, String> {
    // The candidates go, and so do the nodes of commands already in progress: their pods need a
    // place too, so a new command never takes the room they are moving into.
    let removed: BTreeSet<&str> = candidates
        .iter()
        .map(|c| c.node.name.as_str())
        .chain(
            snapshot
                .nodes
                .iter()
                .filter(|n| disrupting(n))
                .map(|n| n.name.as_str()),
        )
        .collect();
    let mut sim = snapshot.clone();
    sim.nodes.retain(|n| !removed.contains(n.name.as_str()));
    sim.nodeclaims
        .retain(|c| !c.node_name.as_deref().is_some_and(|n| removed.contains(n)));
    sim.pods.retain(|p| p.node_name.is_some() || p.terminal);
    for pod in &mut sim.pods {
        if pod
            .node_name
            .as_deref()
            .is_some_and(|n| removed.contains(n))
        {
            if pod.is_daemonset() {
                pod.terminal = true;
            } else {
                pod.node_name = None;
            }
        }
    }
    let plan = schedule(
        &sim,
        catalog,
        &ScheduleOptions {
            now,
            ..Default::default()
        },
    );
    match plan.unschedulable.first() {
        Some(u) => Err(format!(
            "pod {} would not fit elsewhere: {}",
            u.pod, u.reason
        )),
        None => Ok(plan.nodeclaims),
    }
}

/// Expired and drifted nodes, one command each (budgets already applied).
pub(crate) fn replace_each(
    snapshot: &Snapshot,
    catalog: &Catalog,
    candidates: &[&Candidate],
    reason: Reason,
    now: i64,
    blocked: &mut Vec<Blocked>,
) -> Vec<Disruption> {
    let mut out = Vec::new();
    for c in candidates {
        match simulate(snapshot, catalog, &[c], now) {
            Ok(claims) if claims.len() <= 1 => {
                let replacement = claims.into_iter().next().map(replacement_of);
                let cost = replacement.as_ref().map_or(0.0, |r| r.price);
                out.push(Disruption {
                    command: if replacement.is_some() {
                        Command::Replace
                    } else {
                        Command::Delete
                    },
                    reason,
                    nodes: vec![c.node.name.clone()],
                    replacement,
                    savings: round4(c.price - cost),
                });
            }
            Ok(claims) => blocked.push(Blocked {
                node: c.node.name.clone(),
                reason: format!(
                    "{}: its pods need {} new nodes",
                    reason.as_str(),
                    claims.len()
                ),
            }),
            Err(why) => blocked.push(Blocked {
                node: c.node.name.clone(),
                reason: format!("{}: {why}", reason.as_str()),
            }),
        }
    }
    out
}

pub(crate) fn replacement_of(claim: NewNodeClaim) -> Replacement {
    Replacement {
        instance_types: claim.instance_types.clone(),
        capacity_types: claim.capacity_types.clone(),
        zones: claim.zones.clone(),
        price: claim.price,
        nodeclaim: claim,
    }
}

/// A consolidation of these candidates, if one is allowed and saves money.
pub(crate) fn consolidation(
    snapshot: &Snapshot,
    catalog: &Catalog,
    candidates: &[&Candidate],
    now: i64,
) -> Result<Disruption, String> {
    if let Some(reason) = pdb_blocks(
        snapshot,
        &candidates
            .iter()
            .flat_map(|c| c.pods.iter().copied())
            .collect::<Vec<_>>(),
    ) {
        return Err(reason);
    }
    let claims = simulate(snapshot, catalog, candidates, now)?;
    let total: f64 = candidates.iter().map(|c| c.price).sum();
    let nodes: Vec<String> = candidates.iter().map(|c| c.node.name.clone()).collect();
    let reason = if candidates.iter().all(|c| c.pods.is_empty()) {
        Reason::Empty
    } else {
        Reason::Underutilized
    };
    match claims.len() {
        0 => Ok(Disruption {
            command: Command::Delete,
            reason,
            nodes,
            replacement: None,
            savings: round4(total),
        }),
        1 => {
            let ceiling = candidates.iter().map(|c| c.price).fold(0.0, f64::max);
            let claim = claims
                .into_iter()
                .next()
                .ok_or("no replacement was planned")?;
            let replacement = cheaper(catalog, claim, ceiling, candidates)?;
            Ok(Disruption {
                command: Command::Replace,
                reason,
                nodes,
                savings: round4(total - replacement.price),
                replacement: Some(replacement),
            })
        }
        n => Err(format!("its pods would need {n} new nodes")),
    }
}

/// The replacement's options cut to those strictly cheaper than `ceiling` (the dearest
/// candidate), with Karpenter's spot-to-spot diversity rule.
pub(crate) fn cheaper(
    catalog: &Catalog,
    claim: NewNodeClaim,
    ceiling: f64,
    candidates: &[&Candidate],
) -> Result<Replacement, String> {
    let prices = Prices::new(catalog);
    let cheapest = |t: &str, capacity: &str| {
        claim
            .zones
            .iter()
            .filter_map(|z| {
                let labels: BTreeMap<String, String> = [
                    (INSTANCE_TYPE.to_string(), t.to_string()),
                    (ZONE.to_string(), z.clone()),
                    (CAPACITY_TYPE.to_string(), capacity.to_string()),
                ]
                .into();
                prices.of(&labels)
            })
            .fold(f64::INFINITY, f64::min)
    };
    let all_spot = candidates.iter().all(|c| c.spot);
    let capacity = if all_spot && claim.capacity_types.iter().any(|c| c == CAPACITY_SPOT) {
        CAPACITY_SPOT.to_string()
    } else {
        claim
            .capacity_types
            .first()
            .cloned()
            .unwrap_or_else(|| "on-demand".into())
    };
    let capacity = capacity.as_str();
    let options: Vec<(String, f64)> = claim
        .instance_types
        .iter()
        .map(|t| (t.clone(), cheapest(t, capacity)))
        .filter(|(_, p)| *p < ceiling - 1e-9)
        .collect();
    if options.is_empty() {
        return Err("no cheaper instance type fits its pods".into());
    }
    if all_spot && capacity == CAPACITY_SPOT && options.len() < MIN_SPOT_OPTIONS {
        return Err(format!(
            "spot-to-spot consolidation needs {MIN_SPOT_OPTIONS} cheaper spot types, found {}",
            options.len()
        ));
    }
    let price = options
        .iter()
        .map(|(_, p)| *p)
        .fold(f64::INFINITY, f64::min);
    let mut nodeclaim = claim;
    nodeclaim.instance_types = options.into_iter().map(|(t, _)| t).collect();
    nodeclaim.capacity_types = vec![capacity.to_string()];
    nodeclaim.price = price;
    Ok(replacement_of(nodeclaim))
}

/// Consolidation: the largest multi-node command among the best-ranked candidates, else the
/// first single node that can go.
pub(crate) fn consolidate(
    snapshot: &Snapshot,
    catalog: &Catalog,
    movable: &[&Candidate],
    budgets: &Budgets,
    now: i64,
    blocked: &mut Vec<Blocked>,
) -> Vec<Disruption> {
    let mut ranked: Vec<&Candidate> = movable.to_vec();
    ranked.sort_by(|a, b| {
        let score = |c: &Candidate| c.price / c.cost.max(0.1);
        score(b)
            .total_cmp(&score(a))
            .then_with(|| a.cost.total_cmp(&b.cost))
            .then_with(|| a.node.name.cmp(&b.node.name))
    });
    let mut quiet = Vec::new();
    let within = budgets.take(&ranked, Reason::Underutilized, &mut quiet);
    let pool: Vec<&Candidate> = within.into_iter().take(MAX_MULTI_NODE).collect();
    if let Some(multi) = largest_multi(snapshot, catalog, &pool, now) {
        return vec![multi];
    }
    for c in &pool {
        match consolidation(snapshot, catalog, &[c], now) {
            Ok(d) => return vec![d],
            Err(why) => blocked.push(Blocked {
                node: c.node.name.clone(),
                reason: format!("not consolidating: {why}"),
            }),
        }
    }
    blocked.extend(quiet);
    Vec::new()
}

/// Binary search for the longest prefix (at least two nodes) that consolidates.
pub(crate) fn largest_multi(
    snapshot: &Snapshot,
    catalog: &Catalog,
    ranked: &[&Candidate],
    now: i64,
) -> Option<Disruption> {
    let (mut lo, mut hi) = (2usize, ranked.len());
    let mut best = None;
    while lo <= hi {
        let mid = (lo + hi) / 2;
        match consolidation(snapshot, catalog, &ranked[..mid], now) {
            Ok(d) => {
                best = Some(d);
                lo = mid + 1;
            }
            Err(_) => hi = mid - 1,
        }
    }
    best
}
