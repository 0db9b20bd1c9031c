//! The instances a cluster launched, as the cloud port sees them, and the pure rules about them:
//! ownership (an instance without `kubernetes.io/cluster/<this cluster>=owned` and
//! `karpenter.sh/nodepool` is never terminated, whatever IAM would allow), and which owned
//! instances are orphans.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Duration, Utc};
use fleetwright_core::labels::{NODEPOOL, TAG_CLUSTER_PREFIX, TAG_NODECLAIM};
use serde::{Deserialize, Serialize};

use crate::launch::{Launched, LaunchedReservation};

/// Instances younger than this are never garbage collected (their NodeClaim may not be visible yet).
pub const ORPHAN_GRACE: Duration = Duration::seconds(30);

/// The states of an instance that still exists.
pub const LIVE_STATES: [&str; 4] = ["pending", "running", "stopping", "stopped"];

/// An EC2 instance as Fleetwright sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Instance {
    pub id: String,
    pub instance_type: String,
    pub zone: String,
    pub state: String,
    pub capacity_type: String,
    pub image_id: String,
    #[serde(default)]
    pub subnet_id: String,
    /// Sorted.
    #[serde(default)]
    pub security_groups: Vec<String>,
    pub launch_time: Option<DateTime<Utc>>,
    pub tags: BTreeMap<String, String>,
    /// The capacity reservation it runs in (EC2's `CapacityReservationId`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_reservation_id: Option<String>,
    /// The partition EC2 placed it in, in a partition placement group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<i32>,
}

impl Instance {
    pub fn nodeclaim(&self) -> Option<&str> {
        self.tags.get(TAG_NODECLAIM).map(String::as_str)
    }

    /// This instance as the launch of the NodeClaim it was found for, unless it has died: a
    /// NodeClaim gets one instance for life, so a dead one ends the NodeClaim (the reason says
    /// so) rather than being recorded as capacity that does not exist.
    pub fn adopted(&self) -> Result<Launched, String> {
        if LIVE_STATES.contains(&self.state.as_str()) {
            Ok(self.launched())
        } else {
            Err(format!(
                "its instance {} is {}, and a NodeClaim gets one instance for life",
                self.id, self.state
            ))
        }
    }

    pub fn launched(&self) -> Launched {
        Launched {
            instance_id: self.id.clone(),
            instance_type: self.instance_type.clone(),
            zone: self.zone.clone(),
            capacity_type: self.capacity_type.clone(),
            image_id: self.image_id.clone(),
            subnet_id: self.subnet_id.clone(),
            security_groups: self.security_groups.clone(),
            reservation: self
                .capacity_reservation_id
                .as_ref()
                .map(|id| LaunchedReservation {
                    id: id.clone(),
                    kind: None,
                    interruptible: None,
                }),
            partition: self.partition,
            type_labels: Default::default(),
        }
    }
}

/// Why an instance is not this cluster's to terminate, or None when it is.
pub fn ownership_problem(tags: &BTreeMap<String, String>, cluster: &str) -> Option<String> {
    let key = format!("{TAG_CLUSTER_PREFIX}{cluster}");
    if tags.get(&key).map(String::as_str) != Some("owned") {
        return Some(format!("it is not tagged {key}=owned"));
    }
    if !tags.contains_key(NODEPOOL) {
        return Some("it has no karpenter.sh/nodepool tag".to_string());
    }
    None
}

/// What terminating an instance did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Termination {
    /// TerminateInstances accepted it.
    Terminating,
    /// It no longer exists or is already shutting down.
    AlreadyGone,
}

/// Owned instances that no NodeClaim accounts for and that are older than the grace period.
pub fn orphans<'a>(
    instances: &'a [Instance],
    claimed_instance_ids: &BTreeSet<String>,
    now: DateTime<Utc>,
) -> Vec<&'a Instance> {
    instances
        .iter()
        .filter(|i| !claimed_instance_ids.contains(&i.id))
        .filter(|i| i.launch_time.is_some_and(|t| now - t >= ORPHAN_GRACE))
        .filter(|i| LIVE_STATES.contains(&i.state.as_str()))
        .collect()
}

#[cfg(test)]
#[path = "../tests/unit/instances.rs"]
mod tests;
