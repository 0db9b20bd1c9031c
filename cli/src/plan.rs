//! `fleetwright plan`: reads a cluster dump, runs the core scheduler, prints the plan; with
//! `--actions`, every action the next tick would take on that cluster, as the tick decides them.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, ValueEnum};
use fleetwright_core::disruption::DisruptionPlan;
use fleetwright_core::model::{MinValuesPolicy, TerminateFirst};
use fleetwright_core::{schedule, Plan, ScheduleOptions};

use fleetwright_kube::dump::ClusterDump;

use crate::aside::{check_kubelet_expressions, name_parked, readable_snapshot, report_parked};
use crate::catalog_args::CatalogArgs;
use crate::read::{read_input, scheduler_config};

/// The example cluster used when no dump is given: the `inflate` hands-on.
pub const EXAMPLE_CLUSTER: &str = include_str!("../../examples/inflate.yaml");

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Output {
    Json,
    /// The JSON's content as YAML.
    Yaml,
    Table,
}

/// A JSON value printed as `output` asks (JSON or YAML; tables are each verb's own).
pub fn structured(value: &serde_json::Value, output: Output) -> anyhow::Result<String> {
    Ok(match output {
        Output::Yaml => fleetwright_kube::yaml::to_string(value),
        _ => serde_json::to_string_pretty(value)?,
    })
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// Cluster dump: `kubectl get pods,nodes,daemonsets,poddisruptionbudgets,persistentvolumeclaims,persistentvolumes,storageclasses,csinodes,nodepools,ec2nodeclasses,nodeclaims -A -o yaml`.
    /// Without it, the embedded example cluster is planned.
    #[arg(long, value_name = "DUMP")]
    pub cluster: Option<PathBuf>,
    /// Read the cluster from its API server instead, as the tick reads it (every list, converted
    /// the same way); nothing is written to it. Needs list on the kinds a dump holds.
    #[arg(long, value_name = "FILE", conflicts_with = "cluster")]
    pub kubeconfig: Option<PathBuf>,
    #[command(flatten)]
    pub catalog: CatalogArgs,
    #[arg(short = 'o', long, value_enum, default_value = "json")]
    pub output: Output,
    /// The instant to plan at (RFC 3339); defaults to now.
    #[arg(long, value_name = "RFC3339")]
    pub now: Option<String>,
    /// Print what the next tick would do to the cluster (its whole action list, decided by the
    /// tick's own code and applied to nothing) instead of the plan.
    #[arg(long)]
    pub actions: bool,
    /// How `minValues` hold when too few instance types are left: as the tick's
    /// `FLEETWRIGHT_MIN_VALUES_POLICY` (Karpenter's `MIN_VALUES_POLICY`).
    #[arg(long, value_enum, default_value = "strict")]
    pub min_values_policy: MinValuesArg,
    /// With `--actions`: repair nodes unhealthy past their toleration, as the tick does with
    /// `FLEETWRIGHT_NODE_REPAIR` (Karpenter's `NodeRepair` feature gate).
    #[arg(long, requires = "actions")]
    pub node_repair: bool,
    /// With `--node-repair`: repair as Karpenter did before v1.15 (its `--legacy-node-repair`;
    /// the tick's `FLEETWRIGHT_LEGACY_NODE_REPAIR`): no budgets, and a node that is not Ready
    /// repaired forcefully.
    #[arg(long, requires = "node_repair")]
    pub legacy_node_repair: bool,
    /// With `--node-repair`: reboot a node whose only due fault is one a reboot clears (the GPU
    /// XID codes the AWS provider names) instead of replacing it, as the tick does with
    /// `FLEETWRIGHT_REBOOT_FOR_REPAIR` (Karpenter's `RebootForRepair` feature gate).
    #[arg(long, requires = "node_repair")]
    pub reboot_for_repair: bool,
    /// Evaluate the CEL expressions of EC2NodeClasses' kubelet settings (`maxPods`,
    /// `kubeReserved`, `systemReserved`) per instance type, as the tick does with
    /// `FLEETWRIGHT_NODE_CLASS_CEL` (Karpenter's `NodeClassCEL` feature gate, off by default:
    /// without it such a class is not ready, and its NodePools are not planned).
    #[arg(long)]
    pub node_class_cel: bool,
    /// Delete a static NodePool's drifted node before its replacement when the pool is at its
    /// `limits.nodes`, its refill taking the freed slot, as the tick does with
    /// `FLEETWRIGHT_TERMINATE_FIRST_DRIFT` (Karpenter's `TerminateFirstDrift` feature gate, off
    /// by default: such a node is then kept, reported blocked).
    #[arg(long)]
    pub terminate_first_drift: bool,
    /// With `--node-repair`: the same for an unhealthy node, as the tick does with
    /// `FLEETWRIGHT_TERMINATE_FIRST_REPAIR` (Karpenter's `TerminateFirstRepair` feature gate).
    #[arg(long, requires = "node_repair")]
    pub terminate_first_repair: bool,
    /// Let consolidation replace spot nodes with cheaper spot nodes, as the tick does with
    /// `FLEETWRIGHT_SPOT_TO_SPOT_CONSOLIDATION` (Karpenter's `SpotToSpotConsolidation` feature
    /// gate, off by default: spot nodes are then only deleted, never replaced).
    #[arg(long)]
    pub spot_to_spot_consolidation: bool,
    /// Karpenter v1.15's scheduler config document (YAML or JSON; Karpenter's own format, not a
    /// KubeSchedulerConfiguration): its `podTopologySpread.defaultConstraints` are given to pods
    /// without spread constraints of their own, with the selector kube-scheduler deduces from
    /// the Services and ReplicaSets/StatefulSets in the input (add `services,replicasets,
    /// statefulsets,replicationcontrollers` to the dump). The tick's counterpart is its
    /// `FLEETWRIGHT_SCHEDULER_CONFIG` setting; this command reads only the file.
    #[arg(long, value_name = "FILE")]
    pub scheduler_config: Option<PathBuf>,
    /// Also plan the pending pods with Karpenter's own provisioning scheduler (the harness
    /// `scripts/peer-bench.sh` builds), on the same objects and catalog, side by side.
    #[arg(long, value_enum, conflicts_with = "actions")]
    pub compare: Option<crate::peer::cluster::Peer>,
    /// With --compare: the harness binary (`scripts/peer-bench.sh` builds
    /// target/peers/karpenter-peer).
    #[arg(long, value_name = "FILE", requires = "compare")]
    pub peer_bin: Option<PathBuf>,
}

