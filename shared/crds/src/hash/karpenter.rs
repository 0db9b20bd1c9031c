//! The Rust CRD types as Karpenter's Go types, for hashing: `NodePool.Hash()` (the template,
//! `sigs.k8s.io/karpenter/pkg/apis/v1`) and `EC2NodeClass.Hash(caBundle)` (the spec, the
//! resolved AMI family, the cluster's CA bundle and the kubelet settings' JSON,
//! `aws/karpenter-provider-aws/pkg/apis/v1`). Field order, names, widths and tags follow the Go
//! declarations of Karpenter v1.15.

use serde_json::Value;

use super::go::{go_json, hash, quantity_string, Field, Go};
use super::{go_duration_nanos, HashError};
use crate::{
    BlockDevice, BlockDeviceMapping, EC2NodeClassSpec, KubeletConfiguration, NodeClaimTemplate,
    TaintSpec,
};

/// `karpenter.sh/nodepool-hash-version` of the hash [`nodepool_hash`] computes.
pub const NODEPOOL_HASH_VERSION: &str = "v3";
/// `karpenter.k8s.aws/ec2nodeclass-hash-version` of the hash [`ec2nodeclass_hash`] computes.
pub const EC2NODECLASS_HASH_VERSION: &str = "v6";

/// `NodePool.Hash()`: the template's labels, annotations, taints, startup taints,
/// `nodeClassRef`, `terminationGracePeriod` and `expireAfter` (its requirements are tagged
/// `hash:"ignore"`: they are checked against the node's labels instead), in decimal as
/// Karpenter writes it.
pub fn nodepool_hash(template: &NodeClaimTemplate) -> Result<String, HashError> {
    Ok(hash(&node_claim_template(template)?).to_string())
}

/// `EC2NodeClass.Hash(caBundle)`: the spec but its selector terms, `amiFamily`,
/// `ipPrefixCount` and `kubelet`; the AMI family as Karpenter resolves it (the field, else the
/// alias's family, else `Custom`); the cluster's CA bundle as Karpenter holds it (the base64 of
/// the CA it trusts; `""` when unknown); and the kubelet settings as one JSON string (a map of
/// raw JSON hashed field by field would let a permutation of a value's bytes collide).
pub fn ec2nodeclass_hash(spec: &EC2NodeClassSpec, ca_bundle: &str) -> Result<String, HashError> {
    let family = ami_family(spec)?;
    let parts = Go::Slice(Some(vec![
        ec2_node_class_spec(spec)?,
        Go::str(family),
        Go::str(ca_bundle),
        Go::str(kubelet_string(spec.kubelet.as_ref())?),
    ]));
    Ok(hash(&parts).to_string())
}

fn node_claim_template(t: &NodeClaimTemplate) -> Result<Go, HashError> {
    let meta = t.metadata.clone().unwrap_or_default();
    let spec = &t.spec;
    let object_meta = Go::Struct(
        "ObjectMeta",
        vec![
            Field::new("Labels", Go::string_map(meta.labels.as_ref())),
            Field::new("Annotations", Go::string_map(meta.annotations.as_ref())),
        ],
    );
    let class_ref = spec.node_class_ref.as_ref().map(|r| {
        Go::Struct(
            "NodeClassReference",
            vec![
                Field::new("Kind", Go::str(r.kind.as_str())),
                Field::new("Name", Go::str(r.name.as_str())),
                Field::new("Group", Go::str(r.group.as_str())),
            ],
        )
    });
    let grace = spec
        .termination_grace_period
        .as_deref()
        .map(|d| duration(d, "spec.template.spec.terminationGracePeriod"))
        .transpose()?
        .map(metav1_duration);
    let expire_after = nillable_duration(spec.expire_after.as_deref())?;
    let template_spec = Go::Struct(
        "NodeClaimTemplateSpec",
        vec![
            Field::new("Taints", taints(spec.taints.as_deref(), "taints")?),
            Field::new(
                "StartupTaints",
                taints(spec.startup_taints.as_deref(), "startupTaints")?,
            ),
            Field::ignored("Requirements", present(!spec.requirements.is_empty())),
            Field::new("NodeClassRef", Go::ptr(class_ref)),
            Field::new("TerminationGracePeriod", Go::ptr(grace)),
            Field::new("ExpireAfter", expire_after),
        ],
    );
    Ok(Go::Struct(
        "NodeClaimTemplate",
        vec![
            Field::new("ObjectMeta", object_meta),
            Field::new("Spec", template_spec),
        ],
    ))
}

