//! Karpenter's validation of an EC2NodeClass (v1.15): its selector terms, AMI family and alias
//! rules, tags, block devices, network interfaces, metadata options, placement group and
//! connection tracking.

use schemars::{json_schema, Schema, SchemaGenerator};
use serde_json::{json, Value};

use super::{one_of, require, rule};
use crate::SelectorTerm;

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

/// The AMI families Karpenter v1.15's CRD admits.
pub const AMI_FAMILIES: [&str; 7] = [
    "AL2",
    "AL2023",
    "Bottlerocket",
    "Custom",
    "Windows2019",
    "Windows2022",
    "Windows2025",
];

pub fn ami_family(_: &mut SchemaGenerator) -> Schema {
    one_of(&AMI_FAMILIES)
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
