//! The local end-to-end harness that `scripts/e2e.sh` runs once moto and `cargo lambda watch
//! --only-lambda-apis` are up. It starts the HTTP Kubernetes API fake, seeds moto (network, AMI
//! parameters, an EKS cluster, an EventBridge rule that delivers Fleetwright's nudges to a
//! queue), and runs the three function binaries against the emulator's runtime API. Then it
//! sends `cargo lambda invoke` with the `events/` files and checks the effects through the APIs.
//!
//! `check` runs the acceptance scenario; `latency` measures webhook → launched, over N runs;
//! `init` measures each function's cold init on its own, with no stack.

#[path = "../../../shared/kube/tests/fake_api/mod.rs"]
mod fake_api;
mod init;
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
    /// Cold init of each function binary: process start to its first Runtime API poll, over
    /// this many starts (p50, p99, max). Needs no stack.
    Init {
        #[arg(long, default_value_t = 20)]
        runs: usize,
        /// Where the `tick`, `interruption` and `webhook` binaries are.
        #[arg(long, default_value = "target/debug")]
        bin_dir: std::path::PathBuf,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Init { runs, bin_dir } => init::run(&bin_dir, runs).await,
        Command::Check => with_stack(|stack| Box::pin(scenario::check(stack))).await,
        Command::Latency { runs } => {
            with_stack(move |stack| Box::pin(scenario::latency(stack, runs))).await
        }
    }
}

type StackRun<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = anyhow::Result<()>> + 'a>>;

/// Starts the stack, runs `f` on it, and stops it whatever `f` returned.
async fn with_stack(
    f: impl for<'a> FnOnce(&'a stack::Stack) -> StackRun<'a>,
) -> anyhow::Result<()> {
    let stack = stack::Stack::start().await?;
    let result = f(&stack).await;
    stack.stop().await;
    result
}
