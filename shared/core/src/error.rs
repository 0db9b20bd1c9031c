//! The core's one error type: bad input data, named by object and field.

use thiserror::Error;

/// Errors raised while turning input data (catalogs, quantities, requirements) into core types.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum CoreError {
    /// A quantity such as `100m` or `2Gi` could not be parsed.
    #[error("invalid quantity {0:?}")]
    Quantity(String),
    /// A node selector requirement is malformed.
    #[error("invalid requirement on key {key:?}: {reason}")]
    Requirement { key: String, reason: String },
    /// An input document (catalog JSON, price table) is malformed.
    #[error("{object}: field {field}: {reason}")]
    Input {
        object: String,
        field: String,
        reason: String,
    },
}

impl CoreError {
    /// Shorthand for [`CoreError::Input`].
    pub fn input(
        object: impl Into<String>,
        field: impl Into<String>,
        reason: impl ToString,
    ) -> Self {
        CoreError::Input {
            object: object.into(),
            field: field.into(),
            reason: reason.to_string(),
        }
    }
}
