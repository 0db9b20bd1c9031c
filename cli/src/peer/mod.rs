//! `fleetwright bench --peer karpenter`: Fleetwright and Karpenter's own provisioning scheduler
//! (the Go harness in `peers/karpenter`, built by `scripts/peer-bench.sh`) on identical inputs,
//! in one run. Each case is written once as Kubernetes objects and a catalog ([`export`]);
//! Karpenter reads them through its provisioner, Fleetwright through its own converter. Both
//! plans are priced by one rule ([`price`]: the capacity type Karpenter's launch would pick, then
//! the lowest price among the NodeClaim's options, as CreateFleet's `lowest-price` buys), and
//! compared with the LP lower bound and with each other, pod by pod.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::Context;
use fleetwright_core::catalog::InstanceType;
use fleetwright_core::check::{self, Claim};
use fleetwright_core::model::Snapshot;
use fleetwright_core::synthetic::{self, CLUSTER_MIXES, MIXES};
use fleetwright_core::{schedule, Catalog, NodeClassSettings, ScheduleOptions};
use serde::Deserialize;
use serde_json::Value;

pub mod cluster;
pub mod export;
pub mod kwok;
pub mod price;
mod summary;

/// One case: a cluster and the catalog both schedulers plan on.
pub struct Case {
    pub name: String,
    pub snapshot: Snapshot,
    pub catalog: Catalog,
}

/// The cases: `smoke` (a few hundred pods, and every real-cluster mix at 30 pods, for CI) or
/// `full`.
pub fn cases(which: &str, seed: u64) -> anyhow::Result<Vec<Case>> {
    let synthetic_catalog = synthetic::benchmark_catalog(400);
    let shape = |n: usize| Case {
        name: format!("karpenter-shape/400-types/{n}"),
        snapshot: Snapshot {
            pods: synthetic::benchmark_pods(n, seed),
            nodepools: vec![synthetic::default_pool("default")],
            ..Default::default()
        },
        catalog: synthetic_catalog.clone(),
    };
    let embedded = Catalog::embedded();
    let real = |mix: &str, n: usize| -> anyhow::Result<Case> {
        Ok(Case {
            name: format!("{mix}/embedded/{n}"),
            snapshot: synthetic::cluster_mix(mix, n, seed)
                .with_context(|| format!("unknown mix {mix}"))?,
            catalog: embedded.clone(),
        })
    };
    match which {
        "smoke" => {
            let mut out = vec![shape(300), real("pools", 200)?, real("spread", 200)?];
            for mix in CLUSTER_MIXES {
                out.push(real(mix, 30)?);
            }
            Ok(out)
        }
        "full" => {
            let mut out: Vec<Case> = [1_000, 5_000, 10_000].map(shape).into();
            for mix in MIXES {
                out.push(Case {
                    name: format!("{mix}/embedded"),
                    snapshot: synthetic::mix_snapshot(mix, seed).context("a known mix")?,
                    catalog: embedded.clone(),
                });
            }
            for mix in CLUSTER_MIXES {
                out.push(real(mix, 1_000)?);
            }
            Ok(out)
        }
        generated if generated.starts_with("generated") => generated_cases(generated, seed),
        other => anyhow::bail!("--cases: {other} is not one of smoke, full, generated[:N]"),
    }
}

/// `generated[:N]`: N generated clusters (200 by default) from seed `seed` on, each also with a
/// limit on every pool that does not bind.
fn generated_cases(which: &str, seed: u64) -> anyhow::Result<Vec<Case>> {
    let count: u64 = match which.strip_prefix("generated:") {
        Some(n) => n.parse().context("--cases generated:N: N is a count")?,
        None => 200,
    };
    let embedded = Catalog::embedded();
    let mut out = Vec::new();
    for s in seed..seed + count {
        for limited in [false, true] {
            let (name, snapshot) = synthetic::generated_case(s, limited);
            let name = if limited {
                format!("{name}+limit")
            } else {
                name
            };
            out.push(Case {
                name,
                snapshot,
                catalog: embedded.clone(),
            });
        }
    }
    Ok(out)
}

