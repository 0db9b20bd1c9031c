//! NodeOverlays, and how they apply to a resolved instance type, as Karpenter applies them to
//! its scheduling simulation: the highest-weight overlay with a price that selects an offering
//! (by the type's labels, the offering's zone and capacity type) sets or adjusts that offering's
//! price; and each extended resource an overlay's `capacity` names is offered by the types it
//! selects, the highest-weight overlay naming it deciding how much. Overlays arrive sorted
//! (weight, then name).

use std::collections::{BTreeMap, BTreeSet};

use crate::labels::{CAPACITY_TYPE, ZONE};
use crate::requirements::Requirements;

use super::InstanceType;

/// A change a NodeOverlay makes to the price of the offerings it selects.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PriceChange {
    /// `price: "0.25"`: this hourly price.
    Set(f64),
    /// `priceAdjustment: "+0.05"` or `"-0.02"`: plus this many dollars an hour.
    Add(f64),
    /// `priceAdjustment: "+10%"` or `"-25%"`: plus this fraction of the price.
    Percent(f64),
}

impl PriceChange {
    /// Reads a `priceAdjustment` (Karpenter's forms: `+0.5`, `-0.5`, `+10%`, `-10%`, `-100%`).
    pub fn adjustment(text: &str) -> Option<PriceChange> {
        let (sign, rest) = match text.as_bytes().first()? {
            b'+' => (1.0, &text[1..]),
            b'-' => (-1.0, &text[1..]),
            _ => return None,
        };
        let (number, percent) = match rest.strip_suffix('%') {
            Some(n) => (n, true),
            None => (rest, false),
        };
        let value: f64 = number
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite() && *v >= 0.0)?;
        if percent {
            (sign > 0.0 || value <= 100.0).then_some(PriceChange::Percent(sign * value / 100.0))
        } else {
            Some(PriceChange::Add(sign * value))
        }
    }

    /// The price after the change (never below zero).
    pub fn apply(self, price: f64) -> f64 {
        match self {
            PriceChange::Set(p) => p,
            PriceChange::Add(d) => (price + d).max(0.0),
            PriceChange::Percent(f) => (price * (1.0 + f)).max(0.0),
        }
    }
}

/// A NodeOverlay (Karpenter's `karpenter.sh/v1alpha1`), resolved: what the scheduling
/// simulation believes of the instance types and offerings its requirements select.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeOverlay {
    pub name: String,
    pub weight: i32,
    pub requirements: Requirements,
    pub price: Option<PriceChange>,
    /// Extended resources the selected types offer besides their own.
    pub capacity: BTreeMap<String, i64>,
}

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