/// `--min-values-policy`.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum MinValuesArg {
    #[value(name = "Strict", alias = "strict")]
    Strict,
    #[value(name = "BestEffort", alias = "best-effort")]
    BestEffort,
}

pub fn run(args: PlanArgs) -> anyhow::Result<()> {
    let defaults = scheduler_config(args.scheduler_config.as_deref())?;
    let input = read_input(
        args.kubeconfig.as_deref(),
        args.cluster.as_deref(),
        &defaults,
    )?;
    let (mut dump, source) = match input {
        Some(read) => read,
        None => {
            let source = "embedded example cluster".to_string();
            let mut dump = fleetwright_kube::dump::parse_strict(EXAMPLE_CLUSTER, &source)?;
            dump.default_spread = defaults;
            (dump, source)
        }
    };
    dump.node_class_cel = args.node_class_cel;
    let (mut snapshot, set_aside) = readable_snapshot(&mut dump, &source)?;
    note_unspread(&dump, &snapshot);
    for note in crate::pools::uncounted_reservations(&dump) {
        eprintln!("note: {note}");
    }
    let policy = match args.min_values_policy {
        MinValuesArg::Strict => MinValuesPolicy::Strict,
        MinValuesArg::BestEffort => MinValuesPolicy::BestEffort,
    };
    for pool in &mut snapshot.nodepools {
        pool.min_values_policy = policy;
        pool.terminate_first = TerminateFirst {
            drift: args.terminate_first_drift,
            repair: args.terminate_first_repair,
        };
        pool.spot_to_spot = args.spot_to_spot_consolidation;
    }
    let loaded = args.catalog.load(Some(&snapshot))?;
    check_kubelet_expressions(&mut dump, &snapshot, &loaded, &source);
    let catalog = loaded.with_overlays(&snapshot.overlays);
    let instant = instant(args.now.as_deref())?;
    if args.compare.is_some() {
        let peer = crate::peer::cluster::harness(args.peer_bin.as_deref())?;
        return crate::peer::cluster::run(&peer, (&source, &dump), snapshot, &catalog);
    }
    if args.actions {
        // The tick's actions leave such a NodePool out too; each is named as the plan names it.
        let classes = fleetwright_runtime::tick::isolation::classes_of_dump(&dump);
        let parked =
            fleetwright_runtime::tick::isolation::park_known(&mut snapshot, classes.as_ref());
        for pool in &parked {
            report_parked((&dump, &source), pool);
        }
        fleetwright_runtime::tick::isolation::restore(&mut snapshot, parked);
        let repair = fleetwright_runtime::tick::repair::NodeRepair::of(
            args.node_repair,
            args.legacy_node_repair,
            args.reboot_for_repair,
        );
        return print_actions(&dump, &mut snapshot, &catalog, instant, repair, args.output);
    }
    let now = instant.timestamp();
    let pending = snapshot
        .pods
        .iter()
        .filter(|p| p.node_name.is_none() && !p.terminal && !p.is_daemonset())
        .count();
    tracing::info!(pods = pending, "found provisionable pod(s)");
    let moving = fleetwright_core::scheduler::moving::moving_pods(&snapshot, now).len();
    if moving > 0 {
        tracing::info!(pods = moving, "planning for the pod(s) of deleting node(s)");
    }
    if crate::verbosity::get() != crate::verbosity::Level::Quiet {
        // With pods to plan, only the pools that allow nothing are worth a line.
        let summary = crate::pools::summary(&snapshot, &catalog);
        let all = pending + moving == 0;
        for line in summary
            .iter()
            .filter(|l| all || l.contains(crate::pools::NO_TYPE))
        {
            eprintln!("note: {line}");
        }
    }
    // As the tick: a NodePool whose EC2NodeClass the dump lacks (or says is not ready) could
    // launch nothing, so nothing is planned for it.
    let classes = fleetwright_runtime::tick::isolation::classes_of_dump(&dump);
    let parked = fleetwright_runtime::tick::isolation::park_known(&mut snapshot, classes.as_ref());
    let mut plan = schedule(
        &snapshot,
        &catalog,
        &ScheduleOptions {
            now,
            plan_moving_pods: true,
            ..Default::default()
        },
    );
    log_plan(&plan);
    // The commands a tick would decide now, in its order.
    let disruption =
        fleetwright_core::disruption::plan_sequence(&mut snapshot.clone(), &catalog, now);
    let none_left = snapshot.nodepools.is_empty();
    name_parked(
        (&dump, &source),
        (&parked, &set_aside),
        none_left,
        &mut plan,
    );
    fleetwright_runtime::tick::isolation::restore(&mut snapshot, parked);
    log_disruption(&disruption);
    let waiting = pending.saturating_sub(plan.unschedulable.len());
    let quiet = crate::verbosity::get() == crate::verbosity::Level::Quiet;
    if waiting > 0 && !disruption.disruptions.is_empty() && !quiet {
        eprintln!(
            "note: {waiting} schedulable pod(s) are pending: a tick decides no disruption until they run, so the disruptions listed are what it would decide after (`--actions` shows the tick's own order)"
        );
    }
    if !quiet {
        for note in catalog.price_notes() {
            eprintln!("note: {note}");
        }
    }
    let text = match args.output {
        Output::Json | Output::Yaml => {
            let mut value = serde_json::to_value(&plan)?;
            value["prices"] = serde_json::json!(catalog.price_notes());
            value["disruptions"] = serde_json::to_value(&disruption.disruptions)?;
            value["blocked"] = serde_json::to_value(&disruption.blocked)?;
            if !disruption.scores.is_empty() {
                value["scores"] = serde_json::to_value(&disruption.scores)?;
            }
            value["region"] = serde_json::json!(catalog.region);
            structured(&value, args.output)?
        }
        Output::Table => table(&plan) + &disruption_table(&disruption),
    };
    use std::io::Write;
    writeln!(std::io::stdout(), "{text}")?;
    Ok(())
}

