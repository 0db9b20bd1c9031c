//! Launch templates: what every node of one (node class, AMI, user data) shares. A template is
//! named by a hash of its content, so it is created once and then found again by name; changing
//! any field gives a new template. Templates are tagged as owned by the cluster.

use std::collections::BTreeMap;

use aws_sdk_ec2::types::{
    CapacityReservationTarget, ConnectionTrackingSpecificationRequest,
    LaunchTemplateBlockDeviceMappingRequest, LaunchTemplateCapacityReservationSpecificationRequest,
    LaunchTemplateCpuOptionsRequest, LaunchTemplateEbsBlockDeviceRequest,
    LaunchTemplateEnclaveOptionsRequest, LaunchTemplateHttpTokensState,
    LaunchTemplateIamInstanceProfileSpecificationRequest,
    LaunchTemplateInstanceMarketOptionsRequest, LaunchTemplateInstanceMetadataEndpointState,
    LaunchTemplateInstanceMetadataOptionsRequest, LaunchTemplateInstanceMetadataProtocolIpv6,
    LaunchTemplateInstanceNetworkInterfaceSpecificationRequest, LaunchTemplatePlacementRequest,
    LaunchTemplatesMonitoringRequest, MarketType, NestedVirtualizationSpecification,
    RequestLaunchTemplateData, ResourceType, Tag, TagSpecification, VolumeType,
};
use base64::Engine;
use fleetwright_core::quantity::parse_scaled;
use fleetwright_crds::{
    BlockDeviceMapping, ConnectionTracking, EC2NodeClassSpec, NetworkInterface,
    PlacementGroupSelector,
};
use serde::Serialize;
use sha2::{Digest, Sha256};
use tracing::{info, instrument};

use crate::ami::AmiFamily;
use crate::error::AwsError;
use crate::nodeclass::ResolvedNodeClass;
use fleetwright_cloud::launch::hex;

/// One EBS volume of a launch template.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BlockDevice {
    pub device_name: String,
    pub size_gib: i32,
    pub volume_type: String,
    pub encrypted: bool,
    pub iops: Option<i32>,
    pub throughput: Option<i32>,
    pub kms_key_id: Option<String>,
    pub snapshot_id: Option<String>,
    pub delete_on_termination: bool,
}

/// The content of a launch template. Its hash names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LaunchTemplateSpec {
    pub image_id: String,
    /// Plain text; base64-encoded when sent.
    pub user_data: String,
    pub block_devices: Vec<BlockDevice>,
    pub http_endpoint: String,
    pub http_tokens: String,
    pub http_put_response_hop_limit: i32,
    pub http_protocol_ipv6: String,
    pub security_groups: Vec<String>,
    pub instance_profile: String,
    pub detailed_monitoring: bool,
    pub associate_public_ip_address: Option<bool>,
    /// The capacity reservation the template targets, and whether it is a capacity block (whose
    /// market type the template sets).
    pub capacity_reservation: Option<(String, bool)>,
    /// `placementGroupSelector`: the placement group, by name or by id.
    pub placement_group: Option<PlacementGroupSelector>,
    /// The partition of a partition group the launch targets (left out of the name's hash when
    /// unset, so templates named before it keep their names).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partition: Option<i32>,
    /// `networkInterfaces` (empty: one interface on card 0, device 0).
    pub network_interfaces: Vec<NetworkInterface>,
    /// `ipPrefixCount`: IPv4 prefixes on each `interface` (prefix delegation).
    pub ip_prefix_count: Option<i32>,
    pub connection_tracking: Option<ConnectionTracking>,
    /// `cpuOptions.nestedVirtualization` (`enabled` or `disabled`).
    pub nested_virtualization: Option<String>,
    /// `enclaveOptions.enabled`: Nitro Enclaves on (left out of the name's hash when off, so
    /// templates named before it keep their names).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub enclaves: bool,
    /// Tags on the template itself.
    pub tags: BTreeMap<String, String>,
}

