//! Building the `kube::Client`. Inside Lambda the client points at the EKS endpoint, trusts
//! the cluster CA, and authenticates with an EKS IAM bearer token ([`crate::eks_token`]). The
//! endpoint and CA come from settings or `eks:DescribeCluster`. The client is built through
//! kube's own kubeconfig loader, so the CA is parsed exactly as `kubectl` would parse it.
//!
//! kube's built-in retry of 429/503 responses is turned off: a PodDisruptionBudget's 429 on an
//! eviction must come back at once (the next tick retries it). Reads retry transient errors
//! themselves ([`crate::retry`]), and every call is bounded by connect, read and write timeouts
//! ([`crate::retry::bound`]), so a hung API server fails a call, not the whole invocation.

use kube::config::{
    AuthInfo, Cluster, Context, KubeConfigOptions, Kubeconfig, NamedAuthInfo, NamedCluster,
    NamedContext,
};
use kube::{Client, Config};

use crate::error::KubeError;

/// Where an EKS cluster's API server is and how to trust it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EksEndpoint {
    /// `https://XXXX.gr7.us-east-1.eks.amazonaws.com`
    pub url: String,
    /// The cluster CA as `eks:DescribeCluster` returns it (base64 of PEM); None trusts the
    /// system roots only.
    pub certificate_authority_data: Option<String>,
}

/// Selects the process's TLS crypto provider (aws-lc-rs, the one the AWS SDK uses) before any
/// TLS client is built, so it never depends on which crypto features other crates turn on.
pub fn install_crypto_provider() {
    // An error means a provider is already installed, which is just as good.
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
}

/// A client for an EKS cluster authenticated with `token`.
pub async fn eks_client(endpoint: &EksEndpoint, token: &str) -> Result<Client, KubeError> {
    install_crypto_provider();
    let fail = |e: &dyn std::fmt::Display| {
        KubeError::Auth(format!("configuring the client for {}: {e}", endpoint.url))
    };
    let kubeconfig = Kubeconfig {
        clusters: vec![NamedCluster {
            name: "eks".into(),
            other: Default::default(),
            cluster: Some(Cluster {
                server: Some(endpoint.url.clone()),
                certificate_authority_data: endpoint.certificate_authority_data.clone(),
                ..Default::default()
            }),
        }],
        auth_infos: vec![NamedAuthInfo {
            name: "fleetwright".into(),
            other: Default::default(),
            auth_info: Some(AuthInfo {
                token: Some(token.to_string().into()),
                ..Default::default()
            }),
        }],
        contexts: vec![NamedContext {
            name: "eks".into(),
            other: Default::default(),
            context: Some(Context {
                cluster: "eks".into(),
                user: Some("fleetwright".into()),
                ..Default::default()
            }),
        }],
        current_context: Some("eks".into()),
        ..Default::default()
    };
    let mut config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| fail(&e))?;
    crate::retry::bound(&mut config);
    Client::try_from(config).map_err(|e| fail(&e))
}

/// A client from a kubeconfig file (its current context), configured as the functions'
/// clients are: bounded timeouts and no retry of a PDB's 429.
pub async fn kubeconfig_client(path: &std::path::Path) -> Result<Client, KubeError> {
    install_crypto_provider();
    let fail = |e: &dyn std::fmt::Display| KubeError::Auth(format!("{}: {e}", path.display()));
    let kubeconfig = Kubeconfig::read_from(path).map_err(|e| fail(&e))?;
    let mut config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| fail(&e))?;
    crate::retry::bound(&mut config);
    Client::try_from(config).map_err(|e| fail(&e))
}
