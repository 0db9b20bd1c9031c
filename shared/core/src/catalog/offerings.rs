//! Offerings: where and how an instance type can be bought and for how much (each zone it is
//! offered in, by capacity type, and the capacity reservations a node class selects), and
//! which node requirements allow one.

use std::collections::BTreeMap;

use crate::labels::*;
use crate::requirements::Requirements;

use super::{Catalog, RawInstanceType};

/// Where and how an instance type can be bought, and for how much.
#[derive(Clone, Debug, PartialEq)]
pub struct Offering {
    pub zone: String,
    pub capacity_type: String,
    /// USD per hour.
    pub price: f64,
    pub available: bool,
    /// For a `reserved` offering: the capacity reservation it launches into.
    pub reservation: Option<Reservation>,
}

/// The capacity reservation of a `reserved` offering, with the labels a node in it carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reservation {
    pub id: String,
    /// `default` or `capacity-block`.
    pub kind: String,
    pub interruptible: bool,
    /// Instances it can still take.
    pub available: usize,
}

/// A capacity reservation an EC2NodeClass selects (its `status.capacityReservations`, with the
/// instances it can still take).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct CapacityReservation {
    pub id: String,
    pub instance_type: String,
    pub zone: String,
    /// `default` or `capacity-block`.
    pub kind: String,
    pub interruptible: bool,
    /// `active`, or `expiring` (a capacity block within 40 minutes of its end): nothing
    /// launches into an expiring reservation.
    pub state: String,
    /// Instances it can still take (unknown counts as none, as Karpenter counts it).
    pub available: usize,
}

/// A reserved offering's price: the on-demand price divided by ten million, as Karpenter prices
/// it: all but free (the reservation is paid for whether it is used or not), while keeping the
/// types' order for consolidation.
pub fn reserved_price(on_demand: f64) -> f64 {
    on_demand / 10_000_000.0
}

/// Whether requirements on zone, capacity type and reservation allow an offering. An offering
/// outside reservations has no reservation labels: only `NotIn` and `DoesNotExist` on them
/// allow it.
pub fn offering_allowed(o: &Offering, reqs: &Requirements) -> bool {
    reqs.get(ZONE).is_none_or(|r| r.has(&o.zone))
        && reqs
            .get(CAPACITY_TYPE)
            .is_none_or(|r| r.has(&o.capacity_type))
        && reservation_allowed(o.reservation.as_ref(), reqs)
}

fn reservation_allowed(reservation: Option<&Reservation>, reqs: &Requirements) -> bool {
    let keys = [RESERVATION_ID, RESERVATION_TYPE, RESERVATION_INTERRUPTIBLE];
    if keys.iter().all(|k| !reqs.has_key(k)) {
        return true;
    }
    let mut labels = BTreeMap::new();
    if let Some(r) = reservation {
        labels.insert(RESERVATION_ID.to_string(), r.id.clone());
        labels.insert(RESERVATION_TYPE.to_string(), r.kind.clone());
        labels.insert(
            RESERVATION_INTERRUPTIBLE.to_string(),
            r.interruptible.to_string(),
        );
    }
    keys.iter().all(|k| match reqs.get(k) {
        None => true,
        Some(req) => {
            let mut one = Requirements::new();
            one.add(req.clone());
            one.matches_labels(&labels)
        }
    })
}

impl Catalog {
    /// Every offering of a type: each zone it is offered in × each capacity type it supports.
    pub fn offerings(&self, raw: &RawInstanceType) -> Vec<Offering> {
        let name = &raw.instance_type;
        let mut out = Vec::new();
        let Some(zones) = self.zones.get(name) else {
            return out;
        };
        for zone in zones {
            for class in [CAPACITY_ON_DEMAND, CAPACITY_SPOT] {
                if !raw.supported_usage_classes.iter().any(|c| c == class) {
                    continue;
                }
                let price = if class == CAPACITY_SPOT {
                    self.spot_price(name, zone)
                } else {
                    self.on_demand.get(name).copied()
                };
                let blocked =
                    self.unavailable
                        .contains(&(class.to_string(), name.clone(), zone.clone()));
                out.push(Offering {
                    zone: zone.clone(),
                    capacity_type: class.to_string(),
                    price: price.unwrap_or(f64::MAX),
                    available: price.is_some() && !blocked,
                    reservation: None,
                });
            }
        }
        out
    }

    /// The `reserved` offerings of a type: one per reservation of it, in the reservation's zone,
    /// available while the reservation is active, has instances left, and the type is offered
    /// in that zone (and not marked unavailable there).
    pub fn reserved_offerings(
        &self,
        raw: &RawInstanceType,
        reservations: &[CapacityReservation],
    ) -> Vec<Offering> {
        let name = &raw.instance_type;
        let offered = |zone: &str| self.zones.get(name).is_some_and(|z| z.contains(zone));
        reservations
            .iter()
            .filter(|r| &r.instance_type == name)
            .map(|r| {
                let blocked = self.unavailable.contains(&(
                    CAPACITY_RESERVED.to_string(),
                    name.clone(),
                    r.zone.clone(),
                ));
                Offering {
                    zone: r.zone.clone(),
                    capacity_type: CAPACITY_RESERVED.to_string(),
                    price: reserved_price(self.on_demand.get(name).copied().unwrap_or(0.0)),
                    available: r.state == "active"
                        && r.available > 0
                        && offered(&r.zone)
                        && !blocked,
                    reservation: Some(Reservation {
                        id: r.id.clone(),
                        kind: r.kind.clone(),
                        interruptible: r.interruptible,
                        available: r.available,
                    }),
                }
            })
            .collect()
    }
}
