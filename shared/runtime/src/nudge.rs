//! Nudging the tick function. The port and its constants are `fleetwright_cloud::nudge`; the
//! webhook's `Pending Pod` and `Node Joined` detail types come from the admission decisions.

pub use fleetwright_cloud::nudge::{Nudge, CAPACITY_NEEDED, SOURCE};
pub use fleetwright_kube::admission::{NODE_JOINED, PENDING_POD};

use std::sync::{Arc, Mutex};

/// Every detail type a nudge of the tick carries: the tick treats an event of one of these as a
/// nudge (and skips it when a later tick has read the cluster since it was sent), anything else
/// as its schedule.
pub const NUDGES: [&str; 3] = [PENDING_POD, NODE_JOINED, CAPACITY_NEEDED];

/// Whether an EventBridge detail type is a nudge of the tick.
pub fn is_nudge(detail_type: &str) -> bool {
    NUDGES.contains(&detail_type)
}

use serde_json::Value;

/// Records nudges instead of putting them on a bus: the stand-in for EventBridge where the
/// caller runs tick itself (tests, and harnesses against a real control plane).
#[derive(Clone, Debug, Default)]
pub struct Recorder(pub Arc<Mutex<Vec<(String, Value)>>>);

impl Nudge for Recorder {
    async fn nudge(
        &self,
        detail_type: &str,
        detail: Value,
    ) -> Result<(), fleetwright_cloud::CloudError> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((detail_type.to_string(), detail));
        Ok(())
    }
}

impl Recorder {
    /// How many nudges were recorded.
    pub fn count(&self) -> usize {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// The nudges recorded so far: detail type and detail.
    pub fn recorded(&self) -> Vec<(String, Value)> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}
