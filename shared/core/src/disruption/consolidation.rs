//! Commands: deleting empty nodes, and consolidation (multi-node first, then single nodes; N→1
//! strictly cheaper, N→M with a margin, and room kept for kube-scheduler's spreading), each
//! checked by re-running the scheduler over the cluster without the candidates; and where a
//! candidate's pods would go ([`simulate`]), which drift and repair share.

use std::collections::{BTreeMap, BTreeSet};

use crate::catalog::Catalog;
use crate::labels::{CAPACITY_RESERVED, CAPACITY_SPOT, CAPACITY_TYPE, INSTANCE_TYPE, ZONE};
use crate::model::Snapshot;
use crate::plan::NewNodeClaim;
use crate::scheduler::{schedule, ScheduleOptions};

use super::balanced::Scoring;
use super::budget::{Budgets, Reason};
use super::candidates::{leaving, pdb_blocks, pod_cost, Candidate, Prices};
use super::narrow;
use super::{Blocked, Command, Disruption, Replacement, MAX_MULTI_NODE, MIN_SPLIT_SAVINGS};

pub(crate) fn delete_all(candidates: &[&Candidate], reason: Reason) -> Vec<Disruption> {
    if candidates.is_empty() {
        return Vec::new();
    }
    vec![Disruption {
        command: Command::Delete,
        reason,
        nodes: candidates.iter().map(|c| c.node.name.clone()).collect(),
        replacement: None,
        replacements: Vec::new(),
        savings: round4(candidates.iter().map(|c| c.price).sum()),
        moves: Vec::new(),
        terminate_first: None,
    }]
}

pub(crate) fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

/// Where the candidates' pods go: the new NodeClaims they need, and which of them land on nodes
/// that stay (`(pod key, node)`).
pub(crate) struct Moved {
    pub(crate) claims: Vec<NewNodeClaim>,
    pub(crate) onto: Vec<(String, String)>,
}

/// What scheduling the candidates' pods elsewhere gives: where they go, or why they cannot move.
pub(crate) fn simulate(
    snapshot: &Snapshot,
    catalog: &Catalog,
    candidates: &[&Candidate],
    now: i64,
) -> Result<Moved, String> {
    simulate_with_room(snapshot, catalog, candidates, now, 0)
}

/// Lowers each limited pool's limits by what its removed nodes hold: they run until their
/// replacements have initialized, so a replacement must fit beside them, never past the limit.
fn hold_limits_for(sim: &mut Snapshot, removed: &BTreeSet<&str>) {
    use crate::labels::{RESOURCE_CPU, RESOURCE_EPHEMERAL, RESOURCE_MEMORY, RESOURCE_PODS};
    for pool in sim.nodepools.iter_mut() {
        let Some(limits) = pool.limits.as_mut() else {
            continue;
        };
        let mut held = crate::resources::Resources::default();
        let mut nodes = 0;
        for node in sim
            .nodes
            .iter()
            .filter(|n| removed.contains(n.name.as_str()) && n.nodepool() == Some(&pool.name))
        {
            held.add(if node.capacity.is_zero() {
                &node.allocatable
            } else {
                &node.capacity
            });
            nodes += 1;
        }
        if nodes == 0 {
            continue;
        }
        for name in [
            RESOURCE_CPU,
            RESOURCE_MEMORY,
            RESOURCE_EPHEMERAL,
            RESOURCE_PODS,
        ] {
            let limit = limits.get(name);
            if limit != 0 {
                // Zero reads as unlimited there: what is left never drops below one unit.
                limits.set(name, (limit - held.get(name)).max(1));
            }
        }
        let extended: Vec<String> = limits.extended.keys().cloned().collect();
        for name in extended {
            let taken = if name == "nodes" {
                nodes
            } else {
                held.get(&name)
            };
            if let Some(v) = limits.extended.get_mut(&name) {
                *v -= taken;
            }
        }
    }
}

