//! fleetwright-connect: the functions' wiring, built once per container. It reads the settings,
//! loads the AWS configuration, and builds the adapters the use cases run on: the EC2 cloud, the
//! EventBridge nudge, and the Kubernetes client for the configured API (EKS with an IAM token,
//! or a plain local URL for local stacks). Only the function binaries depend on it, so the use
//! cases and the CLI build without the AWS SDK.

use std::time::SystemTime;

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
        let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .retry_config(fleetwright_aws::clients::retry_config(
                std::time::Duration::from_millis(200),
            ))
            .load()
            .await;
        Ok(Clients {
            aws: AwsClients::new(&sdk),
            sdk,
            settings,
        })
    }

    pub fn cloud(&self) -> Ec2Cloud {
        Ec2Cloud::new(self.aws.clone(), &self.settings.cluster_name)
            .with_parameter_root(&self.settings.ssm_parameter_root)
    }

    /// The webhook's path token: read from its SSM SecureString parameter (once, when the
    /// container starts), or the local `FLEETWRIGHT_WEBHOOK_TOKEN`, or none.
    pub async fn webhook_token(&self) -> Result<Option<String>, RuntimeError> {
        let Some(name) = &self.settings.webhook_token_parameter else {
            return Ok(self.settings.webhook_token.clone());
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
