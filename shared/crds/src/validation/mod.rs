//! Karpenter's validation of its objects, as pieces of the CRD schemas: the patterns, enums,
//! bounds and CEL rules of Karpenter v1.15's own CRDs (durations, quantities, label keys and
//! values, restricted label domains, requirements, taints, budgets, selector terms), attached to
//! the types' fields with `schema_with` and `transform`. Rust's serde defaults are kept out of
//! the schemas (a default would fill a missing field in before validation); the one default
//! here is Karpenter's own. After generation, [`finish`] restores the int-or-string
//! alternatives that kube's schema rewriter empties, and drops the `nullable` it adds.

use schemars::{json_schema, Schema, SchemaGenerator};
use serde_json::{json, Value};

use crate::NodeSelectorRequirementWithMinValues;

mod nodeclass;
mod passes;

pub use nodeclass::*;
pub use passes::{finish, spec_optional};

/// `expireAfter` and `consolidateAfter`: Go durations of whole s, m and h, or `Never`.
pub const DURATION_OR_NEVER: &str = r"^(([0-9]+(s|m|h))+|Never)$";
/// `terminationGracePeriod`: Go durations of whole s, m and h.
pub const DURATION: &str = r"^([0-9]+(s|m|h))+$";
/// A budget's `duration`: minutes and hours only (cron has no seconds), with Go's trailing `0s`.
pub const BUDGET_DURATION: &str = r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$";
/// A budget's `nodes`: a count or a percentage up to 100%.
pub const BUDGET_NODES: &str = r"^((100|[0-9]{1,2})%|[0-9]+)$";
/// A budget's `schedule`: a cron macro or five fields.
pub const BUDGET_SCHEDULE: &str =
    r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$";
/// A Kubernetes resource quantity (`resource.Quantity`).
pub const QUANTITY: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";
/// A qualified name (`prefix/name`): label and taint keys, and (as Karpenter has it) taint values.
pub const QUALIFIED_NAME: &str = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$";
/// A label value.
pub const LABEL_VALUE: &str = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$";
/// An EBS volume size: up to 64 TiB, in Gi, G, Ti or T.
pub const VOLUME_SIZE: &str = r"^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|[5][0-8][0-9]{3}|59000)Gi|(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|[6][0-3][0-9]{3}|64000)G|([1-9]||[1-5][0-7]|58)Ti|([1-9]||[1-5][0-9]|6[0-3]|64)T)$";
/// A NodeOverlay's `priceAdjustment`: `+0.05`, `-0.02`, `+10%`, `-25%`.
pub const PRICE_ADJUSTMENT: &str =
    r"^(([+-]{1}(\d*\.?\d+))|(\+{1}\d*\.?\d+%)|(^(-\d{1,2}(\.\d+)?%)$)|(-100%))$";

/// The `karpenter.k8s.aws` labels a NodePool or NodeClaim may use; the rest of the domain is
/// Karpenter's own.
const AWS_LABELS: [&str; 28] = [
    "karpenter.k8s.aws/instance-tenancy",
    "karpenter.k8s.aws/capacity-reservation-type",
    "karpenter.k8s.aws/capacity-reservation-id",
    "karpenter.k8s.aws/capacity-reservation-interruptible",
    "karpenter.k8s.aws/ec2nodeclass",
    "karpenter.k8s.aws/instance-encryption-in-transit-supported",
    "karpenter.k8s.aws/instance-category",
    "karpenter.k8s.aws/instance-hypervisor",
    "karpenter.k8s.aws/instance-family",
    "karpenter.k8s.aws/instance-generation",
    "karpenter.k8s.aws/instance-local-nvme",
    "karpenter.k8s.aws/instance-size",
    "karpenter.k8s.aws/instance-cpu",
    "karpenter.k8s.aws/instance-cpu-manufacturer",
    "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz",
    "karpenter.k8s.aws/instance-memory",
    "karpenter.k8s.aws/instance-ebs-bandwidth",
    "karpenter.k8s.aws/instance-network-bandwidth",
    "karpenter.k8s.aws/instance-gpu-name",
    "karpenter.k8s.aws/instance-gpu-manufacturer",
    "karpenter.k8s.aws/instance-gpu-count",
    "karpenter.k8s.aws/instance-gpu-memory",
    "karpenter.k8s.aws/instance-accelerator-name",
    "karpenter.k8s.aws/instance-accelerator-manufacturer",
    "karpenter.k8s.aws/instance-accelerator-count",
    "karpenter.k8s.aws/instance-capability-flex",
    "karpenter.k8s.aws/placement-group-id",
    "karpenter.k8s.aws/placement-group-partition",
];

