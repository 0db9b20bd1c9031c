//! The admission webhook: it always admits (never mutates, never denies, so an outage of
//! Fleetwright cannot block the cluster) and nudges tick for a pod created without a node, so
//! capacity is planned within about a second, and for a Node created, so a node that joined is
//! registered (and the pods waiting for it bind) without waiting for the schedule. Nudges are
//! coalesced to one of each kind per second per warm container; a nudge only starts an ordinary
//! tick, which re-reads the truth from the API.

use std::collections::BTreeMap;
use std::sync::Mutex;

use chrono::{DateTime, Duration, Utc};
use fleetwright_kube::admission;
pub use fleetwright_kube::admission::MAX_BODY;
use serde_json::{json, Value};
use tracing::{info, warn};

use crate::nudge::{Nudge, NODE_JOINED, PENDING_POD};

/// At most one nudge per this interval per container.
pub const COALESCE: Duration = Duration::seconds(1);

/// An HTTP answer: status and JSON body.
#[derive(Clone, Debug, PartialEq)]
pub struct HttpAnswer {
    pub status: u16,
    pub body: Value,
}

fn refuse(status: u16, reason: &str) -> HttpAnswer {
    HttpAnswer {
        status,
        body: json!({"error": reason}),
    }
}

/// The webhook use case.
pub struct Webhook<N> {
    pub nudge: N,
    /// When set, only `/admit/<token>` is served.
    pub token: Option<String>,
    /// When each kind of nudge was last sent (its detail type): a node joining never takes the
    /// slot of a pending pod's nudge.
    last_nudge: Mutex<BTreeMap<&'static str, DateTime<Utc>>>,
}

/// The token never reaches a log: Debug shows only whether one is set.
impl<N: std::fmt::Debug> std::fmt::Debug for Webhook<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhook")
            .field("nudge", &self.nudge)
            .field("token", &self.token.as_ref().map(|_| REDACTED))
            .finish_non_exhaustive()
    }
}

/// What Debug output shows in place of a secret.
pub const REDACTED: &str = "<redacted>";

impl<N: Nudge> Webhook<N> {
    pub fn new(nudge: N, token: Option<String>) -> Self {
        Webhook {
            nudge,
            token,
            last_nudge: Mutex::new(BTreeMap::new()),
        }
    }

    fn path_allowed(&self, path: &str) -> bool {
        match &self.token {
            None => true,
            Some(token) => path
                .trim_end_matches('/')
                .strip_prefix("/admit/")
                .is_some_and(|given| same_secret(given.as_bytes(), token.as_bytes())),
        }
    }

    /// Whether to send a nudge of this detail type now (and records it), keeping to one of each
    /// per [`COALESCE`].
    fn take_nudge_slot(&self, detail_type: &'static str, now: DateTime<Utc>) -> bool {
        let mut last = self.last_nudge.lock().unwrap_or_else(|p| p.into_inner());
        if last.get(detail_type).is_some_and(|t| now - *t < COALESCE) {
            return false;
        }
        last.insert(detail_type, now);
        true
    }

    /// Answers one HTTP request with `path` and `body`.
    pub async fn handle(&self, path: &str, body: &[u8], now: DateTime<Utc>) -> HttpAnswer {
        if !self.path_allowed(path) {
            return refuse(403, "forbidden");
        }
        let request = match admission::read_request(body) {
            Ok(r) => r,
            Err(reason) => return refuse(400, &reason),
        };
        let nudge = match (
            admission::pending_pod(&request),
            admission::joined_node(&request),
        ) {
            (Some(detail), _) => Some((PENDING_POD, detail, "a pending pod")),
            (None, Some(detail)) => Some((NODE_JOINED, detail, "a node that joined")),
            (None, None) => None,
        };
        if let Some((detail_type, detail, what)) = nudge {
            if self.take_nudge_slot(detail_type, now) {
                match self.nudge.nudge(detail_type, detail).await {
                    Ok(()) => {
                        info!(namespace = request.namespace.as_deref().unwrap_or_default(), name = %request.name, "nudged tick for {what}")
                    }
                    Err(e) => {
                        warn!(error = %e, "could not nudge tick for {what}; the scheduled tick will pick it up")
                    }
                }
            }
        }
        HttpAnswer {
            status: 200,
            body: admission::allow(&request),
        }
    }
}

/// Compares a presented secret with the expected one in time that depends only on their
/// lengths, not on where they first differ, so the token cannot be guessed byte by byte from
/// response times.
fn same_secret(given: &[u8], expected: &[u8]) -> bool {
    if given.len() != expected.len() {
        return false;
    }
    given
        .iter()
        .zip(expected)
        .fold(0u8, |diff, (a, b)| diff | (a ^ b))
        == 0
}

#[cfg(test)]
#[path = "../tests/unit/webhook.rs"]
mod tests;
