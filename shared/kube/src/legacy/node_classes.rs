//! Legacy node classes as v1 `EC2NodeClass`es: a `v1alpha1` `AWSNodeTemplate` or a
//! Provisioner's inline `provider` (their selectors as v1 terms, their AMI family as an alias),
//! and a `v1beta1` `EC2NodeClass`.

use serde_json::{json, Map, Value};

use super::{metadata, spec_of, NoteKind, Notes};

/// `AWSNodeTemplate` (and a Provisioner's inline `provider`) as a v1 `EC2NodeClass`.
pub(super) fn node_template(object: &Value, notes: &mut Notes) -> Value {
    class_from_provider(metadata(object), spec_of(object), "spec", notes)
}

pub(super) fn class_from_provider(
    meta: Value,
    mut spec: Map<String, Value>,
    prefix: &str,
    notes: &mut Notes,
) -> Value {
    let mut out = Map::new();
    let family = spec
        .remove("amiFamily")
        .and_then(|v| v.as_str().map(str::to_string));
    if let Some(selector) = spec.remove("subnetSelector") {
        out.insert("subnetSelectorTerms".into(), selector_terms(&selector));
    }
    if let Some(selector) = spec.remove("securityGroupSelector") {
        out.insert(
            "securityGroupSelectorTerms".into(),
            selector_terms(&selector),
        );
    }
    match spec.remove("amiSelector") {
        Some(selector) => {
            out.insert("amiSelectorTerms".into(), selector_terms(&selector));
            out.insert(
                "amiFamily".into(),
                json!(family.clone().unwrap_or_else(|| "AL2".into())),
            );
            if family.is_none() {
                notes.add(
                    &format!("{prefix}.amiFamily"),
                    NoteKind::Defaulted,
                    "AL2, the legacy default, since the AMI selector needs a family in v1",
                );
            }
        }
        None => {
            let family = family.unwrap_or_else(|| "AL2".into());
            match alias(&family) {
                Some(alias) => {
                    out.insert("amiSelectorTerms".into(), json!([{ "alias": alias }]));
                }
                None => {
                    out.insert("amiFamily".into(), json!(family));
                    notes.unmapped(
                        &format!("{prefix}.amiFamily"),
                        format!("{family} has no alias; add amiSelectorTerms"),
                    );
                }
            }
        }
    }
    for key in [
        "instanceProfile",
        "userData",
        "tags",
        "blockDeviceMappings",
        "metadataOptions",
        "detailedMonitoring",
        "context",
        "associatePublicIPAddress",
        "instanceStorePolicy",
    ] {
        if let Some(v) = spec.remove(key).filter(|v| !v.is_null()) {
            out.insert(key.into(), v);
        }
    }
    if !out.contains_key("instanceProfile") {
        notes.unmapped(
            &format!("{prefix}.instanceProfile"),
            "absent: the legacy global default instance profile has no v1 equivalent; set spec.role or spec.instanceProfile",
        );
    }
    if spec.remove("launchTemplate").is_some() {
        notes.unmapped(
            &format!("{prefix}.launchTemplate"),
            "v1 builds its own launch templates; move the settings into the EC2NodeClass",
        );
    }
    notes.leftovers(prefix, spec);
    json!({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": meta, "spec": out})
}

/// The v1 alias for an AMI family, with the latest version.
fn alias(family: &str) -> Option<String> {
    let prefix = match family {
        "AL2" => "al2",
        "AL2023" => "al2023",
        "Bottlerocket" => "bottlerocket",
        "Windows2019" => "windows2019",
        "Windows2022" => "windows2022",
        _ => return None,
    };
    Some(format!("{prefix}@latest"))
}

/// A legacy selector map as v1 terms: `aws-ids`/`aws::ids` become one term per id,
/// `aws::name` and `aws::owners` become name and owner, the other keys one term of tags.
pub(super) fn selector_terms(selector: &Value) -> Value {
    let mut terms = Vec::new();
    let mut tags = Map::new();
    let mut name = None;
    let mut owners = Vec::new();
    for (key, value) in selector.as_object().into_iter().flatten() {
        let text = value.as_str().unwrap_or_default();
        let items = text.split(',').map(str::trim).filter(|s| !s.is_empty());
        match key.as_str() {
            "aws-ids" | "aws::ids" => terms.extend(items.map(|id| json!({ "id": id }))),
            "aws::name" => name = Some(text.to_string()),
            "aws::owners" => owners.extend(items.map(str::to_string)),
            _ => {
                tags.insert(key.clone(), json!(text));
            }
        }
    }
    if name.is_some() || !tags.is_empty() {
        let mut term = Map::new();
        if !tags.is_empty() {
            term.insert("tags".into(), Value::Object(tags));
        }
        if let Some(n) = name {
            term.insert("name".into(), json!(n));
        }
        match owners.as_slice() {
            [] => terms.push(Value::Object(term)),
            _ => {
                for owner in &owners {
                    let mut t = term.clone();
                    t.insert("owner".into(), json!(owner));
                    terms.push(Value::Object(t));
                }
            }
        }
    }
    Value::Array(terms)
}

/// `karpenter.k8s.aws/v1beta1` EC2NodeClass: the same fields, with the family as an alias
/// when no AMI selector is given.
pub(super) fn beta_node_class(object: &Value, notes: &mut Notes) -> Value {
    let mut spec = spec_of(object);
    let has_terms = spec
        .get("amiSelectorTerms")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty());
    if !has_terms {
        let family = spec
            .get("amiFamily")
            .and_then(Value::as_str)
            .unwrap_or("AL2")
            .to_string();
        match alias(&family) {
            Some(a) => {
                spec.remove("amiFamily");
                spec.insert("amiSelectorTerms".into(), json!([{ "alias": a }]));
            }
            None => notes.unmapped(
                "spec.amiFamily",
                format!("{family} has no alias; add amiSelectorTerms"),
            ),
        }
    }
    json!({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
           "metadata": metadata(object), "spec": spec})
}
