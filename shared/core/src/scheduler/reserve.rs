//! Capacity reservations in a plan: a reserved offering is all but free, so the packing prefers
//! it, but a reservation has only so many instances. The plan hands them out first come
//! ([`super::output`]); when the packing counted on more than there are, the NodeClaims that
//! got a reservation are kept, the reservations' counts lowered by what they took, and the pods
//! planned again with the kept NodeClaims as capacity in flight: the rest of the pods are packed
//! for the capacity that is really there (spot, on-demand, other reservations), instead of
//! launching the reserved types at full price.

use std::collections::BTreeMap;

use crate::labels::{CAPACITY_RESERVED, CAPACITY_TYPE, INSTANCE_TYPE, ZONE};
use crate::model::{NodeClaim, Snapshot};
use crate::plan::{NewNodeClaim, Plan, RequirementOut};
use crate::requirements::{Operator, Requirement, Requirements};
use crate::resources::Resources;

/// Replanning rounds at most: each one uses up at least one more reservation.
const MAX_ROUNDS: usize = 4;

/// The plan with no reservation taken more often than it has instances: `plan` is the first
/// packing, `again` packs a snapshot.
pub(crate) fn settle(snapshot: &Snapshot, first: Plan, again: impl Fn(&Snapshot) -> Plan) -> Plan {
    let mut plan = first;
    let mut kept: Vec<(String, NewNodeClaim)> = Vec::new();
    let mut next = snapshot.clone();
    for _ in 0..MAX_ROUNDS {
        if !plan.reservations_short {
            break;
        }
        let lower_bound = plan.cost.lower_bound;
        let (reserved, _) = std::mem::take(&mut plan.nodeclaims)
            .into_iter()
            .partition::<Vec<_>, _>(|c| c.reservation.is_some());
        for claim in reserved {
            let name = format!("fleetwright-reserved-{}", kept.len());
            take_one(&mut next, &claim);
            next.nodeclaims.push(in_flight(&name, &claim, snapshot));
            kept.push((name, claim));
        }
        plan = again(&next);
        plan.cost.lower_bound = plan.cost.lower_bound.min(lower_bound);
    }
    merge(snapshot, kept, plan)
}

/// The better of the settled plan and a plan that leaves the reservations out: the packing is a
/// heuristic, and all but free offerings can lead it down a path that ends dearer than not
/// using them. Fewer pods left pending first, then the lower cost; a tie keeps the
/// reservations (they are paid for).
pub(crate) fn best(snapshot: &Snapshot, settled: Plan, again: impl Fn(&Snapshot) -> Plan) -> Plan {
    let reserved = snapshot
        .node_classes
        .values()
        .any(|c| !c.reservations.is_empty());
    if !reserved {
        return settled;
    }
    let mut without = snapshot.clone();
    for class in without.node_classes.values_mut() {
        class.reservations.clear();
    }
    let plain = again(&without);
    let key = |p: &Plan| (p.unschedulable.len(), p.cost.hourly);
    let (a, b) = (key(&plain), key(&settled));
    if a.0 < b.0 || (a.0 == b.0 && a.1 < b.1 - 1e-9) {
        plain
    } else {
        settled
    }
}

/// Lowers the reservation's count, in the snapshot's node classes, by the instance `claim` took.
fn take_one(snapshot: &mut Snapshot, claim: &NewNodeClaim) {
    let Some(id) = &claim.reservation else {
        return;
    };
    for class in snapshot.node_classes.values_mut() {
        for r in class.reservations.iter_mut().filter(|r| &r.id == id) {
            r.available = r.available.saturating_sub(1);
        }
    }
}

