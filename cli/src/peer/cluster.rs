//! `fleetwright plan --compare karpenter`: what Karpenter's own provisioning scheduler would
//! launch for a user's pending pods, beside Fleetwright's plan, on the same objects and catalog
//! (the harness of `scripts/peer-bench.sh`, on one case: the user's cluster). Both plan the
//! pending pods onto new nodes only, as the harness has no existing nodes. It prints the
//! side-by-side row, the pods one placed and the other did not, and where each put every pod
//! whose instance type differs. Go is needed only here, to build the harness; without one it
//! says how to get it.

use std::collections::BTreeMap;
use std::io::Write;

use anyhow::Context;
use std::path::{Path, PathBuf};

use fleetwright_core::model::Snapshot;
use fleetwright_core::Catalog;
use fleetwright_kube::dump::ClusterDump;

use super::{compare, print_differences, print_table, Case, Row};

/// `plan --compare`: the scheduler to compare with.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Peer {
    Karpenter,
}

/// The harness to run: the one given with `--peer-bin` (never one found on its own, so that
/// nothing runs that the user did not name), or an error that says how to build it.
pub fn harness(given: Option<&Path>) -> anyhow::Result<PathBuf> {
    let Some(path) = given else {
        anyhow::bail!("--compare karpenter runs Karpenter's own scheduler, a Go program: give it with --peer-bin PATH; {HOW}");
    };
    anyhow::ensure!(
        path.is_file(),
        "--peer-bin {}: no such file; {HOW}",
        path.display()
    );
    // The file named, never one a PATH search would find instead.
    std::fs::canonicalize(path).with_context(|| format!("--peer-bin {}", path.display()))
}

const HOW: &str = "build it from a clone of Fleetwright with `scripts/peer-bench.sh smoke` (it writes target/peers/karpenter-peer; it needs Go, and fetches the Go toolchain Karpenter asks for from the Go proxy), or `cd peers/karpenter && GOTOOLCHAIN=auto go build -o karpenter-peer .`";

/// Plans the pending pods of `snapshot` (read from `dump`, named `source`) with both
/// schedulers and prints the comparison.
pub fn run(
    peer: &Path,
    (source, dump): (&str, &ClusterDump),
    snapshot: Snapshot,
    catalog: &Catalog,
) -> anyhow::Result<()> {
    let mut pending = snapshot;
    // As the tick: a pool whose EC2NodeClass is missing or not ready launches nothing.
    let classes = fleetwright_runtime::tick::isolation::classes_of_dump(dump);
    fleetwright_runtime::tick::isolation::park_known(&mut pending, classes.as_ref());
    pending
        .pods
        .retain(|p| p.node_name.is_none() && !p.terminal && !p.is_daemonset());
    if pending.pods.is_empty() {
        writeln!(
            std::io::stdout(),
            "{source}: no pending pod, so nothing to compare"
        )?;
        return Ok(());
    }
    // The harness's cloud provider has no capacity reservations: both plan without them.
    let mut reserved = 0;
    for class in pending.node_classes.values_mut() {
        if !std::mem::take(&mut class.reservations).is_empty() {
            reserved += 1;
        }
    }
    if reserved > 0 && crate::verbosity::get() != crate::verbosity::Level::Quiet {
        eprintln!("note: {reserved} EC2NodeClass(es) select capacity reservations; both plans leave them out (Karpenter's harness has none)");
    }
    let case = Case {
        name: source.to_string(),
        snapshot: pending,
        catalog: catalog.clone(),
    };
    let (row, version) = compare(peer, &case, 1)?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "The pending pods of {source} on new nodes (existing nodes are left out of both plans)."
    )?;
    print_table(&mut out, std::slice::from_ref(&row), &version)?;
    print_differences(&mut out, std::slice::from_ref(&row))?;
    print_placements(&mut out, &row)?;
    // Karpenter's own broken constraints are listed above as its loss (its scheduler is not
    // deterministic); only Fleetwright's fail the comparison.
    let broken = row.fleetwright.violations.len();
    anyhow::ensure!(
        broken == 0,
        "the independent checker found {broken} constraint(s) Fleetwright's plan breaks (listed above)"
    );
    Ok(())
}

/// Each pod whose instance type differs between the two plans, with both.
fn print_placements(out: &mut impl Write, row: &Row) -> std::io::Result<()> {
    let (f, k) = (&row.fleetwright.placed, &row.karpenter.placed);
    let differing: BTreeMap<&String, (&String, &String)> = f
        .iter()
        .filter_map(|(pod, fw)| Some((pod, (fw, k.get(pod)?))))
        .filter(|(_, (fw, kp))| fw != kp)
        .collect();
    if differing.is_empty() {
        return writeln!(out, "Every pod both placed is on the same instance type.");
    }
    writeln!(
        out,
        "{:<48} {:<40} {:<40}",
        "pod", "Fleetwright", "Karpenter"
    )?;
    for (pod, (fw, kp)) in differing {
        writeln!(out, "{pod:<48} {fw:<40} {kp:<40}")?;
    }
    Ok(())
}
