//! fleetwright-connect: the functions' wiring, built once per container. It reads the settings,
//! loads the AWS configuration, and builds the adapters the use cases run on: the EC2 cloud, the
//! EventBridge nudge, and the Kubernetes client for the configured API (EKS with an IAM token,
//! or a plain local URL for local stacks). Only the function binaries depend on it, so the use
//! cases and the CLI build without the AWS SDK.

use std::time::{Duration, SystemTime};

use aws_config::timeout::TimeoutConfig;
use aws_config::SdkConfig;
use fleetwright_aws::cluster;
use fleetwright_aws::nudge::EventBridgeNudge;
use fleetwright_aws::{AwsClients, Ec2Cloud};
use fleetwright_kube::client::{eks_client, EksEndpoint};
use fleetwright_kube::eks_token;
use kube::Client;

use fleetwright_runtime::settings::{KubeApi, Settings};
use fleetwright_runtime::RuntimeError;

/// JSON logs for CloudWatch (level from `RUST_LOG`, `info` by default; Lambda stamps the time).
pub fn init_tracing() {
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .without_time()
        .with_current_span(false)
        .init();
}

/// How long an AWS call may wait to connect.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long one attempt of an AWS call may take; a hung attempt is retried (with the same
/// ClientToken, for CreateFleet) while the operation's time lasts.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(6);
/// How long an AWS call may take with all its retries: no more than the invocation's deadline
/// margin, so a call started before the margin ends before Lambda ends the invocation.
pub const OPERATION_TIMEOUT: Duration = Duration::from_secs(10);

/// The SDK's timeouts: connect, each attempt, and the whole operation with its retries.
pub fn timeout_config() -> TimeoutConfig {
    TimeoutConfig::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .operation_attempt_timeout(ATTEMPT_TIMEOUT)
        .operation_timeout(OPERATION_TIMEOUT)
        .build()
}

/// The AWS configuration the functions load: the retry policy (with backoff capped so the
/// retries fit the operation timeout) and the timeouts above; region, credentials and endpoint
/// from the environment.
pub fn sdk_defaults() -> aws_config::ConfigLoader {
    aws_config::defaults(aws_config::BehaviorVersion::latest())
        .retry_config(
            fleetwright_aws::clients::retry_config(Duration::from_millis(200))
                .with_max_backoff(Duration::from_secs(2)),
        )
        .timeout_config(timeout_config())
}

/// The variable that lets the webhook serve without a token (local stacks only).
pub const WEBHOOK_UNAUTHENTICATED: &str = "FLEETWRIGHT_WEBHOOK_UNAUTHENTICATED";

/// Whether [`WEBHOOK_UNAUTHENTICATED`] is `true` (anything but `true`/`false` or unset is an
/// error naming it).
pub fn unauthenticated_allowed(get: impl Fn(&str) -> Option<String>) -> Result<bool, RuntimeError> {
    match get(WEBHOOK_UNAUTHENTICATED).as_deref().map(str::trim) {
        None | Some("") | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(other) => Err(RuntimeError::setting(
            WEBHOOK_UNAUTHENTICATED,
            format!("{other:?} is not true or false"),
        )),
    }
}

/// The webhook's local token, or a refusal to start without one unless serving every caller
/// was asked for.
fn webhook_token_or_refusal(
    token: Option<String>,
    unauthenticated: bool,
) -> Result<Option<String>, RuntimeError> {
    if token.is_some() || unauthenticated {
        return Ok(token);
    }
    Err(RuntimeError::setting(
        "FLEETWRIGHT_WEBHOOK_TOKEN_PARAMETER",
        format!(
            "is required: without a token the webhook's public URL answers every caller. \
             Set it (or FLEETWRIGHT_WEBHOOK_TOKEN), or {WEBHOOK_UNAUTHENTICATED}=true for a local stack"
        ),
    ))
}

/// Everything the functions need, built once.
#[derive(Debug)]
pub struct Clients {
    pub sdk: SdkConfig,
    pub aws: AwsClients,
    pub settings: Settings,
}

impl Clients {
    /// Reads settings and the AWS configuration from the environment.
    pub async fn from_env() -> Result<Self, RuntimeError> {
        let settings = Settings::from_env()?;
        let sdk = sdk_defaults().load().await;
        Ok(Clients {
            aws: AwsClients::new(&sdk),
            sdk,
            settings,
        })
    }

