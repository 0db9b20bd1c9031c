//! Karpenter's v1 custom resources as Rust types: `NodePool` and `NodeClaim` (`karpenter.sh/v1`)
//! and `EC2NodeClass` (`karpenter.k8s.aws/v1`), defined with `kube::CustomResource` (cluster
//! scoped, with status subresources and Karpenter's printer columns). Field names follow
//! Karpenter's v1 API exactly. Fields Fleetwright does not know are kept in `extra`, so nothing
//! is lost on a round trip; they are left out of the published schema.

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub mod hash;

/// A free-form value in a CRD schema: any JSON, kept as it is.
fn any_value(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "x-kubernetes-preserve-unknown-fields": true })
}

/// A map of resource quantities (numbers or strings).
fn quantity_map(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "additionalProperties": { "anyOf": [{ "type": "integer" }, { "type": "string" }], "x-kubernetes-int-or-string": true }
    })
}

/// A string that must be one of `values` (Karpenter's CRDs enumerate these fields).
fn one_of(values: &[&str]) -> schemars::Schema {
    schemars::json_schema!({ "type": "string", "enum": values })
}

fn requirement_operator(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    one_of(&[
        "In",
        "NotIn",
        "Exists",
        "DoesNotExist",
        "Gt",
        "Lt",
        "Gte",
        "Lte",
    ])
}

fn taint_effect(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    one_of(&["NoSchedule", "PreferNoSchedule", "NoExecute"])
}

fn consolidation_policy(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    one_of(&["WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"])
}

fn budget_reasons(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "items": { "type": "string", "enum": ["Underutilized", "Empty", "Drifted"] }
    })
}

/// `karpenter.sh/v1` NodePool spec.
#[derive(CustomResource, Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[kube(
    group = "karpenter.sh",
    version = "v1",
    kind = "NodePool",
    plural = "nodepools",
    status = "NodePoolStatus",
    category = "karpenter",
    printcolumn = r#"{"name":"NodeClass","type":"string","jsonPath":".spec.template.spec.nodeClassRef.name"}"#,
    printcolumn = r#"{"name":"Nodes","type":"string","jsonPath":".status.resources.nodes"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Weight","type":"integer","jsonPath":".spec.weight","priority":1}"#,
    printcolumn = r#"{"name":"CPU","type":"string","jsonPath":".status.resources.cpu","priority":1}"#,
    printcolumn = r#"{"name":"Memory","type":"string","jsonPath":".status.resources.memory","priority":1}"#,
    scale = r#"{"specReplicasPath":".spec.replicas","statusReplicasPath":".status.nodes"}"#,
    validation = Rule::new("has(self.spec.replicas) == has(oldSelf.spec.replicas)").message("Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes"),
    validation = Rule::new("!has(self.spec.replicas) || !has(self.spec.limits) || size(self.spec.limits) == 0 || (size(self.spec.limits) == 1 && has(self.spec.limits.nodes))").message("only 'limits.nodes' is supported on static NodePools"),
    validation = Rule::new("!has(self.spec.replicas) || !has(self.spec.weight)").message("'weight' cannot be set on static NodePools")
)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolSpec {
    /// A static NodePool: keep exactly this many nodes, whatever the pods (`kubectl scale
    /// nodepool NAME --replicas N` sets it through the scale subresource).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub replicas: Option<i64>,
    #[serde(default)]
    pub template: NodeClaimTemplate,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disruption: Option<Disruption>,
    /// Resource limits; values may be numbers or quantity strings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "quantity_map")]
    pub limits: Option<BTreeMap<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: BTreeMap<String, Value>,
}

