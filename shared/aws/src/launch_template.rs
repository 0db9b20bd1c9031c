//! Launch templates: what every node of one (node class, AMI, user data) shares. A template is
//! named by a hash of its content, so it is created once and then found again by name; changing
//! any field gives a new template. Templates are tagged as owned by the cluster.

use std::collections::BTreeMap;

use aws_sdk_ec2::types::{
    CapacityReservationTarget, LaunchTemplateBlockDeviceMappingRequest,
    LaunchTemplateCapacityReservationSpecificationRequest, LaunchTemplateEbsBlockDeviceRequest,
    LaunchTemplateHttpTokensState, LaunchTemplateIamInstanceProfileSpecificationRequest,
    LaunchTemplateInstanceMarketOptionsRequest, LaunchTemplateInstanceMetadataEndpointState,
    LaunchTemplateInstanceMetadataOptionsRequest, LaunchTemplateInstanceMetadataProtocolIpv6,
    LaunchTemplateInstanceNetworkInterfaceSpecificationRequest, LaunchTemplatesMonitoringRequest,
    MarketType, RequestLaunchTemplateData, ResourceType, Tag, TagSpecification, VolumeType,
};
use base64::Engine;
use fleetwright_core::quantity::parse_scaled;
use fleetwright_crds::{BlockDeviceMapping, EC2NodeClassSpec};
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
    /// Tags on the template itself.
    pub tags: BTreeMap<String, String>,
}

impl LaunchTemplateSpec {
    /// `fleetwright/<cluster>/<hash of the content>`.
    pub fn name(&self, cluster: &str) -> String {
        let json = serde_json::to_vec(self).expect("a launch template spec serializes");
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
        block_devices: block_devices(nodeclass, family, &class.block_device_mappings)?,
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
    data = match spec.associate_public_ip_address {
        Some(public) => data.network_interfaces(
            LaunchTemplateInstanceNetworkInterfaceSpecificationRequest::builder()
                .device_index(0)
                .associate_public_ip_address(public)
                .set_groups(Some(spec.security_groups.clone()))
                .build(),
        ),
        None => data.set_security_group_ids(Some(spec.security_groups.clone())),
    };
    data.build()
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
