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
    cheapest(types, options, capacity_types, zones).map_or(0.0, |c| c.price)
}

/// What a launch of these options would buy: its type, capacity type and hourly price.
#[derive(Clone, Debug, PartialEq)]
pub struct Bought {
    pub instance_type: String,
    pub capacity_type: String,
    pub price: f64,
}

/// The launch [`lowest`] prices; None when no option is offered.
pub fn cheapest(
    types: &BTreeMap<String, InstanceType>,
    options: &[String],
    capacity_types: &[String],
    zones: &[String],
) -> Option<Bought> {
    let offers = |capacity: &str| {
        options
            .iter()
            .filter_map(|name| types.get(name))
            .flat_map(|t| t.offerings.iter().map(move |o| (t, o)))
            .filter(|(_, o)| o.available && o.capacity_type == capacity)
            .filter(|(_, o)| zones.is_empty() || zones.contains(&o.zone))
            .min_by(|a, b| a.1.price.total_cmp(&b.1.price))
            .map(|(t, o)| Bought {
                instance_type: t.name.clone(),
                capacity_type: capacity.to_string(),
                price: o.price,
            })
    };
    ORDER
        .iter()
        .filter(|c| capacity_types.is_empty() || capacity_types.iter().any(|a| a == *c))
        .find_map(|c| offers(c))
}
