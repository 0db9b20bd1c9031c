//! Turning AWS SDK errors into the cloud port's error ([`CloudError`]), keeping the operation and
//! the AWS error code.

use aws_sdk_ec2::error::ProvideErrorMetadata;
pub use fleetwright_cloud::CloudError as AwsError;

/// Wraps an SDK error with the operation it came from, keeping the AWS error code.
pub fn api<E>(operation: &'static str, err: E) -> AwsError
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
