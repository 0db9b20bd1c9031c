//! NodeOverlays applied to a resolved instance type, as Karpenter applies them to its scheduling
//! simulation: the highest-weight overlay with a price that selects an offering (by the type's
//! labels, the offering's zone and capacity type) sets or adjusts that offering's price; and
//! each extended resource an overlay's `capacity` names is offered by the types it selects, the
//! highest-weight overlay naming it deciding how much. Overlays arrive sorted (weight, then name).

use std::collections::BTreeSet;

use crate::labels::{CAPACITY_TYPE, ZONE};
use crate::model::NodeOverlay;

use super::InstanceType;

pub(super) fn apply(overlays: &[NodeOverlay], t: &mut InstanceType) {
    if overlays.is_empty() {
        return;
    }
    let labels = t.requirements.single_valued_labels();
    for o in t.offerings.iter_mut().filter(|o| o.available) {
        let mut at = labels.clone();
        at.insert(ZONE.to_string(), o.zone.clone());
        at.insert(CAPACITY_TYPE.to_string(), o.capacity_type.clone());
        let change = overlays
            .iter()
            .filter(|ov| ov.requirements.matches_labels(&at))
            .find_map(|ov| ov.price);
        if let Some(change) = change {
            o.price = change.apply(o.price);
        }
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
