//! The passes over a generated CRD that the derive cannot express: the int-or-string
//! alternatives kube's schema rewriter empties put back, its `nullable` dropped, and an
//! EC2NodeClass's `spec` left optional as Karpenter has it.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps,
};
use serde_json::{json, Value};

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
/// for `required` and for CEL's `has()`). Also drops the integer formats the API server does
/// not know (`uint`, `uint32`: Rust's unsigned types, already bounded by their `minimum`), of
/// which it would warn on every apply.
fn karpenters_types(value: &mut Value) {
    match value {
        Value::Object(object) => {
            let format = object.get("format").and_then(Value::as_str);
            if format.is_some_and(|f| f.starts_with("uint")) {
                object.remove("format");
            }
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
