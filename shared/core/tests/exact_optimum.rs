//! Small batches against their exact optimum, computed here independently of the scheduler:
//! every split of the pods into nodes (a subset dynamic program), each node at the cheapest
//! catalog type whose allocatable holds its pods and that the NodePool allows. Over generated
//! batches of 2 to 9 pods on the embedded catalog, every plan must cost within 5 % of it. (Before
//! the exact packing of small groups, `repack/exact.rs`, this test failed; over 200 batches of 2
//! to 10 pods, 38 were more than 5 % over, the worst by 33 %.)

use fleetwright_core::model::*;
use fleetwright_core::rng::Rng;
use fleetwright_core::synthetic::general_purpose_pool;
use fleetwright_core::{schedule, Catalog, NodeClassSettings, Resources};

/// The catalog's types the pool allows, cheapest first: (allocatable, hourly price).
fn allowed_types(pool: &NodePool) -> Vec<(Resources, f64)> {
    let mut types: Vec<(Resources, f64)> = Catalog::embedded()
        .instance_types(&NodeClassSettings::default())
        .into_iter()
        .filter(|t| t.requirements.intersects(&pool.requirements).is_ok())
        .filter_map(|t| {
            let offering = t.cheapest_offering(&pool.requirements)?;
            Some((t.allocatable.clone(), offering.price))
        })
        .collect();
    types.sort_by(|a, b| a.1.total_cmp(&b.1));
    types
}

/// The cheapest cost of any split of `pods` into whole nodes.
fn optimum(pods: &[Pod], types: &[(Resources, f64)]) -> f64 {
    let n = pods.len();
    let full = (1usize << n) - 1;
    let node: Vec<f64> = (0..=full)
        .map(|s| {
            let mut used = Resources::default();
            for (i, pod) in pods.iter().enumerate() {
                if s >> i & 1 == 1 {
                    used.add(&pod.requests);
                }
            }
            types
                .iter()
                .find(|(allocatable, _)| used.fits_in(allocatable))
                .map_or(f64::INFINITY, |(_, price)| *price)
        })
        .collect();
    let mut best = vec![f64::INFINITY; full + 1];
    best[0] = 0.0;
    for s in 1..=full {
        let low = s & s.wrapping_neg();
        let rest = s & !low;
        let mut t = rest;
        loop {
            let part = t | low;
            best[s] = best[s].min(node[part] + best[s & !part]);
            if t == 0 {
                break;
            }
            t = (t - 1) & rest;
        }
    }
    best[full]
}

#[test]
fn small_batches_cost_within_five_percent_of_the_exact_optimum() {
    let pool = general_purpose_pool();
    let types = allowed_types(&pool);
    let mut rng = Rng::new(7);
    for case in 0..30 {
        let n = 2 + rng.below(8);
        let pods: Vec<Pod> = (0..n)
            .map(|i| {
                let cpu = *rng.pick(&[100i64, 250, 500, 1000, 1500, 2000, 4000]);
                let mib = *rng.pick(&[128i64, 256, 512, 1024, 2048, 4096, 8192, 16384]);
                Pod::new("default", &format!("p{i}"), Resources::new(cpu, mib << 20))
            })
            .collect();
        let snapshot = Snapshot {
            pods: pods.clone(),
            nodepools: vec![pool.clone()],
            ..Default::default()
        };
        let plan = schedule(&snapshot, Catalog::embedded(), &Default::default());
        assert!(plan.unschedulable.is_empty(), "case {case}");
        let best = optimum(&pods, &types);
        let ratio = plan.cost.hourly / best;
        assert!(
            (1.0 - 1e-6..=1.05).contains(&ratio),
            "case {case}: ${:.4}/h against an optimum of ${best:.4}/h ({ratio:.3}), pods {:?}",
            plan.cost.hourly,
            pods.iter()
                .map(|p| (p.requests.cpu, p.requests.memory >> 20))
                .collect::<Vec<_>>()
        );
    }
}
