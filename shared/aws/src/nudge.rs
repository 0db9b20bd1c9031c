//! The EventBridge implementation of the nudge ([`fleetwright_cloud::nudge::Nudge`]): `PutEvents`
//! on the configured bus.

use aws_sdk_eventbridge::types::PutEventsRequestEntry;
use fleetwright_cloud::nudge::{Nudge, SOURCE};
use serde_json::Value;
use tracing::instrument;

use crate::error::AwsError;

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
    async fn nudge(&self, detail_type: &str, mut detail: Value) -> Result<(), AwsError> {
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
                AwsError::Nudge(aws_sdk_eventbridge::error::DisplayErrorContext(e).to_string())
            })?;
        if out.failed_entry_count() > 0 {
            let reason = out
                .entries()
                .iter()
                .filter_map(|e| e.error_message())
                .collect::<Vec<_>>()
                .join("; ");
            return Err(AwsError::Nudge(reason));
        }
        Ok(())
    }
}