/// [`simulate`], with room kept for `spare` more pods the size of the largest one displaced
/// (copies of it, with its constraints, planned with the others and then dropped from the
/// claims' pod lists).
pub(crate) fn simulate_with_room(
    snapshot: &Snapshot,
    catalog: &Catalog,
    candidates: &[&Candidate],
    now: i64,
    spare: usize,
) -> Result<Moved, String> {
    // The candidates go, and so do the nodes of commands already in progress: their pods need a
    // place too, so a new command never takes the room they are moving into.
    let removed: BTreeSet<&str> = candidates
        .iter()
        .map(|c| c.node.name.as_str())
        .chain(
            snapshot
                .nodes
                .iter()
                .filter(|n| leaving(n))
                .map(|n| n.name.as_str()),
        )
        .collect();
    let mut sim = snapshot.clone();
    hold_limits_for(&mut sim, &removed);
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
    let largest = candidates
        .iter()
        .flat_map(|c| c.pods.iter().copied())
        .filter(|p| !p.is_daemonset())
        .max_by_key(|p| (p.requests.cpu, p.requests.memory, p.name.clone()))
        .cloned();
    let mut spares = Vec::new();
    if let Some(largest) = largest {
        for n in 0..spare {
            let mut copy = largest.clone();
            copy.name = format!("{}-room-{n}", largest.name);
            copy.node_name = None;
            spares.push(format!("{}/{}", copy.namespace, copy.name));
            sim.pods.push(copy);
        }
    }
    let mut plan = schedule(
        &sim,
        catalog,
        &ScheduleOptions {
            now,
            ..Default::default()
        },
    );
    for claim in &mut plan.nodeclaims {
        claim.pods.retain(|p| !spares.contains(p));
    }
    match plan.unschedulable.first() {
        Some(u) => Err(format!(
            "pod {} would not fit elsewhere: {}",
            u.pod, u.reason
        )),
        None => Ok(Moved {
            claims: plan.nodeclaims,
            onto: plan
                .existing
                .into_iter()
                .filter(|e| !spares.contains(&e.pod))
                .map(|e| (e.pod, e.node))
                .collect(),
        }),
    }
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
    scoring: &Scoring,
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
    let total: f64 = candidates.iter().map(|c| c.price).sum();
    let mut moved = simulate(snapshot, catalog, candidates, now)?;
    let destinations = moved.claims.len()
        + moved
            .onto
            .iter()
            .map(|(_, node)| node)
            .collect::<BTreeSet<_>>()
            .len();
    if !moved.claims.is_empty() && destinations >= 2 {
        // kube-scheduler spreads pods and follows no plan: where the displaced pods go to
        // several nodes packed tight, the last of them can find every one just short of room,
        // and stay pending until a new node launches for it. With room left for one more of
        // the largest on all but one destination, in total, it cannot. (Deletions, which launch
        // nothing, keep Karpenter's rule.)
        // Only worth planning again when the tight plan itself would save.
        replacements_for(catalog, moved.claims.clone(), total, candidates)?;
        moved = simulate_with_room(snapshot, catalog, candidates, now, destinations - 1)?;
    }
    let Moved { claims, onto } = moved;

    let nodes: Vec<String> = candidates.iter().map(|c| c.node.name.clone()).collect();
    let reason = if candidates.iter().all(|c| c.pods.is_empty()) {
        Reason::Empty
    } else {
        Reason::Underutilized
    };
    if reason == Reason::Empty && !claims.is_empty() {
        return Err("empty, but the pods of a disruption in progress need its room".into());
    }
    let replacements = replacements_for(catalog, claims, total, candidates)?;
    let price: f64 = replacements.iter().map(|r| r.price).sum();
    if reason == Reason::Underutilized {
        scoring.check(candidates, price)?;
    }
    Ok(Disruption {
        command: if replacements.is_empty() {
            Command::Delete
        } else {
            Command::Replace
        },
        reason,
        nodes,
        replacement: (replacements.len() == 1).then(|| replacements[0].clone()),
        replacements,
        savings: round4(total - price),
        moves: onto,
        terminate_first: None,
    })
}

/// The replacements for the new nodes `claims` of a consolidation of `candidates` (costing
/// `total`): none, one strictly cheaper than the dearest candidate, or several (N→M) saving the
/// margin; or why there are none worth launching.
fn replacements_for(
    catalog: &Catalog,
    claims: Vec<NewNodeClaim>,
    total: f64,
    candidates: &[&Candidate],
) -> Result<Vec<Replacement>, String> {
    match claims.len() {
        0 => Ok(Vec::new()),
        1 => {
            // As Karpenter: cheaper than the candidates together (a candidate of a type the
            // replacement could be lowers it further, in `cheaper`).
            let ceiling = total;
            let claim = claims
                .into_iter()
                .next()
                .ok_or("no replacement was planned")?;
            Ok(vec![cheaper(catalog, claim, ceiling, candidates)?])
        }
        _ => split(catalog, claims, total, candidates),
    }
}

