//! Nudging the tick function. The port and its constants are `fleetwright_cloud::nudge`; the
//! webhook's `Pending Pod` and `Node Joined` detail types come from the admission decisions.

pub use fleetwright_cloud::nudge::{Nudge, CAPACITY_NEEDED, SOURCE};
pub use fleetwright_kube::admission::{NODE_JOINED, PENDING_POD};

use std::sync::{Arc, Mutex};

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