fn taints(list: Option<&[TaintSpec]>, field: &str) -> Result<Go, HashError> {
    let Some(list) = list else {
        return Ok(Go::Slice(None));
    };
    let taints = list
        .iter()
        .map(|t| {
            let added = t
                .time_added
                .as_deref()
                .map(|at| time(at, &format!("spec.template.spec.{field}[].timeAdded")))
                .transpose()?;
            Ok(Go::Struct(
                "Taint",
                vec![
                    Field::new("Key", Go::str(t.key.as_str())),
                    Field::new("Value", Go::str(t.value.clone().unwrap_or_default())),
                    Field::new("Effect", Go::str(t.effect.as_str())),
                    Field::new(
                        "TimeAdded",
                        Go::ptr(added.map(|a| Go::Struct("Time", vec![Field::new("Time", a)]))),
                    ),
                ],
            ))
        })
        .collect::<Result<Vec<_>, HashError>>()?;
    Ok(Go::Slice(Some(taints)))
}

fn duration(text: &str, field: &str) -> Result<i64, HashError> {
    go_duration_nanos(text).map_err(|reason| HashError {
        field: field.into(),
        reason,
    })
}

/// A `metav1.Duration`.
fn metav1_duration(nanos: i64) -> Go {
    Go::Struct("Duration", vec![Field::new("Duration", Go::Int64(nanos))])
}

/// Karpenter's `NillableDuration` (`expireAfter`): `Never` (or unset) is its zero value; a
/// duration points at its nanoseconds (its raw JSON is `hash:"ignore"`).
fn nillable_duration(text: Option<&str>) -> Result<Go, HashError> {
    let nanos = text
        .filter(|t| *t != "Never")
        .map(|t| duration(t, "spec.template.spec.expireAfter"))
        .transpose()?;
    Ok(Go::Struct(
        "NillableDuration",
        vec![
            Field::new("Duration", Go::ptr(nanos.map(Go::Int64))),
            Field::ignored("Raw", present(nanos.is_some())),
        ],
    ))
}

/// An RFC 3339 timestamp as `metav1.Time` reads it.
fn time(at: &str, field: &str) -> Result<Go, HashError> {
    let ts: k8s_openapi::jiff::Timestamp = at.parse().map_err(|e| HashError {
        field: field.into(),
        reason: format!("{at:?} is not an RFC 3339 time: {e}"),
    })?;
    Ok(Go::Time {
        unix: ts.as_second(),
        nanos: ts.subsec_nanosecond().unsigned_abs(),
    })
}

/// `EC2NodeClass.AMIFamily()`.
fn ami_family(spec: &EC2NodeClassSpec) -> Result<String, HashError> {
    if let Some(family) = &spec.ami_family {
        return Ok(family.clone());
    }
    let Some(alias) = spec
        .ami_selector_terms
        .iter()
        .find_map(|t| t.alias.as_deref().filter(|a| !a.is_empty()))
    else {
        return Ok("Custom".into());
    };
    let bad = || HashError {
        field: "spec.amiSelectorTerms[].alias".into(),
        reason: format!("{alias:?} is not FAMILY@VERSION with a family Karpenter knows"),
    };
    let (family, _version) = alias.split_once('@').ok_or_else(bad)?;
    [
        "AL2",
        "AL2023",
        "Bottlerocket",
        "Windows2019",
        "Windows2022",
        "Windows2025",
    ]
    .into_iter()
    .find(|known| known.to_lowercase() == family)
    .map(str::to_string)
    .ok_or_else(bad)
}

