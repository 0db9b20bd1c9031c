//! Shared pieces of the runtime tests: the sample events, a nudge that records, and settings.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use fleetwright_runtime::nudge::Nudge;
use fleetwright_runtime::Settings;
use serde_json::Value;

/// The text of `events/<name>`.
pub fn event_text(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../events")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A sample event as JSON, with the sample instance id replaced.
pub fn event_json(name: &str, instance_id: &str) -> Value {
    serde_json::from_str(&event_text(name).replace("i-0abcdef1234567890", instance_id)).unwrap()
}

/// Records nudges instead of sending them.
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
            .unwrap()
            .push((detail_type.to_string(), detail));
        Ok(())
    }
}

impl Recorder {
    pub fn count(&self) -> usize {
        self.0.lock().unwrap().len()
    }
}

pub fn settings(cluster: &str) -> Settings {
    Settings::from_lookup(|k| match k {
        "FLEETWRIGHT_CLUSTER_NAME" => Some(cluster.to_string()),
        "FLEETWRIGHT_KUBE_API_URL" => Some("http://127.0.0.1:1".to_string()),
        _ => None,
    })
    .unwrap()
}
