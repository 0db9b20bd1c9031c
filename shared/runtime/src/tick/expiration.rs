//! Expiration, as Karpenter v1 has it: a NodeClaim older than its own `expireAfter` is deleted
//! outright. No disruption budget holds it back and no replacement is launched first; its node
//! is then drained as any deleted NodeClaim's is (PodDisruptionBudgets and do-not-disrupt pods
//! waited on until its `terminationGracePeriod` says otherwise), and provisioning places the
//! pods it sheds.

use chrono::{DateTime, Utc};
use fleetwright_crds::NodeClaim;
use fleetwright_kube::dump::ClusterDump;

use super::action::Action;
use super::claims::name_of;

/// The `expireAfter` a NodeClaim without one has: the CRD's default, which the API server
/// writes on every NodeClaim it stores.
pub const DEFAULT_EXPIRE_AFTER: &str = "720h";

/// When the NodeClaim expires (None: `Never`, an unreadable value, or no creation time).
pub fn expires_at(claim: &NodeClaim) -> Option<DateTime<Utc>> {
    let text = claim
        .spec
        .expire_after
        .as_deref()
        .unwrap_or(DEFAULT_EXPIRE_AFTER);
    let seconds = fleetwright_kube::convert::duration_seconds(text).ok()??;
    let created = claim.metadata.creation_timestamp.as_ref()?.0.as_second();
    DateTime::from_timestamp(created + seconds, 0)
}

/// An [`Action::Expire`] for each NodeClaim not being deleted whose time has come.
pub fn expired(dump: &ClusterDump, claims: &[NodeClaim], now: DateTime<Utc>) -> Vec<Action> {
    let due: Vec<(&NodeClaim, DateTime<Utc>)> = (claims.iter())
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .filter_map(|c| Some((c, expires_at(c).filter(|at| now >= *at)?)))
        .collect();
    // Every pod is looked at once, however many NodeClaims expire together.
    let pods = super::disrupted::pods_by_node(dump, due.is_empty());
    (due.into_iter())
        .map(|(c, at)| Action::Expire {
            nodeclaim: name_of(c),
            node: c.status.as_ref().and_then(|s| s.node_name.clone()),
            expired_at: at,
            disrupted: super::disrupted::labels(dump, c, "expired", &pods),
        })
        .collect()
}

/// How far ahead an expiry brings the tick forward: past the schedule's period, so that some
/// tick always sees it coming, and no further, so a far expiry sends no follow-up.
pub const EXPIRY_HORIZON: chrono::Duration = chrono::Duration::minutes(5);

/// How soon the next NodeClaim not being deleted expires, when within [`EXPIRY_HORIZON`]: the
/// tick asks to run then, so a NodeClaim goes at its `expireAfter` and not up to a schedule's
/// period later, as Karpenter requeues at the second.
pub fn next_expiry(claims: &[NodeClaim], now: DateTime<Utc>) -> Option<chrono::Duration> {
    (claims.iter())
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .filter_map(expires_at)
        .map(|at| at - now)
        .filter(|left| *left > chrono::Duration::zero() && *left <= EXPIRY_HORIZON)
        .min()
}

#[cfg(test)]
#[path = "../../tests/unit/tick/expiration.rs"]
mod tests;
