//! The global `--strict` switch and what every verb does with the keys its input's reader
//! ignored (unknown to the object's kind, or given twice): a warning on stderr that names the
//! object and the path, or with `--strict` an error and a non-zero exit; and the workloads of a
//! dump that stand for their pods.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use fleetwright_core::labels::NODEPOOL;
use fleetwright_kube::dump::ClusterDump;
use fleetwright_kube::strict::{InputWarning, Problem};

static STRICT: OnceLock<bool> = OnceLock::new();
/// Objects of a file's input that could not be used but did not stop the verb (an EC2NodeClass
/// set aside while the other NodePools plan): the verb's output is printed, and the process
/// still exits non-zero, as for any bad input.
static SET_ASIDE: AtomicUsize = AtomicUsize::new(0);

/// Counts an object of the input that was named as an error and set aside.
pub fn set_aside() {
    SET_ASIDE.fetch_add(1, Ordering::Relaxed);
}

/// How many objects were set aside.
pub fn set_aside_count() -> usize {
    SET_ASIDE.load(Ordering::Relaxed)
}

/// Sets `--strict` for this process (the first call wins).
pub fn set_strict(strict: bool) {
    let _ = STRICT.set(strict);
}

fn strict() -> bool {
    STRICT.get().copied().unwrap_or(false)
}

/// Prints each ignored key as a warning; with `--strict`, fails when there is any. Another
/// provider's NodePools (EKS Auto Mode's) are no fault of the input: each is a note, and
/// `--strict` passes them.
pub fn check(warnings: &[InputWarning]) -> anyhow::Result<()> {
    let (notes, warnings): (Vec<&InputWarning>, Vec<&InputWarning>) =
        (warnings.iter()).partition(|w| w.problem == Problem::Foreign);
    if crate::verbosity::get() != crate::verbosity::Level::Quiet {
        for n in notes {
            eprintln!("note: {n}");
        }
    }
    if warnings.is_empty() {
        return Ok(());
    }
    if strict() {
        let listed: Vec<String> = warnings.iter().map(ToString::to_string).collect();
        anyhow::bail!(
            "--strict: {} problem(s) in the input (keys ignored or missing, values that fail closed):\n  {}",
            warnings.len(),
            listed.join("\n  ")
        );
    }
    if crate::verbosity::get() != crate::verbosity::Level::Quiet {
        for w in &warnings {
            eprintln!("warning: {w}");
        }
        eprintln!(
            "warning: {} problem(s) in the input; --strict makes this an error",
            warnings.len()
        );
    }
    Ok(())
}

/// [`check`] on a dump's warnings, then a note for each workload expanded into pending pods
/// (but those `set_aside`, whose pods nothing plans).
pub fn check_dump(
    dump: &ClusterDump,
    set_aside: &[fleetwright_kube::rejected::Rejected],
) -> anyhow::Result<()> {
    check(&dump.warnings)?;
    if crate::verbosity::get() == crate::verbosity::Level::Quiet {
        return Ok(());
    }
    let planned = |workload: &str| !set_aside.iter().any(|r| r.object() == workload);
    for e in dump.expanded.iter().filter(|e| planned(&e.workload)) {
        eprintln!(
            "note: {} has none of its pods in the input: planned as {} pending pod(s) of its template ({}, …)",
            e.workload, e.pods, e.first
        );
    }
    for line in gaps(dump) {
        eprintln!("{line}");
    }
    Ok(())
}

/// What a dump lacks that a cluster would have: an EC2NodeClass for its NodePools (without any,
/// every pool is planned as if its class were ready, which a tick would not do), and the
/// NodeClaims of nodes a NodePool owns (without them, those nodes are neither counted against
/// the pool nor considered for disruption).
fn gaps(dump: &ClusterDump) -> Vec<String> {
    let mut out = Vec::new();
    if !dump.nodepools.is_empty() && dump.nodeclasses.is_empty() {
        out.push("note: the input holds NodePools but no EC2NodeClass: every pool is planned as if its EC2NodeClass were ready (a tick plans none whose class is missing); add `ec2nodeclasses` to the dump".into());
    }
    let claimed: std::collections::BTreeSet<&str> = dump
        .nodeclaims
        .iter()
        .filter_map(|c| c.status.as_ref()?.provider_id.as_deref())
        .collect();
    let unclaimed: Vec<&str> = dump
        .nodes
        .iter()
        .filter(|n| {
            let labels = n.metadata.labels.as_ref();
            let owned = labels.is_some_and(|l| l.contains_key(NODEPOOL));
            let provider = n.spec.as_ref().and_then(|s| s.provider_id.as_deref());
            owned && !provider.is_some_and(|p| claimed.contains(p)) && !dump.foreign.has_node(n)
        })
        .filter_map(|n| n.metadata.name.as_deref())
        .collect();
    if let Some(first) = unclaimed.first() {
        out.push(format!(
            "warning: {} node(s) carry karpenter.sh/nodepool but no NodeClaim in the input has their providerID ({first}, …): they are left out of the pools' counts and of disruption; add `nodeclaims` to the dump",
            unclaimed.len()
        ));
    }
    out
}
