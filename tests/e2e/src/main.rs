//! The local end-to-end harness that `scripts/e2e.sh` runs once moto and `cargo lambda watch
//! --only-lambda-apis` are up. It starts the HTTP Kubernetes API fake, seeds moto (network, AMI
//! parameters, an EKS cluster, an EventBridge rule that delivers Fleetwright's nudges to a
//! queue), and runs the three function binaries against the emulator's runtime API. Then it
//! sends `cargo lambda invoke` with the `events/` files and checks the effects through the APIs.
//!
//! `check` runs the acceptance scenario; `latency` measures webhook → launched, over N runs.

#[path = "../../../shared/kube/tests/fake_api/mod.rs"]
mod fake_api;
mod scenario;
mod stack;
#[path = "../../../shared/aws/tests/support/mod.rs"]
mod support;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "fleetwright-e2e", about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The acceptance scenario: webhook → nudge → tick → launch; join; spot warning; SQS batch.
    Check,
    /// Time from the webhook invocation for a new pending pod to the tick that launched its
    /// instance, over this many runs (p50 and p99).
    Latency {
        #[arg(long, default_value_t = 20)]
        runs: usize,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let stack = stack::Stack::start().await?;
    let result = match cli.command {
        Command::Check => scenario::check(&stack).await,
        Command::Latency { runs } => scenario::latency(&stack, runs).await,
    };
    stack.stop().await;
    result
}
