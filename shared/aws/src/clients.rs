//! The AWS SDK clients, built once per process from one `SdkConfig` (region, credentials,
//! endpoint, and the retry policy: standard mode, jittered exponential backoff, throttling and
//! 5xx retried).

use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::{BehaviorVersion, SdkConfig};

/// How many attempts each call gets (the first plus retries).
pub const MAX_ATTEMPTS: u32 = 5;

/// The SDK clients Fleetwright uses.
#[derive(Clone, Debug)]
pub struct AwsClients {
    pub ec2: aws_sdk_ec2::Client,
    pub ssm: aws_sdk_ssm::Client,
    pub eks: aws_sdk_eks::Client,
    pub sqs: aws_sdk_sqs::Client,
    pub iam: aws_sdk_iam::Client,
    /// The Price List API client, in the region that serves this one's prices.
    pub pricing: aws_sdk_pricing::Client,
    pub region: String,
}

/// The retry policy: standard mode (token bucket, jittered exponential backoff) for throttling,
/// transient and 5xx errors.
pub fn retry_config(initial_backoff: Duration) -> RetryConfig {
    RetryConfig::standard()
        .with_max_attempts(MAX_ATTEMPTS)
        .with_initial_backoff(initial_backoff)
        .with_max_backoff(Duration::from_secs(5))
}

/// The Price List API is read on the tick's way to its catalog, from an endpoint that may be
/// out of reach (an isolated VPC): short timeouts and two attempts keep an unreachable one from
/// holding the tick.
fn price_list_timeouts() -> aws_config::timeout::TimeoutConfig {
    aws_config::timeout::TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(2))
        .operation_attempt_timeout(Duration::from_secs(3))
        .operation_timeout(Duration::from_secs(5))
        .build()
}

impl AwsClients {
    /// Loads region, credentials and endpoint the SDK's usual way (env, profile, container and
    /// instance credentials; `AWS_ENDPOINT_URL` for local stacks).
    pub async fn from_env() -> Self {
        let config = aws_config::defaults(BehaviorVersion::latest())
            .retry_config(retry_config(Duration::from_millis(200)))
            .load()
            .await;
        AwsClients::new(&config)
    }

    /// Builds every client from one configuration.
    pub fn new(config: &SdkConfig) -> Self {
        let region = config
            .region()
            .map(|r| r.to_string())
            .unwrap_or_else(|| "us-east-1".to_string());
        let pricing = aws_sdk_pricing::config::Builder::from(config)
            .region(aws_config::Region::new(crate::pricing::price_list_region(
                &region,
            )))
            .timeout_config(price_list_timeouts())
            .retry_config(retry_config(Duration::from_millis(200)).with_max_attempts(2))
            .build();
        AwsClients {
            ec2: aws_sdk_ec2::Client::new(config),
            ssm: aws_sdk_ssm::Client::new(config),
            eks: aws_sdk_eks::Client::new(config),
            sqs: aws_sdk_sqs::Client::new(config),
            iam: aws_sdk_iam::Client::new(config),
            pricing: aws_sdk_pricing::Client::from_conf(pricing),
            region,
        }
    }
}