    /// The EC2 cloud; a dry run's creates and changes nothing in the account.
    pub fn cloud(&self) -> Ec2Cloud {
        let cloud = Ec2Cloud::new(self.aws.clone(), &self.settings.cluster_name)
            .with_parameter_root(&self.settings.ssm_parameter_root);
        match self.settings.dry_run {
            true => cloud.read_only(),
            false => cloud,
        }
    }

    /// The webhook's path token: read from its SSM SecureString parameter (once, when the
    /// container starts), or the local `FLEETWRIGHT_WEBHOOK_TOKEN`. With neither, the webhook
    /// would answer every caller of its public URL, so it refuses to start unless
    /// `FLEETWRIGHT_WEBHOOK_UNAUTHENTICATED=true` says that is meant (a local stack).
    pub async fn webhook_token(&self) -> Result<Option<String>, RuntimeError> {
        let Some(name) = &self.settings.webhook_token_parameter else {
            let token = self.settings.webhook_token.clone();
            let open = unauthenticated_allowed(|n| std::env::var(n).ok())?;
            return webhook_token_or_refusal(token, open);
        };
        let token = fleetwright_aws::secret::parameter(&self.aws.ssm, name).await?;
        let token = token.trim().to_string();
        fleetwright_runtime::settings::check_webhook_token(
            &format!("SSM parameter {name} (FLEETWRIGHT_WEBHOOK_TOKEN_PARAMETER)"),
            &token,
        )?;
        Ok(Some(token))
    }

    pub fn nudge(&self) -> EventBridgeNudge {
        EventBridgeNudge {
            client: aws_sdk_eventbridge::Client::new(&self.sdk),
            bus: self.settings.event_bus.clone(),
            cluster: self.settings.cluster_name.clone(),
        }
    }

    /// Where the tick sends its follow-ups (none when no queue is configured).
    pub fn follow_up(&self) -> Option<fleetwright_aws::follow_up::SqsFollowUp> {
        let queue_url = self.settings.follow_up_queue_url.clone()?;
        Some(fleetwright_aws::follow_up::SqsFollowUp {
            client: self.aws.sqs.clone(),
            queue_url,
            cluster: self.settings.cluster_name.clone(),
        })
    }

    /// A Kubernetes client for this invocation (EKS tokens last 15 minutes, so a fresh one is
    /// signed per invocation; signing is local and cheap).
    pub async fn kube(&self) -> Result<Client, RuntimeError> {
        match &self.settings.kube_api {
            KubeApi::Plain { url } => {
                let uri = url
                    .parse()
                    .map_err(|e| RuntimeError::setting("FLEETWRIGHT_KUBE_API_URL", e))?;
                let mut config = kube::Config::new(uri);
                fleetwright_kube::retry::bound(&mut config);
                Client::try_from(config)
                    .map_err(|e| RuntimeError::setting("FLEETWRIGHT_KUBE_API_URL", e))
            }
            KubeApi::Endpoint { url, ca } => self.eks(url.clone(), ca.clone()).await,
            KubeApi::Eks => {
                let info = cluster::describe(&self.aws.eks, &self.settings.cluster_name).await?;
                self.eks(info.endpoint, Some(info.certificate_authority))
                    .await
            }
        }
    }

    async fn eks(&self, url: String, ca: Option<String>) -> Result<Client, RuntimeError> {
        use aws_credential_types::provider::ProvideCredentials;
        let provider = self
            .sdk
            .credentials_provider()
            .ok_or_else(|| RuntimeError::setting("AWS credentials", "none are configured"))?;
        let credentials = provider
            .provide_credentials()
            .await
            .map_err(|e| RuntimeError::setting("AWS credentials", e))?;
        let token = eks_token::token(
            &credentials,
            &self.aws.region,
            &self.settings.cluster_name,
            SystemTime::now(),
        )?;
        Ok(eks_client(
            &EksEndpoint {
                url,
                certificate_authority_data: ca,
            },
            &token.token,
        )
        .await?)
    }
}

#[cfg(test)]
#[path = "../tests/unit/lib.rs"]
mod tests;
