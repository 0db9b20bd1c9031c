//! The Kubernetes adapter's one error type: every variant names the object and, where known, the field.

use thiserror::Error;

/// Errors reading or converting Kubernetes objects.
#[derive(Debug, Error)]
pub enum KubeError {
    /// A field of an object has a value Fleetwright cannot use.
    #[error("{object}: field {field}: {reason}")]
    Field {
        object: String,
        field: String,
        reason: String,
    },
    /// A Kubernetes API call failed; `kind` says what was being done (`listing Pod`).
    #[error("{kind}: {reason}")]
    Api { kind: String, reason: String },
    /// Authenticating to the cluster failed.
    #[error("{0}")]
    Auth(String),
    /// A document could not be parsed at all.
    #[error("{source_name}: {reason}")]
    Document { source_name: String, reason: String },
}

impl KubeError {
    pub fn field(
        object: impl Into<String>,
        field: impl Into<String>,
        reason: impl ToString,
    ) -> Self {
        KubeError::Field {
            object: object.into(),
            field: field.into(),
            reason: reason.to_string(),
        }
    }
}
