//! What an EC2NodeClass resolves to (subnets, security groups, AMIs, instance profile, capacity
//! reservations, placement group), as the cloud port hands it to the runtime.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ami::{Ami, AmiFamily};

/// A subnet a node can launch into.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subnet {
    pub id: String,
    pub zone: String,
    pub available_ips: i32,
}

/// What an EC2NodeClass resolves to right now.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResolvedNodeClass {
    pub name: String,
    pub family: AmiFamily,
    pub subnets: Vec<Subnet>,
    pub security_groups: Vec<String>,
    pub amis: Vec<Ami>,
    pub instance_profile: String,
    /// The capacity reservations its `capacityReservationSelectorTerms` select.
    #[serde(default)]
    pub reservations: Vec<ResolvedReservation>,
    /// The placement group its `placementGroupSelector` names, when it names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement_group: Option<ResolvedPlacementGroup>,
}

/// A placement group as EC2 describes it. Its id is the `karpenter.k8s.aws/placement-group-id`
/// label of the nodes launched into it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedPlacementGroup {
    pub id: String,
    pub name: String,
    /// `cluster`, `partition` or `spread`.
    pub strategy: String,
    /// How many partitions a `partition` group has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions: Option<i32>,
}

/// A capacity reservation as EC2 describes it, with what the EC2NodeClass's status shows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedReservation {
    pub id: String,
    pub instance_type: String,
    pub zone: String,
    /// `default` or `capacity-block`.
    pub kind: String,
    pub interruptible: bool,
    pub owner_id: String,
    /// `open` or `targeted`.
    pub instance_match_criteria: String,
    pub end_time: Option<chrono::DateTime<chrono::Utc>>,
    /// Instances it can still take.
    pub available: usize,
}

/// A capacity block is `expiring` from 40 minutes before its end, as Karpenter counts it:
/// nothing launches into it, and its nodes are drained (AWS reclaims them at the end).
pub const CAPACITY_BLOCK_EXPIRING: chrono::Duration = chrono::Duration::minutes(40);

impl ResolvedReservation {
    /// `active`, or `expiring` for a capacity block within 40 minutes of its end.
    pub fn state(&self, now: chrono::DateTime<chrono::Utc>) -> &'static str {
        match self.end_time {
            Some(end) if self.kind == "capacity-block" && now >= end - CAPACITY_BLOCK_EXPIRING => {
                "expiring"
            }
            _ => "active",
        }
    }

    /// The reservation as the core plans with it.
    pub fn planned(
        &self,
        now: chrono::DateTime<chrono::Utc>,
    ) -> fleetwright_core::catalog::CapacityReservation {
        fleetwright_core::catalog::CapacityReservation {
            id: self.id.clone(),
            instance_type: self.instance_type.clone(),
            zone: self.zone.clone(),
            kind: self.kind.clone(),
            interruptible: self.interruptible,
            state: self.state(now).to_string(),
            available: self.available,
        }
    }
}

impl ResolvedNodeClass {
    /// The subnet with the most free addresses in each zone.
    pub fn best_subnets(&self) -> BTreeMap<&str, &Subnet> {
        let mut best: BTreeMap<&str, &Subnet> = BTreeMap::new();
        for s in &self.subnets {
            let keep = best
                .get(s.zone.as_str())
                .is_some_and(|b| (b.available_ips, &s.id) >= (s.available_ips, &b.id));
            if !keep {
                best.insert(&s.zone, s);
            }
        }
        best
    }
}

/// Where the AWS public SSM parameters are read from: the public root (`""`) by default, or a
/// mirror such as `/mirror` holding copies under `/mirror/aws/service/...` (for accounts that pin
/// approved AMIs, and for tests, since local AWS emulators reserve `/aws/`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ParameterRoot(pub String);