/// What Karpenter's harness prints.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PeerOutput {
    pub karpenter: String,
    pub millis: Vec<f64>,
    pub node_claims: Vec<PeerNodeClaim>,
    #[serde(default)]
    pub unschedulable: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PeerNodeClaim {
    pub node_pool: String,
    pub pods: Vec<String>,
    pub instance_types: Vec<String>,
    #[serde(default)]
    pub zones: Vec<String>,
    #[serde(default)]
    pub capacity_types: Vec<String>,
}

/// One scheduler's figures for one case.
#[derive(Debug, Default)]
pub struct Side {
    pub pods_per_second: f64,
    pub hourly: f64,
    pub nodes: usize,
    pub unschedulable: BTreeMap<String, String>,
    pub scheduled: BTreeSet<String>,
    /// Each placed pod's node as bought: `type capacity-type $price/h`.
    pub placed: BTreeMap<String, String>,
    /// What the independent checker found wrong with the plan.
    pub violations: Vec<String>,
}

/// One row of the table.
#[derive(Debug)]
pub struct Row {
    pub case: String,
    pub pods: usize,
    pub lower_bound: f64,
    pub fleetwright: Side,
    pub karpenter: Side,
}

/// Runs every case through both schedulers and prints the table and the differences.
pub fn run(peer: &Path, which: &str, seed: u64, repeat: usize) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    let mut version = String::new();
    let mut rows = Vec::new();
    for case in cases(which, seed)? {
        let (row, karpenter) = compare(peer, &case, repeat)?;
        version = karpenter;
        let again = which.starts_with("generated") && pending_differs(&row);
        let placed = row.karpenter.scheduled.clone();
        rows.push(row);
        if again {
            let (row, _) = compare(peer, &on_pods(&case, &placed), repeat)?;
            rows.push(row);
        }
    }
    print_table(&mut out, &rows, &version)?;
    print_differences(&mut out, &rows)?;
    if which.starts_with("generated") {
        summary::print_distribution(&mut out, &rows)?;
    }
    // Karpenter's scheduler is not deterministic (Go's map order): a constraint its plan breaks
    // in one run is listed above as its loss, and only Fleetwright's own fail the comparison.
    let broken: usize = rows.iter().map(|r| r.fleetwright.violations.len()).sum();
    anyhow::ensure!(
        broken == 0,
        "the independent checker found {broken} constraint(s) Fleetwright's plan breaks (listed above)"
    );
    Ok(())
}

/// What Karpenter left pending: the pods it reported, and those its result does not mention
/// at all. Its provisioner's `Schedule` stops after one minute (`provisioner.go`,
/// `context.WithTimeout(ctx, time.Minute)`) and returns what it placed so far; the pods it never
/// reached would be scheduled in its next loop, and are not placed by this plan.
fn unplaced(out: &PeerOutput, snapshot: &Snapshot) -> BTreeMap<String, String> {
    let mut pending = out.unschedulable.clone();
    let placed: BTreeSet<&str> = out
        .node_claims
        .iter()
        .flat_map(|n| n.pods.iter().map(String::as_str))
        .collect();
    for pod in snapshot.pods.iter().filter(|p| p.node_name.is_none()) {
        let key = pod.key();
        if !placed.contains(key.as_str()) && !pending.contains_key(&key) {
            pending.insert(
                key,
                "not in Karpenter's result: its scheduling stops after one minute".into(),
            );
        }
    }
    pending
}

/// Whether the two plans of a row leave different pods pending.
pub fn pending_differs(row: &Row) -> bool {
    let pending = |s: &Side| s.unschedulable.keys().cloned().collect::<Vec<_>>();
    pending(&row.fleetwright) != pending(&row.karpenter)
}

/// The case with only the pods Karpenter placed (`…@k-placed`): where a limit binds, or Karpenter
/// left pods it could not place, both are priced again on the same work.
fn on_pods(case: &Case, placed: &BTreeSet<String>) -> Case {
    let mut snapshot = case.snapshot.clone();
    snapshot.pods.retain(|p| placed.contains(&p.key()));
    Case {
        name: format!("{}@k-placed", case.name),
        snapshot,
        catalog: case.catalog.clone(),
    }
}

