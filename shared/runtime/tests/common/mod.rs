//! Shared pieces of the runtime tests: the sample events, a nudge that records, and settings.
#![allow(dead_code)]

use std::path::PathBuf;

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

pub use fleetwright_runtime::nudge::Recorder;

pub fn settings(cluster: &str) -> Settings {
    Settings::from_lookup(|k| match k {
        "FLEETWRIGHT_CLUSTER_NAME" => Some(cluster.to_string()),
        "FLEETWRIGHT_KUBE_API_URL" => Some("http://127.0.0.1:1".to_string()),
        _ => None,
    })
    .unwrap()
}
