//! `fleetwright bench`: scheduling throughput on Karpenter's benchmark shape, plain pods on the
//! real catalog, plan cost against the LP lower bound for the named mixes and the real-cluster
//! mixes (each plan checked by the independent checker), and peak memory.

use std::io::Write;
use std::time::Instant;

use clap::Args;
use fleetwright_core::model::Snapshot;
use fleetwright_core::synthetic::{self, MIXES};
use fleetwright_core::{check, schedule, Catalog, Plan, ScheduleOptions};
use serde::Serialize;

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Pod counts for the synthetic (400-type) benchmark.
    #[arg(long, value_delimiter = ',', default_value = "1000,5000,10000")]
    pub pods: Vec<usize>,
    /// Seed for the synthetic pods.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Timed repetitions per case (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Run a peer scheduler on the same inputs and print one table: `karpenter`.
    #[arg(long)]
    pub peer: Option<String>,
    /// The peer harness's binary (built by scripts/peer-bench.sh).
    #[arg(long, default_value = "target/peers/karpenter-peer")]
    pub peer_bin: std::path::PathBuf,
    /// With --peer: `smoke` (a few hundred pods) or `full`.
    #[arg(long, default_value = "full")]
    pub cases: String,
    /// Seeds (1 to N) of the real-cluster mixes (several pools, selectors, affinity,
    /// tolerations, spread) at 1,000 pods, each plan checked by the independent checker.
    #[arg(long, default_value_t = 3)]
    pub cluster_seeds: u64,
}

#[derive(Debug, Serialize)]
struct Throughput {
    case: String,
    pods: usize,
    nodes: usize,
    unschedulable: usize,
    millis: f64,
    pods_per_second: f64,
}

#[derive(Debug, Serialize)]
struct CostRatio {
    mix: String,
    pods: usize,
    nodes: usize,
    hourly: f64,
    lower_bound: f64,
    ratio: f64,
}

#[derive(Debug, Serialize)]
struct Report {
    throughput: Vec<Throughput>,
    cost: Vec<CostRatio>,
    peak_rss_mib: f64,
}

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.peer.as_deref() {
        None => {}
        Some("karpenter") => {
            return crate::peer::run(&args.peer_bin, &args.cases, args.seed, args.repeat)
        }
        Some(other) => anyhow::bail!("--peer: {other} is not a known peer (karpenter)"),
    }
    let synthetic_catalog = synthetic::benchmark_catalog(400);
    let mut throughput = Vec::new();
    for &n in &args.pods {
        let snap = Snapshot {
            pods: synthetic::benchmark_pods(n, args.seed),
            nodepools: vec![synthetic::default_pool("default")],
            ..Default::default()
        };
        throughput.push(measure(
            &format!("karpenter-shape/400-types/{n}"),
            &snap,
            &synthetic_catalog,
            args.repeat,
        ));
    }
    let plain = Snapshot {
        pods: synthetic::plain_pods(10_000, args.seed),
        nodepools: vec![synthetic::general_purpose_pool()],
        ..Default::default()
    };
    throughput.push(measure(
        "plain/embedded-catalog/10000",
        &plain,
        Catalog::embedded(),
        args.repeat,
    ));
    let mut cost = Vec::new();
    for mix in MIXES {
        let snap = synthetic::mix_snapshot(mix, args.seed).expect("known mix");
        let plan = schedule(&snap, Catalog::embedded(), &ScheduleOptions::default());
        cost.push(CostRatio {
            mix: mix.to_string(),
            pods: snap.pods.len(),
            nodes: plan.nodeclaims.len(),
            hourly: plan.cost.hourly,
            lower_bound: plan.cost.lower_bound,
            ratio: ratio(&plan),
        });
    }
    cost.extend(cluster_mixes(args.cluster_seeds)?);
    let report = Report {
        throughput,
        cost,
        peak_rss_mib: peak_rss_mib(),
    };
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        print_table(&mut out, &report)?;
    }
    Ok(())
}

