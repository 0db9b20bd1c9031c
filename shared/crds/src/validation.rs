//! Karpenter's validation of its objects, as pieces of the CRD schemas: the patterns, enums,
//! bounds and CEL rules of Karpenter v1.15's own CRDs (durations, quantities, label keys and
//! values, restricted label domains, requirements, taints, budgets, selector terms), attached to
//! the types' fields with `schema_with` and `transform`. Rust's serde defaults are kept out of
//! the schemas (a default would fill a missing field in before validation); the one default
//! here is Karpenter's own. After generation, [`finish`] restores the int-or-string
//! alternatives that kube's schema rewriter empties, and drops the `nullable` it adds.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps,
};
use schemars::{json_schema, Schema, SchemaGenerator};
use serde_json::{json, Value};

use crate::{NodeSelectorRequirementWithMinValues, SelectorTerm};

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

/// The tags of a selector term: at most 20, no empty key or value.
fn term_tags() -> Value {
    json!({
        "type": "object",
        "maxProperties": 20,
        "additionalProperties": { "type": "string" },
        "x-kubernetes-validations": [rule("self.all(k, k != '' && self[k] != '')", "empty tag keys or values aren't supported")]
    })
}

/// A list of selector terms with only `fields` of [`SelectorTerm`] (in the CRD's names), `id`
/// matching `id_pattern`, and `rules` on the list.
fn selector_terms(
    g: &mut SchemaGenerator,
    fields: &[&str],
    id_pattern: &str,
    rules: Vec<Value>,
) -> Schema {
    let term = g.subschema_for::<SelectorTerm>();
    let mut properties = serde_json::Map::new();
    if let Some(all) = term.get("properties").and_then(Value::as_object) {
        for field in fields {
            let mut property = all.get(*field).cloned().unwrap_or_else(|| json!({}));
            if let Some(p) = property.as_object_mut() {
                p.remove("nullable");
            }
            properties.insert(field.to_string(), property);
        }
    }
    properties.insert("tags".into(), term_tags());
    properties.insert(
        "id".into(),
        json!({ "type": "string", "pattern": id_pattern }),
    );
    json_schema!({
        "type": "array",
        "maxItems": 30,
        "items": { "type": "object", "properties": properties },
        "x-kubernetes-validations": rules
    })
}

/// `x` has at least one of `fields`, as a CEL expression.
fn has_any(fields: &[&str]) -> String {
    let has: Vec<String> = fields.iter().map(|f| format!("has(x.{f})")).collect();
    has.join(" || ")
}

fn at_least_one(fields: &[&str]) -> Value {
    let names: Vec<String> = fields.iter().map(|f| format!("'{f}'")).collect();
    rule(
        &format!("self.all(x, {})", has_any(fields)),
        &format!("expected at least one, got none, [{}]", names.join(", ")),
    )
}

pub fn ami_selector_terms(g: &mut SchemaGenerator) -> Schema {
    let mut alias = json!({ "type": "string", "maxLength": 30, "x-kubernetes-validations": [
        rule("self.matches('^[a-zA-Z0-9]+@.+$')", "'alias' is improperly formatted, must match the format 'family@version'"),
        rule("self.split('@')[0] in ['al2','al2023','bottlerocket','windows2019','windows2022','windows2025']",
            "family is not supported, must be one of the following: 'al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025'"),
        rule("self.split('@')[0] in ['windows2019','windows2022','windows2025'] ? self.split('@')[1] == 'latest' : true",
            "windows families may only specify version 'latest'"),
    ]});
    let rules = vec![
        at_least_one(&["tags", "id", "name", "alias", "ssmParameter"]),
        rule("!self.exists(x, has(x.id) && (has(x.alias) || has(x.tags) || has(x.name) || has(x.owner)))",
            "'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms"),
        rule("!self.exists(x, has(x.alias) && (has(x.id) || has(x.tags) || has(x.name) || has(x.owner)))",
            "'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms"),
        rule("!(self.exists(x, has(x.alias)) && self.size() != 1)",
            "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms"),
    ];
    let mut schema = selector_terms(
        g,
        &["alias", "name", "owner", "ssmParameter"],
        "ami-[0-9a-z]+",
        rules,
    );
    schema.insert("minItems".into(), json!(1));
    if let Some(p) = schema.pointer_mut("/items/properties/alias") {
        std::mem::swap(p, &mut alias);
    }
    schema
}

pub fn subnet_selector_terms(g: &mut SchemaGenerator) -> Schema {
    let rules = vec![
        rule("self.size() != 0", "subnetSelectorTerms cannot be empty"),
        at_least_one(&["tags", "id"]),
        rule("!self.all(x, has(x.id) && has(x.tags))",
            "'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term"),
    ];
    selector_terms(g, &[], "subnet-[0-9a-z]+", rules)
}

