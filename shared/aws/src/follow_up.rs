//! The tick's follow-ups: a message to the tick function's own follow-up queue, delayed by the
//! seconds the tick asked for (SQS holds it that long, up to its 15-minute maximum, then the
//! queue's event source invokes tick with it). The body names the cluster, when the message is
//! due, and when the tick that asked for it started: a follow-up from a tick that a later one
//! has superseded is skipped.

use chrono::{DateTime, Utc};
use serde_json::json;
use tracing::instrument;

use crate::error::{api, AwsError};

/// SQS's longest delay.
pub const MAX_DELAY_SECONDS: i64 = 900;

/// The `detail-type` a follow-up message carries, as a nudge's does.
pub const FOLLOW_UP: &str = "Follow Up";

/// Sends follow-ups to one queue.
#[derive(Clone, Debug)]
pub struct SqsFollowUp {
    pub client: aws_sdk_sqs::Client,
    pub queue_url: String,
    pub cluster: String,
}

/// The message for a follow-up asked for at `now` by the tick that started at `requested_by`,
/// `after_seconds` later: its delay (within what SQS allows) and its body.
pub fn message(
    cluster: &str,
    requested_by: DateTime<Utc>,
    now: DateTime<Utc>,
    after_seconds: i64,
) -> (i32, String) {
    let delay = after_seconds.clamp(0, MAX_DELAY_SECONDS);
    let due = now + chrono::Duration::seconds(delay);
    let stamp = |t: DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let body = json!({"source": fleetwright_cloud::nudge::SOURCE, "detail-type": FOLLOW_UP,
        "time": stamp(due), "detail": {"cluster": cluster, "requestedBy": stamp(requested_by)}});
    (i32::try_from(delay).unwrap_or(0), body.to_string())
}

/// When the tick that sent this follow-up message started (None: not a follow-up's body).
pub fn requested_by(body: &str) -> Option<DateTime<Utc>> {
    let body: serde_json::Value = serde_json::from_str(body).ok()?;
    body["detail"]["requestedBy"].as_str()?.parse().ok()
}

impl SqsFollowUp {
    /// Asks, for the tick that started at `requested_by`, for a tick `after_seconds` after `now`.
    #[instrument(skip(self))]
    pub async fn send(
        &self,
        requested_by: DateTime<Utc>,
        now: DateTime<Utc>,
        after_seconds: i64,
    ) -> Result<(), AwsError> {
        let (delay, body) = message(&self.cluster, requested_by, now, after_seconds);
        self.client
            .send_message()
            .queue_url(&self.queue_url)
            .delay_seconds(delay)
            .message_body(body)
            .send()
            .await
            .map_err(|e| api("SendMessage", e))?;
        Ok(())
    }
}

#[cfg(test)]
#[path = "../tests/unit/follow_up.rs"]
mod tests;
