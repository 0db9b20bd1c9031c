//! The cost benchmark's named mixes on the embedded catalog: each plan stays within 5 % of the
//! LP lower bound at the benchmark's seed (the target `fleetwright bench` reports against).

use fleetwright_core::scheduler::{schedule, ScheduleOptions};
use fleetwright_core::synthetic::{mix_snapshot, MIXES};
use fleetwright_core::Catalog;

#[test]
fn every_named_mix_is_within_five_percent_of_the_lp_bound() {
    for mix in MIXES {
        let snap = mix_snapshot(mix, 42).expect("known mix");
        let plan = schedule(&snap, Catalog::embedded(), &ScheduleOptions::default());
        assert!(
            plan.unschedulable.is_empty(),
            "{mix}: {:?}",
            plan.unschedulable
        );
        let ratio = plan.cost.hourly / plan.cost.lower_bound;
        assert!(
            (1.0 - 1e-9..=1.05).contains(&ratio),
            "{mix}: ${:.3}/h against a bound of ${:.3}/h (ratio {ratio:.4})",
            plan.cost.hourly,
            plan.cost.lower_bound
        );
    }
}