pub fn security_group_selector_terms(g: &mut SchemaGenerator) -> Schema {
    let rules = vec![
        rule("self.size() != 0", "securityGroupSelectorTerms cannot be empty"),
        at_least_one(&["tags", "id", "name"]),
        rule("!self.all(x, has(x.id) && (has(x.tags) || has(x.name)))",
            "'id' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term"),
        rule("!self.all(x, has(x.name) && (has(x.tags) || has(x.id)))",
            "'name' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term"),
    ];
    selector_terms(g, &["name"], "sg-[0-9a-z]+", rules)
}

pub fn capacity_reservation_selector_terms(g: &mut SchemaGenerator) -> Schema {
    let rules = vec![
        at_least_one(&["tags", "id", "instanceMatchCriteria"]),
        rule("!self.all(x, has(x.id) && (has(x.tags) || has(x.ownerID) || has(x.instanceMatchCriteria)))",
            "'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation selector term"),
    ];
    let mut schema = selector_terms(g, &["ownerID"], "^cr-[0-9a-z]+$", rules);
    if let Some(p) = schema.pointer_mut("/items/properties") {
        p["ownerID"] = json!({ "type": "string", "pattern": "^[0-9]{12}$" });
        p["instanceMatchCriteria"] = json!({ "type": "string", "enum": ["open", "targeted"] });
    }
    schema
}

pub fn ami_family(_: &mut SchemaGenerator) -> Schema {
    one_of(&[
        "AL2",
        "AL2023",
        "Bottlerocket",
        "Custom",
        "Windows2019",
        "Windows2022",
        "Windows2025",
    ])
}

/// The EC2NodeClass's tags: none empty, none of the tags Karpenter and EKS set themselves.
pub fn nodeclass_tags(_: &mut SchemaGenerator) -> Schema {
    let restricted = |tag: &str, rule_text: &str| {
        rule(
            rule_text,
            &format!("tag contains a restricted tag matching {tag}"),
        )
    };
    json_schema!({
        "type": "object",
        "additionalProperties": { "type": "string" },
        "x-kubernetes-validations": [
            rule("self.all(k, k != '')", "empty tag keys aren't supported"),
            restricted("eks:eks-cluster-name", "self.all(k, k !='eks:eks-cluster-name')"),
            restricted("kubernetes.io/cluster/", "self.all(k, !k.startsWith('kubernetes.io/cluster') )"),
            restricted("karpenter.sh/nodepool", "self.all(k, k != 'karpenter.sh/nodepool')"),
            restricted("karpenter.sh/nodeclaim", "self.all(k, k !='karpenter.sh/nodeclaim')"),
            restricted("karpenter.k8s.aws/ec2nodeclass", "self.all(k, k !='karpenter.k8s.aws/ec2nodeclass')"),
        ]
    })
}

/// The kubelet settings: free-form, as Karpenter v1.15 has them (it validates them itself and
/// says so in the EC2NodeClass's status).
pub fn kubelet(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "additionalProperties": { "x-kubernetes-preserve-unknown-fields": true },
        "x-kubernetes-preserve-unknown-fields": true
    })
}

/// The block device mappings: at most 50, one root volume at most.
pub fn block_device_mappings(g: &mut SchemaGenerator) -> Schema {
    let mut schema = g.subschema_for::<Vec<crate::BlockDeviceMapping>>();
    schema.insert("maxItems".into(), json!(50));
    schema.insert(
        "x-kubernetes-validations".into(),
        json!([rule(
            "self.filter(x, has(x.rootVolume)?x.rootVolume==true:false).size() <= 1",
            "must have only one blockDeviceMappings with rootVolume"
        )]),
    );
    schema
}

pub fn volume_type(_: &mut SchemaGenerator) -> Schema {
    one_of(&["standard", "io1", "io2", "gp2", "sc1", "st1", "gp3"])
}

/// An EBS volume: from a snapshot or of a size; initialised at a rate only from a snapshot.
pub fn block_device(schema: &mut Schema) {
    schema.insert(
        "x-kubernetes-validations".into(),
        json!([
            rule("has(self.snapshotID) || has(self.volumeSize)", "snapshotID or volumeSize must be defined"),
            rule("!has(self.volumeInitializationRate) || (has(self.snapshotID) && self.snapshotID != '')",
                "snapshotID must be set when volumeInitializationRate is set"),
        ]),
    );
}

/// Network interfaces: at most 150, a primary one, no pair twice, one EFA-only per card.
pub fn network_interfaces(g: &mut SchemaGenerator) -> Schema {
    let mut schema = g.subschema_for::<Vec<crate::NetworkInterface>>();
    schema.insert("maxItems".into(), json!(150));
    schema.insert(
        "x-kubernetes-validations".into(),
        json!([
            rule("self.size() == 0 || self.exists(x, x.deviceIndex == 0 && x.networkCardIndex == 0 && x.interfaceType == 'interface')",
                "networkInterfaces must include a primary interface with interfaceType='interface'"),
            rule("self.all(x, self.filter(y, x.networkCardIndex == y.networkCardIndex && x.deviceIndex == y.deviceIndex).size() == 1 && (x.interfaceType != 'efa-only' || self.filter(y, x.networkCardIndex == y.networkCardIndex && y.interfaceType == 'efa-only').size() == 1))",
                "networkInterfaces must not have duplicate networkCardIndex and deviceIndex pairs, and can have at most one efa device per network card"),
        ]),
    );
    schema
}

