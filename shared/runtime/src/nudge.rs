//! Nudging the tick function: an EventBridge event (source `fleetwright`) that a rule on the bus
//! delivers to tick. The webhook sends `Pending Pod`; the interruption function sends
//! `Capacity Needed` right after a drain starts.

use std::future::Future;

use aws_sdk_eventbridge::types::PutEventsRequestEntry;
use serde_json::Value;
use tracing::instrument;

use crate::error::RuntimeError;

/// The event source of every nudge.
pub const SOURCE: &str = "fleetwright";
pub use fleetwright_kube::admission::PENDING_POD;
pub const CAPACITY_NEEDED: &str = "Capacity Needed";

/// Something that can wake the tick function.
pub trait Nudge: Send + Sync {
    fn nudge(
        &self,
        detail_type: &str,
        detail: Value,
    ) -> impl Future<Output = Result<(), RuntimeError>> + Send;
}

/// Nudges through EventBridge `PutEvents`. The detail carries the cluster name, so the rule
/// that targets tick matches only its own cluster's nudges when several share an account.
#[derive(Clone, Debug)]
pub struct EventBridgeNudge {
    pub client: aws_sdk_eventbridge::Client,
    pub bus: String,
    pub cluster: String,
}

impl Nudge for EventBridgeNudge {
    #[instrument(skip(self, detail))]
    async fn nudge(&self, detail_type: &str, mut detail: Value) -> Result<(), RuntimeError> {
        if let Some(fields) = detail.as_object_mut() {
            fields.insert("cluster".into(), Value::String(self.cluster.clone()));
        }
        let entry = PutEventsRequestEntry::builder()
            .source(SOURCE)
            .detail_type(detail_type)
            .detail(detail.to_string())
            .event_bus_name(&self.bus)
            .build();
        let out = self
            .client
            .put_events()
            .entries(entry)
            .send()
            .await
            .map_err(|e| {
                RuntimeError::Nudge(aws_sdk_eventbridge::error::DisplayErrorContext(e).to_string())
            })?;
        if out.failed_entry_count() > 0 {
            let reason = out
                .entries()
                .iter()
                .filter_map(|e| e.error_message())
                .collect::<Vec<_>>()
                .join("; ");
            return Err(RuntimeError::Nudge(reason));
        }
        Ok(())
    }
}
