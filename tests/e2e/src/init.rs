//! The cold-init benchmark: how long each function binary takes from process start until it is
//! ready for its first event, that is, until it polls the Lambda Runtime API's
//! `GET /2018-06-01/runtime/invocation/next`. A one-route Runtime API on loopback records the
//! time of that poll and never answers it, so no Kubernetes or AWS call is made; the binary is
//! killed once timed. Init does what a cold Lambda container does: read the settings, load the
//! AWS configuration (credentials from the environment, no network), build the clients.

use std::convert::Infallible;
use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::process::Command;
use tokio::sync::mpsc;

/// The functions timed, in the README's order.
const FUNCTIONS: [&str; 3] = ["tick", "interruption", "webhook"];
/// A binary that has not polled by then has failed init.
const INIT_LIMIT: Duration = Duration::from_secs(10);

/// Times `runs` cold starts of each function in `bin_dir` and prints p50, p99 and max.
pub async fn run(bin_dir: &Path, runs: usize) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "cold init (process start -> first invocation/next poll), {runs} runs each, binaries in {}",
        bin_dir.display()
    )?;
    writeln!(
        out,
        "{:<13} {:>9} {:>9} {:>9}",
        "function", "p50 ms", "p99 ms", "max ms"
    )?;
    for name in FUNCTIONS {
        let mut times = Vec::with_capacity(runs);
        for _ in 0..runs {
            times.push(cold_start(&bin_dir.join(name), name).await?);
        }
        times.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let at = |q: f64| times[((times.len() as f64 - 1.0) * q).round() as usize];
        writeln!(
            out,
            "{:<13} {:>9.1} {:>9.1} {:>9.1}",
            name,
            ms(at(0.5)),
            ms(at(0.99)),
            ms(*times.last().expect("at least one run"))
        )?;
    }
    Ok(())
}

/// One cold start: a fresh Runtime API, a fresh process, the time to its first poll.
async fn cold_start(bin: &Path, name: &str) -> anyhow::Result<Duration> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (polled, mut first_poll) = mpsc::unbounded_channel();
    let server = tokio::spawn(serve(listener, polled));
    let started = Instant::now();
    let mut child = spawn(bin, name, addr)?;
    let outcome = tokio::time::timeout(INIT_LIMIT, first_poll.recv()).await;
    let _ = child.kill().await;
    server.abort();
    match outcome {
        Ok(Some(at)) => Ok(at - started),
        _ => anyhow::bail!(
            "{}: no invocation/next poll within {INIT_LIMIT:?}",
            bin.display()
        ),
    }
}

fn spawn(bin: &Path, name: &str, runtime_api: SocketAddr) -> anyhow::Result<tokio::process::Child> {
    Command::new(bin)
        .env_clear()
        .env("AWS_LAMBDA_RUNTIME_API", runtime_api.to_string())
        .env("AWS_LAMBDA_FUNCTION_NAME", name)
        .env("AWS_LAMBDA_FUNCTION_VERSION", "1")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        // Nothing listens there: init must not call out, and the benchmark proves it does not.
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
        .env("FLEETWRIGHT_CLUSTER_NAME", "init-bench")
        .env("FLEETWRIGHT_KUBE_API_URL", "http://127.0.0.1:9")
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))
}

/// Answers nothing; records when `invocation/next` is first asked for.
async fn serve(listener: TcpListener, polled: mpsc::UnboundedSender<Instant>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            return;
        };
        let polled = polled.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<hyper::body::Incoming>| {
                let polled = polled.clone();
                async move {
                    if req.uri().path().ends_with("/runtime/invocation/next") {
                        let _ = polled.send(Instant::now());
                        std::future::pending::<()>().await;
                    }
                    Ok::<_, Infallible>(Response::new(Full::new(Bytes::new())))
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
