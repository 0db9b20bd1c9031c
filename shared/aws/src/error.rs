//! The AWS adapter's one error type. Every variant names the call or the object it is about, so a
//! log line or a NodeClaim condition says what failed without a backtrace.

use aws_sdk_ec2::error::ProvideErrorMetadata;
use thiserror::Error;

/// Errors talking to AWS or resolving what an EC2NodeClass asks for.
#[derive(Debug, Error)]
pub enum AwsError {
    /// An AWS API call failed (after the SDK's retries).
    #[error("{operation}: {code}: {message}")]
    Api {
        operation: &'static str,
        code: String,
        message: String,
    },
    /// An EC2NodeClass field cannot be satisfied (no subnets match, an alias is malformed, …).
    #[error("EC2NodeClass {nodeclass}: field {field}: {reason}")]
    NodeClass {
        nodeclass: String,
        field: String,
        reason: String,
    },
    /// A request was refused before reaching AWS because it would be unsafe.
    #[error("refused to {action} {instance_id}: {reason}")]
    Refused {
        action: &'static str,
        instance_id: String,
        reason: String,
    },
    /// CreateFleet launched nothing; every offering's error is listed.
    #[error(
        "nodeclaim {nodeclaim}: no instance launched ({capacity_type}): {}",
        summarize(errors)
    )]
    NothingLaunched {
        nodeclaim: String,
        capacity_type: String,
        errors: Vec<crate::fleet::FleetError>,
    },
    /// A launch request that cannot be built (no instance types, no subnet in any zone, …).
    #[error("nodeclaim {nodeclaim}: {reason}")]
    Launch { nodeclaim: String, reason: String },
}

fn summarize(errors: &[crate::fleet::FleetError]) -> String {
    if errors.is_empty() {
        return "CreateFleet returned no instances and no errors".to_string();
    }
    errors
        .iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

impl AwsError {
    /// Wraps an SDK error with the operation it came from, keeping the AWS error code.
    pub fn api<E>(operation: &'static str, err: E) -> Self
    where
        E: ProvideErrorMetadata + std::fmt::Debug,
    {
        AwsError::Api {
            operation,
            code: err.code().unwrap_or("Unknown").to_string(),
            message: err
                .message()
                .map(str::to_string)
                .unwrap_or_else(|| format!("{err:?}")),
        }
    }

    pub fn nodeclass(nodeclass: &str, field: &str, reason: impl ToString) -> Self {
        AwsError::NodeClass {
            nodeclass: nodeclass.to_string(),
            field: field.to_string(),
            reason: reason.to_string(),
        }
    }

    /// The AWS error code, when the error came from AWS.
    pub fn code(&self) -> Option<&str> {
        match self {
            AwsError::Api { code, .. } => Some(code),
            _ => None,
        }
    }
}
