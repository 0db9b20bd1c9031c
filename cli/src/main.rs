//! The `fleetwright` command: thin argument parsing over the library verbs in this crate.

mod aside;
mod bench;
mod catalog_args;
mod convert;
mod explain;
mod input;
mod manifests;
mod peer;
mod plan;
mod pools;
#[cfg(feature = "aws")]
mod queue;
mod read;
mod replay;
mod shadow;
mod simulate;
mod verbosity;

use clap::{Parser, Subcommand};

/// The version and the commit built (cli/build.rs).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("FLEETWRIGHT_COMMIT"),
    ")"
);

/// Fleetwright: serverless, Karpenter-compatible node autoscaling for EKS.
#[derive(Debug, Parser)]
#[command(name = "fleetwright", version = VERSION, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log errors only (no progress bar either).
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    quiet: bool,
    /// Log more: -v for Fleetwright's debug lines, -vv for trace. FLEETWRIGHT_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    /// Fail on keys the input's reader would ignore (unknown to the object's kind, or given
    /// twice in one mapping) instead of warning about them.
    #[arg(long, global = true)]
    strict: bool,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Plan where pending pods go and which NodeClaims to launch, from a cluster dump.
    Plan(plan::PlanArgs),
    /// Measure scheduling throughput (pods/s), cost against the LP bound, and peak memory.
    Bench(bench::BenchArgs),
    /// Print, as JSON, what the interruption or webhook function would do with an event against
    /// a cluster dump (a dry run for debugging DLQ messages).
    ReplayEvent(replay::ReplayArgs),
    /// Print the NodePool, NodeClaim and EC2NodeClass CRDs as YAML (for `kubectl apply -f -`).
    Crds,
    /// Explain one pod: every NodePool's verdict, the cheapest types that would hold it, and
    /// where the scheduler puts it.
    Explain(explain::ExplainArgs),
    /// Convert legacy Karpenter resources (v1alpha5 Provisioner, v1alpha1 AWSNodeTemplate,
    /// v1beta1 NodePool and EC2NodeClass) into v1 NodePools and EC2NodeClasses.
    Convert(convert::ConvertArgs),
    /// Print what to apply to the cluster after `sam deploy`: the CRDs, the functions' RBAC,
    /// the pod-CREATE webhook configuration, and optionally a default NodePool.
    Manifests(manifests::ManifestsArgs),
    /// Run the real tick, interruption and webhook use cases on a virtual clock against a
    /// simulated cloud and cluster: the embedded hands-on replay, or a scenario file.
    Simulate(simulate::SimulateArgs),
    /// Compare what Fleetwright would do with what the cluster's autoscaler (Karpenter, Cluster
    /// Autoscaler) does: the records of ticks run with FLEETWRIGHT_DRY_RUN=true, and the cluster
    /// now. Writes nothing.
    Shadow(shadow::ShadowArgs),
}

fn print_crds() -> anyhow::Result<()> {
    use std::io::Write;
    write!(
        std::io::stdout(),
        "{}",
        fleetwright_crds::definitions_yaml()?
    )?;
    Ok(())
}

fn main() -> std::process::ExitCode {
    quiet_on_closed_pipe();
    let cli = Cli::parse();
    verbosity::set(verbosity::Level::from_flags(cli.quiet, cli.verbose));
    input::set_strict(cli.strict);
    let result = match cli.command {
        // The simulation installs its own logging, on its virtual clock.
        Command::Simulate(args) => simulate::run(args),
        command => {
            init_logging();
            run(command)
        }
    };
    exit(result)
}

/// A reader that stops early (`fleetwright plan | head`) closes stdout (or stderr) under the
/// command; it then ends as a Unix tool killed by SIGPIPE does (status 141, nothing on stderr)
/// instead of with a panic's message.
fn quiet_on_closed_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if message.starts_with("failed printing to std") && message.contains("Broken pipe") {
            std::process::exit(141);
        }
        default(info)
    }));
}

fn init_logging() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(verbosity::filter("info"))
        .with_ansi(verbosity::colour())
        .with_target(false)
        .init();
}

fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Plan(args) => plan::run(args),
        Command::Bench(args) => bench::run(args),
        Command::ReplayEvent(args) => replay::run(args),
        Command::Crds => print_crds(),
        Command::Manifests(args) => manifests::run(&args),
        Command::Convert(args) => convert::run(&args),
        Command::Explain(args) => explain::run(&args),
        Command::Simulate(args) => simulate::run(args),
        Command::Shadow(args) => shadow::run(&args),
    }
}

/// Whether an error is a write to a reader that stopped early (see [`quiet_on_closed_pipe`]):
/// a bare broken pipe, as a `write!` to stdout returns it. A broken pipe anywhere else (a peer
/// process, a connection) comes wrapped in what was being done, and is an error like any other.
fn closed_pipe(e: &anyhow::Error) -> bool {
    e.chain().count() == 1
        && e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
}

fn exit(result: anyhow::Result<()>) -> std::process::ExitCode {
    let set_aside = input::set_aside_count();
    match result {
        Ok(()) if set_aside > 0 => {
            eprintln!("error: {set_aside} object(s) of the input could not be used (each named above with its field); the rest was planned without them");
            std::process::ExitCode::FAILURE
        }
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) if closed_pipe(&e) => std::process::ExitCode::from(141),
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
#[path = "../tests/unit/bin.rs"]
mod tests;