/// NodePool status.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "quantity_map")]
    pub resources: Option<BTreeMap<String, Value>>,
    /// How many nodes the pool has (the scale subresource's replicas).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<i64>,
    /// The EC2NodeClass generation last observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_class_observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: BTreeMap<String, Value>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimTemplate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateMetadata>,
    #[serde(default)]
    pub spec: NodeClaimTemplateSpec,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateMetadata {
    // Unset and empty differ here: Karpenter's template hash tells a nil map from an empty one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "BTreeMap<String, String>")]
    pub labels: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "BTreeMap<String, String>")]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// The NodeClaim spec a NodePool template stamps out.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimTemplateSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_class_ref: Option<NodeClassRef>,
    #[serde(default)]
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,
    // Unset and empty differ, as for the template's labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Vec<TaintSpec>")]
    pub taints: Option<Vec<TaintSpec>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Vec<TaintSpec>")]
    pub startup_taints: Option<Vec<TaintSpec>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expire_after: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period: Option<String>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: BTreeMap<String, Value>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimResources {
    #[serde(default)]
    #[schemars(schema_with = "quantity_map")]
    pub requests: BTreeMap<String, Value>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClassRef {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub kind: String,
    pub name: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelectorRequirementWithMinValues {
    pub key: String,
    #[schemars(schema_with = "requirement_operator")]
    pub operator: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_values: Option<usize>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaintSpec {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[schemars(schema_with = "taint_effect")]
    pub effect: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_added: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Disruption {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "consolidation_policy")]
    pub consolidation_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consolidate_after: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub budgets: Vec<BudgetSpec>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BudgetSpec {
    pub nodes: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "budget_reasons")]
    pub reasons: Vec<String>,
}

/// `karpenter.k8s.aws/v1` EC2NodeClass spec.
#[derive(CustomResource, Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[kube(
    group = "karpenter.k8s.aws",
    version = "v1",
    kind = "EC2NodeClass",
    plural = "ec2nodeclasses",
    status = "EC2NodeClassStatus",
    category = "karpenter",
    shortname = "ec2nc",
    shortname = "ec2ncs",
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Role","type":"string","jsonPath":".spec.role","priority":1}"#
)]
#[serde(rename_all = "camelCase")]
pub struct EC2NodeClassSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ami_family: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ami_selector_terms: Vec<SelectorTerm>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subnet_selector_terms: Vec<SelectorTerm>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub security_group_selector_terms: Vec<SelectorTerm>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capacity_reservation_selector_terms: Vec<SelectorTerm>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_profile: Option<String>,
    // Unset and empty differ here and for the block device mappings: Karpenter's EC2NodeClass
    // hash tells a nil map or list from an empty one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "BTreeMap<String, String>")]
    pub tags: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet: Option<KubeletConfiguration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Vec<BlockDeviceMapping>")]
    pub block_device_mappings: Option<Vec<BlockDeviceMapping>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_store_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_options: Option<MetadataOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detailed_monitoring: Option<bool>,
    #[serde(
        default,
        rename = "associatePublicIPAddress",
        skip_serializing_if = "Option::is_none"
    )]
    pub associate_public_ip_address: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// The placement group instances launch into (by name or id; Karpenter v1.x).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement_group_selector: Option<PlacementGroupSelector>,
    /// Network interfaces per network card (EFA-only ones included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_interfaces: Option<Vec<NetworkInterface>>,
    /// How many IPv4 prefixes each ENI gets (prefix delegation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_prefix_count: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_tracking: Option<ConnectionTracking>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_options: Option<CpuOptions>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: BTreeMap<String, Value>,
}

/// `placementGroupSelector`: one of `name` or `id`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlacementGroupSelector {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// One of `networkInterfaces`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkInterface {
    pub network_card_index: i32,
    pub device_index: i32,
    /// `interface` or `efa-only`.
    pub interface_type: String,
}

/// `connectionTracking` timeouts, in seconds.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionTracking {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_established_timeout: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp_stream_timeout: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp_timeout: Option<i32>,
}

/// `cpuOptions`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CpuOptions {
    /// `enabled` or `disabled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nested_virtualization: Option<String>,
}

/// A capacity reservation the EC2NodeClass selects, as its status lists it.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityReservation {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub availability_zone: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_match_criteria: Option<String>,
    #[serde(default, rename = "ownerID", skip_serializing_if = "Option::is_none")]
    pub owner_id: Option<String>,
    /// `default` or `capacity-block`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation_type: Option<String>,
    /// `active` or `expiring`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interruptible: Option<bool>,
    /// Instances the reservation can still take, as DescribeCapacityReservations last said
    /// (Fleetwright writes it; Karpenter keeps the count in memory). Unset counts as none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_instance_count: Option<u32>,
}

/// EC2NodeClass status: what discovery resolved.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EC2NodeClassStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "any_value")]
    pub subnets: Vec<Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "any_value")]
    pub security_groups: Vec<Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "any_value")]
    pub amis: Vec<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_profile: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capacity_reservations: Vec<CapacityReservation>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: BTreeMap<String, Value>,
}

