//! Capacity reservations in the scheduler, with Karpenter's semantics: a pool that allows the
//! capacity type `reserved` launches into its EC2NodeClass's reservations before spot or
//! on-demand (a reserved offering costs the on-demand price / 10^7); a reservation is taken by no
//! more NodeClaims than it has instances; pods that select a reservation wait when the
//! reservations are used up, while those of a pool that allows only `reserved` fall through to
//! the next pool; an expiring capacity block takes
//! nothing; and reservations never make a plan dearer than the same cluster without them.
//! Checked over generated clusters with the independent plan checker.

mod common;

use std::collections::BTreeMap;

use common::*;
use fleetwright_core::catalog::{CapacityReservation, NodeClassSettings};
use fleetwright_core::check::{violations, Claim};
use fleetwright_core::labels::*;
use fleetwright_core::model::*;
use fleetwright_core::requirements::Operator;
use fleetwright_core::rng::Rng;
use fleetwright_core::{Catalog, Plan};

fn reservation(id: &str, instance_type: &str, zone: &str, available: usize) -> CapacityReservation {
    CapacityReservation {
        id: id.into(),
        instance_type: instance_type.into(),
        zone: zone.into(),
        kind: "default".into(),
        interruptible: false,
        state: "active".into(),
        available,
    }
}

fn reserved_pool(capacity_types: &[&str]) -> NodePool {
    pool_with(
        "default",
        vec![
            req(CAPACITY_TYPE, Operator::In, capacity_types),
            req(INSTANCE_CATEGORY, Operator::In, &["c", "m", "r"]),
            zones3(),
        ],
    )
}

fn cluster(pods: Vec<Pod>, pool: NodePool, reservations: Vec<CapacityReservation>) -> Snapshot {
    let mut snap = snapshot(pods, vec![pool]);
    snap.node_classes.insert(
        "default".into(),
        NodeClassSettings {
            reservations,
            ..Default::default()
        },
    );
    snap
}

fn taken(plan: &Plan) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for c in &plan.nodeclaims {
        if let Some(id) = &c.reservation {
            *out.entry(id.clone()).or_default() += 1;
        }
    }
    out
}

/// What every plan must hold: the independent checker finds nothing, no reservation is taken
/// more often than it has instances, each reserved claim's cheapest type is its reservation's,
/// priced as a reservation, and every pod is placed or said to be unschedulable.
fn check(snap: &Snapshot, plan: &Plan) {
    let settings = &snap.node_classes["default"];
    let types = Catalog::embedded()
        .instance_types(settings)
        .into_iter()
        .map(|t| (t.name.clone(), t))
        .collect();
    let broken = violations(snap, &types, &Claim::of_plan(plan));
    assert!(broken.is_empty(), "{broken:?}");
    for (id, n) in taken(plan) {
        let r = settings.reservations.iter().find(|r| r.id == id).unwrap();
        assert!(
            n <= r.available,
            "{id} taken {n} times, has {}",
            r.available
        );
    }
    for c in plan.nodeclaims.iter().filter(|c| c.reservation.is_some()) {
        let id = c.reservation.as_ref().unwrap();
        let r = settings.reservations.iter().find(|r| &r.id == id).unwrap();
        assert_eq!(c.instance_types[0], r.instance_type, "{c:?}");
        assert!(c.capacity_types.iter().any(|t| t == CAPACITY_RESERVED));
        assert!(c.price < 1e-5, "a reservation is all but free: {}", c.price);
    }
    let unschedulable = plan.unschedulable.len();
    assert_eq!(placed_count(plan) + unschedulable, snap.pods.len());
}

#[test]
fn a_pool_allowing_reserved_launches_into_the_reservation_first_and_no_more_than_it_has() {
    let snap = cluster(
        pods("web", 6, 1500, 2048),
        reserved_pool(&["reserved", "on-demand"]),
        vec![reservation("cr-m5", "m5.large", "us-east-1a", 2)],
    );
    let plan = plan(&snap);
    check(&snap, &plan);
    assert_eq!(taken(&plan), BTreeMap::from([("cr-m5".to_string(), 2)]));
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    let reserved_pods: usize = plan
        .nodeclaims
        .iter()
        .filter(|c| c.reservation.is_some())
        .map(|c| c.pods.len())
        .sum();
    assert_eq!(reserved_pods, 2, "one 1.5-CPU pod per m5.large");
}

#[test]
fn a_pool_without_reserved_never_uses_the_reservation() {
    let snap = cluster(
        pods("web", 4, 1500, 2048),
        reserved_pool(&["spot", "on-demand"]),
        vec![reservation("cr-m5", "m5.large", "us-east-1a", 4)],
    );
    let plan = plan(&snap);
    check(&snap, &plan);
    assert!(taken(&plan).is_empty());
    assert!(plan
        .nodeclaims
        .iter()
        .all(|c| !c.capacity_types.iter().any(|t| t == CAPACITY_RESERVED)));
}

