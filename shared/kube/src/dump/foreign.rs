//! Another provider's objects (EKS Auto Mode's, whose class is `eks.amazonaws.com/NodeClass`)
//! in a cluster Fleetwright reads: left out of the read, and remembered by name so that nothing
//! of Fleetwright's touches them. Pods may still run on their nodes.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Node;

use super::ClusterDump;
use crate::crds::NodeClaim;

/// The label EKS Auto Mode puts on its nodes.
const AUTO_MODE_COMPUTE: (&str, &str) = ("eks.amazonaws.com/compute-type", "auto");

/// Another provider's NodePools and NodeClaims by name, and their nodes' names and provider IDs.
#[derive(Clone, Debug, Default)]
pub struct Foreign {
    pub pools: BTreeSet<String>,
    pub claims: BTreeSet<String>,
    pub nodes: BTreeSet<String>,
    /// The node names and provider IDs of those NodeClaims being deleted: their room is going.
    pub leaving: BTreeSet<String>,
}

impl Foreign {
    /// Whether a node is another provider's: one of its NodeClaims' nodes, labelled with one of
    /// its NodePools, or labelled as an EKS Auto Mode node.
    pub fn has_node(&self, node: &Node) -> bool {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let spec = node.spec.as_ref();
        let provider = spec.and_then(|s| s.provider_id.as_deref());
        let labels = node.metadata.labels.as_ref();
        let label = |k: &str| labels.and_then(|l| l.get(k)).map(String::as_str);
        self.nodes.contains(name)
            || provider.is_some_and(|p| self.nodes.contains(p))
            || label(fleetwright_core::labels::NODEPOOL).is_some_and(|p| self.pools.contains(p))
            || label(AUTO_MODE_COMPUTE.0) == Some(AUTO_MODE_COMPUTE.1)
    }

    /// Whether an instance is another provider's: one of its NodeClaims', by provider ID or by
    /// the NodeClaim or NodePool its tags name.
    pub fn has_instance(&self, id: &str, tags: &BTreeMap<String, String>) -> bool {
        let tag = |k: &str| tags.get(k).map(String::as_str);
        (self.nodes.iter()).any(|p| p.rsplit('/').next() == Some(id))
            || tag("karpenter.sh/nodeclaim").is_some_and(|c| self.claims.contains(c))
            || tag(fleetwright_core::labels::NODEPOOL).is_some_and(|p| self.pools.contains(p))
    }
}

/// Leaves out another provider's NodeClaims, remembering them, their NodePools and their nodes
/// in [`ClusterDump::foreign`]: expiry, liveness, registration, termination, garbage collection
/// and interruption act only on the NodeClaims left.
pub fn drop_foreign_claims(dump: &mut ClusterDump) {
    let foreign = &mut dump.foreign;
    dump.nodeclaims.retain(|c| {
        if !crate::convert::foreign_claim(c) {
            return true;
        }
        remember(foreign, c);
        false
    });
}

fn remember(foreign: &mut Foreign, c: &NodeClaim) {
    let status = c.status.as_ref();
    foreign.claims.extend(c.metadata.name.clone());
    let labels = c.metadata.labels.as_ref();
    let pool = labels.and_then(|l| l.get(fleetwright_core::labels::NODEPOOL));
    foreign.pools.extend(pool.cloned());
    foreign
        .nodes
        .extend(status.and_then(|s| s.node_name.clone()));
    foreign
        .nodes
        .extend(status.and_then(|s| s.provider_id.clone()));
    if c.metadata.deletion_timestamp.is_some() {
        let node = status.and_then(|s| s.node_name.clone());
        foreign.leaving.extend(node);
        let provider = status.and_then(|s| s.provider_id.clone());
        foreign.leaving.extend(provider);
    }
}

#[cfg(test)]
#[path = "../../tests/unit/foreign.rs"]
mod tests;
