//! Drift: a node whose NodeClaim no longer matches its NodePool's template or its EC2NodeClass:
//! the static hashes, the NodePool's requirements (checked against the node's labels directly,
//! not by hash, as Karpenter does), and the AMI, subnets and security groups it was launched
//! with.

use std::collections::{BTreeMap, BTreeSet};

use crate::catalog::Catalog;
use crate::labels::INSTANCE_TYPE;
use crate::model::{NodeClaim, NodePool, Snapshot};
use crate::requirements::Requirements;

use super::candidates::Candidate;
use super::{
    HASH_VERSION, NODECLASS_HASH, NODECLASS_HASH_VERSION, NODEPOOL_HASH, NODEPOOL_HASH_VERSION,
    SECURITY_GROUP_IDS, SUBNET_ID,
};

/// Why a node has drifted from its NodePool or EC2NodeClass, if it has (Karpenter's drift
/// reasons, in its order). Unknown facts (no annotation, nothing resolved, an instance type the
/// catalog does not know) never count as drift.
pub fn drift(
    claim: &NodeClaim,
    pool: &NodePool,
    snapshot: &Snapshot,
    catalog: &Catalog,
) -> Option<&'static str> {
    let ours = |version_key: &str| {
        claim.annotations.get(version_key).map(String::as_str) == Some(HASH_VERSION)
    };
    let differs = |stamped: Option<&String>, current: Option<&String>| matches!((stamped, current), (Some(a), Some(b)) if a != b);
    if ours(NODEPOOL_HASH_VERSION)
        && differs(
            claim.annotations.get(NODEPOOL_HASH),
            pool.template_hash.as_ref(),
        )
    {
        return Some("NodePoolDrifted");
    }
    if requirements_drifted(claim, pool, catalog) {
        return Some("RequirementsDrifted");
    }
    let state = snapshot.node_class_state.get(&pool.node_class)?;
    if ours(NODECLASS_HASH_VERSION)
        && differs(claim.annotations.get(NODECLASS_HASH), state.hash.as_ref())
    {
        return Some("NodeClassDrifted");
    }
    if let Some(image) = &claim.image_id {
        if !state.images.is_empty() && !state.images.contains(image) {
            return Some("AMIDrift");
        }
    }
    if let Some(subnet) = claim.annotations.get(SUBNET_ID) {
        if !state.subnets.is_empty() && !state.subnets.contains(subnet) {
            return Some("SubnetDrift");
        }
    }
    if let Some(groups) = claim.annotations.get(SECURITY_GROUP_IDS) {
        let groups: BTreeSet<String> = groups.split(',').map(str::to_string).collect();
        if !state.security_groups.is_empty() && groups != state.security_groups {
            return Some("SecurityGroupDrift");
        }
    }
    None
}

/// Whether the node's labels (its NodeClaim's, with its instance type's from the catalog, as
/// Karpenter labels a NodeClaim at launch) no longer satisfy the NodePool's requirements: a
/// pool narrowed to on-demand while the node is spot, a zone, family or architecture taken out,
/// a custom label the node lacks. Every required key must be one of the labels (Karpenter's
/// strict compatibility), unless the catalog does not know the type: then only the labels the
/// node has are checked.
fn requirements_drifted(claim: &NodeClaim, pool: &NodePool, catalog: &Catalog) -> bool {
    let mut labels: BTreeMap<String, String> = claim
        .labels
        .get(INSTANCE_TYPE)
        .map(|t| catalog.type_labels(t))
        .unwrap_or_default();
    let known = !labels.is_empty();
    labels.extend(claim.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
    let node = Requirements::from_labels(&labels);
    if known {
        node.compatible_with_labels(&pool.requirements).is_err()
    } else {
        node.intersects(&pool.requirements).is_err()
    }
}

pub(crate) fn drifted(c: &Candidate, snapshot: &Snapshot, catalog: &Catalog) -> bool {
    drift(c.claim, c.pool, snapshot, catalog).is_some()
}