#[test]
fn pods_selecting_a_reservation_wait_once_it_is_used_up_and_an_expiring_block_takes_none() {
    let selecting = |n| {
        pods("gpu", n, 1500, 2048)
            .into_iter()
            .map(|mut p| {
                p.node_selector
                    .insert(RESERVATION_ID.into(), "cr-m5".into());
                p
            })
            .collect::<Vec<_>>()
    };
    let pool = reserved_pool(&["reserved", "spot", "on-demand"]);
    let snap = cluster(
        selecting(3),
        pool.clone(),
        vec![reservation("cr-m5", "m5.large", "us-east-1a", 2)],
    );
    let planned = plan(&snap);
    check(&snap, &planned);
    assert_eq!(taken(&planned), BTreeMap::from([("cr-m5".to_string(), 2)]));
    assert_eq!(planned.unschedulable.len(), 1, "{planned:?}");

    let mut expiring = reservation("cr-m5", "m5.large", "us-east-1a", 2);
    expiring.state = "expiring".into();
    let snap = cluster(selecting(1), pool, vec![expiring]);
    let planned = plan(&snap);
    assert!(taken(&planned).is_empty());
    assert_eq!(planned.unschedulable.len(), 1, "{planned:?}");
}

/// Generated clusters (pods of several shapes, some with a zone selector or zone spread),
/// reservations of several types and counts: every plan passes the checks, none costs more than
/// the same cluster planned with no reservations at all, and most use a reservation.
#[test]
fn generated_clusters_with_reservations_are_valid_and_never_dearer() {
    let types = [
        "m5.large",
        "m5.xlarge",
        "c5.2xlarge",
        "r5.large",
        "m5.4xlarge",
    ];
    let zones = ["us-east-1a", "us-east-1b", "us-east-1c"];
    let mut used = 0;
    for seed in 1..=40u64 {
        let mut rng = Rng::new(seed);
        let mut all = Vec::new();
        for i in 0..(3 + rng.below(14)) {
            let cpu = [250, 500, 1000, 1500, 3000][rng.below(5)];
            let mem = [256, 1024, 2048, 4096, 8192][rng.below(5)];
            let mut p = pod(&format!("p{i}"), cpu, mem);
            p.labels.insert("app".into(), format!("a{}", i % 3));
            match rng.below(4) {
                0 => {
                    p.node_selector
                        .insert(ZONE.into(), zones[rng.below(3)].into());
                }
                1 => p
                    .spread
                    .push(spread(ZONE, 1, &[("app", &format!("a{}", i % 3))])),
                _ => {}
            }
            all.push(p);
        }
        let reservations: Vec<CapacityReservation> = (0..1 + rng.below(3))
            .map(|i| {
                reservation(
                    &format!("cr-{i}"),
                    types[rng.below(types.len())],
                    zones[rng.below(3)],
                    rng.below(4),
                )
            })
            .collect();
        let with = cluster(
            all.clone(),
            reserved_pool(&["reserved", "on-demand"]),
            reservations,
        );
        let without = cluster(all, reserved_pool(&["reserved", "on-demand"]), Vec::new());
        let (planned, plain) = (plan(&with), plan(&without));
        check(&with, &planned);
        used += usize::from(!taken(&planned).is_empty());
        assert_eq!(
            planned.unschedulable.len(),
            plain.unschedulable.len(),
            "seed {seed}"
        );
        assert!(
            planned.cost.hourly <= plain.cost.hourly * 1.0001 + 1e-6,
            "seed {seed}: {} with reservations, {} without",
            planned.cost.hourly,
            plain.cost.hourly
        );
    }
    assert!(
        used >= 15,
        "reservations are used where they help: {used} of 40 plans"
    );
}

/// A reservation of a bare-metal type is filled with plain pods as any other: the launch options leave
/// out GPU and metal types only where no reservation takes them.
#[test]
fn a_metal_reservation_takes_plain_pods_before_on_demand() {
    let snap = cluster(
        pods("web", 2, 1500, 2048),
        reserved_pool(&["reserved", "on-demand"]),
        vec![reservation("cr-metal", "m5.metal", "us-east-1a", 1)],
    );
    let plan = plan(&snap);
    check(&snap, &plan);
    assert_eq!(taken(&plan), BTreeMap::from([("cr-metal".to_string(), 1)]));
}

/// The pattern Karpenter's docs give for reservations: a NodePool that allows only `reserved`,
/// with a higher weight, and an on-demand NodePool to fall through to once the reservations are
/// full. The reservation's instances are used, the rest falls through, and no pod waits.
fn reserved_first(pods: Vec<Pod>, reservations: Vec<CapacityReservation>) -> Snapshot {
    let mut reserved = reserved_pool(&["reserved"]);
    reserved.name = "reserved".into();
    reserved.weight = 100;
    let on_demand = reserved_pool(&["on-demand"]);
    let mut snap = cluster(pods, on_demand, reservations);
    snap.nodepools.insert(0, reserved);
    snap
}

