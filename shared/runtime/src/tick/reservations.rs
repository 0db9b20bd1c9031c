//! Capacity reservations in the tick, decided purely from what the cloud resolved (or, for
//! `fleetwright plan --actions` on a dump, from the EC2NodeClasses' status): the snapshot the
//! core plans on gets each class's reservations with the instances they can still take; the
//! NodeClaims in a capacity block that is expiring (40 minutes before its end) are deleted, so
//! their pods are drained gracefully before AWS reclaims the instances, as Karpenter's
//! capacity-reservation expiration controller does; and [`status_entry`] is how a class's
//! status lists each one.

use std::collections::BTreeMap;

use chrono::{DateTime, SecondsFormat, Utc};
use fleetwright_cloud::nodeclass::ResolvedReservation;
use fleetwright_core::labels::RESERVATION_ID;
use fleetwright_core::Snapshot;
use fleetwright_crds::{CapacityReservation, NodeClaim};
use fleetwright_kube::dump::ClusterDump;

use super::action::Action;
use super::claims::name_of;

/// Each EC2NodeClass's reservations, by class name.
pub type Reservations = BTreeMap<String, Vec<ResolvedReservation>>;

/// Puts each class's reservations, as they are `now`, into the snapshot the core plans on.
pub fn apply(snapshot: &mut Snapshot, reservations: &Reservations, now: DateTime<Utc>) {
    for (class, list) in reservations {
        let settings = snapshot.node_classes.entry(class.clone()).or_default();
        settings.reservations = list.iter().map(|r| r.planned(now)).collect();
    }
}

/// The reservations the EC2NodeClasses' status lists (what a dump knows of them).
pub fn from_status(dump: &ClusterDump) -> Reservations {
    let mut out = Reservations::new();
    for class in &dump.nodeclasses {
        let Some(status) = &class.status else {
            continue;
        };
        let list: Vec<ResolvedReservation> = status
            .capacity_reservations
            .iter()
            .filter_map(resolved)
            .collect();
        if !list.is_empty() {
            out.insert(name(class), list);
        }
    }
    out
}

fn name(class: &fleetwright_crds::EC2NodeClass) -> String {
    class.metadata.name.clone().unwrap_or_default()
}

/// A status entry as the cloud would resolve it: the fields the core plans with (read as the
/// snapshot reads them), and the owner, match criteria and end the status shows.
fn resolved(r: &CapacityReservation) -> Option<ResolvedReservation> {
    let planned = fleetwright_kube::convert::reservation(r)?;
    Some(ResolvedReservation {
        id: planned.id,
        instance_type: planned.instance_type,
        zone: planned.zone,
        kind: planned.kind,
        interruptible: planned.interruptible,
        owner_id: r.owner_id.clone().unwrap_or_default(),
        instance_match_criteria: r.instance_match_criteria.clone().unwrap_or_default(),
        end_time: r
            .end_time
            .as_deref()
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&Utc)),
        available: planned.available,
    })
}

/// The NodeClaims running in a reservation that is expiring: each is deleted (its node drained
/// through the Eviction API, as any deleted NodeClaim is) before AWS takes the capacity back.
pub fn expiring(
    claims: &[NodeClaim],
    reservations: &Reservations,
    now: DateTime<Utc>,
) -> Vec<Action> {
    let ending: BTreeMap<&str, &ResolvedReservation> = reservations
        .values()
        .flatten()
        .filter(|r| r.state(now) == "expiring")
        .map(|r| (r.id.as_str(), r))
        .collect();
    claims
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .filter_map(|c| {
            let id = c.metadata.labels.as_ref()?.get(RESERVATION_ID)?;
            let r = ending.get(id.as_str())?;
            Some(Action::ReservationExpiring {
                nodeclaim: name_of(c),
                reservation: id.clone(),
                ends: r.end_time,
            })
        })
        .collect()
}

/// A reservation as the EC2NodeClass's `status.capacityReservations` lists it (Karpenter's
/// fields, and the instances it can still take).
pub fn status_entry(r: &ResolvedReservation, now: DateTime<Utc>) -> CapacityReservation {
    CapacityReservation {
        id: r.id.clone(),
        availability_zone: Some(r.zone.clone()),
        instance_type: Some(r.instance_type.clone()),
        instance_match_criteria: Some(r.instance_match_criteria.clone()).filter(|c| !c.is_empty()),
        owner_id: Some(r.owner_id.clone()).filter(|o| !o.is_empty()),
        reservation_type: Some(r.kind.clone()),
        state: Some(r.state(now).to_string()),
        end_time: r
            .end_time
            .map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true)),
        interruptible: Some(r.interruptible),
        available_instance_count: Some(r.available as u32),
    }
}
