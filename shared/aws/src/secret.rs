//! Secrets the functions read once per container: an SSM Parameter Store SecureString,
//! decrypted by SSM with the parameter's KMS key (the webhook's path token).

use crate::error::{api, AwsError};

/// The decrypted value of an SSM parameter (a SecureString or a plain String).
pub async fn parameter(ssm: &aws_sdk_ssm::Client, name: &str) -> Result<String, AwsError> {
    let out = ssm
        .get_parameter()
        .name(name)
        .with_decryption(true)
        .send()
        .await
        .map_err(|e| api("GetParameter", e.into_service_error()))?;
    out.parameter
        .and_then(|p| p.value)
        .ok_or_else(|| AwsError::Api {
            operation: "GetParameter",
            code: "NoValue".into(),
            message: format!("parameter {name} has no value"),
        })
}