#[test]
fn a_reserved_only_pool_fills_its_reservation_and_the_rest_falls_through() {
    let snap = reserved_first(
        pods("train", 3, 3000, 4096),
        vec![reservation("cr-m5", "m5.xlarge", "us-east-1a", 1)],
    );
    let planned = plan(&snap);
    check(&snap, &planned);
    assert!(planned.unschedulable.is_empty(), "{planned:?}");
    assert_eq!(taken(&planned), BTreeMap::from([("cr-m5".to_string(), 1)]));
    let of = |pool: &str| {
        (planned.nodeclaims.iter())
            .filter(|c| c.nodepool == pool)
            .map(|c| c.pods.len())
            .sum::<usize>()
    };
    assert_eq!((of("reserved"), of("default")), (1, 2), "{planned:?}");
}

/// Over generated clusters in that pattern: no pod waits that would not wait without the
/// reservations, no plan is dearer, and a reservation that has instances left is used.
#[test]
fn generated_reserved_first_clusters_use_their_reservations_and_are_never_dearer() {
    let types = ["m5.large", "m5.xlarge", "c5.2xlarge", "r5.large"];
    let zones = ["us-east-1a", "us-east-1b", "us-east-1c"];
    let mut used = 0;
    for seed in 1..=30u64 {
        let mut rng = Rng::new(seed);
        let all: Vec<Pod> = (0..(2 + rng.below(10)))
            .map(|i| {
                let cpu = [250, 500, 1000, 1500][rng.below(4)];
                pod(&format!("p{i}"), cpu, [256, 1024, 2048][rng.below(3)])
            })
            .collect();
        let reservations: Vec<CapacityReservation> = (0..1 + rng.below(2))
            .map(|i| {
                let (t, z) = (types[rng.below(types.len())], zones[rng.below(3)]);
                reservation(&format!("cr-{i}"), t, z, 1 + rng.below(2))
            })
            .collect();
        let with = reserved_first(all.clone(), reservations);
        let without = reserved_first(all, Vec::new());
        let (planned, plain) = (plan(&with), plan(&without));
        check(&with, &planned);
        assert!(planned.unschedulable.is_empty(), "seed {seed}: {planned:?}");
        assert!(plain.unschedulable.is_empty(), "seed {seed}");
        assert!(
            planned.cost.hourly <= plain.cost.hourly * 1.0001 + 1e-6,
            "seed {seed}: {} with reservations, {} without",
            planned.cost.hourly,
            plain.cost.hourly
        );
        used += usize::from(!taken(&planned).is_empty());
    }
    assert_eq!(used, 30, "every cluster has pods a reservation fits");
}

/// Pods that prefer `reserved` capacity, in a pool that allows on-demand too: the preference
/// holds while the reservation has instances and is relaxed once it is full, so no pod waits.
#[test]
fn a_preference_for_reserved_capacity_is_relaxed_once_the_reservation_is_full() {
    let prefer = pods("train", 3, 3000, 4096)
        .into_iter()
        .map(|mut p| {
            let mut wanted = fleetwright_core::requirements::Requirements::new();
            wanted.add(req(CAPACITY_TYPE, Operator::In, &["reserved"]));
            p.preferred_terms.push((100, wanted));
            p
        })
        .collect();
    let snap = cluster(
        prefer,
        reserved_pool(&["reserved", "on-demand"]),
        vec![reservation("cr-m5", "m5.xlarge", "us-east-1a", 1)],
    );
    let planned = plan(&snap);
    check(&snap, &planned);
    assert!(planned.unschedulable.is_empty(), "{planned:?}");
    assert_eq!(taken(&planned), BTreeMap::from([("cr-m5".to_string(), 1)]));
}

/// A reserved-only pool's `limits` hold over the whole plan, the NodeClaims kept in a
/// reservation that the plan filled counting as the type they launch as (a reservation's type
/// its pool offers no more once it is full).
#[test]
fn a_reserved_only_pools_limits_hold_with_its_reservations_filled() {
    let mut snap = reserved_first(
        pods("batch", 30, 1500, 1024),
        vec![
            reservation("cr-big", "m5.4xlarge", "us-east-1a", 1),
            reservation("cr-small", "m5.large", "us-east-1b", 40),
        ],
    );
    snap.nodepools[0].limits = Some(fleetwright_core::resources::Resources {
        cpu: 40_000,
        ..Default::default()
    });
    let planned = plan(&snap);
    check(&snap, &planned);
    let types = catalog_types();
    let cpu: i64 = (planned.nodeclaims.iter())
        .filter(|c| c.nodepool == "reserved")
        .map(|c| {
            (c.instance_types.iter())
                .map(|t| types[t].capacity.cpu)
                .max()
                .unwrap_or(0)
        })
        .sum();
    assert!(
        cpu <= 40_000,
        "{cpu} millicores planned in the pool: {planned:?}"
    );
    assert!(planned.unschedulable.is_empty(), "{planned:?}");
}