/// A selector term: by tags, id, name, owner or (AMIs) alias and SSM parameter.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SelectorTerm {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssm_parameter: Option<String>,
    #[serde(default, rename = "ownerID", skip_serializing_if = "Option::is_none")]
    pub owner_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_match_criteria: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeletConfiguration {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_pods: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods_per_core: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_reserved: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_reserved: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_hard: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_soft: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_soft_grace_period: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_max_pod_grace_period: Option<i64>,
    #[serde(
        default,
        rename = "imageGCHighThresholdPercent",
        skip_serializing_if = "Option::is_none"
    )]
    pub image_gc_high_threshold_percent: Option<i64>,
    #[serde(
        default,
        rename = "imageGCLowThresholdPercent",
        skip_serializing_if = "Option::is_none"
    )]
    pub image_gc_low_threshold_percent: Option<i64>,
    #[serde(
        default,
        rename = "cpuCFSQuota",
        skip_serializing_if = "Option::is_none"
    )]
    pub cpu_cfs_quota: Option<bool>,
    #[serde(
        default,
        rename = "clusterDNS",
        skip_serializing_if = "Option::is_none"
    )]
    pub cluster_dns: Option<Vec<String>>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: BTreeMap<String, Value>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlockDeviceMapping {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_volume: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ebs: Option<BlockDevice>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlockDevice {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_size: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iops: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput: Option<i64>,
    #[serde(default, rename = "kmsKeyID", skip_serializing_if = "Option::is_none")]
    pub kms_key_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_on_termination: Option<bool>,
    #[serde(
        default,
        rename = "snapshotID",
        skip_serializing_if = "Option::is_none"
    )]
    pub snapshot_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_initialization_rate: Option<i64>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetadataOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_endpoint: Option<String>,
    #[serde(
        default,
        rename = "httpProtocolIPv6",
        skip_serializing_if = "Option::is_none"
    )]
    pub http_protocol_ipv6: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_put_response_hop_limit: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_tokens: Option<String>,
}

/// `karpenter.sh/v1` NodeClaim spec.
#[derive(CustomResource, Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[kube(
    group = "karpenter.sh",
    version = "v1",
    kind = "NodeClaim",
    plural = "nodeclaims",
    status = "NodeClaimStatus",
    category = "karpenter",
    printcolumn = r#"{"name":"Type","type":"string","jsonPath":".metadata.labels.node\\.kubernetes\\.io/instance-type"}"#,
    printcolumn = r#"{"name":"Capacity","type":"string","jsonPath":".metadata.labels.karpenter\\.sh/capacity-type"}"#,
    printcolumn = r#"{"name":"Zone","type":"string","jsonPath":".metadata.labels.topology\\.kubernetes\\.io/zone"}"#,
    printcolumn = r#"{"name":"Node","type":"string","jsonPath":".status.nodeName"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"ID","type":"string","jsonPath":".status.providerID","priority":1}"#,
    printcolumn = r#"{"name":"NodePool","type":"string","jsonPath":".metadata.labels.karpenter\\.sh/nodepool","priority":1}"#,
    printcolumn = r#"{"name":"NodeClass","type":"string","jsonPath":".spec.nodeClassRef.name","priority":1}"#
)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_class_ref: Option<NodeClassRef>,
    #[serde(default)]
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<TaintSpec>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub startup_taints: Vec<TaintSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expire_after: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<NodeClaimResources>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: BTreeMap<String, Value>,
}

/// NodeClaim status, filled in as the instance launches, registers and initialises.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimStatus {
    #[serde(
        default,
        rename = "providerID",
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    #[serde(default, rename = "imageID", skip_serializing_if = "Option::is_none")]
    pub image_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "quantity_map")]
    pub capacity: Option<BTreeMap<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "quantity_map")]
    pub allocatable: Option<BTreeMap<String, Value>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_pod_event_time: Option<String>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: BTreeMap<String, Value>,
}

