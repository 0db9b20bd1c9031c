//! The cloud port's one error type, shared by every implementation of [`crate::Cloud`]. Every
//! variant names the call or the object it is about, so a log line or a NodeClaim condition says
//! what failed without a backtrace.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Errors talking to the cloud or resolving what an EC2NodeClass asks for.
#[derive(Debug, Error)]
pub enum CloudError {
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
        errors: Vec<FleetError>,
    },
    /// Waking the tick function (EventBridge `PutEvents`) failed.
    #[error("PutEvents: {0}")]
    Nudge(String),
    /// A launch request that cannot be built (no instance types, no subnet in any zone, …).
    #[error("nodeclaim {nodeclaim}: {reason}")]
    Launch { nodeclaim: String, reason: String },
}

fn summarize(errors: &[FleetError]) -> String {
    if errors.is_empty() {
        return "CreateFleet returned no instances and no errors".to_string();
    }
    errors
        .iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

impl CloudError {
    pub fn nodeclass(nodeclass: &str, field: &str, reason: impl ToString) -> Self {
        CloudError::NodeClass {
            nodeclass: nodeclass.to_string(),
            field: field.to_string(),
            reason: reason.to_string(),
        }
    }

    /// Whether the call may have taken effect although it failed: a timeout, a lost answer or a
    /// server error (not a throttle, which AWS refused before acting). A CreateFleet failing
    /// this way may have launched an instance, so its NodeClaim is kept for the next launch to
    /// find that instance by tag.
    pub fn outcome_unknown(&self) -> bool {
        const UNKNOWN: [&str; 6] = [
            "Unknown",
            "RequestTimeout",
            "InternalError",
            "InternalFailure",
            "ServiceUnavailable",
            "Unavailable",
        ];
        self.code().is_some_and(|code| UNKNOWN.contains(&code))
    }

    /// The AWS error code, when the error came from AWS.
    pub fn code(&self) -> Option<&str> {
        match self {
            CloudError::Api { code, .. } => Some(code),
            _ => None,
        }
    }
}

/// One offering CreateFleet could not launch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetError {
    pub code: String,
    pub message: String,
    pub instance_type: Option<String>,
    pub zone: Option<String>,
}

impl std::fmt::Display for FleetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}/{}: {}: {}",
            self.instance_type.as_deref().unwrap_or("?"),
            self.zone.as_deref().unwrap_or("?"),
            self.code,
            self.message
        )
    }
}