impl LaunchTemplateSpec {
    /// `fleetwright/<cluster>/<hash of the content>`.
    pub fn name(&self, cluster: &str) -> String {
        // Plain strings and lists only: serializing cannot fail, and an empty hash input would
        // still name a template, not abort the invocation.
        let json = serde_json::to_vec(self).unwrap_or_default();
        let hash = hex(&Sha256::digest(&json));
        format!("fleetwright/{cluster}/{}", &hash[..20])
    }
}

/// The launch template content for one AMI of a node class.
pub fn spec(
    class: &EC2NodeClassSpec,
    resolved: &ResolvedNodeClass,
    image_id: &str,
    user_data: String,
    tags: BTreeMap<String, String>,
) -> Result<LaunchTemplateSpec, AwsError> {
    let metadata = class.metadata_options.clone().unwrap_or_default();
    let nodeclass = resolved.name.as_str();
    let family = resolved.family;
    Ok(LaunchTemplateSpec {
        image_id: image_id.to_string(),
        user_data,
        block_devices: block_devices(nodeclass, family, class.block_device_mappings())?,
        http_endpoint: metadata.http_endpoint.unwrap_or_else(|| "enabled".into()),
        http_tokens: metadata.http_tokens.unwrap_or_else(|| "required".into()),
        http_put_response_hop_limit: metadata.http_put_response_hop_limit.unwrap_or(1) as i32,
        http_protocol_ipv6: metadata
            .http_protocol_ipv6
            .unwrap_or_else(|| "disabled".into()),
        security_groups: resolved.security_groups.clone(),
        instance_profile: resolved.instance_profile.clone(),
        detailed_monitoring: class.detailed_monitoring.unwrap_or(false),
        associate_public_ip_address: class.associate_public_ip_address,
        capacity_reservation: None,
        placement_group: class.placement_group_selector.clone(),
        partition: None,
        network_interfaces: class.network_interfaces.clone().unwrap_or_default(),
        ip_prefix_count: class.ip_prefix_count,
        connection_tracking: class.connection_tracking.clone(),
        nested_virtualization: class
            .cpu_options
            .as_ref()
            .and_then(|c| c.nested_virtualization.clone()),
        enclaves: class.enclave_options.as_ref().is_some_and(|e| e.enabled),
        tags,
    })
}

/// The node class's block devices, or the family's defaults: a 20Gi encrypted gp3 root volume
/// (Bottlerocket: a 4Gi OS volume plus a 20Gi data volume).
pub fn block_devices(
    nodeclass: &str,
    family: AmiFamily,
    mappings: &[BlockDeviceMapping],
) -> Result<Vec<BlockDevice>, AwsError> {
    let default = |name: &str, size: i32| BlockDevice {
        device_name: name.into(),
        size_gib: size,
        volume_type: "gp3".into(),
        encrypted: true,
        iops: None,
        throughput: None,
        kms_key_id: None,
        snapshot_id: None,
        delete_on_termination: true,
    };
    if mappings.is_empty() {
        return Ok(match family {
            AmiFamily::Bottlerocket => vec![default("/dev/xvda", 4), default("/dev/xvdb", 20)],
            _ => vec![default("/dev/xvda", 20)],
        });
    }
    mappings
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let field = |f: &str| format!("blockDeviceMappings[{i}].{f}");
            let device_name = m.device_name.clone().ok_or_else(|| {
                AwsError::nodeclass(nodeclass, &field("deviceName"), "is required")
            })?;
            let ebs = m.ebs.clone().unwrap_or_default();
            let size_gib = match &ebs.volume_size {
                Some(text) => {
                    let bytes = parse_scaled(text, 1)
                        .map_err(|e| AwsError::nodeclass(nodeclass, &field("ebs.volumeSize"), e))?;
                    ((bytes + (1 << 30) - 1) >> 30) as i32
                }
                None => 20,
            };
            Ok(BlockDevice {
                device_name,
                size_gib,
                volume_type: ebs.volume_type.unwrap_or_else(|| "gp3".into()),
                encrypted: ebs.encrypted.unwrap_or(true),
                iops: ebs.iops.map(|v| v as i32),
                throughput: ebs.throughput.map(|v| v as i32),
                kms_key_id: ebs.kms_key_id,
                snapshot_id: ebs.snapshot_id,
                delete_on_termination: ebs.delete_on_termination.unwrap_or(true),
            })
        })
        .collect()
}