/// The labels a NodeOverlay may select on: the instance-type ones (an overlay applies before
/// any reservation, tenancy or placement is chosen).
fn overlay_aws_labels() -> impl Iterator<Item = &'static str> {
    AWS_LABELS.iter().copied().filter(|l| {
        !l.contains("capacity-reservation")
            && !l.contains("placement-group")
            && !l.ends_with("instance-tenancy")
    })
}

/// Which object a label key or requirement is in: the restricted labels differ.
#[derive(Clone, Copy, PartialEq)]
enum Owner {
    Pool,
    Claim,
    Overlay,
}

fn rule(rule: &str, message: &str) -> Value {
    json!({ "rule": rule, "message": message })
}

fn quoted(labels: impl Iterator<Item = &'static str>) -> String {
    let quoted: Vec<String> = labels.map(|l| format!("\"{l}\"")).collect();
    format!("[{}]", quoted.join(", "))
}

/// Karpenter's rules on one label key `key` (a CEL expression: `self`, or `x` in a map's `all`).
fn label_key_rules(owner: Owner, key: &str) -> Vec<(String, &'static str)> {
    let aws = match owner {
        Owner::Overlay => quoted(overlay_aws_labels()),
        _ => quoted(AWS_LABELS.iter().copied()),
    };
    let mut rules = vec![(
        format!(
            r#"{key} in ["karpenter.sh/capacity-type", "karpenter.sh/nodepool"] || !{key}.find("^([^/]+)").endsWith("karpenter.sh")"#
        ),
        r#"label domain "karpenter.sh" is restricted"#,
    )];
    if owner == Owner::Pool {
        rules.push((
            format!(r#"{key} != "karpenter.sh/nodepool""#),
            r#"label "karpenter.sh/nodepool" is restricted"#,
        ));
    }
    rules.push((
        format!(r#"{key} != "kubernetes.io/hostname""#),
        r#"label "kubernetes.io/hostname" is restricted"#,
    ));
    rules.push((
        format!(r#"{key} in {aws} || !{key}.find("^([^/]+)").endsWith("karpenter.k8s.aws")"#),
        r#"label domain "karpenter.k8s.aws" is restricted"#,
    ));
    rules
}

/// A string matching `pattern`.
fn pattern(pattern: &str) -> Schema {
    json_schema!({ "type": "string", "pattern": pattern })
}

/// A string that must be one of `values`.
pub fn one_of(values: &[&str]) -> Schema {
    json_schema!({ "type": "string", "enum": values })
}

/// A free-form value: any JSON, kept as it is.
pub fn any_value(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "x-kubernetes-preserve-unknown-fields": true })
}

/// A map of resource quantities: integers, or strings in the quantity format.
pub fn quantity_map(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "additionalProperties": {
            "anyOf": [{ "type": "integer" }, { "type": "string" }],
            "pattern": QUANTITY,
            "x-kubernetes-int-or-string": true
        }
    })
}

/// A NodeOverlay's extra capacity: quantities, of anything but the resources every type has.
pub fn overlay_capacity(g: &mut SchemaGenerator) -> Schema {
    let mut schema = quantity_map(g);
    schema.insert(
        "x-kubernetes-validations".into(),
        json!([rule(
            "self.all(x, !(x in ['cpu', 'memory', 'ephemeral-storage', 'pods']))",
            "invalid resource restricted"
        )]),
    );
    schema
}

pub fn requirement_operator(_: &mut SchemaGenerator) -> Schema {
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

pub fn taint_effect(_: &mut SchemaGenerator) -> Schema {
    one_of(&["NoSchedule", "PreferNoSchedule", "NoExecute"])
}

pub fn consolidation_policy(_: &mut SchemaGenerator) -> Schema {
    one_of(&["WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"])
}

pub fn duration_or_never(_: &mut SchemaGenerator) -> Schema {
    pattern(DURATION_OR_NEVER)
}

pub fn duration(_: &mut SchemaGenerator) -> Schema {
    pattern(DURATION)
}

pub fn budget_duration(_: &mut SchemaGenerator) -> Schema {
    pattern(BUDGET_DURATION)
}

pub fn budget_schedule(_: &mut SchemaGenerator) -> Schema {
    pattern(BUDGET_SCHEDULE)
}

/// A budget's `nodes`, which Karpenter defaults to 10% when a budget leaves it out.
pub fn budget_nodes(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "pattern": BUDGET_NODES, "default": "10%" })
}

