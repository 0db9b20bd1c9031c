//! `fleetwright explain --cluster DUMP --pod NS/NAME`: for one pod, every NodePool's verdict
//! (compatible, or its first unmet constraint), the three cheapest instance types that would
//! hold it, and where the scheduler puts it.

use std::path::PathBuf;

use anyhow::bail;
use clap::Args;
use fleetwright_core::explain::{explain_pod, PodExplanation, PoolVerdict, Quote};

use crate::catalog_args::CatalogArgs;
use crate::plan::Output;

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// Cluster dump, as for `fleetwright plan`.
    #[arg(long, value_name = "DUMP", required_unless_present = "kubeconfig")]
    cluster: Option<PathBuf>,
    /// Read the cluster from its API server instead, as the tick reads it; nothing is written.
    #[arg(long, value_name = "FILE", conflicts_with = "cluster")]
    kubeconfig: Option<PathBuf>,
    /// The pod, as `namespace/name` (a bare name means the `default` namespace).
    #[arg(long, value_name = "NS/NAME")]
    pod: String,
    #[command(flatten)]
    catalog: CatalogArgs,
    #[arg(short = 'o', long, value_enum, default_value = "table")]
    output: Output,
    /// The instant to explain at (RFC 3339), as for `plan`; defaults to now.
    #[arg(long, value_name = "RFC3339")]
    now: Option<String>,
    /// Evaluate EC2NodeClasses' kubelet CEL expressions per instance type, as for `plan`.
    #[arg(long)]
    node_class_cel: bool,
    /// Karpenter's scheduler config document: default topology spread, as for `plan`.
    #[arg(long, value_name = "FILE")]
    scheduler_config: Option<PathBuf>,
}

pub fn run(args: &ExplainArgs) -> anyhow::Result<()> {
    use std::io::Write;
    let Some((mut dump, source)) = crate::read::read_input(
        args.kubeconfig.as_deref(),
        args.cluster.as_deref(),
        &crate::read::scheduler_config(args.scheduler_config.as_deref())?,
    )?
    else {
        bail!("give --cluster DUMP or --kubeconfig FILE");
    };
    dump.node_class_cel = args.node_class_cel;
    let (mut snapshot, set_aside) = crate::aside::readable_snapshot(&mut dump, &source)?;
    let loaded = args.catalog.load(Some(&snapshot))?;
    // As `plan`: a class whose kubelet expressions fail is not ready, and overlays apply.
    crate::aside::check_kubelet_expressions(&mut dump, &snapshot, &loaded, &source);
    let catalog = loaded.with_overlays(&snapshot.overlays);
    // As `plan` and the tick: a NodePool whose EC2NodeClass the dump lacks (or says is not
    // ready) launches nothing, so the scheduler's answer is found without it.
    let classes = fleetwright_runtime::tick::isolation::classes_of_dump(&dump);
    let parked = fleetwright_runtime::tick::isolation::park_known(&mut snapshot, classes.as_ref());
    let key = if args.pod.contains('/') {
        args.pod.clone()
    } else {
        format!("default/{}", args.pod)
    };
    let now = crate::plan::instant(args.now.as_deref())?.timestamp();
    let Some(mut explanation) = explain_pod(&snapshot, &catalog, &key, now) else {
        if in_dump(&dump, &key) {
            bail!("--pod {key}: it is in {source} but was left out, as the tick leaves it out (the error above says why): nothing plans capacity for it");
        }
        // A workload's name given for its pods: name the pods that stand for it.
        let workload = dump.expanded.iter().find(|e| {
            e.workload
                .split_once(' ')
                .is_some_and(|(_, name)| name == key)
        });
        if let Some(e) = workload {
            let namespace = key.split_once('/').map_or("default", |(ns, _)| ns);
            bail!(
                "--pod {key}: no such pod in {source}; {} stands for {} pending pod(s): give --pod {namespace}/{}",
                e.workload,
                e.pods,
                e.first
            );
        }
        bail!("--pod {key}: no such pod in {source}");
    };
    explanation
        .nodepools
        .extend(parked.iter().map(|pool| PoolVerdict {
            nodepool: pool.name.clone(),
            compatible: false,
            reason: Some(crate::aside::report_parked((&dump, &source), pool)),
            cheapest: Vec::new(),
        }));
    explanation
        .nodepools
        .extend(set_aside.iter().map(|pool| PoolVerdict {
            nodepool: pool.name.clone(),
            compatible: false,
            reason: Some(crate::aside::set_aside_reason(pool)),
            cheapest: Vec::new(),
        }));
    let out = match args.output {
        Output::Json | Output::Yaml => {
            let mut value = serde_json::to_value(&explanation)?;
            value["prices"] = serde_json::json!(catalog.price_notes());
            crate::plan::structured(&value, args.output)? + "\n"
        }
        Output::Table => {
            let notes: String = catalog
                .price_notes()
                .iter()
                .map(|n| format!("note: {n}\n"))
                .collect();
            table(&explanation) + &notes
        }
    };
    write!(std::io::stdout(), "{out}")?;
    Ok(())
}