/// The replacements of an N→M command (M ≥ 2), the packing engine's new nodes: each one's
/// options cut to a share of what the set may cost, so that whichever options launch, the set
/// saves at least [`MIN_SPLIT_SAVINGS`] of `total` (the candidates' price).
pub(crate) fn split(
    catalog: &Catalog,
    claims: Vec<NewNodeClaim>,
    total: f64,
    candidates: &[&Candidate],
) -> Result<Vec<Replacement>, String> {
    let count = claims.len();
    let ceiling = total * (1.0 - MIN_SPLIT_SAVINGS);
    let mut replacements = Vec::new();
    let mut paid = Vec::new();
    for claim in claims {
        match into_reservation(&claim, ceiling, candidates) {
            Some(reserved) => replacements.push(reserved),
            None => paid.push(claim),
        }
    }
    let cheapest: f64 = paid.iter().map(|c| c.price).sum();
    let short = || {
        format!(
            "its pods would need {count} new nodes at ${cheapest:.4}/h, not {:.0} % under its ${total:.4}/h",
            MIN_SPLIT_SAVINGS * 100.0
        )
    };
    if !paid.is_empty() && (cheapest <= 0.0 || cheapest >= ceiling) {
        return Err(short());
    }
    for claim in paid {
        let share = ceiling * claim.price / cheapest;
        replacements.push(cheaper(catalog, claim, share, candidates)?);
    }
    let price: f64 = replacements.iter().map(|r| r.price).sum();
    if price >= ceiling {
        return Err(short());
    }
    Ok(replacements)
}

/// The replacement's options cut to those strictly cheaper than `ceiling` (the dearest
/// candidate) and than every candidate of a type among the options, with Karpenter's
/// spot-to-spot diversity rule.
pub(crate) fn cheaper(
    catalog: &Catalog,
    claim: NewNodeClaim,
    ceiling: f64,
    candidates: &[&Candidate],
) -> Result<Replacement, String> {
    let prices = Prices::new(catalog);
    let in_zones = |t: &str, capacity: &str| -> Vec<f64> {
        (claim.zones.iter())
            .filter_map(|z| {
                let labels: BTreeMap<String, String> = [
                    (INSTANCE_TYPE.to_string(), t.to_string()),
                    (ZONE.to_string(), z.clone()),
                    (CAPACITY_TYPE.to_string(), capacity.to_string()),
                ]
                .into();
                prices.of(&labels)
            })
            .collect()
    };
    // A type stays an option only when every zone the replacement may launch in offers it for
    // less than the ceiling (Karpenter's worst launch price): EC2 picks the zone, and the dearest
    // one must still save.
    let priced = |t: &str, capacity: &str| {
        let p = in_zones(t, capacity);
        let worst = p.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let best = p.iter().copied().fold(f64::INFINITY, f64::min);
        (worst, best)
    };
    let all_spot = candidates.iter().all(|c| c.spot);
    // As Karpenter: a replacement that may be spot or on-demand is priced and launched as spot,
    // so that a spot shortage fails the launch instead of buying dearer on-demand capacity.
    let capacity = if claim.capacity_types.iter().any(|c| c == CAPACITY_SPOT) {
        CAPACITY_SPOT.to_string()
    } else {
        claim
            .capacity_types
            .first()
            .cloned()
            .unwrap_or_else(|| "on-demand".into())
    };
    let capacity = capacity.as_str();
    if let Some(reserved) = into_reservation(&claim, ceiling, candidates) {
        return Ok(reserved);
    }
    // A node is never replaced by one of its own type: that moves pods for a zone's price
    // difference, and the next spot price change undoes it.
    let own: Vec<&str> = candidates
        .iter()
        .filter_map(|c| c.node.labels.get(INSTANCE_TYPE).map(String::as_str))
        .collect();
    // Nor by anything as dear as a candidate of a type the replacement could be: keeping that
    // candidate and deleting the others moves fewer pods for the same saving (Karpenter's
    // `filterOutSameInstanceType`).
    let ceiling = candidates
        .iter()
        .filter(|c| {
            c.node
                .labels
                .get(INSTANCE_TYPE)
                .is_some_and(|t| claim.instance_types.contains(t))
        })
        .map(|c| c.price)
        .fold(ceiling, f64::min);
    let options: Vec<(String, f64)> = claim
        .instance_types
        .iter()
        .filter(|t| !own.contains(&t.as_str()))
        .map(|t| (t.clone(), priced(t, capacity)))
        .filter(|(_, (worst, best))| best.is_finite() && *worst < ceiling - 1e-9)
        .map(|(t, (_, best))| (t, best))
        .collect();
    if options.is_empty() {
        return Err("no cheaper instance type fits its pods".into());
    }
    let options = if all_spot && capacity == CAPACITY_SPOT {
        narrow::spot_to_spot(options, candidates, &claim)?
    } else {
        options
    };
    let price = options
        .iter()
        .map(|(_, p)| *p)
        .fold(f64::INFINITY, f64::min);
    let mut nodeclaim = claim;
    nodeclaim.instance_types = options.into_iter().map(|(t, _)| t).collect();
    nodeclaim.capacity_types = vec![capacity.to_string()];
    nodeclaim.price = price;
    narrow::narrow_types(&mut nodeclaim)?;
    narrow::narrow_capacity(&mut nodeclaim, capacity);
    Ok(replacement_of(nodeclaim))
}