pub fn budget_reasons(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "maxItems": 50,
        "x-kubernetes-list-type": "set",
        "items": { "type": "string", "enum": ["Underutilized", "Empty", "Drifted", "Unhealthy"] }
    })
}

/// The budgets: at most 50, each with both or neither of `schedule` and `duration`.
pub fn budgets(g: &mut SchemaGenerator) -> Schema {
    let mut schema = g.subschema_for::<Vec<crate::BudgetSpec>>();
    schema.insert("maxItems".into(), json!(50));
    // Required, as Karpenter's CRD has it; the API server fills it in from its default first,
    // and a manifest read without the API server is defaulted as it would be.
    if let Some(items) = schema.get_mut("items").and_then(|i| i.as_object_mut()) {
        items.insert("required".into(), json!(["nodes"]));
    }
    schema.insert(
        "x-kubernetes-validations".into(),
        json!([rule(
            "self.all(x, has(x.schedule) == has(x.duration))",
            "'schedule' must be set with 'duration'"
        )]),
    );
    schema
}

/// A NodePool template's labels: label values, at most 100, none in Karpenter's own domains.
pub fn template_labels(_: &mut SchemaGenerator) -> Schema {
    let rules: Vec<Value> = label_key_rules(Owner::Pool, "x")
        .into_iter()
        .map(|(r, message)| rule(&format!("self.all(x, {r})"), message))
        .collect();
    json_schema!({
        "type": "object",
        "maxProperties": 100,
        "additionalProperties": { "type": "string", "maxLength": 63, "pattern": LABEL_VALUE },
        "x-kubernetes-validations": rules
    })
}

fn requirements(g: &mut SchemaGenerator, owner: Owner) -> Schema {
    let mut schema = g.subschema_for::<Vec<NodeSelectorRequirementWithMinValues>>();
    let key_rules: Vec<Value> = label_key_rules(owner, "self")
        .into_iter()
        .map(|(r, message)| rule(&r, message))
        .collect();
    if let Some(item) = schema.get_mut("items").and_then(Value::as_object_mut) {
        let properties = item.get_mut("properties").and_then(Value::as_object_mut);
        if let Some(properties) = properties {
            if let Some(key) = properties.get_mut("key").and_then(Value::as_object_mut) {
                key.insert("maxLength".into(), json!(316));
                key.insert("pattern".into(), json!(QUALIFIED_NAME));
                key.insert("x-kubernetes-validations".into(), json!(key_rules));
            }
            if owner == Owner::Overlay {
                properties.remove("minValues");
            }
        }
    }
    let mut rules = Vec::new();
    if owner == Owner::Overlay {
        rules.push(rule(
            "self.all(x, x.operator == 'NotIn' ? x.values.size() != 0 : true)",
            "requirements with operator 'NotIn' must have a value defined",
        ));
    }
    rules.push(rule(
        "self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)",
        "requirements with operator 'In' must have a value defined",
    ));
    let comma = if owner == Owner::Overlay { "" } else { "," };
    rules.push(rule(
        "self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || x.operator == 'Lte') ? (x.values.size() == 1 && int(x.values[0]) >= 0) : true)",
        &format!("requirements operator 'Gt', 'Lt', 'Gte'{comma} or 'Lte' must have a single positive integer value"),
    ));
    if owner != Owner::Overlay {
        rules.push(rule(
            "self.all(x, (x.operator == 'In' && has(x.minValues)) ? x.values.size() >= x.minValues : true)",
            "requirements with 'minValues' must have at least that many values specified in the 'values' field",
        ));
    }
    schema.insert("maxItems".into(), json!(100));
    schema.insert("x-kubernetes-validations".into(), json!(rules));
    schema
}

pub fn nodepool_requirements(g: &mut SchemaGenerator) -> Schema {
    requirements(g, Owner::Pool)
}

pub fn nodeclaim_requirements(g: &mut SchemaGenerator) -> Schema {
    requirements(g, Owner::Claim)
}

