//! The invocation's deadline. Lambda ends an invocation at its timeout wherever it is; the use
//! cases check the deadline between actions instead, and stop starting new work once too little
//! time is left for one more call to finish. What was not done is repaired by the next
//! invocation: every step is decided again from what the cluster and the cloud then hold.

use std::time::{Duration, Instant};

/// Work stops when less than this is left: what one call may take, with its retries, and room
/// to spare. A Kubernetes call with its retries ends within [`fleetwright_kube::retry::BUDGET`]
/// (10 s), and an AWS call within the SDK's operation timeout the functions set (10 s, in
/// `fleetwright-connect`), so a call started before the margin ends before the invocation does.
/// An action of several calls (a launch) can still be cut off; the next invocation repairs it.
pub const MARGIN: Duration = Duration::from_secs(15);

/// 2001-09-09 in milliseconds since the epoch: no Lambda invocation's deadline is earlier, and
/// no invocation lasts this long (the limit is 15 minutes).
pub const EPOCH_FLOOR_MS: u64 = 1_000_000_000_000;

/// When the invocation ends, if known.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Deadline(Option<Instant>);

impl Deadline {
    /// No deadline (the CLI, the simulator, tests).
    pub fn none() -> Deadline {
        Deadline(None)
    }

    pub fn at(instant: Instant) -> Deadline {
        Deadline(Some(instant))
    }

    /// From Lambda's `deadline` (milliseconds since the epoch) and the wall clock now.
    ///
    /// Lambda sends an epoch time. Local emulators may send the time left instead:
    /// `cargo lambda watch` sends `600000` (ten minutes). A value below [`EPOCH_FLOOR_MS`]
    /// cannot be an invocation's epoch deadline, so it is read as the time left.
    pub fn from_epoch_millis(deadline_ms: u64, now: std::time::SystemTime) -> Deadline {
        let left_ms = if deadline_ms < EPOCH_FLOOR_MS {
            deadline_ms
        } else {
            let now_ms = now
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64);
            deadline_ms.saturating_sub(now_ms)
        };
        Deadline::at(Instant::now() + Duration::from_millis(left_ms))
    }

    /// Whether too little time is left to start another call.
    pub fn near(&self) -> bool {
        self.0.is_some_and(|d| Instant::now() + MARGIN >= d)
    }
}

#[cfg(test)]
#[path = "../tests/unit/deadline.rs"]
mod tests;
