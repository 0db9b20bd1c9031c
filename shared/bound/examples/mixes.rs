//! Prints each real-cluster mix's plan against the plan's own (relaxed) bound and the
//! constraint-aware bound, with timings: `cargo run --release -p fleetwright-bound --example
//! mixes -- SEEDS [PODS]`; with `SPEND=1`, where each spends, by pool and capacity type, and the
//! bound's (fractional) nodes by type.
use fleetwright_core::synthetic::{cluster_mix, CLUSTER_MIXES};
use std::io::Write;

use fleetwright_core::{schedule, Catalog};

fn main() -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    let seeds: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let pods: usize = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    let only = std::env::var("MIX").ok();
    for mix in CLUSTER_MIXES
        .into_iter()
        .filter(|m| only.as_deref().is_none_or(|o| o == *m))
    {
        for seed in 1..=seeds {
            let snap = cluster_mix(mix, pods, seed).expect("mix");
            let t = std::time::Instant::now();
            let plan = schedule(&snap, Catalog::embedded(), &Default::default());
            let ts = t.elapsed().as_secs_f64();
            let t = std::time::Instant::now();
            let b = fleetwright_bound::lower_bound(&snap, Catalog::embedded()).expect("bound");
            let (hourly, relaxed) = (plan.cost.hourly, plan.cost.lower_bound);
            writeln!(
                out,
                "{mix}/s{seed}: plan ${hourly:.3} relaxed {relaxed:.3} ({:.3}) constrained {:.3} \
                 ({:.3}) groups {} cols {} sched {ts:.2}s bound {:.2}s",
                hourly / relaxed,
                b.hourly,
                hourly / b.hourly,
                b.groups,
                b.columns,
                t.elapsed().as_secs_f64()
            )?;
            if std::env::var("SPEND").is_ok() {
                let mut spend: std::collections::BTreeMap<String, (f64, usize)> =
                    Default::default();
                for n in &plan.nodeclaims {
                    let e = spend
                        .entry(format!("{}/{}", n.nodepool, n.capacity_types.join("+")))
                        .or_default();
                    e.0 += n.price;
                    e.1 += 1;
                }
                writeln!(out, "   plan  {spend:.3?}")?;
                writeln!(out, "   bound {:.3?}", b.spend)?;
                for (key, nodes) in &b.nodes {
                    writeln!(out, "   bound nodes {key} {nodes:.2}")?;
                }
            }
        }
    }
    Ok(())
}
