//! Retrying the API server's transient answers. kube's own retry layer is off (see
//! [`crate::client`]) because it would also retry a PodDisruptionBudget's 429 on an eviction,
//! which must come back at once. Reads go through [`with_retries`] instead: a 429, a 5xx, or a
//! transport error or timeout is retried a few times with a doubling, jittered pause, so one throttled or
//! failed list does not end an invocation; all within [`BUDGET`], so a call started before the
//! invocation's deadline margin ends before the invocation does. Writes that carry a resourceVersion (the Lease, and
//! every read-modify-write in [`crate::executor`]) are retried the same way, since a retry after a
//! write that did land meets a 409. Other writes are not: each is re-decided by the next
//! invocation from what the cluster then holds.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tracing::warn;

/// Attempts per read, the first included.
pub const ATTEMPTS: u32 = 4;
/// The pause before the first retry; it doubles after each.
pub const FIRST_PAUSE: Duration = Duration::from_millis(100);

/// The first pause in use, in milliseconds: [`FIRST_PAUSE`] unless [`set_first_pause`] changed it.
static FIRST_PAUSE_MS: AtomicU64 = AtomicU64::new(FIRST_PAUSE.as_millis() as u64);

/// Changes the first pause for the whole process. The simulator sets zero: its API server is in
/// memory and a tick happens at one instant of simulated time, so waiting on the wall clock
/// would only slow the simulation down.
pub fn set_first_pause(pause: Duration) {
    FIRST_PAUSE_MS.store(pause.as_millis() as u64, Ordering::Relaxed);
}

/// The pause before the first retry now.
pub fn first_pause() -> Duration {
    Duration::from_millis(FIRST_PAUSE_MS.load(Ordering::Relaxed))
}

/// The pause before re-reading after a 409 on attempt `attempt` (from 0): a random share of
/// 5 ms doubled per attempt, at most 160 ms, so writers that met in one round spread out in the
/// next. Zero when [`set_first_pause`] set zero (the simulator's in-memory API server).
pub fn conflict_pause(attempt: usize) -> Duration {
    if first_pause().is_zero() {
        return Duration::ZERO;
    }
    let ceiling = 5u64 << attempt.min(5);
    Duration::from_millis(noise() % (ceiling + 1))
}

/// A random number for jitter: the clock's nanoseconds are random enough to break a tie.
fn noise() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::from(d.subsec_nanos()))
}

/// `pause` with jitter: half of it, plus a random share of the other half, so invocations
/// throttled together (a burst of interruption batches, a tick) do not retry together.
pub fn jittered(pause: Duration) -> Duration {
    let half = pause.as_millis() as u64 / 2;
    Duration::from_millis(half + noise() % (half + 1))
}

/// How long a client waits to connect, and for each response: a hung call fails well inside a
/// Lambda's timeout instead of running into it.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
pub const READ_TIMEOUT: Duration = Duration::from_secs(15);
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether an error is worth another attempt: throttling, a server error, or the transport.
pub fn transient(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => matches!(status.code, 429 | 500 | 502 | 503 | 504),
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}

/// The longest one call may take with its retries: no attempt runs past it, and no retry starts
/// that its pause would take past it. An invocation's deadline margin
/// (`fleetwright_runtime::deadline::MARGIN`) is at least this, so a call started before the
/// margin ends before the invocation does.
pub const BUDGET: Duration = Duration::from_secs(10);

/// Runs `call` until it succeeds, fails for good, [`ATTEMPTS`] are used up, or [`BUDGET`] is.
pub async fn with_retries<T, F, Fut>(what: &str, call: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    within(BUDGET, what, call).await
}

/// [`with_retries`] with another budget.
pub async fn within<T, F, Fut>(budget: Duration, what: &str, mut call: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let end = tokio::time::Instant::now() + budget;
    let mut pause = first_pause();
    let mut attempt = 1;
    loop {
        let left = end.saturating_duration_since(tokio::time::Instant::now());
        let outcome = match tokio::time::timeout(left, call()).await {
            Ok(outcome) => outcome,
            Err(_) => return Err(out_of_time(what, budget)),
        };
        match outcome {
            Err(e) if transient(&e) && attempt < ATTEMPTS => {
                let wait = jittered(pause);
                if tokio::time::Instant::now() + wait >= end {
                    return Err(e);
                }
                warn!(%what, attempt, error = %e, pause_ms = wait.as_millis() as u64, "transient API error; retrying");
                tokio::time::sleep(wait).await;
                pause *= 2;
                attempt += 1;
            }
            other => return other,
        }
    }
}

/// The error of a call that ran out of its budget: a transport timeout, as kube reports one.
fn out_of_time(what: &str, budget: Duration) -> kube::Error {
    let reason = format!("{what}: no answer within {} s", budget.as_secs_f32());
    kube::Error::Service(Box::new(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        reason,
    )))
}

/// Sets the timeouts above on a client configuration.
pub fn bound(config: &mut kube::Config) {
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    config.read_timeout = Some(READ_TIMEOUT);
    config.write_timeout = Some(WRITE_TIMEOUT);
    config.default_retry = false;
}

#[cfg(test)]
#[path = "../tests/unit/retry.rs"]
mod tests;