/// A status condition.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// `karpenter.sh/v1alpha1` NodeOverlay spec: what the scheduling simulation should believe of the
/// instance types its requirements select (a price, a price adjustment, extra capacity).
#[derive(CustomResource, Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[kube(
    group = "karpenter.sh",
    version = "v1alpha1",
    kind = "NodeOverlay",
    plural = "nodeoverlays",
    status = "NodeOverlayStatus",
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Weight","type":"integer","jsonPath":".spec.weight","priority":1}"#,
    validation = Rule::new("!has(self.spec.price) || !has(self.spec.priceAdjustment)").message("cannot set both 'price' and 'priceAdjustment'")
)]
#[serde(rename_all = "camelCase")]
pub struct NodeOverlaySpec {
    /// The instance types (and offerings: capacity type, zone) it applies to.
    #[serde(default)]
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,
    /// An hourly price that replaces the offerings' (`"0.25"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^\d+(\.\d+)?$"))]
    pub price: Option<String>,
    /// A change of the offerings' price: `+0.05`, `-0.02`, `+10%`, `-25%`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_adjustment: Option<String>,
    /// Extended resources the selected types offer besides their own (not cpu, memory,
    /// ephemeral-storage or pods).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "quantity_map")]
    pub capacity: Option<BTreeMap<String, Value>>,
    /// Precedence among overlays that select the same type: the highest wins, then the name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: BTreeMap<String, Value>,
}

/// NodeOverlay status.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeOverlayStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

impl TemplateMetadata {
    /// The labels (none when unset).
    pub fn labels(&self) -> &BTreeMap<String, String> {
        self.labels.as_ref().unwrap_or(empty_map())
    }

    /// The annotations (none when unset).
    pub fn annotations(&self) -> &BTreeMap<String, String> {
        self.annotations.as_ref().unwrap_or(empty_map())
    }
}

impl NodeClaimTemplateSpec {
    /// The taints (none when unset).
    pub fn taints(&self) -> &[TaintSpec] {
        self.taints.as_deref().unwrap_or_default()
    }

    /// The startup taints (none when unset).
    pub fn startup_taints(&self) -> &[TaintSpec] {
        self.startup_taints.as_deref().unwrap_or_default()
    }
}

impl EC2NodeClassSpec {
    /// The tags (none when unset).
    pub fn tags(&self) -> &BTreeMap<String, String> {
        self.tags.as_ref().unwrap_or(empty_map())
    }

    /// The block device mappings (none when unset).
    pub fn block_device_mappings(&self) -> &[BlockDeviceMapping] {
        self.block_device_mappings.as_deref().unwrap_or_default()
    }
}

fn empty_map() -> &'static BTreeMap<String, String> {
    static EMPTY: BTreeMap<String, String> = BTreeMap::new();
    &EMPTY
}

/// The CRDs Fleetwright reads and writes, as `kubectl apply` takes them: NodePool, NodeClaim,
/// EC2NodeClass, and NodeOverlay (read only).
///
/// The Rust types keep `nodeClassRef` and `requirements` optional, so that dumps and legacy
/// objects still parse; the schemas require them, as Karpenter's CRDs do, so the API server
/// refuses a NodePool template or a NodeClaim without them (found against a real
/// kube-apiserver: with only the types' schema it accepted both).
pub fn definitions() -> Vec<CustomResourceDefinition> {
    use kube::CustomResourceExt;
    let mut pool = NodePool::crd();
    require(
        &mut pool,
        &["spec", "template", "spec"],
        &["nodeClassRef", "requirements"],
    );
    let mut claim = NodeClaim::crd();
    require(&mut claim, &["spec"], &["nodeClassRef", "requirements"]);
    vec![pool, claim, EC2NodeClass::crd(), NodeOverlay::crd()]
}

/// Marks `fields` of the object at `path` (under the root's `properties`) required in every
/// version's schema, and drops their defaults (a default would fill a missing field in before
/// validation) and those of the objects along the path (the API server refuses a CRD whose
/// default would break its own schema).
fn require(crd: &mut CustomResourceDefinition, path: &[&str], fields: &[&str]) {
    for version in &mut crd.spec.versions {
        let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        else {
            continue;
        };
        let mut node = schema;
        for step in path {
            let Some(next) = node.properties.as_mut().and_then(|p| p.get_mut(*step)) else {
                return;
            };
            next.default = None;
            node = next;
        }
        let required = node.required.get_or_insert_with(Vec::new);
        for field in fields {
            if !required.iter().any(|r| r == field) {
                required.push(field.to_string());
            }
            if let Some(property) = node.properties.as_mut().and_then(|p| p.get_mut(*field)) {
                property.default = None;
            }
        }
    }
}

/// The CRDs as one multi-document YAML stream.
pub fn definitions_yaml() -> Result<String, serde_yaml::Error> {
    let mut out = String::new();
    for crd in definitions() {
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(&crd)?);
    }
    Ok(out)
}
