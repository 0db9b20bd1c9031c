//! Nudging the tick function: an event (source `fleetwright`) that a rule on the bus delivers to
//! tick. The webhook sends `Pending Pod`; the interruption function sends `Capacity Needed` right
//! after a drain starts. The EventBridge implementation is `fleetwright_aws::nudge`.

use std::future::Future;

use serde_json::Value;

use crate::error::CloudError;

/// The event source of every nudge.
pub const SOURCE: &str = "fleetwright";
/// The detail type the interruption function sends once a drain has started.
pub const CAPACITY_NEEDED: &str = "Capacity Needed";

/// Something that can wake the tick function.
pub trait Nudge: Send + Sync {
    fn nudge(
        &self,
        detail_type: &str,
        detail: Value,
    ) -> impl Future<Output = Result<(), CloudError>> + Send;
}
