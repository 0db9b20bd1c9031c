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

pub mod conditions;
mod ec2nodeclass;
pub mod hash;
pub mod validation;

pub use ec2nodeclass::*;

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
    scale = r#"{"specReplicasPath":".spec.replicas","statusReplicasPath":".status.nodes"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = validation::nodepool_spec)]
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
    #[schemars(schema_with = "validation::quantity_map")]
    pub limits: Option<BTreeMap<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
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
    #[schemars(schema_with = "validation::quantity_map")]
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
#[schemars(transform = validation::require_spec)]
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
    #[schemars(schema_with = "validation::template_labels")]
    pub labels: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "BTreeMap<String, String>")]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// The NodeClaim spec a NodePool template stamps out.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = validation::require_class_and_requirements)]
pub struct NodeClaimTemplateSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "validation::pool_node_class_ref")]
    pub node_class_ref: Option<NodeClassRef>,
    #[serde(default)]
    #[schemars(schema_with = "validation::nodepool_requirements")]
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,
    // Unset and empty differ, as for the template's labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Vec<TaintSpec>")]
    pub taints: Option<Vec<TaintSpec>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Vec<TaintSpec>")]
    pub startup_taints: Option<Vec<TaintSpec>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "validation::duration_or_never")]
    pub expire_after: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "validation::duration")]
    pub termination_grace_period: Option<String>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: BTreeMap<String, Value>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimResources {
    #[serde(default)]
    #[schemars(schema_with = "validation::quantity_map", transform = validation::no_default)]
    pub requests: BTreeMap<String, Value>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = validation::require_reference)]
pub struct NodeClassRef {
    #[serde(default)]
    #[schemars(regex(pattern = r"^[^/]*$"), transform = validation::group_not_empty)]
    pub group: String,
    #[serde(default)]
    #[schemars(transform = validation::kind_not_empty)]
    pub kind: String,
    #[schemars(transform = validation::name_not_empty)]
    pub name: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelectorRequirementWithMinValues {
    /// A label key; the owner's schema adds Karpenter's restricted domains.
    pub key: String,
    #[schemars(schema_with = "validation::requirement_operator")]
    pub operator: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 50))]
    pub min_values: Option<usize>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaintSpec {
    #[schemars(length(min = 1), regex(pattern = validation::QUALIFIED_NAME))]
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = validation::QUALIFIED_NAME))]
    pub value: Option<String>,
    #[schemars(schema_with = "validation::taint_effect")]
    pub effect: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub time_added: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Disruption {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "validation::consolidation_policy")]
    pub consolidation_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "validation::duration_or_never")]
    pub consolidate_after: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "validation::budgets")]
    pub budgets: Vec<BudgetSpec>,
}

/// A budget's `nodes` when left out (Karpenter's CRD default).
fn ten_percent() -> String {
    "10%".into()
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BudgetSpec {
    // Defaulted to `10%` when left out, as the API server defaults it from Karpenter's CRD.
    #[serde(default = "ten_percent")]
    #[schemars(schema_with = "validation::budget_nodes")]
    pub nodes: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "validation::budget_schedule")]
    pub schedule: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "validation::budget_duration")]
    pub duration: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "validation::budget_reasons")]
    pub reasons: Vec<String>,
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
#[schemars(transform = validation::nodeclaim_spec)]
pub struct NodeClaimSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_class_ref: Option<NodeClassRef>,
    #[serde(default)]
    #[schemars(schema_with = "validation::nodeclaim_requirements")]
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<TaintSpec>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub startup_taints: Vec<TaintSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "validation::duration_or_never")]
    pub expire_after: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "validation::duration")]
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
    #[schemars(schema_with = "validation::quantity_map")]
    pub capacity: Option<BTreeMap<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "validation::quantity_map")]
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
    printcolumn = r#"{"name":"Weight","type":"integer","jsonPath":".spec.weight","priority":1}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = validation::overlay_spec)]
pub struct NodeOverlaySpec {
    /// The instance types (and offerings: capacity type, zone) it applies to.
    #[serde(default)]
    #[schemars(schema_with = "validation::overlay_requirements")]
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,
    /// An hourly price that replaces the offerings' (`"0.25"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^\d+(\.\d+)?$"))]
    pub price: Option<String>,
    /// A change of the offerings' price: `+0.05`, `-0.02`, `+10%`, `-25%`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = validation::PRICE_ADJUSTMENT))]
    pub price_adjustment: Option<String>,
    /// Extended resources the selected types offer besides their own (not cpu, memory,
    /// ephemeral-storage or pods).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "validation::overlay_capacity")]
    pub capacity: Option<BTreeMap<String, Value>>,
    /// Precedence among overlays that select the same type: the highest wins, then the name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10000))]
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

fn empty_map() -> &'static BTreeMap<String, String> {
    static EMPTY: BTreeMap<String, String> = BTreeMap::new();
    &EMPTY
}

/// The CRDs Fleetwright reads and writes, as `kubectl apply` takes them: NodePool, NodeClaim,
/// EC2NodeClass, and NodeOverlay (read only). They validate as Karpenter v1.15's own CRDs do
/// (the `validation` module): what Karpenter's API server refuses, Fleetwright's refuses too.
///
/// The Rust types keep `nodeClassRef` and `requirements` optional, so that dumps and legacy
/// objects still parse; the schemas require them, as Karpenter's CRDs do.
pub fn definitions() -> Vec<CustomResourceDefinition> {
    use kube::CustomResourceExt;
    let mut crds = vec![
        NodePool::crd(),
        NodeClaim::crd(),
        EC2NodeClass::crd(),
        NodeOverlay::crd(),
    ];
    validation::spec_optional(&mut crds[2]);
    for crd in &mut crds {
        validation::finish(crd);
    }
    crds
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