/// Both schedulers on one case.
pub fn compare(peer: &Path, case: &Case, repeat: usize) -> anyhow::Result<(Row, String)> {
    let types = case.catalog.instance_types(&NodeClassSettings::default());
    let input = export::input(
        &case.snapshot.pods,
        &case.snapshot.nodepools,
        &case.snapshot.daemonsets,
        &types,
        repeat,
    );
    let snapshot = read_back(&input, &case.snapshot)
        .with_context(|| format!("{}: reading the exported objects back", case.name))?;
    let types: BTreeMap<String, InstanceType> =
        types.into_iter().map(|t| (t.name.clone(), t)).collect();
    let fleetwright = plan_side(&snapshot, &case.catalog, &types, repeat);
    let lower_bound = schedule(&snapshot, &case.catalog, &ScheduleOptions::default())
        .cost
        .lower_bound;
    let peer_out = run_peer(peer, &input).with_context(|| format!("{}: the peer", case.name))?;
    let karpenter = peer_side(&peer_out, &snapshot, &types);
    Ok((
        Row {
            case: case.name.clone(),
            pods: snapshot.pods.len(),
            lower_bound,
            fleetwright,
            karpenter,
        },
        peer_out.karpenter,
    ))
}

/// Fleetwright's snapshot of the exported objects, through its own converter, with the case's
/// node classes.
fn read_back(input: &Value, original: &Snapshot) -> anyhow::Result<Snapshot> {
    let mut items: Vec<Value> = Vec::new();
    for key in ["pods", "nodePools", "daemonSets"] {
        items.extend(input[key].as_array().cloned().unwrap_or_default());
    }
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
    let dump = fleetwright_kube::dump::parse_strict(&list.to_string(), "peer input")?;
    let mut snapshot = fleetwright_kube::convert::snapshot_from_dump(&dump)?;
    snapshot.node_classes = original.node_classes.clone();
    Ok(snapshot)
}

fn plan_side(
    snapshot: &Snapshot,
    catalog: &Catalog,
    types: &BTreeMap<String, InstanceType>,
    repeat: usize,
) -> Side {
    let mut times = Vec::new();
    let mut plan = None;
    for _ in 0..repeat.max(1) {
        let start = Instant::now();
        let p = schedule(snapshot, catalog, &ScheduleOptions::default());
        times.push(start.elapsed().as_secs_f64());
        plan.get_or_insert(p);
    }
    let plan = plan.expect("at least one run");
    let claims = Claim::of_plan(&plan);
    let hourly = plan
        .nodeclaims
        .iter()
        .map(|n| price::lowest(types, &n.instance_types, &n.capacity_types, &n.zones))
        .sum();
    Side {
        pods_per_second: snapshot.pods.len() as f64 / median(&mut times),
        hourly,
        nodes: plan.nodeclaims.len(),
        unschedulable: plan
            .unschedulable
            .iter()
            .map(|u| (u.pod.clone(), u.reason.clone()))
            .collect(),
        scheduled: plan
            .nodeclaims
            .iter()
            .flat_map(|n| n.pods.iter().cloned())
            .chain(plan.existing.iter().map(|e| e.pod.clone()))
            .collect(),
        placed: placements(types, &claims),
        violations: check::violations(snapshot, types, &claims),
    }
}

/// Each pod of `claims` with what its NodeClaim would buy and how many pods share it.
fn placements(
    types: &BTreeMap<String, InstanceType>,
    claims: &[Claim],
) -> BTreeMap<String, String> {
    let mut placed = BTreeMap::new();
    for c in claims {
        let bought = price::cheapest(types, &c.instance_types, &c.capacity_types, &c.zones);
        let pods = c.pods.len();
        let text = bought.map_or("nothing offered".to_string(), |b| {
            let (t, capacity, price) = (b.instance_type, b.capacity_type, b.price);
            format!("{t} {capacity} ${price:.4}/h, {pods} pod(s)")
        });
        for pod in &c.pods {
            placed.insert(pod.clone(), text.clone());
        }
    }
    placed
}

