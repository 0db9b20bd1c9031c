//! The re-pack: the LP-guided zone re-pack, the split and the pair re-cut.

use super::*;
use crate::synthetic::{default_pool, general_purpose_pool};

const GIB: i64 = 1 << 30;

/// Two nodes that each hold one CPU-heavy and one memory-heavy pod are re-cut so that the
/// CPU-heavy pods share a node, which costs at least 10 % less.
#[test]
fn a_pair_of_mixed_nodes_is_recut_by_memory_per_cpu() {
    let pods = vec![
        Pod::new("default", "cpu-0", Resources::new(7000, 6 * GIB)),
        Pod::new("default", "mem-0", Resources::new(1000, 28 * GIB)),
        Pod::new("default", "cpu-1", Resources::new(7000, 6 * GIB)),
        Pod::new("default", "mem-1", Resources::new(1000, 28 * GIB)),
    ];
    let snapshot = Snapshot {
        pods,
        nodepools: vec![NodePool {
            requirements: general_purpose_pool().requirements,
            ..default_pool("general")
        }],
        ..Default::default()
    };
    let ctx = Ctx::new(&snapshot, Catalog::embedded(), 0);
    let reqs = ctx.pools[0].base.clone();
    let node = |members: Vec<usize>| {
        let mut used = Resources::default();
        for &i in &members {
            used.add(&snapshot.pods[i].requests);
        }
        let (t, price) = ctx.cheapest_fit(0, &used, &reqs).expect("fits");
        (members, t, price)
    };
    let mut packing = vec![node(vec![0, 1]), node(vec![2, 3])];
    let before: f64 = packing.iter().map(|n| n.2).sum();
    ctx.improve_pairs(0, &reqs, &mut packing);
    let after: f64 = packing.iter().map(|n| n.2).sum();
    let mut all: Vec<usize> = packing.iter().flat_map(|n| n.0.clone()).collect();
    all.sort();
    assert_eq!(all, vec![0, 1, 2, 3], "{packing:?}");
    assert!(
        packing.iter().any(|n| n.0.contains(&0) && n.0.contains(&2)),
        "the CPU-heavy pods share a node: {packing:?}"
    );
    assert!(after < before * 0.9, "{before} -> {after}");
}

/// Two hostname anti-affine pods are never re-cut onto one node, though one node would cost
/// less.
#[test]
fn pairs_with_hostname_anti_affinity_are_left_alone() {
    let mut pods = Vec::new();
    for (i, memory) in [GIB / 2, 6 * GIB].into_iter().enumerate() {
        let mut p = Pod::new("default", &format!("db-{i}"), Resources::new(250, memory));
        p.labels = BTreeMap::from([("app".to_string(), "db".to_string())]);
        p.anti_affinity.push(PodAffinityTerm {
            selector: {
                let mut r = Requirements::new();
                r.add(Requirement::single("app", "db"));
                r
            },
            namespaces: Namespaces::Listed(BTreeSet::from(["default".to_string()])),
            topology_key: HOSTNAME.to_string(),
        });
        pods.push(p);
    }
    let snapshot = Snapshot {
        pods,
        nodepools: vec![default_pool("default")],
        ..Default::default()
    };
    let ctx = Ctx::new(&snapshot, Catalog::embedded(), 0);
    let reqs = ctx.pools[0].base.clone();
    let node = |i: usize| {
        let (t, price) = ctx
            .cheapest_fit(0, &snapshot.pods[i].requests, &reqs)
            .expect("fits");
        (vec![i], t, price)
    };
    let mut packing = vec![node(0), node(1)];
    let before = packing.clone();
    ctx.improve_pairs(0, &reqs, &mut packing);
    assert_eq!(packing, before, "merging would be cheaper, but not allowed");
}
