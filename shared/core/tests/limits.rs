//! NodePool limits: respected exactly, and a limit that does not bind never changes the plan
//! (the cost improvements apply whatever the pool's fields).

mod common;

use common::*;
use fleetwright_core::labels::{ARCH, CAPACITY_TYPE};
use fleetwright_core::model::{NodePool, Pod};
use fleetwright_core::requirements::Operator;
use fleetwright_core::resources::Resources;
use fleetwright_core::Plan;

/// An on-demand amd64 pool, with a CPU limit of `cpu` when given.
fn open_pool(cpu: Option<i64>) -> NodePool {
    let mut pool = pool_with(
        "default",
        vec![
            req(CAPACITY_TYPE, Operator::In, &["on-demand"]),
            req(ARCH, Operator::In, &["amd64"]),
        ],
    );
    pool.limits = cpu.map(|cores| {
        let mut limits = Resources::default();
        limits.set("cpu", cores * 1000);
        limits
    });
    pool
}

/// Twelve pods of six sizes, each of an app of its own (what a Karpenter user's docs pool met).
fn mixed_pods() -> Vec<Pod> {
    let sizes = [
        (250, 512),
        (500, 1024),
        (1000, 2048),
        (2000, 4096),
        (100, 256),
        (1000, 8192),
    ];
    (0..12)
        .map(|i| {
            let (cpu, mem) = sizes[i % sizes.len()];
            labelled(
                pod(&format!("app{i}-0"), cpu, mem),
                &[("app", &format!("app{i}"))],
            )
        })
        .collect()
}

fn cost(plan: &Plan) -> f64 {
    plan.nodeclaims.iter().map(|c| c.price).sum()
}

fn cpus_planned(plan: &Plan) -> i64 {
    let types = catalog_types();
    plan.nodeclaims
        .iter()
        .map(|c| {
            c.instance_types
                .iter()
                .filter_map(|t| types.get(t))
                .map(|t| t.capacity.cpu)
                .max()
                .unwrap_or(0)
        })
        .sum()
}

#[test]
fn a_limit_that_does_not_bind_changes_nothing() {
    let free = plan(&snapshot(mixed_pods(), vec![open_pool(None)]));
    for cores in [40, 100, 1000, 100_000] {
        let limited = plan(&snapshot(mixed_pods(), vec![open_pool(Some(cores))]));
        assert_eq!(placed_count(&limited), 12);
        assert!(
            (cost(&limited) - cost(&free)).abs() <= cost(&free) * 0.01,
            "cpu {cores}: ${:.4}/h with the limit, ${:.4}/h without",
            cost(&limited),
            cost(&free)
        );
    }
}

#[test]
fn a_limit_that_binds_is_kept_counting_each_nodeclaim_at_its_largest_option() {
    for cores in [2, 4, 8] {
        let limited = plan(&snapshot(mixed_pods(), vec![open_pool(Some(cores))]));
        assert!(
            cpus_planned(&limited) <= cores * 1000,
            "cpu {cores}: {} mCPU planned",
            cpus_planned(&limited)
        );
        assert!(placed_count(&limited) < 12, "{limited:?}");
    }
}

/// A generated case whose docs pool (`limits: cpu: 1000`) binds long before its 800
/// memory-heavy pods are placed: placing them comes before the price, so the limit is spent on
/// the types that carry the most per CPU, and every NodeClaim still counts as its largest
/// option. The cheapest plan alone placed 231 of them; Karpenter v1.15.0's provisioner, on the
/// same objects, 354 (`fleetwright bench --peer karpenter --cases generated:1 --seed 190`).
#[test]
fn a_binding_limit_is_spent_on_the_types_that_carry_most_per_unit_of_it() {
    let (name, snapshot) = fleetwright_core::synthetic::generated_case(190, false);
    assert_eq!(name, "docs/memory/selector/800/s190");
    let planned = plan(&snapshot);
    assert!(
        cpus_planned(&planned) <= 1_000_000,
        "{} mCPU planned",
        cpus_planned(&planned)
    );
    assert!(
        placed_count(&planned) >= 360,
        "{} of 800 placed",
        placed_count(&planned)
    );
}