/// What an ignored field is reduced to: it is never hashed, only tested for Go's zero value,
/// so whether it is set is all that counts.
fn present(set: bool) -> Go {
    Go::ptr(set.then_some(Go::Bool(true)))
}

fn opt_str(value: &Option<String>) -> Go {
    Go::ptr(value.as_deref().map(Go::str))
}

fn opt_bool(value: Option<bool>) -> Go {
    Go::ptr(value.map(Go::Bool))
}

fn opt_i64(value: Option<i64>) -> Go {
    Go::ptr(value.map(Go::Int64))
}

/// An `*int32` field, refused when the value does not fit.
fn opt_i32(value: Option<i64>, field: &str) -> Result<Go, HashError> {
    value
        .map(|v| {
            i32::try_from(v).map(Go::Int32).map_err(|_| HashError {
                field: field.into(),
                reason: format!("{v} does not fit a 32-bit integer"),
            })
        })
        .transpose()
        .map(Go::ptr)
}

fn ec2_node_class_spec(s: &EC2NodeClassSpec) -> Result<Go, HashError> {
    let placement = s.placement_group_selector.as_ref().map(|p| {
        Go::Struct(
            "PlacementGroupSelector",
            vec![
                Field::new("Name", opt_str(&p.name)),
                Field::new("ID", opt_str(&p.id)),
            ],
        )
    });
    let devices = s
        .block_device_mappings
        .as_ref()
        .map(|list| list.iter().map(block_device_mapping).collect())
        .transpose()?;
    let interfaces = s.network_interfaces.as_ref().map(|list| {
        list.iter()
            .map(|n| {
                Go::Struct(
                    "NetworkInterface",
                    vec![
                        Field::new("NetworkCardIndex", Go::Int32(n.network_card_index)),
                        Field::new("DeviceIndex", Go::Int32(n.device_index)),
                        Field::new("InterfaceType", Go::str(n.interface_type.as_str())),
                    ],
                )
            })
            .collect()
    });
    let metadata = s.metadata_options.as_ref().map(|m| {
        Go::Struct(
            "MetadataOptions",
            vec![
                Field::new("HTTPEndpoint", opt_str(&m.http_endpoint)),
                Field::new("HTTPProtocolIPv6", opt_str(&m.http_protocol_ipv6)),
                Field::new(
                    "HTTPPutResponseHopLimit",
                    opt_i64(m.http_put_response_hop_limit),
                ),
                Field::new("HTTPTokens", opt_str(&m.http_tokens)),
            ],
        )
    });
    let enclave = s.enclave_options.as_ref().map(|e| {
        Go::Struct(
            "EnclaveOptions",
            vec![Field::new("Enabled", Go::Bool(e.enabled))],
        )
    });
    let tracking = s.connection_tracking.as_ref().map(|c| {
        let timeout = |v: Option<i32>| Go::ptr(v.map(Go::Int32));
        Go::Struct(
            "ConnectionTracking",
            vec![
                Field::new("TCPEstablishedTimeout", timeout(c.tcp_established_timeout)),
                Field::new("UDPStreamTimeout", timeout(c.udp_stream_timeout)),
                Field::new("UDPTimeout", timeout(c.udp_timeout)),
            ],
        )
    });
    let cpu = s.cpu_options.as_ref().map(|c| {
        Go::Struct(
            "CPUOptions",
            vec![Field::new(
                "NestedVirtualization",
                opt_str(&c.nested_virtualization),
            )],
        )
    });
    Ok(Go::Struct(
        "EC2NodeClassSpec",
        vec![
            Field::ignored(
                "SubnetSelectorTerms",
                present(!s.subnet_selector_terms.is_empty()),
            ),
            Field::ignored(
                "SecurityGroupSelectorTerms",
                present(!s.security_group_selector_terms.is_empty()),
            ),
            Field::ignored(
                "CapacityReservationSelectorTerms",
                present(!s.capacity_reservation_selector_terms.is_empty()),
            ),
            Field::new("PlacementGroupSelector", Go::ptr(placement)),
            Field::new(
                "AssociatePublicIPAddress",
                opt_bool(s.associate_public_ip_address),
            ),
            Field::ignored("IPPrefixCount", present(s.ip_prefix_count.is_some())),
            Field::ignored(
                "AMISelectorTerms",
                present(!s.ami_selector_terms.is_empty()),
            ),
            Field::ignored("AMIFamily", present(s.ami_family.is_some())),
            Field::new("UserData", opt_str(&s.user_data)),
            Field::new("Role", Go::str(s.role.clone().unwrap_or_default())),
            Field::new("InstanceProfile", opt_str(&s.instance_profile)),
            Field::new("Tags", Go::string_map(s.tags.as_ref())),
            // `hash:"ignore"`: hashed as `KubeletConfiguration.String()` beside the spec.
            Field::ignored("Kubelet", present(s.kubelet.is_some())),
            Field::new("BlockDeviceMappings", Go::Slice(devices)),
            Field::new("InstanceStorePolicy", opt_str(&s.instance_store_policy)),
            Field::new("NetworkInterfaces", Go::Slice(interfaces)),
            Field::new("DetailedMonitoring", opt_bool(s.detailed_monitoring)),
            Field::new("MetadataOptions", Go::ptr(metadata)),
            Field::new("EnclaveOptions", Go::ptr(enclave)),
            Field::new("ConnectionTracking", Go::ptr(tracking)),
            Field::new("Context", opt_str(&s.context)),
            Field::new("CPUOptions", Go::ptr(cpu)),
        ],
    ))
}