/// `--now`: an RFC 3339 instant, or now.
pub fn instant(now: Option<&str>) -> anyhow::Result<chrono::DateTime<chrono::Utc>> {
    Ok(match now {
        Some(t) => chrono::DateTime::parse_from_rfc3339(t)
            .with_context(|| format!("--now {t:?} is not RFC 3339"))?
            .with_timezone(&chrono::Utc),
        None => chrono::Utc::now(),
    })
}

/// With default spread, says how many pending pods got none: no Service or controller in the
/// input selects them, so kube-scheduler would deduce nothing for them either.
fn note_unspread(dump: &ClusterDump, snapshot: &fleetwright_core::Snapshot) {
    if dump.default_spread.is_empty() || crate::verbosity::get() == crate::verbosity::Level::Quiet {
        return;
    }
    let unspread = snapshot
        .pods
        .iter()
        .filter(|p| p.node_name.is_none() && !p.is_daemonset() && p.spread.is_empty())
        .count();
    if unspread > 0 {
        eprintln!(
            "note: {unspread} pending pod(s) get no default topology spread: no Service, ReplicaSet, StatefulSet, ReplicationController or Deployment in the input selects them (add `services,replicasets,statefulsets,replicationcontrollers` to the dump)"
        );
    }
}

/// The next tick's actions for the dump, as JSON (`{"actions": [...]}`) or one line each.
fn print_actions(
    dump: &fleetwright_kube::dump::ClusterDump,
    snapshot: &mut fleetwright_core::Snapshot,
    catalog: &fleetwright_core::Catalog,
    now: chrono::DateTime<chrono::Utc>,
    node_repair: fleetwright_runtime::tick::repair::NodeRepair,
    output: Output,
) -> anyhow::Result<()> {
    let actions = fleetwright_runtime::tick::decide_all(dump, snapshot, catalog, now, node_repair);
    let text = match output {
        Output::Json | Output::Yaml => {
            structured(&serde_json::json!({ "actions": actions }), output)?
        }
        Output::Table => actions
            .iter()
            .map(|a| {
                let mut value = serde_json::to_value(a).unwrap_or_default();
                shorten_lists(&mut value);
                let kind = value
                    .as_object_mut()
                    .and_then(|o| o.remove("action"))
                    .and_then(|k| k.as_str().map(str::to_string))
                    .unwrap_or_default();
                format!("{kind:<18} {value}")
            })
            .collect::<Vec<_>>()
            .join("\n"),
    };
    use std::io::Write;
    writeln!(std::io::stdout(), "{text}")?;
    Ok(())
}

