//! The global `--strict` switch and what every verb does with the keys its input's reader
//! ignored (unknown to the object's kind, or given twice): a warning on stderr that names the
//! object and the path, or with `--strict` an error and a non-zero exit; and the workloads of a
//! dump that stand for their pods.

use std::sync::OnceLock;

use fleetwright_kube::dump::ClusterDump;
use fleetwright_kube::strict::InputWarning;

static STRICT: OnceLock<bool> = OnceLock::new();

/// Sets `--strict` for this process (the first call wins).
pub fn set_strict(strict: bool) {
    let _ = STRICT.set(strict);
}

fn strict() -> bool {
    STRICT.get().copied().unwrap_or(false)
}

/// Prints each ignored key as a warning; with `--strict`, fails when there is any.
pub fn check(warnings: &[InputWarning]) -> anyhow::Result<()> {
    if warnings.is_empty() {
        return Ok(());
    }
    if strict() {
        let listed: Vec<String> = warnings.iter().map(ToString::to_string).collect();
        anyhow::bail!(
            "--strict: {} key(s) in the input would be ignored:\n  {}",
            warnings.len(),
            listed.join("\n  ")
        );
    }
    if crate::verbosity::get() != crate::verbosity::Level::Quiet {
        for w in warnings {
            eprintln!("warning: {w}");
        }
        eprintln!(
            "warning: {} key(s) ignored; --strict makes this an error",
            warnings.len()
        );
    }
    Ok(())
}

/// [`check`] on a dump's warnings, then a note for each workload expanded into pending pods.
pub fn check_dump(dump: &ClusterDump) -> anyhow::Result<()> {
    check(&dump.warnings)?;
    if crate::verbosity::get() == crate::verbosity::Level::Quiet {
        return Ok(());
    }
    for e in &dump.expanded {
        eprintln!(
            "note: {} has none of its pods in the input: planned as {} pending pod(s) of its template ({}, …)",
            e.workload, e.pods, e.first
        );
    }
    Ok(())
}
