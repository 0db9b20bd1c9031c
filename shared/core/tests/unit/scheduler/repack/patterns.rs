use super::*;
use crate::rng::Rng;
use crate::synthetic::{default_pool, general_purpose_pool};

/// The most worth of any pattern, by trying every count vector.
fn brute_force(shapes: &Shapes, prices: &[f64], cap: &[i64]) -> f64 {
    let mut best = 0.0f64;
    let mut pattern = vec![0usize; shapes.count.len()];
    loop {
        let fits = (0..cap.len()).all(|d| {
            let used: i64 = (0..pattern.len())
                .map(|k| shapes.size[k][d] * pattern[k] as i64)
                .sum();
            used <= cap[d]
        });
        if fits {
            let worth: f64 = (0..pattern.len())
                .map(|k| prices[k] * pattern[k] as f64)
                .sum();
            best = best.max(worth);
        }
        let mut k = 0;
        while k < pattern.len() && pattern[k] == shapes.count[k] {
            pattern[k] = 0;
            k += 1;
        }
        if k == pattern.len() {
            return best;
        }
        pattern[k] += 1;
    }
}

/// The knapsack's branch and bound finds the best pattern on generated instances small
/// enough that its node limit cannot cut it short (at most 7³ patterns), checked against
/// trying every pattern; and what it returns fits and is worth what it says.
#[test]
fn the_best_pattern_is_the_brute_force_optimum_on_generated_knapsacks() {
    let mut rng = Rng::new(20);
    for case in 0..300 {
        let kinds = 1 + rng.below(3);
        let dims = 1 + rng.below(3);
        let shapes = Shapes {
            size: (0..kinds)
                .map(|_| (0..dims).map(|_| rng.below(9) as i64).collect())
                .collect(),
            count: (0..kinds).map(|_| rng.below(7)).collect(),
        };
        let prices: Vec<f64> = (0..kinds).map(|_| rng.between(0.0, 2.0)).collect();
        let cap: Vec<i64> = (0..dims).map(|_| 1 + rng.below(30) as i64).collect();
        let (worth, pattern) = best_pattern(&shapes, &prices, &cap);
        let expected = brute_force(&shapes, &prices, &cap);
        assert!(
            (worth - expected).abs() < 1e-9,
            "case {case}: {worth} vs {expected} ({:?} {prices:?} {cap:?})",
            shapes.size
        );
        let priced: f64 = (0..kinds).map(|k| prices[k] * pattern[k] as f64).sum();
        assert!((priced - worth).abs() < 1e-9, "case {case}");
        for (d, room) in cap.iter().enumerate() {
            let used: i64 = (0..kinds)
                .map(|k| shapes.size[k][d] * pattern[k] as i64)
                .sum();
            assert!(used <= *room, "case {case}: dimension {d} over");
        }
        assert!(
            (0..kinds).all(|k| pattern[k] <= shapes.count[k]),
            "case {case}"
        );
    }
}

/// Generated groups of 24 to 300 pods of one to five shapes: every rounding places each pod
/// exactly once, on a node whose type holds its pods, at that type's price, and never for
/// less than the aggregate LP bound of the group.
#[test]
fn pattern_packings_place_every_pod_once_on_a_node_that_holds_it() {
    let mut rng = Rng::new(7);
    for case in 0..12 {
        let kinds = 1 + rng.below(5);
        let menu: Vec<Resources> = (0..kinds)
            .map(|_| {
                let cpu = *rng.pick(&[250, 500, 1000, 2000, 4000]);
                let gib = *rng.pick(&[1, 2, 4, 8, 16]);
                Resources::new(cpu, gib << 30)
            })
            .collect();
        let count = 24 + rng.below(277);
        let pods: Vec<Pod> = (0..count)
            .map(|i| Pod::new("default", &format!("p-{i}"), rng.pick(&menu).clone()))
            .collect();
        let pool = if case % 2 == 0 {
            default_pool("default")
        } else {
            NodePool {
                requirements: general_purpose_pool().requirements,
                ..default_pool("general")
            }
        };
        let snapshot = Snapshot {
            pods,
            nodepools: vec![pool],
            ..Default::default()
        };
        let ctx = Ctx::new(&snapshot, Catalog::embedded(), 0);
        let reqs = ctx.pools[0].base.clone();
        let all: Vec<usize> = (0..count).collect();
        let mut total = Resources::default();
        for p in &snapshot.pods {
            total.add(&p.requests);
        }
        let allowed = ctx.allowed_types(0, &reqs).expect("types");
        let cols: Vec<(usize, usize, f64)> = allowed
            .by_price
            .iter()
            .map(|&(t, price)| (0, t, price))
            .collect();
        let (bound, _) = ctx.lp_priced(&total, &cols).expect("a bound");
        for share in [1.0, 0.25] {
            for rounding in [Rounding::Down, Rounding::Nearest] {
                let Some(packing) = ctx.pattern_pack(0, &all, &reqs, share, rounding) else {
                    continue;
                };
                let mut placed: Vec<usize> = packing.iter().flat_map(|n| n.0.clone()).collect();
                placed.sort();
                assert_eq!(placed, all, "case {case}: each pod exactly once");
                for (members, t, price) in &packing {
                    let mut used = Resources::default();
                    for &i in members {
                        used.add(&snapshot.pods[i].requests);
                    }
                    assert!(used.fits_in(&ctx.pools[0].usable[*t]), "case {case}");
                    let (_, cheapest) = ctx.cheapest_fit(0, &used, &reqs).expect("fits");
                    assert!((cheapest - price).abs() < 1e-9, "case {case}");
                }
                assert!(
                    cost(&packing) >= bound - 1e-6,
                    "case {case}: below the bound"
                );
            }
        }
    }
}