fn quote(q: &Quote) -> String {
    format!(
        "{} {} {} ${:.4}/h",
        q.instance_type, q.capacity_type, q.zone, q.price
    )
}

fn table(e: &PodExplanation) -> String {
    let mut out = format!("pod {} requests {}\n\n", e.pod, e.requests);
    let width = e
        .nodepools
        .iter()
        .map(|v| v.nodepool.len())
        .max()
        .unwrap_or(8)
        .max(8);
    out.push_str(&format!(
        "{:width$}  {:10}  {}\n",
        "NODEPOOL", "COMPATIBLE", "WHY NOT / CHEAPEST TYPES"
    ));
    for v in &e.nodepools {
        let detail = match &v.reason {
            Some(reason) => reason.clone(),
            None => v.cheapest.iter().map(quote).collect::<Vec<_>>().join(", "),
        };
        let yes = if v.compatible { "yes" } else { "no" };
        out.push_str(&format!("{:width$}  {yes:10}  {detail}\n", v.nodepool));
    }
    out.push_str("\ncheapest instance types that would fit:\n");
    if e.cheapest.is_empty() {
        out.push_str("  none\n");
    }
    for (i, q) in e.cheapest.iter().enumerate() {
        out.push_str(&format!("  {}. {}\n", i + 1, quote(q)));
    }
    out.push_str(&format!("\nscheduler: {}\n", e.placement));
    out
}

/// Whether the dump holds the pod `namespace/name`, read or not.
fn in_dump(dump: &fleetwright_kube::dump::ClusterDump, key: &str) -> bool {
    let listed = dump.pods.iter().any(|p| {
        let ns = p.metadata.namespace.as_deref().unwrap_or("default");
        format!("{ns}/{}", p.metadata.name.as_deref().unwrap_or_default()) == key
    });
    listed || set_aside_for(dump, key)
}

/// Whether the read set aside the pod, or the workload whose pods its name is one of (a
/// Deployment's `<name>-deployment-<i>`, a StatefulSet's `<name>-<i>`).
fn set_aside_for(dump: &fleetwright_kube::dump::ClusterDump, key: &str) -> bool {
    let (namespace, name) = key.split_once('/').unwrap_or(("default", key));
    dump.rejected.iter().any(|r| {
        let same_namespace = r.namespace.as_deref().unwrap_or("default") == namespace;
        // The names a file's workload gives its pods (`<name>-deployment-<i>`, `<name>-<i>`).
        let numbered = |infix: &str| {
            let prefix = format!("{}-{infix}", r.name);
            name.strip_prefix(&prefix)
                .is_some_and(|i| !i.is_empty() && i.chars().all(|c| c.is_ascii_digit()))
        };
        let own = match r.kind.as_str() {
            "Pod" => r.name == name,
            "Deployment" => numbered("deployment-"),
            "ReplicaSet" => numbered("replicaset-"),
            "Job" => numbered("job-"),
            "StatefulSet" => numbered(""),
            _ => false,
        };
        same_namespace && own
    })
}
