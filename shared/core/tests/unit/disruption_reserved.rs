//! Consolidation onto capacity reservations: a reservation is paid for whether used or not, so
//! an on-demand node moves into one even when it is of the reservation's own type, and a node
//! splits onto several reserved ones; the replacement is pinned to reserved capacity.

use super::*;
use crate::catalog::CapacityReservation;

/// A pool that allows `reserved` and on-demand m5 in one zone, its class selecting a
/// reservation of `count` instances of `instance_type` there.
fn with_reservation(instance_type: &str, count: usize) -> Cluster {
    let mut pool = pool(
        &["m5.large", "m5.xlarge", "m5.2xlarge", "m5.4xlarge"],
        "on-demand",
        "100%",
    );
    pool.requirements.replace(Requirement::in_values(
        CAPACITY_TYPE,
        ["reserved".to_string(), "on-demand".to_string()],
    ));
    let mut c = Cluster::new(pool);
    c.snapshot.node_classes.insert(
        "default".into(),
        NodeClassSettings {
            reservations: vec![CapacityReservation {
                id: "cr-0123456789abcdef0".into(),
                instance_type: instance_type.into(),
                zone: ZONE_A.into(),
                kind: "default".into(),
                interruptible: false,
                state: "active".into(),
                available: count,
            }],
            ..Default::default()
        },
    );
    c
}

fn reserved_replacements(d: &Disruption) -> Vec<(Vec<String>, Vec<String>)> {
    d.replacements
        .iter()
        .map(|r| (r.instance_types.clone(), r.capacity_types.clone()))
        .collect()
}

#[test]
fn an_on_demand_node_moves_into_a_reservation_of_its_own_type() {
    let mut c = with_reservation("m5.2xlarge", 1);
    c.node("od", "m5.2xlarge", "on-demand");
    for i in 0..3 {
        c.pod(&format!("web-{i}"), "od", 2000);
    }
    let plan = c.plan();
    assert_eq!(plan.disruptions.len(), 1, "{plan:?}");
    let d = &plan.disruptions[0];
    assert_eq!(
        (d.command, d.reason),
        (Command::Replace, Reason::Underutilized)
    );
    let reserved = vec!["reserved".to_string()];
    assert_eq!(
        reserved_replacements(d),
        vec![(vec!["m5.2xlarge".to_string()], reserved.clone())]
    );
    let r = &d.replacements[0].nodeclaim;
    let pinned = |key: &str| {
        r.requirements
            .iter()
            .find(|q| q.key == key)
            .map(|q| (q.operator.clone(), q.values.clone()))
    };
    assert_eq!(pinned(CAPACITY_TYPE), Some(("In".into(), reserved)));
    assert_eq!(
        pinned(INSTANCE_TYPE),
        Some(("In".into(), vec!["m5.2xlarge".to_string()]))
    );
    assert!(d.savings > 0.3, "{d:?}");
    // Without the reservation the same node stays: no cheaper type holds its pods.
    c.snapshot.node_classes.clear();
    assert!(c.plan().disruptions.is_empty());
}

#[test]
fn a_node_splits_onto_reserved_nodes() {
    let mut c = with_reservation("m5.2xlarge", 2);
    c.node("big", "m5.4xlarge", "on-demand");
    for i in 0..6 {
        c.pod(&format!("web-{i}"), "big", 2000);
    }
    let plan = c.plan();
    assert_eq!(plan.disruptions.len(), 1, "{plan:?}");
    let d = &plan.disruptions[0];
    assert_eq!(d.command, Command::Replace, "{d:?}");
    let reserved = reserved_replacements(d)
        .into_iter()
        .filter(|(_, capacity)| capacity == &["reserved".to_string()])
        .count();
    assert_eq!(reserved, 2, "{d:?}");
    assert!(d.savings > 0.5, "{}: {d:?}", d.savings);
}

/// A node already in the reservation never moves to another slot of it.
#[test]
fn a_reserved_node_stays_in_its_reservation() {
    let mut c = with_reservation("m5.2xlarge", 1);
    c.node("in-it", "m5.2xlarge", "reserved");
    c.snapshot.nodes[0]
        .labels
        .insert(RESERVATION_ID.into(), "cr-0123456789abcdef0".into());
    for i in 0..3 {
        c.pod(&format!("web-{i}"), "in-it", 2000);
    }
    let plan = c.plan();
    assert!(plan.disruptions.is_empty(), "{plan:?}");
}
