//! What nodes need to know about the EKS cluster they join: endpoint, CA, service CIDR and the
//! DNS address derived from it, and the Kubernetes version AMI aliases resolve against. Read with
//! `eks:DescribeCluster`.

pub use fleetwright_cloud::cluster::{cluster_dns_ip, ClusterInfo};
use tracing::instrument;

use crate::error::AwsError;

/// Reads the cluster with `eks:DescribeCluster`.
#[instrument(skip(eks))]
pub async fn describe(eks: &aws_sdk_eks::Client, name: &str) -> Result<ClusterInfo, AwsError> {
    let out = eks
        .describe_cluster()
        .name(name)
        .send()
        .await
        .map_err(|e| crate::error::api("DescribeCluster", e))?;
    let missing = |field: &str| AwsError::Api {
        operation: "DescribeCluster",
        code: "IncompleteResponse".into(),
        message: format!("cluster {name}: {field} is missing"),
    };
    let cluster = out.cluster().ok_or_else(|| missing("cluster"))?;
    let network = cluster.kubernetes_network_config();
    Ok(ClusterInfo {
        name: name.to_string(),
        endpoint: cluster
            .endpoint()
            .ok_or_else(|| missing("endpoint"))?
            .to_string(),
        certificate_authority: cluster
            .certificate_authority()
            .and_then(|c| c.data())
            .ok_or_else(|| missing("certificateAuthority.data"))?
            .to_string(),
        service_cidr: network
            .and_then(|n| n.service_ipv4_cidr().or(n.service_ipv6_cidr()))
            .unwrap_or("10.100.0.0/16")
            .to_string(),
        kubernetes_version: cluster
            .version()
            .ok_or_else(|| missing("version"))?
            .to_string(),
    })
}
