//! NodeOverlays applied to a resolved instance type, as Karpenter applies them to its scheduling
//! simulation: the highest-weight overlay with a price that selects an offering (by the type's
//! labels, the offering's zone and capacity type) sets or adjusts that offering's price; and
//! each extended resource an overlay's `capacity` names is offered by the types it selects, the
//! highest-weight overlay naming it deciding how much. Overlays arrive sorted (weight, then name).

use std::collections::{BTreeMap, BTreeSet};

use crate::labels::{CAPACITY_TYPE, ZONE};
use crate::model::NodeOverlay;

use super::InstanceType;

pub(super) fn apply(overlays: &[NodeOverlay], t: &mut InstanceType) {
    if overlays.is_empty() {
        return;
    }
    let labels = t.requirements.single_valued_labels();
    for o in t.offerings.iter_mut().filter(|o| o.available) {
        o.price = overlaid_price(overlays, &labels, &o.zone, &o.capacity_type, o.price);
    }
    let mut decided = BTreeSet::new();
    for ov in overlays.iter().filter(|ov| !ov.capacity.is_empty()) {
        if t.requirements
            .compatible_with_labels(&ov.requirements)
            .is_err()
        {
            continue;
        }
        for (name, amount) in &ov.capacity {
            if decided.insert(name.clone()) {
                t.capacity.set(name, *amount);
                t.allocatable.set(name, *amount);
            }
        }
    }
}

/// The price of an offering (of a type with these labels, in `zone`, of `capacity_type`) once
/// the overlays are applied: the highest-weight overlay with a price that selects it decides
/// (equal weights: the first name); `price` when none does. The order of `overlays` is free.
pub fn overlaid_price(
    overlays: &[NodeOverlay],
    labels: &BTreeMap<String, String>,
    zone: &str,
    capacity_type: &str,
    price: f64,
) -> f64 {
    let mut at = labels.clone();
    at.insert(ZONE.to_string(), zone.to_string());
    at.insert(CAPACITY_TYPE.to_string(), capacity_type.to_string());
    overlays
        .iter()
        .filter(|ov| ov.price.is_some() && ov.requirements.matches_labels(&at))
        .min_by(|a, b| b.weight.cmp(&a.weight).then_with(|| a.name.cmp(&b.name)))
        .and_then(|ov| ov.price)
        .map_or(price, |change| change.apply(price))
}