/// Long lists (a NodeClaim's instance types, say) shortened to their first three, for a table.
fn shorten_lists(value: &mut serde_json::Value) {
    let Some(fields) = value.as_object_mut() else {
        return;
    };
    for field in fields.values_mut() {
        if let Some(list) = field.as_array_mut().filter(|l| l.len() > 4) {
            let more = list.len() - 3;
            list.truncate(3);
            list.push(serde_json::Value::String(format!("+{more} more")));
        }
    }
}

fn log_plan(plan: &Plan) {
    if !plan.nodeclaims.is_empty() {
        tracing::info!(
            nodeclaims = plan.nodeclaims.len(),
            hourly = plan.cost.hourly,
            lower_bound = plan.cost.lower_bound,
            "{}",
            plan.packing_line()
        );
    }
    for n in &plan.nodeclaims {
        tracing::debug!(
            nodepool = %n.nodepool,
            pods = ?n.pods,
            instance_types = n.instance_types.len(),
            cheapest = n.instance_types.first().map(String::as_str).unwrap_or("none"),
            "planned nodeclaim"
        );
    }
    for u in &plan.unschedulable {
        tracing::warn!(pod = %u.pod, reason = %u.reason, "could not schedule pod");
    }
}

fn log_disruption(plan: &DisruptionPlan) {
    for d in &plan.disruptions {
        tracing::info!(
            command = ?d.command,
            reason = d.reason.as_str(),
            savings = d.savings,
            replacements = d.replacements.len(),
            "disrupting node(s) {}",
            d.nodes.join(", ")
        );
    }
    for b in &plan.blocked {
        tracing::debug!(node = %b.node, reason = %b.reason, "not disrupting node");
    }
}

fn disruption_table(plan: &DisruptionPlan) -> String {
    let mut out = String::new();
    for d in &plan.disruptions {
        let replacement = if d.replacements.is_empty() {
            "-".to_string()
        } else {
            d.replacements
                .iter()
                .map(|r| {
                    format!(
                        "{} ({} types)",
                        r.instance_types.first().cloned().unwrap_or_default(),
                        r.instance_types.len()
                    )
                })
                .collect::<Vec<_>>()
                .join(" + ")
        };
        out.push_str(&format!(
            "disrupt: {:?} {} [{}] replacement {} savings ${:.4}/h\n",
            d.command,
            d.reason.as_str(),
            d.nodes.join(", "),
            replacement,
            d.savings
        ));
    }
    for b in &plan.blocked {
        out.push_str(&format!("not disrupting: {}: {}\n", b.node, b.reason));
    }
    out
}

/// A human-readable table of the plan.
pub fn table(plan: &Plan) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "{:<14} {:>5} {:>10} {:<12} {:<28} INSTANCE TYPES\n",
        "NODEPOOL", "PODS", "$/HOUR", "CAPACITY", "ZONES"
    ));
    for n in &plan.nodeclaims {
        let types: Vec<&str> = n
            .instance_types
            .iter()
            .take(4)
            .map(String::as_str)
            .collect();
        let more = n.instance_types.len().saturating_sub(4);
        let suffix = if more > 0 {
            format!(" (+{more})")
        } else {
            String::new()
        };
        out.push_str(&format!(
            "{:<14} {:>5} {:>10.4} {:<12} {:<28} {}{}\n",
            n.nodepool,
            n.pods.len(),
            n.price,
            n.capacity_types.join(","),
            n.zones.join(","),
            types.join(" "),
            suffix
        ));
    }
    for e in &plan.existing {
        out.push_str(&format!("existing: {} -> {}\n", e.pod, e.node));
    }
    for u in &plan.unschedulable {
        out.push_str(&format!("unschedulable: {}: {}\n", u.pod, u.reason));
    }
    // A sum of no prices is -0.0, which would print as `$-0.0000/h`.
    out.push_str(&format!(
        "cost: ${:.4}/h (LP lower bound ${:.4}/h)\n",
        plan.cost.hourly + 0.0,
        plan.cost.lower_bound + 0.0
    ));
    out
}
