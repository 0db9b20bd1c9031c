//! fleetwright-kube: the Kubernetes side of Fleetwright. Karpenter's v1 custom resources, cluster
//! dumps, EKS IAM tokens, and the conversion of Kubernetes objects into the core's snapshot model.

pub mod admission;
pub mod api_rules;
pub mod client;
pub mod convert;
pub use fleetwright_crds as crds;
pub mod dump;
#[cfg(feature = "eks")]
pub mod eks_token;
pub mod error;
pub mod executor;
pub mod interruption;
pub mod lease;
pub mod legacy;
pub mod objects;
pub mod peers;
pub mod provisionable;
pub mod rejected;
pub mod retry;
pub mod scheduler_config;
pub mod selectors;
pub mod snapshot;
pub mod state;
pub mod strict;
pub mod workloads;
pub mod yaml;

pub use error::KubeError;

/// Reads a cluster dump (a `kind: List` or a YAML stream) straight into a core snapshot.
pub fn snapshot_from_yaml(
    text: &str,
    source: &str,
) -> Result<fleetwright_core::Snapshot, KubeError> {
    let dump = dump::parse_strict(text, source)?;
    convert::snapshot_from_dump(&dump)
}
