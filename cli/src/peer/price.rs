//! One pricing rule for both schedulers' NodeClaims: the capacity type a launch would take
//! (reserved, then spot, then on-demand, among those the NodeClaim allows and some option offers
//! in an allowed zone), then the lowest price among the options' offerings of that capacity type
//! in the allowed zones, as CreateFleet's `lowest-price` strategy buys.

use std::collections::BTreeMap;

use fleetwright_core::catalog::InstanceType;

const ORDER: [&str; 3] = ["reserved", "spot", "on-demand"];

/// The hourly price a launch of these options would pay; 0 when none is offered.
pub fn lowest(
    types: &BTreeMap<String, InstanceType>,
    options: &[String],
    capacity_types: &[String],
    zones: &[String],
) -> f64 {
    let offers = |capacity: &str| {
        options
            .iter()
            .filter_map(|name| types.get(name))
            .flat_map(|t| t.offerings.iter())
            .filter(|o| o.available && o.capacity_type == capacity)
            .filter(|o| zones.is_empty() || zones.contains(&o.zone))
            .map(|o| o.price)
            .min_by(f64::total_cmp)
    };
    ORDER
        .iter()
        .filter(|c| capacity_types.is_empty() || capacity_types.iter().any(|a| a == *c))
        .find_map(|c| offers(c))
        .unwrap_or(0.0)
}
