//! Retrying the API server's transient answers. kube's own retry layer is off (see
//! [`crate::client`]) because it would also retry a PodDisruptionBudget's 429 on an eviction,
//! which must come back at once. Reads go through [`with_retries`] instead: a 429, a 5xx, or a
//! transport error or timeout is retried a few times with a doubling pause, so one throttled or
//! failed list does not end an invocation. Writes are not retried here: each is re-decided by
//! the next invocation from what the cluster then holds.

use std::future::Future;
use std::time::Duration;

use tracing::warn;

/// Attempts per read, the first included.
pub const ATTEMPTS: u32 = 4;
/// The pause before the first retry; it doubles after each.
pub const FIRST_PAUSE: Duration = Duration::from_millis(100);

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

/// Runs `call` until it succeeds, fails for good, or [`ATTEMPTS`] are used up.
pub async fn with_retries<T, F, Fut>(what: &str, mut call: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let mut pause = FIRST_PAUSE;
    let mut attempt = 1;
    loop {
        match call().await {
            Err(e) if transient(&e) && attempt < ATTEMPTS => {
                warn!(%what, attempt, error = %e, pause_ms = pause.as_millis() as u64, "transient API error; retrying");
                tokio::time::sleep(pause).await;
                pause *= 2;
                attempt += 1;
            }
            other => return other,
        }
    }
}

/// Sets the timeouts above on a client configuration.
pub fn bound(config: &mut kube::Config) {
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    config.read_timeout = Some(READ_TIMEOUT);
    config.write_timeout = Some(WRITE_TIMEOUT);
    config.default_retry = false;
}