fn peer_side(
    out: &PeerOutput,
    snapshot: &Snapshot,
    types: &BTreeMap<String, InstanceType>,
) -> Side {
    let mut millis = out.millis.clone();
    let pods = snapshot.pods.len();
    let claims: Vec<Claim> = out
        .node_claims
        .iter()
        .map(|n| Claim {
            nodepool: n.node_pool.clone(),
            pods: n.pods.clone(),
            instance_types: n.instance_types.clone(),
            zones: n.zones.clone(),
            capacity_types: n.capacity_types.clone(),
        })
        .collect();
    Side {
        pods_per_second: pods as f64 / (median(&mut millis) / 1000.0),
        hourly: out
            .node_claims
            .iter()
            .map(|n| price::lowest(types, &n.instance_types, &n.capacity_types, &n.zones))
            .sum(),
        nodes: out.node_claims.len(),
        unschedulable: unplaced(out, snapshot),
        scheduled: out
            .node_claims
            .iter()
            .flat_map(|n| n.pods.iter().cloned())
            .collect(),
        placed: placements(types, &claims),
        violations: check::violations(snapshot, types, &claims),
    }
}

/// Runs the harness with the input on its standard input.
pub fn run_peer(peer: &Path, input: &Value) -> anyhow::Result<PeerOutput> {
    let mut child = Command::new(peer)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| {
            format!(
                "starting {} (build it with scripts/peer-bench.sh)",
                peer.display()
            )
        })?;
    let mut stdin = child.stdin.take().context("the peer's stdin")?;
    let body = input.to_string();
    let writer = std::thread::spawn(move || stdin.write_all(body.as_bytes()));
    let output = child.wait_with_output()?;
    writer
        .join()
        .map_err(|_| anyhow::anyhow!("writing the peer's input panicked"))?
        .with_context(|| {
            format!(
                "writing the peer's input (the peer exited with {})",
                output.status
            )
        })?;
    anyhow::ensure!(
        output.status.success(),
        "the peer exited with {}",
        output.status
    );
    Ok(serde_json::from_slice(&output.stdout)?)
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

pub(crate) fn print_table(
    out: &mut impl Write,
    rows: &[Row],
    version: &str,
) -> std::io::Result<()> {
    writeln!(out, "Fleetwright vs Karpenter {version} (its provisioner's scheduler, one worker), same inputs, one run")?;
    writeln!(
        out,
        "{:<32} {:>6} | {:>9} {:>9} {:>6} | {:>8} {:>8} {:>6} | {:>7} {:>6} {:>6} | {:>5} {:>5} | {:>5} {:>5}",
        "case", "pods", "FW pod/s", "K pod/s", "FW/K", "FW $/h", "K $/h", "FW/K", "LP $/h", "FW/LP", "K/LP", "FW nd", "K nd", "FW un", "K un"
    )?;
    for r in rows {
        let (f, k) = (&r.fleetwright, &r.karpenter);
        writeln!(
            out,
            "{:<32} {:>6} | {:>9.0} {:>9.0} {:>6.2} | {:>8.3} {:>8.3} {:>6.3} | {:>7.3} {:>6.3} {:>6.3} | {:>5} {:>5} | {:>5} {:>5}",
            r.case,
            r.pods,
            f.pods_per_second,
            k.pods_per_second,
            f.pods_per_second / k.pods_per_second,
            f.hourly,
            k.hourly,
            f.hourly / k.hourly,
            r.lower_bound,
            f.hourly / r.lower_bound,
            k.hourly / r.lower_bound,
            f.nodes,
            k.nodes,
            f.unschedulable.len(),
            k.unschedulable.len(),
        )?;
    }
    Ok(())
}

/// Pods one scheduler placed and the other did not, with the other's reason; and what the
/// checker found.
pub(crate) fn print_differences(out: &mut impl Write, rows: &[Row]) -> std::io::Result<()> {
    for r in rows {
        let (f, k) = (&r.fleetwright, &r.karpenter);
        for v in &f.violations {
            writeln!(
                out,
                "{}: Fleetwright's plan breaks a constraint: {v}",
                r.case
            )?;
        }
        for v in &k.violations {
            writeln!(out, "{}: Karpenter's plan breaks a constraint: {v}", r.case)?;
        }
        for (pod, reason) in &f.unschedulable {
            if k.scheduled.contains(pod) {
                writeln!(
                    out,
                    "{}: Karpenter placed {pod}; Fleetwright did not: {reason}",
                    r.case
                )?;
            }
        }
        for (pod, reason) in &k.unschedulable {
            if f.scheduled.contains(pod) {
                writeln!(
                    out,
                    "{}: Fleetwright placed {pod}; Karpenter did not: {reason}",
                    r.case
                )?;
            }
        }
    }
    Ok(())
}