pub fn overlay_requirements(g: &mut SchemaGenerator) -> Schema {
    requirements(g, Owner::Overlay)
}

/// A NodePool's `nodeClassRef`, whose group and kind never change.
pub fn pool_node_class_ref(g: &mut SchemaGenerator) -> Schema {
    let mut schema = g.subschema_for::<crate::NodeClassRef>();
    schema.insert(
        "x-kubernetes-validations".into(),
        json!([
            rule(
                "self.group == oldSelf.group",
                "nodeClassRef.group is immutable"
            ),
            rule(
                "self.kind == oldSelf.kind",
                "nodeClassRef.kind is immutable"
            ),
        ]),
    );
    schema
}

/// A CEL rule that the string is not empty, said of `field`.
pub fn not_empty(schema: &mut Schema, field: &str) {
    schema.insert(
        "x-kubernetes-validations".into(),
        json!([rule("self != ''", &format!("{field} may not be empty"))]),
    );
}

pub fn group_not_empty(schema: &mut Schema) {
    not_empty(schema, "group");
}

pub fn kind_not_empty(schema: &mut Schema) {
    not_empty(schema, "kind");
}

pub fn name_not_empty(schema: &mut Schema) {
    not_empty(schema, "name");
}

pub fn role_not_empty(schema: &mut Schema) {
    schema.insert(
        "x-kubernetes-validations".into(),
        json!([rule("self != ''", "role cannot be empty")]),
    );
}

pub fn instance_profile_not_empty(schema: &mut Schema) {
    schema.insert(
        "x-kubernetes-validations".into(),
        json!([rule("self != ''", "instanceProfile cannot be empty")]),
    );
}

/// Drops the default `#[serde(default)]` gives a field: it is Rust's way of reading a missing
/// field, not the API's.
pub fn no_default(schema: &mut Schema) {
    schema.remove("default");
}

/// Marks `fields` required, and drops their serde defaults: a default would fill a missing
/// field in before validation.
pub fn require(schema: &mut Schema, fields: &[&str]) {
    if let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) {
        for field in fields {
            if let Some(property) = properties.get_mut(*field).and_then(Value::as_object_mut) {
                property.remove("default");
            }
        }
    }
    let required = schema
        .ensure_object()
        .entry("required")
        .or_insert_with(|| json!([]));
    if let Some(required) = required.as_array_mut() {
        for field in fields {
            if !required.iter().any(|r| r == field) {
                required.push(json!(field));
            }
        }
    }
}

pub fn require_spec(schema: &mut Schema) {
    require(schema, &["spec"]);
}

pub fn require_class_and_requirements(schema: &mut Schema) {
    require(schema, &["nodeClassRef", "requirements"]);
}

pub fn require_reference(schema: &mut Schema) {
    require(schema, &["group", "kind", "name"]);
}

/// Karpenter's rules on a NodePool spec: static pools (`replicas`) stay static, and take only a
/// `nodes` limit and no weight.
pub fn nodepool_spec(schema: &mut Schema) {
    require(schema, &["template"]);
    schema.insert(
        "x-kubernetes-validations".into(),
        json!([
            rule(
                "has(self.replicas) == has(oldSelf.replicas)",
                "Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes"
            ),
            rule(
                "!has(self.replicas) || (!has(self.limits) || size(self.limits) == 0 || (size(self.limits) == 1 && 'nodes' in self.limits))",
                "only 'limits.nodes' is supported on static NodePools"
            ),
            rule(
                "!has(self.replicas) || !has(self.weight)",
                "'weight' is not supported on static NodePools"
            ),
        ]),
    );
}

/// A NodeOverlay: its requirements, and a price or a price adjustment (not both).
pub fn overlay_spec(schema: &mut Schema) {
    require(schema, &["requirements"]);
    schema.insert(
        "x-kubernetes-validations".into(),
        json!([rule(
            "!has(self.price) || !has(self.priceAdjustment)",
            "cannot set both 'price' and 'priceAdjustment'"
        )]),
    );
}

/// A NodeClaim's spec is set at creation and never changes.
pub fn nodeclaim_spec(schema: &mut Schema) {
    require(schema, &["nodeClassRef", "requirements"]);
    schema.insert(
        "x-kubernetes-validations".into(),
        json!([rule("self == oldSelf", "spec is immutable")]),
    );
}
