//! Expiration, as Karpenter v1 has it: a NodeClaim older than its own `expireAfter` is deleted
//! outright. No disruption budget holds it back and no replacement is launched first; its node
//! is then drained as any deleted NodeClaim's is (PodDisruptionBudgets and do-not-disrupt pods
//! waited on until its `terminationGracePeriod` says otherwise), and provisioning places the
//! pods it sheds.

use chrono::{DateTime, Utc};
use fleetwright_crds::NodeClaim;

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
pub fn expired(claims: &[NodeClaim], now: DateTime<Utc>) -> Vec<Action> {
    claims
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .filter_map(|c| {
            let at = expires_at(c)?;
            (now >= at).then(|| Action::Expire {
                nodeclaim: name_of(c),
                node: c.status.as_ref().and_then(|s| s.node_name.clone()),
                expired_at: at,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn claim(name: &str, created: &str, expire_after: Option<&str>) -> NodeClaim {
        let mut c = NodeClaim::new(name, Default::default());
        c.metadata.creation_timestamp = Some(Time(created.parse().unwrap()));
        c.spec.expire_after = expire_after.map(str::to_string);
        c
    }

    fn names(actions: &[Action]) -> Vec<String> {
        actions
            .iter()
            .filter_map(|a| match a {
                Action::Expire { nodeclaim, .. } => Some(nodeclaim.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn every_nodeclaim_past_its_own_expire_after_expires_at_once() {
        let claims = [
            claim("a", "2026-01-01T00:00:00Z", Some("1h")),
            claim("b", "2026-01-01T00:00:00Z", Some("1h")),
            claim("c", "2026-01-01T00:30:00Z", Some("1h")),
            claim("d", "2026-01-01T00:00:00Z", Some("Never")),
            claim("e", "2026-01-01T00:00:00Z", None),
            claim("f", "2026-01-01T00:00:00Z", Some("soon")),
        ];
        let now: DateTime<Utc> = "2026-01-01T01:00:00Z".parse().unwrap();
        assert_eq!(names(&expired(&claims, now)), ["a", "b"]);
        let month: DateTime<Utc> = "2026-01-31T00:00:00Z".parse().unwrap();
        assert_eq!(names(&expired(&claims, month)), ["a", "b", "c", "e"]);
    }

    #[test]
    fn a_nodeclaim_being_deleted_is_not_expired_again() {
        let mut c = claim("a", "2026-01-01T00:00:00Z", Some("1h"));
        c.metadata.deletion_timestamp = c.metadata.creation_timestamp.clone();
        let now: DateTime<Utc> = "2026-01-02T00:00:00Z".parse().unwrap();
        assert!(expired(&[c], now).is_empty());
    }
}