/// `KubeletConfiguration.String()`: `null` for no settings (unset or `{}`), else the settings as
/// `json.Marshal` writes Karpenter's map of raw JSON, keys sorted. The typed fields and the
/// others are written back alike: the API server drops a top-level `null` here (the map's
/// values are not nullable), so every key present holds a value that reads back unchanged.
fn kubelet_string(k: Option<&KubeletConfiguration>) -> Result<String, HashError> {
    let Some(k) = k else {
        return Ok("null".into());
    };
    let value = serde_json::to_value(k).map_err(|e| HashError {
        field: "spec.kubelet".into(),
        reason: e.to_string(),
    })?;
    Ok(match value {
        Value::Object(map) if map.is_empty() => "null".into(),
        other => go_json(&other),
    })
}

fn block_device_mapping(m: &BlockDeviceMapping) -> Result<Go, HashError> {
    let ebs = m.ebs.as_ref().map(block_device).transpose()?;
    Ok(Go::Ptr(Some(Box::new(Go::Struct(
        "BlockDeviceMapping",
        vec![
            Field::new("DeviceName", opt_str(&m.device_name)),
            Field::new("EBS", Go::ptr(ebs)),
            Field::new("RootVolume", Go::Bool(m.root_volume.unwrap_or(false))),
        ],
    )))))
}

fn block_device(d: &BlockDevice) -> Result<Go, HashError> {
    let size = d
        .volume_size
        .as_deref()
        .map(|q| {
            quantity_string(q).map_err(|e| HashError {
                field: "spec.blockDeviceMappings[].ebs.volumeSize".into(),
                reason: e.reason,
            })
        })
        .transpose()?;
    let rate = opt_i32(
        d.volume_initialization_rate,
        "spec.blockDeviceMappings[].ebs.volumeInitializationRate",
    )?;
    Ok(Go::Struct(
        "BlockDevice",
        vec![
            Field::new("DeleteOnTermination", opt_bool(d.delete_on_termination)),
            Field::new("Encrypted", opt_bool(d.encrypted)),
            Field::new("IOPS", opt_i64(d.iops)),
            Field::new("KMSKeyID", opt_str(&d.kms_key_id)),
            Field::new("SnapshotID", opt_str(&d.snapshot_id)),
            Field::new("Throughput", opt_i64(d.throughput)),
            Field::new("VolumeInitializationRate", rate),
            // `hash:"string"`: the quantity's canonical string.
            Field::new("VolumeSize", Go::ptr(size.map(Go::Str))),
            Field::new("VolumeType", opt_str(&d.volume_type)),
        ],
    ))
}
