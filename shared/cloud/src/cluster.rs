//! What nodes need to know about the EKS cluster they join: endpoint, CA, service CIDR and the
//! DNS address derived from it, and the Kubernetes version AMI aliases resolve against.

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

/// The facts about the cluster that user data and AMI resolution need.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterInfo {
    pub name: String,
    pub endpoint: String,
    /// Base64 PEM, as DescribeCluster returns it.
    pub certificate_authority: String,
    pub service_cidr: String,
    /// `major.minor`, e.g. `1.32`.
    pub kubernetes_version: String,
}

impl ClusterInfo {
    /// The cluster DNS service address: the tenth address of the service CIDR (kube-dns's
    /// convention on EKS), e.g. `10.100.0.10` for `10.100.0.0/16`.
    pub fn dns_ip(&self) -> Option<String> {
        cluster_dns_ip(&self.service_cidr)
    }
}

/// The tenth address of an IPv4 CIDR, or `::a` of an IPv6 one.
pub fn cluster_dns_ip(cidr: &str) -> Option<String> {
    let (addr, bits) = cidr.split_once('/')?;
    let bits: u32 = bits.parse().ok()?;
    if let Ok(v4) = addr.parse::<Ipv4Addr>() {
        let mask = if bits == 0 {
            0
        } else {
            u32::MAX << (32 - bits.min(32))
        };
        return Some(Ipv4Addr::from((u32::from(v4) & mask) + 10).to_string());
    }
    let v6: std::net::Ipv6Addr = addr.parse().ok()?;
    let mask = if bits == 0 {
        0
    } else {
        u128::MAX << (128 - bits.min(128))
    };
    Some(std::net::Ipv6Addr::from((u128::from(v6) & mask) + 10).to_string())
}

#[cfg(test)]
#[path = "../tests/unit/cluster.rs"]
mod tests;