/// On exactly the pods Karpenter v1.15.0 placed under the docs pool's binding limit (listed
/// from its harness's run in `tests/data`), Fleetwright places every one, within the limit.
/// The cheapest packing alone left 11 of s190's and 1 of s21's: where a limit binds, Karpenter's
/// order (the pods with the most CPU first, each onto the NodeClaim with the fewest pods) is
/// tried too.
#[test]
fn under_a_binding_limit_the_pods_karpenter_places_are_all_placed() {
    for seed in [190, 21] {
        let (name, mut snapshot) = fleetwright_core::synthetic::generated_case(seed, false);
        let path = format!(
            "{}/tests/data/karpenter-placed-s{seed}.txt",
            env!("CARGO_MANIFEST_DIR")
        );
        let listed = std::fs::read_to_string(&path).unwrap();
        let placed: std::collections::BTreeSet<&str> = listed
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .collect();
        snapshot.pods.retain(|p| placed.contains(p.key().as_str()));
        assert_eq!(snapshot.pods.len(), placed.len(), "{name}");
        let planned = plan(&snapshot);
        assert!(cpus_planned(&planned) <= 1_000_000, "{name}");
        assert_eq!(
            placed_count(&planned),
            placed.len(),
            "{name}: {:?}",
            planned.unschedulable.first()
        );
    }
}

/// A c, m and r pool (on-demand, amd64) with a CPU limit of `cores`.
fn cmr_pool(cores: Option<i64>) -> NodePool {
    let mut pool = open_pool(cores);
    pool.requirements
        .add(fleetwright_core::requirements::Requirement::in_values(
            fleetwright_core::labels::INSTANCE_CATEGORY,
            ["c", "m", "r"].map(String::from),
        ));
    pool
}

/// 85 pods of six shapes, memory-heavy ones and CPU-heavy ones, in Deployments of their own.
fn shaped_pods() -> Vec<Pod> {
    let shapes = [
        (20, 500, 12 * 1024),
        (20, 1000, 24 * 1024),
        (10, 250, 6 * 1024),
        (10, 2000, 30 * 1024),
        (15, 4000, 2 * 1024),
        (10, 7000, 1024),
    ];
    let mut out = Vec::new();
    for (s, (count, cpu, mem)) in shapes.into_iter().enumerate() {
        for r in 0..count {
            let app = format!("shape{s}");
            out.push(labelled(
                pod(&format!("{app}-{r}"), cpu, mem),
                &[("app", &app)],
            ));
        }
    }
    out
}

/// A limit that the cheapest plan's NodeClaims fit, once each lists only the options the limit
/// leaves room for, keeps that plan: the same price, and every NodeClaim counted at its largest
/// option left within the limit. Before, a limit between what the plan launches (188 vCPUs) and
/// its NodeClaims' largest options (512) made the plan 10 % dearer.
#[test]
fn a_limit_the_cheapest_plan_fits_under_keeps_it() {
    let free = plan(&snapshot(shaped_pods(), vec![cmr_pool(None)]));
    assert_eq!(placed_count(&free), 85);
    let launched: i64 = free
        .nodeclaims
        .iter()
        .map(|c| catalog_types()[&c.instance_types[0]].capacity.cpu)
        .sum();
    let top = cpus_planned(&free);
    assert!(top > launched, "{top} > {launched}");
    for cores in [launched / 1000 + 1, (launched + top) / 2000, top / 1000 - 1] {
        let limited = plan(&snapshot(shaped_pods(), vec![cmr_pool(Some(cores))]));
        assert_eq!(placed_count(&limited), 85, "cpu {cores}");
        assert!(cpus_planned(&limited) <= cores * 1000, "cpu {cores}");
        // What a NodeClaim says it may launch as agrees with its options.
        for claim in &limited.nodeclaims {
            let said = |key: &str| -> Vec<String> {
                let r = claim
                    .requirements
                    .iter()
                    .find(|r| r.key == key && r.operator == "In");
                let mut values = r.map(|r| r.values.clone()).unwrap_or_default();
                values.sort();
                values
            };
            let mut types = claim.instance_types.clone();
            types.sort();
            assert_eq!(said(fleetwright_core::labels::INSTANCE_TYPE), types);
            assert_eq!(said(fleetwright_core::labels::ZONE), claim.zones);
        }
        assert!(
            (cost(&limited) - cost(&free)).abs() <= cost(&free) * 0.001,
            "cpu {cores}: ${:.4}/h with the limit, ${:.4}/h without",
            cost(&limited),
            cost(&free)
        );
    }
}

/// Under a limit that binds, the most pods the limit can hold are placed, even when the largest
/// pods would spend it on a few: with `cpu: 100`, the ten 7-vCPU pods alone would take 70 of
/// it. A hand packing holds 61 of these 85 pods within the limit (one r5a.24xlarge and a
/// 4-vCPU node); before, 37 were placed.
#[test]
fn a_binding_limit_places_the_most_pods_it_can_hold() {
    let limited = plan(&snapshot(shaped_pods(), vec![cmr_pool(Some(100))]));
    assert!(cpus_planned(&limited) <= 100_000);
    assert!(
        placed_count(&limited) >= 61,
        "{} of 85 placed",
        placed_count(&limited)
    );
}
