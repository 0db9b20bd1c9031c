//! The simulated CreateFleet: a launch through the real override selection, the cheapest
//! offering with capacity first, into the partition EC2 would choose; and the EC2NodeClass as
//! the simulated account resolves it (its subnets' zones, its AMIs by release, its groups).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use fleetwright_cloud::ami::{Ami, AmiFamily, Variant};
use fleetwright_cloud::instances::Instance;
use fleetwright_cloud::launch::{self, FleetError};
use fleetwright_cloud::nodeclass::{ResolvedNodeClass, ResolvedPlacementGroup, Subnet};
use fleetwright_cloud::{Cloud, CloudError, LaunchRequest, Launched};
use fleetwright_core::labels::NODECLASS;
use fleetwright_crds::EC2NodeClass;
use tracing::info;

use super::{CloudFault, SimCloud, SimInstance};

pub(super) fn resolved(
    nodeclass: &EC2NodeClass,
    release: u32,
    zones: &[String],
) -> ResolvedNodeClass {
    let name = nodeclass.metadata.name.clone().unwrap_or_default();
    let family = nodeclass
        .spec
        .ami_selector_terms
        .iter()
        .find_map(|t| t.alias.as_deref())
        .and_then(|a| AmiFamily::parse(a.split('@').next().unwrap_or_default()))
        .unwrap_or(AmiFamily::AL2023);
    let mut amis = Vec::new();
    for arch in ["amd64", "arm64"] {
        for (variant, tag) in [(Variant::Standard, "std"), (Variant::Nvidia, "gpu")] {
            amis.push(Ami {
                id: format!("ami-{name}-{arch}-{tag}-r{release}"),
                arch: arch.into(),
                variant: Some(variant),
                created: Some(format!("2026-11-{release:02}")),
            });
        }
    }
    ResolvedNodeClass {
        name,
        family,
        subnets: zones
            .iter()
            .map(|z| Subnet {
                id: format!("subnet-{z}"),
                zone: z.to_string(),
                available_ips: 4000,
            })
            .collect(),
        security_groups: vec!["sg-simulated".into()],
        amis,
        instance_profile: "simulated".into(),
        reservations: Vec::new(),
        placement_group: placement_group(nodeclass),
    }
}

/// The simulated cloud holds every placement group a class names: its id the one named, or
/// `pg-` and the name; a group whose name or id has `partition` in it is a `partition` group of
/// [`PARTITIONS`] partitions, any other a `cluster` group.
fn placement_group(nodeclass: &EC2NodeClass) -> Option<ResolvedPlacementGroup> {
    let selector = nodeclass.spec.placement_group_selector.as_ref()?;
    let name = selector.name.clone().unwrap_or_default();
    let id = selector.id.clone().unwrap_or_else(|| format!("pg-{name}"));
    let partition = id.contains("partition") || name.contains("partition");
    Some(ResolvedPlacementGroup {
        id,
        name,
        strategy: if partition { "partition" } else { "cluster" }.into(),
        partitions: partition.then_some(PARTITIONS),
    })
}

/// How many partitions a simulated partition group has.
pub const PARTITIONS: i32 = 3;

/// The partition EC2 puts a new instance in: the one asked for, or else the group's partition
/// with the fewest live instances (EC2 spreads a group's instances evenly), the lowest first.
fn partition_for(
    req: &LaunchRequest,
    group: Option<&ResolvedPlacementGroup>,
    live: &BTreeMap<String, SimInstance>,
    nodeclass: &str,
) -> Option<i32> {
    let count = group.filter(|g| g.strategy == "partition")?.partitions?;
    if let Some(p) = req.partition {
        return Some(p);
    }
    let in_class =
        |i: &&SimInstance| i.instance.tags.get(NODECLASS).map(String::as_str) == Some(nodeclass);
    let used = |p: i32| {
        live.values()
            .filter(in_class)
            .filter(|i| i.instance.partition == Some(p))
            .count()
    };
    (1..=count).min_by_key(|p| (used(*p), *p))
}

pub(super) fn api_error(fault: &CloudFault) -> CloudError {
    CloudError::Api {
        operation: fault.operation,
        code: fault.code.clone(),
        message: "injected".into(),
    }
}

impl SimCloud {
    /// CreateFleet without the injected faults.
    pub(super) async fn launch_now(
        &self,
        req: &LaunchRequest,
        nodeclass: &EC2NodeClass,
        now: DateTime<Utc>,
    ) -> Result<Launched, CloudError> {
        if let Some(existing) = self.existing(&req.nodeclaim) {
            return existing.adopted().map_err(|reason| CloudError::Launch {
                nodeclaim: req.nodeclaim.clone(),
                reason,
            });
        }
        let catalog = self.catalog(now).await?;
        let resolved = self.nodeclass(nodeclass, now).await?;
        let reservations = &resolved.reservations;
        let (capacity_type, overrides) =
            launch::choose(req, &catalog, &resolved, now).map_err(|reason| CloudError::Launch {
                nodeclaim: req.nodeclaim.clone(),
                reason,
            })?;
        let mut errors = Vec::new();
        for o in overrides {
            if !self.has_capacity(&o.instance_type, &o.zone, capacity_type) {
                info!(target: "simulate::cloud", nodeclaim = %req.nodeclaim, instance_type = %o.instance_type, zone = %o.zone, capacity_type, "CreateFleet: InsufficientInstanceCapacity; trying the next override");
                self.mark_unavailable(capacity_type, &o.instance_type, &o.zone, now);
                self.state().capacity_errors += 1;
                errors.push(FleetError {
                    code: "InsufficientInstanceCapacity".into(),
                    message: format!(
                        "There is no {capacity_type} capacity for {} in {}",
                        o.instance_type, o.zone
                    ),
                    instance_type: Some(o.instance_type.clone()),
                    zone: Some(o.zone.clone()),
                });
                continue;
            }
            let mut s = self.state();
            s.next_id += 1;
            s.launches += 1;
            let partition = partition_for(
                req,
                resolved.placement_group.as_ref(),
                &s.live,
                &resolved.name,
            );
            let instance = Instance {
                id: format!("i-{:017x}", 0x5e1d_0000_0000_u64 + s.next_id),
                instance_type: o.instance_type.clone(),
                zone: o.zone.clone(),
                state: "running".into(),
                capacity_type: capacity_type.to_string(),
                image_id: o.image_id.clone(),
                subnet_id: o.subnet_id.clone(),
                security_groups: resolved.security_groups.clone(),
                launch_time: Some(now),
                tags: launch::instance_tags(&self.cluster, req, nodeclass.spec.tags()),
                capacity_reservation_id: o.reservation.clone(),
                partition,
            };
            let mut launched = instance.launched();
            // CreateFleet's answer does not say where EC2 placed the instance: only the
            // partition asked for is known before DescribeInstances.
            launched.partition = req.partition.filter(|_| partition.is_some());
            launched.reservation = o
                .reservation
                .as_deref()
                .map(|id| launch::launched_reservation(id, reservations));
            s.launched_for
                .insert(req.nodeclaim.clone(), instance.clone());
            s.live.insert(
                instance.id.clone(),
                SimInstance {
                    instance,
                    price: o.price,
                    warned: None,
                },
            );
            return Ok(launched);
        }
        Err(CloudError::NothingLaunched {
            nodeclaim: req.nodeclaim.clone(),
            capacity_type: capacity_type.to_string(),
            errors,
        })
    }
}