/// The SDK request data for a spec.
pub fn request_data(spec: &LaunchTemplateSpec) -> RequestLaunchTemplateData {
    let user_data = base64::engine::general_purpose::STANDARD.encode(&spec.user_data);
    let mut data = RequestLaunchTemplateData::builder()
        .image_id(&spec.image_id)
        .user_data(user_data)
        .iam_instance_profile(
            LaunchTemplateIamInstanceProfileSpecificationRequest::builder()
                .name(&spec.instance_profile)
                .build(),
        )
        .monitoring(
            LaunchTemplatesMonitoringRequest::builder()
                .enabled(spec.detailed_monitoring)
                .build(),
        )
        .metadata_options(
            LaunchTemplateInstanceMetadataOptionsRequest::builder()
                .http_endpoint(LaunchTemplateInstanceMetadataEndpointState::from(
                    spec.http_endpoint.as_str(),
                ))
                .http_tokens(LaunchTemplateHttpTokensState::from(
                    spec.http_tokens.as_str(),
                ))
                .http_put_response_hop_limit(spec.http_put_response_hop_limit)
                .http_protocol_ipv6(LaunchTemplateInstanceMetadataProtocolIpv6::from(
                    spec.http_protocol_ipv6.as_str(),
                ))
                .build(),
        )
        .set_block_device_mappings(Some(
            spec.block_devices
                .iter()
                .map(block_device_request)
                .collect(),
        ));
    if let Some((id, block)) = &spec.capacity_reservation {
        data = data.capacity_reservation_specification(
            LaunchTemplateCapacityReservationSpecificationRequest::builder()
                .capacity_reservation_target(
                    CapacityReservationTarget::builder()
                        .capacity_reservation_id(id)
                        .build(),
                )
                .build(),
        );
        if *block {
            data = data.instance_market_options(
                LaunchTemplateInstanceMarketOptionsRequest::builder()
                    .market_type(MarketType::CapacityBlock)
                    .build(),
            );
        }
    }
    if let Some(pg) = &spec.placement_group {
        data = data.placement(
            LaunchTemplatePlacementRequest::builder()
                .set_group_name(pg.name.clone())
                .set_group_id(pg.id.clone())
                .set_partition_number(spec.partition)
                .build(),
        );
    }
    if spec.enclaves {
        data = data.enclave_options(
            LaunchTemplateEnclaveOptionsRequest::builder()
                .enabled(true)
                .build(),
        );
    }
    if let Some(nested) = &spec.nested_virtualization {
        data = data.cpu_options(
            LaunchTemplateCpuOptionsRequest::builder()
                .nested_virtualization(NestedVirtualizationSpecification::from(nested.as_str()))
                .build(),
        );
    }
    let custom = !spec.network_interfaces.is_empty()
        || spec.ip_prefix_count.is_some()
        || spec.connection_tracking.is_some();
    data = match (custom, spec.associate_public_ip_address) {
        (false, None) => data.set_security_group_ids(Some(spec.security_groups.clone())),
        _ => data.set_network_interfaces(Some(network_interfaces(spec))),
    };
    data.build()
}

