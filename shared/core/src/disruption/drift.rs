//! Drift: a node whose NodeClaim no longer matches its NodePool's template or its EC2NodeClass
//! (the static hashes, the AMI, subnets and security groups it was launched with).

use std::collections::BTreeSet;

use crate::model::{NodeClaim, NodePool, Snapshot};

use super::candidates::Candidate;
use super::{
    HASH_VERSION, NODECLASS_HASH, NODECLASS_HASH_VERSION, NODEPOOL_HASH, NODEPOOL_HASH_VERSION,
    SECURITY_GROUP_IDS, SUBNET_ID,
};

/// Why a node has drifted from its NodePool or EC2NodeClass, if it has (Karpenter's drift
/// reasons). Unknown facts (no annotation, nothing resolved) never count as drift.
pub fn drift(claim: &NodeClaim, pool: &NodePool, snapshot: &Snapshot) -> Option<&'static str> {
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

pub(crate) fn drifted(c: &Candidate, snapshot: &Snapshot) -> bool {
    drift(c.claim, c.pool, snapshot).is_some()
}