/// The replacement the plan put into a capacity reservation, strictly cheaper than `ceiling`:
/// all but free, since a reservation is paid for whether used or not, so even a node of its own
/// type moves into it (Karpenter prices reservations so, and consolidates onto them). Pinned to
/// the reservation's type and to reserved capacity: a launch that finds the reservation taken
/// fails, rather than buy the type again at full price. None for any other claim, and when a
/// candidate is reserved itself: its reservation is paid for already, and moving it saves
/// nothing but a rounding of the all-but-free price.
fn into_reservation(
    claim: &NewNodeClaim,
    ceiling: f64,
    candidates: &[&Candidate],
) -> Option<Replacement> {
    claim.reservation.as_ref()?;
    // One type may not meet a `minValues` on another key (families, say): such a pool keeps
    // its replacements as the packing gave them.
    if claim.requirements.iter().any(|r| r.min_values.is_some()) {
        return None;
    }
    let reserved = |c: &&Candidate| {
        c.node.labels.get(CAPACITY_TYPE).map(String::as_str) == Some(CAPACITY_RESERVED)
    };
    if claim.price >= ceiling - 1e-9 || candidates.iter().any(reserved) {
        return None;
    }
    let mut pinned = claim.clone();
    pinned.instance_types.truncate(1);
    pinned.capacity_types = vec![CAPACITY_RESERVED.to_string()];
    narrow::narrow_types(&mut pinned).ok()?;
    for r in (pinned.requirements.iter_mut()).filter(|r| r.key == CAPACITY_TYPE) {
        r.operator = "In".into();
        r.values = vec![CAPACITY_RESERVED.to_string()];
    }
    Some(replacement_of(pinned))
}

/// Consolidation: the largest multi-node command among the best-ranked candidates, else the
/// first single node that can go.
pub(crate) fn consolidate(
    snapshot: &Snapshot,
    catalog: &Catalog,
    movable: &[&Candidate],
    budgets: &Budgets,
    now: i64,
    scoring: &Scoring,
    blocked: &mut Vec<Blocked>,
) -> Vec<Disruption> {
    let mut ranked: Vec<&Candidate> = movable.to_vec();
    ranked.sort_by(|a, b| {
        savings_ratio(b)
            .total_cmp(&savings_ratio(a))
            .then_with(|| a.cost.total_cmp(&b.cost))
            .then_with(|| a.node.name.cmp(&b.node.name))
    });
    let mut quiet = Vec::new();
    let within = budgets.take(&ranked, Reason::Underutilized, &mut quiet);
    let pool: Vec<&Candidate> = within.into_iter().take(MAX_MULTI_NODE).collect();
    if let Some(multi) = largest_multi(snapshot, catalog, &pool, now, scoring) {
        return vec![multi];
    }
    // A single node needs only its pool's budget to allow one more: every such candidate is
    // tried in rank, as Karpenter's single-node pass does, not just those a multi-node
    // command could have taken together.
    let allowed = |c: &&&Candidate| budgets.allowance(c.pool, Reason::Underutilized) > 0;
    let singles: Vec<&Candidate> = (ranked.iter().filter(allowed).copied())
        .take(MAX_MULTI_NODE)
        .collect();
    for c in &singles {
        match consolidation(snapshot, catalog, &[c], now, scoring) {
            Ok(d) => return vec![d],
            Err(why) => blocked.push(Blocked {
                node: c.node.name.clone(),
                reason: format!("not consolidating: {why}"),
            }),
        }
    }
    let tried = |b: &Blocked| singles.iter().any(|c| c.node.name == b.node);
    blocked.extend(quiet.into_iter().filter(|b| !tried(b)));
    Vec::new()
}

/// Karpenter's rank of a consolidation candidate: its price per unit of disruption, a node
/// costing one plus its pods' eviction costs (none below zero).
fn savings_ratio(c: &Candidate) -> f64 {
    let pods: f64 = c.pods.iter().map(|p| pod_cost(p).max(0.0)).sum();
    c.price / (1.0 + pods)
}

/// Binary search for the longest prefix (at least two nodes) that consolidates.
pub(crate) fn largest_multi(
    snapshot: &Snapshot,
    catalog: &Catalog,
    ranked: &[&Candidate],
    now: i64,
    scoring: &Scoring,
) -> Option<Disruption> {
    let (mut lo, mut hi) = (2usize, ranked.len());
    let mut best = None;
    while lo <= hi {
        let mid = (lo + hi) / 2;
        match consolidation(snapshot, catalog, &ranked[..mid], now, scoring) {
            Ok(d) => {
                best = Some(d);
                lo = mid + 1;
            }
            Err(_) => hi = mid - 1,
        }
    }
    best
}