/// The template's network interfaces, when the class shapes them (or asks for a public IP):
/// each with the class's security groups, deleted with the instance; `efa-only` ones as EFA.
/// A public address and the prefixes go on the primary `interface`.
fn network_interfaces(
    spec: &LaunchTemplateSpec,
) -> Vec<LaunchTemplateInstanceNetworkInterfaceSpecificationRequest> {
    let default = [NetworkInterface {
        network_card_index: 0,
        device_index: 0,
        interface_type: "interface".into(),
    }];
    let list = if spec.network_interfaces.is_empty() {
        &default[..]
    } else {
        &spec.network_interfaces[..]
    };
    list.iter()
        .map(|n| {
            let primary = n.network_card_index == 0 && n.device_index == 0;
            let plain = n.interface_type == "interface";
            let tracking = spec.connection_tracking.as_ref().map(|c| {
                ConnectionTrackingSpecificationRequest::builder()
                    .set_tcp_established_timeout(c.tcp_established_timeout)
                    .set_udp_stream_timeout(c.udp_stream_timeout)
                    .set_udp_timeout(c.udp_timeout)
                    .build()
            });
            LaunchTemplateInstanceNetworkInterfaceSpecificationRequest::builder()
                .network_card_index(n.network_card_index)
                .device_index(n.device_index)
                .set_interface_type((!plain).then(|| n.interface_type.clone()))
                .set_groups(Some(spec.security_groups.clone()))
                .delete_on_termination(true)
                .set_associate_public_ip_address(
                    spec.associate_public_ip_address.filter(|_| primary),
                )
                .set_ipv4_prefix_count(spec.ip_prefix_count.filter(|_| plain))
                .set_connection_tracking_specification(tracking)
                .build()
        })
        .collect()
}

fn block_device_request(d: &BlockDevice) -> LaunchTemplateBlockDeviceMappingRequest {
    LaunchTemplateBlockDeviceMappingRequest::builder()
        .device_name(&d.device_name)
        .ebs(
            LaunchTemplateEbsBlockDeviceRequest::builder()
                .volume_size(d.size_gib)
                .volume_type(VolumeType::from(d.volume_type.as_str()))
                .encrypted(d.encrypted)
                .delete_on_termination(d.delete_on_termination)
                .set_iops(d.iops)
                .set_throughput(d.throughput)
                .set_kms_key_id(d.kms_key_id.clone())
                .set_snapshot_id(d.snapshot_id.clone())
                .build(),
        )
        .build()
}

pub(crate) fn tags(tags: &BTreeMap<String, String>) -> Vec<Tag> {
    tags.iter()
        .map(|(k, v)| Tag::builder().key(k).value(v).build())
        .collect()
}

/// Makes sure the template for `spec` exists; returns its name. Finds it by name first, so a
/// second call (or a second container) reuses it.
#[instrument(skip(ec2, spec), fields(image_id = %spec.image_id))]
pub async fn ensure(
    ec2: &aws_sdk_ec2::Client,
    cluster: &str,
    spec: &LaunchTemplateSpec,
) -> Result<String, AwsError> {
    let name = spec.name(cluster);
    let found = ec2
        .describe_launch_templates()
        .launch_template_names(&name)
        .send()
        .await;
    match found {
        Ok(out) if !out.launch_templates().is_empty() => return Ok(name),
        Ok(_) => {}
        Err(e) if is_not_found(&e) => {}
        Err(e) => return Err(crate::error::api("DescribeLaunchTemplates", e)),
    }
    let created = ec2
        .create_launch_template()
        .launch_template_name(&name)
        .launch_template_data(request_data(spec))
        .tag_specifications(
            TagSpecification::builder()
                .resource_type(ResourceType::LaunchTemplate)
                .set_tags(Some(tags(&spec.tags)))
                .build(),
        )
        .send()
        .await;
    match created {
        Ok(_) => {
            info!(launch_template = %name, "created launch template");
            Ok(name)
        }
        Err(e)
            if aws_sdk_ec2::error::ProvideErrorMetadata::code(&e)
                == Some("InvalidLaunchTemplateName.AlreadyExistsException") =>
        {
            Ok(name)
        }
        Err(e) => Err(crate::error::api("CreateLaunchTemplate", e)),
    }
}

fn is_not_found<E: aws_sdk_ec2::error::ProvideErrorMetadata>(e: &E) -> bool {
    e.code().is_some_and(|c| c.contains("NotFound"))
}

#[cfg(test)]
#[path = "../tests/unit/launch_template.rs"]
mod tests;
