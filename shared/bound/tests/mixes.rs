//! The four real-cluster mixes (several weighted and tainted NodePools, nodeSelectors, required
//! and preferred node affinity, tolerations, zone spread, hostname anti-affinity) at 1,000 pods,
//! seeds 1 to 10: every plan passes the independent checker, never costs less than the
//! constraint-aware bound (which would make the bound wrong), and stays within 1.05 × it. The table is printed (`cargo test -p fleetwright-bound --test mixes
//! -- --nocapture`).

use std::io::Write;

use fleetwright_bound::lower_bound;
use fleetwright_core::check::{violations, Claim};
use fleetwright_core::synthetic::{cluster_mix, CLUSTER_MIXES};
use fleetwright_core::{schedule, Catalog, NodeClassSettings};

/// Plan / bound, at most, for every mix at every seed 1 to 10: the packing target (measured: pools
/// 1.022, selectors 1.047, spread 1.042, shapes 1.006; docs/benchmarks.md).
const CEILING: f64 = 1.05;

#[test]
fn constrained_mixes_stay_near_the_constraint_aware_bound_at_seeds_1_to_10() {
    let types = Catalog::embedded()
        .instance_types(&NodeClassSettings::default())
        .into_iter()
        .map(|t| (t.name.clone(), t))
        .collect();
    let mut over = Vec::new();
    for mix in CLUSTER_MIXES {
        let mut ratios = Vec::new();
        for seed in 1..=10 {
            let snapshot = cluster_mix(mix, 1000, seed).expect("a known mix");
            let plan = schedule(&snapshot, Catalog::embedded(), &Default::default());
            let broken = violations(&snapshot, &types, &Claim::of_plan(&plan));
            assert!(broken.is_empty(), "{mix}/{seed}: {broken:?}");
            assert!(plan.unschedulable.is_empty(), "{mix}/{seed}");
            let bound = lower_bound(&snapshot, Catalog::embedded()).expect("a bound");
            assert_eq!(bound.pods, snapshot.pods.len(), "{mix}/{seed}");
            let ratio = plan.cost.hourly / bound.hourly;
            assert!(
                ratio >= 1.0 - 1e-6,
                "{mix}/{seed}: the plan (${:.3}/h) is below the bound (${:.3}/h)",
                plan.cost.hourly,
                bound.hourly
            );
            if ratio > CEILING {
                over.push(format!("{mix}/{seed}: {ratio:.3}"));
            }
            ratios.push(ratio);
        }
        let text: Vec<String> = ratios.iter().map(|r| format!("{r:.3}")).collect();
        // The table, on stderr (shown with --nocapture).
        writeln!(std::io::stderr(), "{mix:<10} {}", text.join(" ")).expect("stderr");
    }
    assert!(over.is_empty(), "over the ceiling: {over:?}");
}