/// A kept NodeClaim as capacity in flight: its own requirements narrowed to its cheapest type,
/// in its reservation's zone.
fn in_flight(name: &str, claim: &NewNodeClaim, snapshot: &Snapshot) -> NodeClaim {
    let mut requirements = Requirements::new();
    for r in &claim.requirements {
        if let Some(req) = requirement(r) {
            requirements.add(req);
        }
    }
    let zone = reservation_zone(claim, snapshot).unwrap_or_default();
    requirements.replace(Requirement::single(INSTANCE_TYPE, &claim.instance_types[0]));
    requirements.replace(Requirement::single(ZONE, &zone));
    requirements.replace(Requirement::single(CAPACITY_TYPE, CAPACITY_RESERVED));
    NodeClaim {
        name: name.to_string(),
        nodepool: claim.nodepool.clone(),
        requirements,
        labels: claim.labels.clone(),
        taints: claim.taints.clone(),
        ..Default::default()
    }
}

/// Narrows a kept NodeClaim to what it was planned again as: its reservation's type, in its
/// zone, reserved. The pods the last round put on it may need exactly that.
fn pin(claim: &mut NewNodeClaim, snapshot: &Snapshot) {
    let zone = reservation_zone(claim, snapshot).unwrap_or_default();
    claim.instance_types.truncate(1);
    claim.zones = vec![zone.clone()];
    claim.capacity_types = vec![CAPACITY_RESERVED.to_string()];
    let pinned = [
        (INSTANCE_TYPE, claim.instance_types[0].clone()),
        (ZONE, zone),
        (CAPACITY_TYPE, CAPACITY_RESERVED.to_string()),
    ];
    claim
        .requirements
        .retain(|r| pinned.iter().all(|(k, _)| r.key != *k));
    for (key, value) in pinned {
        claim.requirements.push(RequirementOut {
            key: key.to_string(),
            operator: "In".into(),
            values: vec![value],
            min_values: None,
        });
    }
}

fn requirement(r: &RequirementOut) -> Option<Requirement> {
    let op = Operator::parse(&r.operator)?;
    Requirement::new(&r.key, op, &r.values).ok()
}

fn reservation_zone(claim: &NewNodeClaim, snapshot: &Snapshot) -> Option<String> {
    let id = claim.reservation.as_ref()?;
    snapshot
        .node_classes
        .values()
        .flat_map(|c| &c.reservations)
        .find(|r| &r.id == id)
        .map(|r| r.zone.clone())
}

/// The kept NodeClaims, each with the pods the last round put on it (one it got none is
/// dropped), then the last round's own.
fn merge(snapshot: &Snapshot, kept: Vec<(String, NewNodeClaim)>, mut plan: Plan) -> Plan {
    if kept.is_empty() {
        return plan;
    }
    let mut on: BTreeMap<String, Vec<String>> = BTreeMap::new();
    plan.existing.retain(|p| {
        let ours = kept.iter().any(|(name, _)| *name == p.node);
        if ours {
            on.entry(p.node.clone()).or_default().push(p.pod.clone());
        }
        !ours
    });
    let mut claims: Vec<NewNodeClaim> = kept
        .into_iter()
        .filter_map(|(name, mut claim)| {
            let pods = on.remove(&name)?;
            pin(&mut claim, snapshot);
            let overhead = claim.requests.minus(&requests(snapshot, &claim.pods));
            claim.requests = requests(snapshot, &pods);
            claim.requests.add(&overhead);
            claim.pods = pods;
            Some(claim)
        })
        .collect();
    claims.append(&mut plan.nodeclaims);
    plan.nodeclaims = claims;
    plan.cost.hourly = super::output::round6(plan.nodeclaims.iter().map(|c| c.price).sum());
    plan.cost.lower_bound = plan.cost.lower_bound.min(plan.cost.hourly);
    plan.reservations_short = false;
    plan
}

/// The summed requests of the pods named (`namespace/name`).
fn requests(snapshot: &Snapshot, pods: &[String]) -> Resources {
    let mut total = Resources::default();
    for p in snapshot.pods.iter().filter(|p| pods.contains(&p.key())) {
        total.add(&p.requests);
    }
    total
}