pub fn interface_type(_: &mut SchemaGenerator) -> Schema {
    one_of(&["interface", "efa-only"])
}

pub fn enabled_or_disabled(_: &mut SchemaGenerator) -> Schema {
    one_of(&["enabled", "disabled"])
}

pub fn http_tokens(_: &mut SchemaGenerator) -> Schema {
    one_of(&["required", "optional"])
}

pub fn instance_store_policy(_: &mut SchemaGenerator) -> Schema {
    one_of(&["RAID0"])
}

pub fn connection_tracking(schema: &mut Schema) {
    schema.insert(
        "x-kubernetes-validations".into(),
        json!([rule(
            "has(self.tcpEstablishedTimeout) || has(self.udpStreamTimeout) || has(self.udpTimeout)",
            "at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set"
        )]),
    );
}

pub fn placement_group_selector(schema: &mut Schema) {
    schema.insert(
        "x-kubernetes-validations".into(),
        json!([
            rule(
                "has(self.name) || has(self.id)",
                "expected at least one, got none, ['name', 'id']"
            ),
            rule(
                "!(has(self.name) && has(self.id))",
                "'name' and 'id' are mutually exclusive"
            ),
        ]),
    );
}

/// An object whose `spec` need not be given (Karpenter's EC2NodeClass schema leaves it
/// optional, though every field a spec must have is required within it).
pub fn spec_optional(crd: &mut CustomResourceDefinition) {
    each_schema(crd, |value| {
        let Some(object) = value.as_object_mut() else {
            return;
        };
        if let Some(required) = object.get_mut("required").and_then(Value::as_array_mut) {
            required.retain(|r| r != "spec");
            if required.is_empty() {
                object.remove("required");
            }
        }
    });
}

/// Karpenter's rules across an EC2NodeClass's fields: one of role and instance profile; an
/// AMI family that agrees with the alias; a family when no alias names one.
pub fn ec2nodeclass_spec(schema: &mut Schema) {
    require(
        schema,
        &[
            "amiSelectorTerms",
            "securityGroupSelectorTerms",
            "subnetSelectorTerms",
        ],
    );
    let mut rules = vec![rule(
        "(has(self.role) && !has(self.instanceProfile)) || (!has(self.role) && has(self.instanceProfile))",
        "must specify exactly one of ['role', 'instanceProfile']",
    )];
    for (alias, family, article) in [
        ("al2", "AL2", "an"),
        ("al2023", "AL2023", "an"),
        ("bottlerocket", "Bottlerocket", "a"),
        ("windows2019", "Windows2019", "a"),
        ("windows2022", "Windows2022", "a"),
        ("windows2025", "Windows2025", "a"),
    ] {
        rules.push(rule(
            &format!("!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == '{alias}') ? (self.amiFamily == 'Custom' || self.amiFamily == '{family}') : true)"),
            &format!("if set, amiFamily must be '{family}' or 'Custom' when using {article} {family} alias"),
        ));
    }
    rules.push(rule(
        "self.amiSelectorTerms.exists(x, has(x.alias)) ? true : has(self.amiFamily)",
        "must specify amiFamily if amiSelectorTerms does not contain an alias",
    ));
    schema.insert("x-kubernetes-validations".into(), json!(rules));
}

/// Every version's schema of `crd`, as JSON, changed by `change`.
fn each_schema(crd: &mut CustomResourceDefinition, change: impl Fn(&mut Value)) {
    for version in &mut crd.spec.versions {
        let Some(schema) = version.schema.as_mut() else {
            continue;
        };
        let Some(props) = schema.open_api_v3_schema.take() else {
            continue;
        };
        let Ok(mut value) = serde_json::to_value(&props) else {
            schema.open_api_v3_schema = Some(props);
            continue;
        };
        change(&mut value);
        schema.open_api_v3_schema =
            Some(serde_json::from_value::<JSONSchemaProps>(value).unwrap_or(props));
    }
}

/// Puts back the integer and string alternatives of int-or-string values (quantities), which
/// kube's schema rewriter empties to `anyOf: [{}, {}]`, so that `1.5` or `true` is refused; and
/// drops `nullable`, which Karpenter's schemas never set: the API server then prunes an
/// explicit `null` as it does for Karpenter, instead of keeping it (a kept `null` counts as set
/// for `required` and for CEL's `has()`).
fn karpenters_types(value: &mut Value) {
    match value {
        Value::Object(object) => {
            if object.get("x-kubernetes-int-or-string") == Some(&json!(true)) {
                object.insert(
                    "anyOf".into(),
                    json!([{ "type": "integer" }, { "type": "string" }]),
                );
            }
            if object.get("nullable") == Some(&json!(true)) {
                object.remove("nullable");
            }
            for child in object.values_mut() {
                karpenters_types(child);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(karpenters_types),
        _ => {}
    }
}

/// The passes over a generated CRD (see the module's comment).
pub fn finish(crd: &mut CustomResourceDefinition) {
    each_schema(crd, karpenters_types);
}
