//! The published CRD schemas without a control plane: the checks that need none (the verdicts
//! themselves are compared with Karpenter's on real API servers by cli/tests/crd_agreement.rs).

use fleetwright_crds::definitions;
use serde_json::Value;

/// Every `(path, node)` of a schema, depth first.
fn nodes<'a>(schema: &'a Value, at: String, out: &mut Vec<(String, &'a Value)>) {
    out.push((at.clone(), schema));
    if let Some(properties) = schema["properties"].as_object() {
        for (k, v) in properties {
            nodes(v, format!("{at}.{k}"), out);
        }
    }
    for (key, suffix) in [("items", "[]"), ("additionalProperties", "{}")] {
        if schema[key].is_object() {
            nodes(&schema[key], format!("{at}{suffix}"), out);
        }
    }
}

fn every_node() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for crd in definitions() {
        let crd = serde_json::to_value(&crd).unwrap();
        let kind = crd["spec"]["names"]["kind"].as_str().unwrap().to_string();
        let schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone();
        let mut found = Vec::new();
        nodes(&schema, kind, &mut found);
        out.extend(found.into_iter().map(|(p, v)| (p, v.clone())));
    }
    out
}

#[test]
fn the_only_default_is_karpenters_ten_percent_budget() {
    // serde's defaults ('' for a nodeClassRef's group, [] for requirements) would fill a missing
    // field in before validation, and the API server would take what Karpenter's refuses.
    let defaults: Vec<(String, Value)> = every_node()
        .into_iter()
        .filter(|(_, node)| !node["default"].is_null())
        .map(|(path, node)| (path, node["default"].clone()))
        .collect();
    assert_eq!(
        defaults,
        [(
            "NodePool.spec.disruption.budgets[].nodes".to_string(),
            Value::from("10%")
        )]
    );
}

#[test]
fn quantities_are_integers_or_strings_in_the_quantity_format() {
    let quantities: Vec<(String, Value)> = every_node()
        .into_iter()
        .filter(|(_, node)| node["x-kubernetes-int-or-string"] == true)
        .collect();
    let paths: Vec<&str> = quantities.iter().map(|(p, _)| p.as_str()).collect();
    for want in [
        "NodePool.spec.limits{}",
        "NodeClaim.spec.resources.requests{}",
        "NodeOverlay.spec.capacity{}",
    ] {
        assert!(paths.contains(&want), "{want} not in {paths:?}");
    }
    for (path, node) in &quantities {
        assert_eq!(
            node["anyOf"],
            serde_json::json!([{"type": "integer"}, {"type": "string"}]),
            "{path}"
        );
        assert_eq!(
            node["pattern"],
            fleetwright_crds::validation::QUANTITY,
            "{path}"
        );
    }
}

#[test]
fn durations_carry_karpenters_patterns_nothing_is_nullable_and_every_format_is_known() {
    let all = every_node();
    let pattern = |path: &str| {
        all.iter()
            .find(|(p, _)| p == path)
            .map(|(_, n)| n["pattern"].clone())
            .unwrap_or_else(|| panic!("no {path}"))
    };
    use fleetwright_crds::validation::{DURATION, DURATION_OR_NEVER};
    for (path, want) in [
        (
            "NodePool.spec.disruption.consolidateAfter",
            DURATION_OR_NEVER,
        ),
        ("NodePool.spec.template.spec.expireAfter", DURATION_OR_NEVER),
        (
            "NodePool.spec.template.spec.terminationGracePeriod",
            DURATION,
        ),
        ("NodeClaim.spec.expireAfter", DURATION_OR_NEVER),
        ("NodeClaim.spec.terminationGracePeriod", DURATION),
    ] {
        assert_eq!(pattern(path), want, "{path}");
    }
    // A kept `null` counts as set for `required` and CEL's has(); Karpenter's schemas prune it.
    let nullable: Vec<&String> = all
        .iter()
        .filter(|(_, n)| n["nullable"] == true)
        .map(|(p, _)| p)
        .collect();
    assert!(nullable.is_empty(), "{nullable:?}");
    // The API server warns of any other format on every apply.
    let unknown: Vec<(&String, &Value)> = all
        .iter()
        .filter(|(_, n)| {
            n["format"]
                .as_str()
                .is_some_and(|f| !["int32", "int64", "date-time", "double", "float"].contains(&f))
        })
        .map(|(p, n)| (p, &n["format"]))
        .collect();
    assert!(unknown.is_empty(), "{unknown:?}");
}
