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
#[path = "../tests/unit/unavailable.rs"]
mod tests;
