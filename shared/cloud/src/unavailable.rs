//! Offerings that recently failed to launch (insufficient capacity and the like), by
//! (capacity type, instance type, zone), each until a deadline. Kept in the warm container and
//! serializable, so the runtime can persist it (a ConfigMap) and a cold start does not forget it.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

/// How long a failed offering is avoided.
pub const UNAVAILABLE_FOR: Duration = Duration::minutes(3);

/// The CreateFleet error codes that mean "this offering cannot be had right now".
pub const CAPACITY_ERRORS: [&str; 6] = [
    "InsufficientInstanceCapacity",
    "MaxSpotInstanceCountExceeded",
    "VcpuLimitExceeded",
    "UnfulfillableCapacity",
    "Unsupported",
    "InsufficientFreeAddressesInSubnet",
];

/// Whether a CreateFleet error code makes its offering unavailable.
pub fn is_capacity_error(code: &str) -> bool {
    CAPACITY_ERRORS.contains(&code)
}

/// (capacity type, instance type, zone).
pub type OfferingKey = (String, String, String);

/// Unavailable offerings and when each becomes available again.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnavailableOfferings {
    /// Keyed `capacity-type/instance-type/zone` so the JSON is a plain object.
    until: BTreeMap<String, DateTime<Utc>>,
}

fn key(capacity_type: &str, instance_type: &str, zone: &str) -> String {
    format!("{capacity_type}/{instance_type}/{zone}")
}

impl UnavailableOfferings {
    /// Marks an offering unavailable for [`UNAVAILABLE_FOR`] from `now`.
    pub fn mark(
        &mut self,
        capacity_type: &str,
        instance_type: &str,
        zone: &str,
        now: DateTime<Utc>,
    ) {
        self.until.insert(
            key(capacity_type, instance_type, zone),
            now + UNAVAILABLE_FOR,
        );
    }

    pub fn is_unavailable(
        &self,
        capacity_type: &str,
        instance_type: &str,
        zone: &str,
        now: DateTime<Utc>,
    ) -> bool {
        self.until
            .get(&key(capacity_type, instance_type, zone))
            .is_some_and(|until| *until > now)
    }

    /// The offerings still unavailable at `now`.
    pub fn active(&self, now: DateTime<Utc>) -> BTreeSet<OfferingKey> {
        self.until
            .iter()
            .filter(|(_, until)| **until > now)
            .filter_map(|(k, _)| {
                let mut parts = k.splitn(3, '/');
                Some((
                    parts.next()?.to_string(),
                    parts.next()?.to_string(),
                    parts.next()?.to_string(),
                ))
            })
            .collect()
    }

    /// Drops expired entries.
    pub fn prune(&mut self, now: DateTime<Utc>) {
        self.until.retain(|_, until| *until > now);
    }

    /// Keeps the later deadline of each entry (merging a persisted copy into a warm one).
    pub fn merge(&mut self, other: &UnavailableOfferings) {
        for (k, until) in &other.until {
            let entry = self.until.entry(k.clone()).or_insert(*until);
            *entry = (*entry).max(*until);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.until.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_offering_is_unavailable_for_three_minutes() {
        let now = DateTime::parse_from_rfc3339("2026-11-22T10:00:00Z")
            .unwrap()
            .to_utc();
        let mut u = UnavailableOfferings::default();
        u.mark("spot", "m5.large", "us-east-1a", now);
        assert!(u.is_unavailable(
            "spot",
            "m5.large",
            "us-east-1a",
            now + Duration::seconds(179)
        ));
        assert!(!u.is_unavailable("on-demand", "m5.large", "us-east-1a", now));
        assert!(!u.is_unavailable(
            "spot",
            "m5.large",
            "us-east-1a",
            now + Duration::seconds(180)
        ));
        let json = serde_json::to_string(&u).unwrap();
        let back: UnavailableOfferings = serde_json::from_str(&json).unwrap();
        assert_eq!(back.active(now).len(), 1);
        let mut later = UnavailableOfferings::default();
        later.mark(
            "spot",
            "m5.large",
            "us-east-1a",
            now + Duration::seconds(60),
        );
        u.merge(&later);
        assert!(u.is_unavailable(
            "spot",
            "m5.large",
            "us-east-1a",
            now + Duration::seconds(200)
        ));
        u.prune(now + Duration::seconds(300));
        assert!(u.is_empty());
    }
}