/// The real-cluster mixes at 1,000 pods, seeds 1 to `seeds`, each against the
/// constraint-aware LP bound (`fleetwright_bound`: which pods may use which offerings, NodePool
/// weights, preferences and hostname anti-affinity respected); a plan the checker faults fails
/// the run.
fn cluster_mixes(seeds: u64) -> anyhow::Result<Vec<CostRatio>> {
    let types: std::collections::BTreeMap<_, _> = Catalog::embedded()
        .instance_types(&fleetwright_core::NodeClassSettings::default())
        .into_iter()
        .map(|t| (t.name.clone(), t))
        .collect();
    let mut out = Vec::new();
    for mix in synthetic::CLUSTER_MIXES {
        for seed in 1..=seeds {
            let snap = synthetic::cluster_mix(mix, 1000, seed).expect("known mix");
            let plan = schedule(&snap, Catalog::embedded(), &ScheduleOptions::default());
            let broken = check::violations(&snap, &types, &check::Claim::of_plan(&plan));
            anyhow::ensure!(
                broken.is_empty() && plan.unschedulable.is_empty(),
                "cluster mix {mix}, seed {seed}: {} broken constraint(s), {} unschedulable: {:?}",
                broken.len(),
                plan.unschedulable.len(),
                broken.first()
            );
            let bound = fleetwright_bound::lower_bound(&snap, Catalog::embedded())?;
            out.push(CostRatio {
                mix: format!("{mix}/s{seed}"),
                pods: snap.pods.len(),
                nodes: plan.nodeclaims.len(),
                hourly: plan.cost.hourly,
                lower_bound: bound.hourly,
                ratio: plan.cost.hourly / bound.hourly.max(f64::MIN_POSITIVE),
            });
        }
    }
    Ok(out)
}

fn measure(case: &str, snap: &Snapshot, catalog: &Catalog, repeat: usize) -> Throughput {
    let mut times = Vec::new();
    let mut plan = Plan::default();
    for _ in 0..repeat.max(1) {
        let start = Instant::now();
        plan = schedule(snap, catalog, &ScheduleOptions::default());
        times.push(start.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    let median = times[times.len() / 2];
    Throughput {
        case: case.to_string(),
        pods: snap.pods.len(),
        nodes: plan.nodeclaims.len(),
        unschedulable: plan.unschedulable.len(),
        millis: median * 1000.0,
        pods_per_second: snap.pods.len() as f64 / median,
    }
}

fn ratio(plan: &Plan) -> f64 {
    if plan.cost.lower_bound > 0.0 {
        plan.cost.hourly / plan.cost.lower_bound
    } else {
        1.0
    }
}

/// Peak resident set size of this process (Linux `VmHWM`), in MiB.
fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

fn print_table(out: &mut impl Write, report: &Report) -> std::io::Result<()> {
    writeln!(
        out,
        "{:<34} {:>7} {:>6} {:>6} {:>10} {:>12}",
        "CASE", "PODS", "NODES", "UNSCH", "MS", "PODS/S"
    )?;
    for t in &report.throughput {
        writeln!(
            out,
            "{:<34} {:>7} {:>6} {:>6} {:>10.1} {:>12.0}",
            t.case, t.pods, t.nodes, t.unschedulable, t.millis, t.pods_per_second
        )?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "{:<14} {:>6} {:>6} {:>10} {:>12} {:>8}",
        "MIX", "PODS", "NODES", "$/HOUR", "LP BOUND", "RATIO"
    )?;
    for c in &report.cost {
        writeln!(
            out,
            "{:<14} {:>6} {:>6} {:>10.3} {:>12.3} {:>8.3}",
            c.mix, c.pods, c.nodes, c.hourly, c.lower_bound, c.ratio
        )?;
    }
    writeln!(out)?;
    writeln!(out, "peak RSS: {:.1} MiB", report.peak_rss_mib)
}
