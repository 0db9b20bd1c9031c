//! The runtime's one error type: a bad setting (named by its variable), or a port's error.

use thiserror::Error;

/// Errors of the use cases.
#[derive(Debug, Error)]
pub enum RuntimeError {
    /// An environment setting is missing or invalid.
    #[error("setting {name}: {reason}")]
    Setting { name: String, reason: String },
    #[error(transparent)]
    Kube(#[from] fleetwright_kube::KubeError),
    #[error(transparent)]
    Cloud(#[from] fleetwright_cloud::CloudError),
}

impl RuntimeError {
    pub fn setting(name: &str, reason: impl ToString) -> Self {
        RuntimeError::Setting {
            name: name.to_string(),
            reason: reason.to_string(),
        }
    }
}
