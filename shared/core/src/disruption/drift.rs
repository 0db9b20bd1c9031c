//! Drift: a node whose NodeClaim no longer matches its NodePool, its instance type's offerings
//! or its EC2NodeClass, with Karpenter v1's reasons in Karpenter's order: the NodePool's static
//! hash, its requirements (checked against the node's labels directly, not by hash), the
//! instance type no longer offered, then the EC2NodeClass's static hash, AMI, security groups,
//! subnet, capacity reservation and placement group.
//!
//! The static hashes are Karpenter's own (`v3` for the NodePool, `v6` for the EC2NodeClass;
//! computed by the Kubernetes adapter and handed in on the snapshot), so a NodeClaim Karpenter
//! launched is compared by the same number as one Fleetwright launched: a migration neither
//! rolls the fleet nor forgets a change Karpenter had not yet acted on.

use std::collections::{BTreeMap, BTreeSet};

use crate::catalog::Catalog;
use crate::labels::{CAPACITY_TYPE, INSTANCE_TYPE, PLACEMENT_GROUP_ID, RESERVATION_ID, ZONE};
use crate::model::{NodeClaim, NodeClassState, NodePool, Snapshot};
use crate::requirements::Requirements;

use super::candidates::Candidate;
use super::{
    CLASS_HASH_VERSION, NODECLASS_HASH, NODECLASS_HASH_VERSION, NODEPOOL_HASH,
    NODEPOOL_HASH_VERSION, POOL_HASH_VERSION, SECURITY_GROUP_IDS, SUBNET_ID,
};

/// Karpenter looks for `InstanceTypeNotFound` only once a NodeClaim is this old (seconds): the
/// offerings are the cloud's, not the user's, and may lag a launch.
pub const INSTANCE_TYPE_CHECK_AFTER: i64 = 3600;

/// Why a node has drifted from its NodePool, its offerings or its EC2NodeClass at `now`, if it
/// has (Karpenter's drift reasons, in its order). Unknown facts (no annotation, nothing
/// resolved, an instance type the catalog does not know) never count as drift.
pub fn drift(
    claim: &NodeClaim,
    pool: &NodePool,
    snapshot: &Snapshot,
    catalog: &Catalog,
    now: i64,
) -> Option<&'static str> {
    if static_drift(
        claim,
        (NODEPOOL_HASH_VERSION, POOL_HASH_VERSION, NODEPOOL_HASH),
        pool.template_hash.as_ref(),
    ) {
        return Some("NodePoolDrifted");
    }
    if requirements_drifted(claim, pool, catalog) {
        return Some("RequirementsDrifted");
    }
    if now - claim.created > INSTANCE_TYPE_CHECK_AFTER && !offered(claim, catalog) {
        return Some("InstanceTypeNotFound");
    }
    let state = snapshot.node_class_state.get(&pool.node_class)?;
    if static_drift(
        claim,
        (NODECLASS_HASH_VERSION, CLASS_HASH_VERSION, NODECLASS_HASH),
        state.hash.as_ref(),
    ) {
        return Some("NodeClassDrift");
    }
    resolved_drift(claim, state)
}

/// Whether the NodeClaim's static hash, stamped in `version` (the annotation, the version
/// compared, the hash annotation), differs from the current one. Another version is never
/// compared (Karpenter's rule; the tick re-stamps it).
fn static_drift(
    claim: &NodeClaim,
    (version_key, version, hash_key): (&str, &str, &str),
    current: Option<&String>,
) -> bool {
    let stamped = claim.annotations.get(version_key).map(String::as_str) == Some(version);
    let hash = claim.annotations.get(hash_key);
    stamped && matches!((hash, current), (Some(a), Some(b)) if a != b)
}

/// Drift from what the EC2NodeClass resolves to now: its AMIs, security groups, subnets,
/// capacity reservations and placement group.
fn resolved_drift(claim: &NodeClaim, state: &NodeClassState) -> Option<&'static str> {
    if let Some(image) = &claim.image_id {
        if !state.images.is_empty() && !state.images.contains(image) {
            return Some("AMIDrift");
        }
    }
    if let Some(groups) = claim.annotations.get(SECURITY_GROUP_IDS) {
        let groups: BTreeSet<String> = groups.split(',').map(str::to_string).collect();
        if !state.security_groups.is_empty() && groups != state.security_groups {
            return Some("SecurityGroupDrift");
        }
    }
    if let Some(subnet) = claim.annotations.get(SUBNET_ID) {
        if !state.subnets.is_empty() && !state.subnets.contains(subnet) {
            return Some("SubnetDrift");
        }
    }
    if let (Some(reservation), Some(reservations)) =
        (claim.labels.get(RESERVATION_ID), &state.reservations)
    {
        if !reservations.contains(reservation) {
            return Some("CapacityReservationDrift");
        }
    }
    if let Some(group) = &state.placement_group {
        if claim.labels.get(PLACEMENT_GROUP_ID) != group.as_ref() {
            return Some("PlacementGroupDrift");
        }
    }
    None
}

/// Whether the NodeClaim's instance type is still offered in its zone with its capacity type
/// (a reserved one may fall back to on-demand, as Karpenter allows). A type the catalog does
/// not know at all counts as offered: the catalog may be older than the fleet (an embedded one,
/// offline), and a node is never replaced for what Fleetwright does not know.
fn offered(claim: &NodeClaim, catalog: &Catalog) -> bool {
    let Some(instance_type) = claim.labels.get(INSTANCE_TYPE) else {
        return true;
    };
    let capacity_type = claim.labels.get(CAPACITY_TYPE).map(String::as_str);
    let capacity_type = match capacity_type {
        Some("reserved") => Some("on-demand"),
        other => other,
    };
    catalog
        .offered(
            instance_type,
            claim.labels.get(ZONE).map(String::as_str),
            capacity_type,
        )
        .unwrap_or(true)
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

pub(crate) fn drifted(c: &Candidate, snapshot: &Snapshot, catalog: &Catalog, now: i64) -> bool {
    drift(c.claim, c.pool, snapshot, catalog, now).is_some()
}
