//! CreateFleet for one NodeClaim: the instant-fleet call itself and the reading of its
//! per-offering errors. The choices (capacity type, overrides, token, tags) are pure and live in
//! [`fleetwright_cloud::launch`], re-exported here.

use std::collections::BTreeMap;

use aws_sdk_ec2::types::{
    DefaultTargetCapacityType, FleetLaunchTemplateConfigRequest,
    FleetLaunchTemplateOverridesRequest, FleetLaunchTemplateSpecificationRequest,
    FleetOnDemandAllocationStrategy, FleetType, InstanceType as Ec2InstanceType,
    OnDemandOptionsRequest, ResourceType, SpotAllocationStrategy, SpotOptionsRequest,
    TagSpecification, TargetCapacitySpecificationRequest,
};
pub use fleetwright_cloud::launch::*;
use tracing::{info, instrument, warn};

use crate::error::AwsError;
use crate::launch_template::tags;

/// What the EC2NodeClass adds to a CreateFleet call.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FleetOptions {
    /// The reserved overrides are capacity blocks (the `capacity-block` target capacity type).
    pub capacity_blocks: bool,
    /// The class's `context` (a reserved-capacity or ODCR context for CreateFleet).
    pub context: Option<String>,
}

/// The fleet's target capacity type: a reserved launch asks for on-demand capacity (its
/// templates target the reservations), or `capacity-block` when they are capacity blocks.
fn target_capacity_type(capacity_type: &str, blocks: bool) -> DefaultTargetCapacityType {
    match (capacity_type, blocks) {
        ("reserved", true) => DefaultTargetCapacityType::CapacityBlock,
        ("reserved", false) => DefaultTargetCapacityType::OnDemand,
        (other, _) => DefaultTargetCapacityType::from(other),
    }
}

/// Calls CreateFleet (instant, one instance) with one launch template config per template.
#[instrument(skip_all, fields(nodeclaim = %req.nodeclaim, capacity_type))]
pub async fn create(
    ec2: &aws_sdk_ec2::Client,
    req: &LaunchRequest,
    capacity_type: &str,
    templates: &[(String, Vec<Override>)],
    tag_set: &BTreeMap<String, String>,
    options: &FleetOptions,
) -> Result<(Option<Launched>, Vec<FleetError>), AwsError> {
    let blocks = options.capacity_blocks;
    let all: Vec<Override> = templates.iter().flat_map(|(_, o)| o.clone()).collect();
    // NodeOverlays priced the overrides (they arrive cheapest first by those prices): EC2 takes
    // them in that order, not by its own prices, as Karpenter launches when an overlay applies.
    let prioritized = !req.overlays.is_empty();
    let mut by_price: Vec<&Override> = all.iter().collect();
    by_price.sort_by(|a, b| a.price.total_cmp(&b.price));
    let rank = |o: &Override| {
        by_price
            .iter()
            .position(|a| a.instance_type == o.instance_type && a.zone == o.zone)
            .unwrap_or(0) as f64
    };
    let token = client_token(&req.nodeclaim, req.uid.as_deref());
    let mut call = ec2
        .create_fleet()
        .r#type(FleetType::Instant)
        .client_token(token)
        .set_context(options.context.clone())
        .target_capacity_specification(
            TargetCapacitySpecificationRequest::builder()
                .total_target_capacity(1)
                .default_target_capacity_type(target_capacity_type(capacity_type, blocks))
                .build(),
        )
        .spot_options(
            SpotOptionsRequest::builder()
                .allocation_strategy(if prioritized {
                    SpotAllocationStrategy::CapacityOptimizedPrioritized
                } else {
                    SpotAllocationStrategy::PriceCapacityOptimized
                })
                .build(),
        )
        .on_demand_options(
            OnDemandOptionsRequest::builder()
                .allocation_strategy(if prioritized {
                    FleetOnDemandAllocationStrategy::Prioritized
                } else {
                    FleetOnDemandAllocationStrategy::LowestPrice
                })
                .build(),
        );
    for (name, list) in templates {
        let mut config = FleetLaunchTemplateConfigRequest::builder().launch_template_specification(
            FleetLaunchTemplateSpecificationRequest::builder()
                .launch_template_name(name)
                .version("$Latest")
                .build(),
        );
        for o in list {
            config = config.overrides(
                FleetLaunchTemplateOverridesRequest::builder()
                    .instance_type(Ec2InstanceType::from(o.instance_type.as_str()))
                    .subnet_id(&o.subnet_id)
                    .availability_zone(&o.zone)
                    .image_id(&o.image_id)
                    .set_priority(prioritized.then(|| rank(o)))
                    .build(),
            );
        }
        call = call.launch_template_configs(config.build());
    }
    for resource in [
        ResourceType::Instance,
        ResourceType::Volume,
        ResourceType::Fleet,
    ] {
        call = call.tag_specifications(
            TagSpecification::builder()
                .resource_type(resource)
                .set_tags(Some(tags(tag_set)))
                .build(),
        );
    }
    let out = call
        .send()
        .await
        .map_err(|e| crate::error::api("CreateFleet", e))?;
    let zone_of = |subnet: Option<&str>, zone: Option<&str>| {
        zone.map(str::to_string).or_else(|| {
            let subnet = subnet?;
            all.iter()
                .find(|o| o.subnet_id == subnet)
                .map(|o| o.zone.clone())
        })
    };
    let errors: Vec<FleetError> = out
        .errors()
        .iter()
        .map(|e| {
            let o = e
                .launch_template_and_overrides()
                .and_then(|l| l.overrides());
            FleetError {
                code: e.error_code().unwrap_or("Unknown").to_string(),
                message: e.error_message().unwrap_or_default().to_string(),
                instance_type: o
                    .and_then(|o| o.instance_type())
                    .map(|t| t.as_str().to_string()),
                zone: o.and_then(|o| zone_of(o.subnet_id(), o.availability_zone())),
            }
        })
        .collect();
    for e in &errors {
        warn!(code = %e.code, instance_type = ?e.instance_type, zone = ?e.zone, message = %e.message, "CreateFleet error");
    }
    let launched = out.instances().iter().find_map(|i| {
        let id = i.instance_ids().first()?.clone();
        let o = i
            .launch_template_and_overrides()
            .and_then(|l| l.overrides());
        let instance_type = i.instance_type().map(|t| t.as_str().to_string())?;
        let zone = o.and_then(|o| zone_of(o.subnet_id(), o.availability_zone()))?;
        let image_id = o
            .and_then(|o| o.image_id())
            .map(str::to_string)
            .or_else(|| {
                all.iter()
                    .find(|x| x.instance_type == instance_type)
                    .map(|x| x.image_id.clone())
            })
            .unwrap_or_default();
        let reservation = all
            .iter()
            .find(|x| x.instance_type == instance_type && x.zone == zone)
            .and_then(|x| x.reservation.clone())
            .map(|id| LaunchedReservation {
                id,
                kind: None,
                interruptible: None,
            });
        Some(Launched {
            instance_id: id,
            instance_type,
            zone,
            capacity_type: capacity_type.to_string(),
            image_id,
            subnet_id: o
                .and_then(|o| o.subnet_id())
                .unwrap_or_default()
                .to_string(),
            security_groups: Vec::new(),
            reservation,
            partition: None,
            type_labels: Default::default(),
        })
    });
    if let Some(l) = &launched {
        info!(instance_id = %l.instance_id, instance_type = %l.instance_type, zone = %l.zone, "launched instance");
    }
    Ok((launched, errors))
}
