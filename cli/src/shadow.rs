//! `fleetwright shadow`: what Fleetwright would do beside the autoscaler a cluster runs
//! (Karpenter, Cluster Autoscaler). With `--kubeconfig`, the records a tick in shadow mode
//! (`FLEETWRIGHT_DRY_RUN=true`) kept in the state ConfigMap, compared (the disruptions both
//! made, and those only one did; the NodeClaims each created; the fleet's cost against
//! Fleetwright's plan), and the cluster as it is now; with `--cluster DUMP`, the dump alone.
//! Nothing is written.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use fleetwright_runtime::shadow::{compare, Comparison, Record, Shadow, SHADOW_KEY};
use serde_json::{json, Value};

use crate::aside::readable_snapshot;
use crate::catalog_args::CatalogArgs;
use crate::plan::{structured, Output};
use crate::read::read_input;

#[derive(Debug, Args)]
pub struct ShadowArgs {
    /// A cluster dump (as `fleetwright plan --cluster` reads it): what Fleetwright would do to
    /// it now, and what that costs against the fleet it runs.
    #[arg(long, value_name = "DUMP")]
    pub cluster: Option<PathBuf>,
    /// Read the cluster, and the shadow records its ticks kept, from its API server.
    #[arg(long, value_name = "FILE", conflicts_with = "cluster")]
    pub kubeconfig: Option<PathBuf>,
    /// The namespace of Fleetwright's state ConfigMap (`FLEETWRIGHT_NAMESPACE`).
    #[arg(long, default_value = "karpenter")]
    pub namespace: String,
    #[command(flatten)]
    pub catalog: CatalogArgs,
    #[arg(short = 'o', long, value_enum, default_value = "table")]
    pub output: Output,
    /// The instant to decide at (RFC 3339); defaults to now.
    #[arg(long, value_name = "RFC3339")]
    pub now: Option<String>,
}

pub fn run(args: &ShadowArgs) -> anyhow::Result<()> {
    let Some((mut dump, source)) =
        read_input(args.kubeconfig.as_deref(), args.cluster.as_deref(), &[])?
    else {
        anyhow::bail!("shadow compares a cluster: give --kubeconfig FILE or --cluster DUMP");
    };
    let (snapshot, _) = readable_snapshot(&mut dump, &source)?;
    let loaded = args.catalog.load(Some(&snapshot))?;
    let catalog = loaded.with_overlays(&snapshot.overlays);
    let now = crate::plan::instant(args.now.as_deref())?;
    let actions =
        fleetwright_runtime::tick::decide_all(&dump, &snapshot, &catalog, now, Default::default());
    let actions: Vec<Value> = actions
        .iter()
        .map(serde_json::to_value)
        .collect::<Result<_, _>>()?;
    let fleet = fleetwright_core::disruption::fleet_cost(&snapshot, &catalog, now.timestamp());
    let current = Shadow::default().observe(&dump, &actions, Some(fleet), now);
    let records = match &args.kubeconfig {
        Some(kubeconfig) => stored(kubeconfig, &args.namespace)?,
        None => Vec::new(),
    };
    let window = compare(&records);
    let text = match args.output {
        Output::Table => table(&source, &current, &window),
        output => structured(&json!({"now": current, "window": window}), output)?,
    };
    use std::io::Write;
    writeln!(std::io::stdout(), "{text}")?;
    Ok(())
}

/// The records the shadow ticks kept in the state ConfigMap.
fn stored(kubeconfig: &std::path::Path, namespace: &str) -> anyhow::Result<Vec<Record>> {
    crate::read::with_client(kubeconfig, |client| async move {
        let shadow: Option<Shadow> = fleetwright_kube::state::load(client, namespace, SHADOW_KEY)
            .await
            .with_context(|| format!("reading the shadow records in namespace {namespace}"))?;
        Ok(shadow.map(|s| s.records).unwrap_or_default())
    })
}

/// `a, 3 × b, c and 4 more`: the same entry once, with its count.
fn list(items: &[String]) -> String {
    if items.is_empty() {
        return "none".into();
    }
    let mut counted: Vec<(&String, usize)> = Vec::new();
    for item in items {
        match counted.iter_mut().find(|(i, _)| *i == item) {
            Some((_, n)) => *n += 1,
            None => counted.push((item, 1)),
        }
    }
    let shown: Vec<String> = counted
        .iter()
        .take(5)
        .map(|(i, n)| {
            if *n > 1 {
                format!("{n} × {i}")
            } else {
                i.to_string()
            }
        })
        .collect();
    let mut text = shown.join("; ");
    if counted.len() > 5 {
        text.push_str(&format!("; and {} more", counted.len() - 5));
    }
    text
}

/// The fleet's cost against Fleetwright's plan, saying what each counts: the nodes of
/// NodePools, at the catalog's prices (on-demand list prices; spot as the catalog estimates it),
/// against a plan of the same pods from scratch, pending ones included.
fn cost(fleet: Option<f64>, planned: Option<f64>) -> String {
    let (Some(fleet), Some(planned)) = (fleet, planned) else {
        return "not measured".into();
    };
    let change = if fleet > 0.0 {
        format!(" ({:+.1}%)", (planned - fleet) / fleet * 100.0)
    } else {
        String::new()
    };
    format!(
        "the NodePools' nodes cost ${fleet:.4}/h at catalog prices; Fleetwright's plan of the same pods from scratch (pending ones included) ${planned:.4}/h{change}"
    )
}

fn table(source: &str, now: &Record, window: &Comparison) -> String {
    let mut out = vec![format!("Fleetwright beside the autoscaler of {source}")];
    if window.ticks == 0 {
        out.push(
            "No shadow records (run the tick with FLEETWRIGHT_DRY_RUN=true to keep them); the cluster now:".into(),
        );
    } else {
        let since = window.since.map(|t| t.to_rfc3339()).unwrap_or_default();
        out.push(format!(
            "{} shadow tick(s) recorded since {since}:",
            window.ticks
        ));
        out.push(format!(
            "  NodeClaims: Fleetwright would have created at most {} in one tick; the cluster's autoscaler created {}",
            window.would_create, window.other_created_nodeclaims
        ));
        out.push(format!(
            "  disrupted by both: {}",
            list(&window.disrupted_by_both)
        ));
        out.push(format!(
            "  only Fleetwright would have disrupted: {}",
            list(&window.only_fleetwright)
        ));
        out.push(format!(
            "  only the cluster's autoscaler removed: {}",
            list(&window.only_other)
        ));
        out.push(format!(
            "  cost: {}",
            cost(window.fleet_hourly, window.planned_hourly)
        ));
        out.push("Now:".into());
    }
    out.push(format!(
        "  Fleetwright would create {} NodeClaim(s): {}",
        now.would_create.len(),
        list(&now.would_create)
    ));
    out.push(format!(
        "  would disrupt {} node(s): {}",
        now.would_disrupt.len(),
        list(&now.would_disrupt)
    ));
    out.push(format!(
        "  would terminate {}: {}",
        now.would_terminate.len(),
        list(&now.would_terminate)
    ));
    out.push(format!(
        "  cost: {}",
        cost(now.fleet_hourly, now.planned_hourly)
    ));
    out.join("\n")
}
