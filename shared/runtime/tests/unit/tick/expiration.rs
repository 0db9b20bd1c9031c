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
    let dump = ClusterDump::default();
    assert_eq!(names(&expired(&dump, &claims, now)), ["a", "b"]);
    let month: DateTime<Utc> = "2026-01-31T00:00:00Z".parse().unwrap();
    assert_eq!(names(&expired(&dump, &claims, month)), ["a", "b", "c", "e"]);
}

#[test]
fn a_nodeclaim_being_deleted_is_not_expired_again() {
    let mut c = claim("a", "2026-01-01T00:00:00Z", Some("1h"));
    c.metadata.deletion_timestamp = c.metadata.creation_timestamp.clone();
    let now: DateTime<Utc> = "2026-01-02T00:00:00Z".parse().unwrap();
    assert!(expired(&ClusterDump::default(), &[c], now).is_empty());
}

/// The tick runs again when the next NodeClaim expires, if that is near; a far expiry, one
/// past, one being deleted and `Never` ask for nothing.
#[test]
fn the_next_expiry_within_the_horizon_brings_the_tick_forward() {
    let now: DateTime<Utc> = "2026-01-01T01:00:00Z".parse().unwrap();
    let mut deleting = claim("gone", "2026-01-01T00:00:00Z", Some("61m"));
    deleting.metadata.deletion_timestamp = Some(Time(now.to_rfc3339().parse().unwrap()));
    let claims = [
        claim("past", "2026-01-01T00:00:00Z", Some("30m")),
        claim("soon", "2026-01-01T00:00:00Z", Some("3660s")),
        claim("later", "2026-01-01T00:00:00Z", Some("63m")),
        claim("far", "2026-01-01T00:00:00Z", Some("2h")),
        claim("never", "2026-01-01T00:00:00Z", Some("Never")),
        deleting,
    ];
    assert_eq!(
        next_expiry(&claims, now),
        Some(chrono::Duration::seconds(60))
    );
    assert_eq!(
        next_expiry(&claims[2..], now),
        Some(chrono::Duration::minutes(3))
    );
    assert_eq!(next_expiry(&claims[3..], now), None);
}
