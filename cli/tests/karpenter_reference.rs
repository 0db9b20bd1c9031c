//! Round trip against Karpenter's own v1.15 CRD schemas and example manifests, read at test time
//! from its Go module (fetched by `scripts/karpenter-reference.sh`; nothing is committed):
//! every example reads, converts and writes back unchanged; an object with every field of
//! Karpenter's schemas writes back unchanged; and Fleetwright's CRDs keep every field Karpenter's
//! define, so the API server prunes nothing a user or Karpenter wrote.
//!
//! `FLEETWRIGHT_KARPENTER_REFERENCE=$(scripts/karpenter-reference.sh) cargo test -p
//! fleetwright-cli --test karpenter_reference -- --ignored` (CI runs it so).

use std::collections::BTreeSet;
use std::path::PathBuf;

use fleetwright_crds::{EC2NodeClass, NodeClaim, NodeOverlay, NodePool};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Map, Value};

const IGNORED: &str = "needs Karpenter's module: FLEETWRIGHT_KARPENTER_REFERENCE=$(scripts/karpenter-reference.sh) cargo test --test karpenter_reference -- --ignored";

fn reference() -> PathBuf {
    let dir = std::env::var("FLEETWRIGHT_KARPENTER_REFERENCE").expect(
        "FLEETWRIGHT_KARPENTER_REFERENCE: the directory scripts/karpenter-reference.sh printed",
    );
    PathBuf::from(dir)
}

fn documents(path: &PathBuf) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml::Deserializer::from_str(&text)
        .map(|doc| serde::Deserialize::deserialize(doc).unwrap())
        .filter(|v: &Value| !v.is_null())
        .collect()
}

/// `value` read as `T` and written back.
fn round_trip<T: DeserializeOwned + Serialize>(value: &Value) -> Result<Value, String> {
    let typed: T = serde_json::from_value(value.clone()).map_err(|e| e.to_string())?;
    serde_json::to_value(&typed).map_err(|e| e.to_string())
}

fn written_back(kind: &str, value: &Value) -> Result<Value, String> {
    match kind {
        "NodePool" => round_trip::<NodePool>(value),
        "EC2NodeClass" => round_trip::<EC2NodeClass>(value),
        "NodeClaim" => round_trip::<NodeClaim>(value),
        "NodeOverlay" => round_trip::<NodeOverlay>(value),
        other => Err(format!("kind {other} is not modelled")),
    }
}

/// Where `after` lacks or changes what `before` has (`path: before → after`).
fn differences(before: &Value, after: &Value, path: &str, out: &mut Vec<String>) {
    match (before, after) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in a {
                let at = format!("{path}.{k}");
                match b.get(k) {
                    Some(w) => differences(v, w, &at, out),
                    None => out.push(format!("{at}: lost")),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (v, w)) in a.iter().zip(b).enumerate() {
                differences(v, w, &format!("{path}[{i}]"), out);
            }
        }
        (a, b) if a == b => {}
        (Value::Number(a), Value::Number(b)) if a.as_f64() == b.as_f64() => {}
        (a, b) => out.push(format!("{path}: {a} → {b}")),
    }
}

#[test]
#[ignore = "needs Karpenter's module (see IGNORED)"]
fn every_karpenter_example_reads_converts_and_writes_back_unchanged() {
    let dir = reference().join("examples");
    let mut seen = 0;
    let mut problems = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        for doc in documents(&path) {
            let kind = doc["kind"].as_str().unwrap_or_default().to_string();
            let name = format!("{} {kind}/{}", path.display(), doc["metadata"]["name"]);
            match written_back(&kind, &doc) {
                Ok(after) => {
                    let mut diff = Vec::new();
                    differences(&doc, &after, "", &mut diff);
                    problems.extend(diff.into_iter().map(|d| format!("{name}: {d}")));
                }
                Err(e) => problems.push(format!("{name}: {e}")),
            }
            let converted = match kind.as_str() {
                "NodePool" => converts(&doc, |p: NodePool| {
                    fleetwright_kube::convert::nodepool(&p).map(|_| ())
                }),
                "EC2NodeClass" => converts(&doc, |c: EC2NodeClass| {
                    fleetwright_kube::convert::nodeclass_settings(&c, true).map(|_| ())
                }),
                _ => Ok(()),
            };
            if let Err(e) = converted {
                problems.push(format!("{name}: conversion: {e}"));
            }
            seen += 1;
        }
    }
    assert!(seen >= 30, "only {seen} objects in {}", dir.display());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Whether `doc`, read as `T`, converts into the core model.
fn converts<T: DeserializeOwned, E: std::fmt::Display>(
    doc: &Value,
    convert: impl Fn(T) -> Result<(), E>,
) -> Result<(), String> {
    let typed: T = serde_json::from_value(doc.clone()).map_err(|e| e.to_string())?;
    convert(typed).map_err(|e| e.to_string())
}

/// A value for every property a schema defines (the first of an enum, an item for each list,
/// a key for each map).
fn every_field(schema: &Value) -> Value {
    if let Some(first) = schema["enum"].as_array().and_then(|e| e.first()) {
        return first.clone();
    }
    if schema["x-kubernetes-int-or-string"] == true {
        return json!("1");
    }
    if let Some(alternatives) = schema["anyOf"].as_array().or(schema["oneOf"].as_array()) {
        if schema["type"].is_null() {
            return every_field(&alternatives[0]);
        }
    }
    match schema["type"].as_str() {
        Some("object") | None => {
            let mut out = Map::new();
            if let Some(properties) = schema["properties"].as_object() {
                for (k, v) in properties {
                    out.insert(k.clone(), every_field(v));
                }
            } else if schema["additionalProperties"].is_object() {
                out.insert(
                    "example.com/key".into(),
                    every_field(&schema["additionalProperties"]),
                );
            } else if schema["x-kubernetes-preserve-unknown-fields"] == true {
                out.insert("anything".into(), json!("kept"));
            }
            Value::Object(out)
        }
        Some("array") => json!([every_field(&schema["items"])]),
        Some("integer") => json!(1),
        Some("number") => json!(1.5),
        Some("boolean") => json!(true),
        Some(_) if schema["format"] == "date-time" => json!("2026-11-24T00:00:00Z"),
        Some(_) => json!("x"),
    }
}

/// How many scalar values a value holds.
fn leaves(value: &Value) -> usize {
    match value {
        Value::Object(m) => m.values().map(leaves).sum(),
        Value::Array(a) => a.iter().map(leaves).sum(),
        _ => 1,
    }
}

fn karpenter_crds() -> Vec<(String, Value)> {
    let dir = reference().join("crds");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        for crd in documents(&entry.unwrap().path()) {
            let kind = crd["spec"]["names"]["kind"].as_str().unwrap().to_string();
            let schema = crd["spec"]["versions"]
                .as_array()
                .unwrap()
                .iter()
                .find(|v| v["storage"] == true)
                .unwrap()["schema"]["openAPIV3Schema"]
                .clone();
            out.push((kind, schema));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
#[ignore = "needs Karpenter's module (see IGNORED)"]
fn an_object_with_every_field_of_karpenters_schemas_writes_back_unchanged() {
    let _ = IGNORED;
    let mut problems = Vec::new();
    let mut kinds = Vec::new();
    for (kind, schema) in karpenter_crds() {
        let mut object = every_field(&schema);
        object["apiVersion"] = json!(match kind.as_str() {
            "EC2NodeClass" => "karpenter.k8s.aws/v1",
            "NodeOverlay" => "karpenter.sh/v1alpha1",
            _ => "karpenter.sh/v1",
        });
        object["kind"] = json!(kind);
        object["metadata"] = json!({"name": "every-field"});
        assert!(
            leaves(&object) >= 10,
            "{kind}: only {} fields generated",
            leaves(&object)
        );
        match written_back(&kind, &object) {
            Ok(after) => {
                let mut diff = Vec::new();
                differences(&object, &after, &kind, &mut diff);
                problems.extend(diff);
            }
            Err(e) => problems.push(format!("{kind}: {e}")),
        }
        kinds.push(kind);
    }
    assert_eq!(
        kinds,
        ["EC2NodeClass", "NodeClaim", "NodeOverlay", "NodePool"]
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Every property path of a schema (`spec.template.spec.taints[].key`), and the paths under
/// which any field is kept (`x-kubernetes-preserve-unknown-fields`).
fn paths(schema: &Value, at: &str, out: &mut BTreeSet<String>, open: &mut BTreeSet<String>) {
    if schema["x-kubernetes-preserve-unknown-fields"] == true {
        open.insert(at.to_string());
    }
    if let Some(properties) = schema["properties"].as_object() {
        for (k, v) in properties {
            let here = if at.is_empty() {
                k.clone()
            } else {
                format!("{at}.{k}")
            };
            out.insert(here.clone());
            paths(v, &here, out, open);
        }
    }
    if schema["items"].is_object() {
        paths(&schema["items"], &format!("{at}[]"), out, open);
    }
    if schema["additionalProperties"].is_object() {
        paths(
            &schema["additionalProperties"],
            &format!("{at}{{}}"),
            out,
            open,
        );
    }
}

#[test]
#[ignore = "needs Karpenter's module (see IGNORED)"]
fn fleetwrights_crds_keep_every_field_of_karpenters() {
    let ours: Vec<(String, Value)> = documents(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../infra/crds/karpenter-v1.yaml"),
    )
    .into_iter()
    .map(|crd| {
        let kind = crd["spec"]["names"]["kind"].as_str().unwrap().to_string();
        let schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone();
        (kind, schema)
    })
    .collect();
    let mut missing = Vec::new();
    for (kind, theirs) in karpenter_crds() {
        let Some((_, mine)) = ours.iter().find(|(k, _)| *k == kind) else {
            missing.push(format!("{kind}: no CRD"));
            continue;
        };
        let (mut want, mut have) = (BTreeSet::new(), BTreeSet::new());
        let (mut _unused, mut open) = (BTreeSet::new(), BTreeSet::new());
        paths(&theirs, "", &mut want, &mut _unused);
        paths(mine, "", &mut have, &mut open);
        // apiVersion, kind and metadata are the API server's own, never pruned.
        let own = |p: &str| {
            ["apiVersion", "kind", "metadata"]
                .iter()
                .any(|o| p == *o || p.starts_with(&format!("{o}.")))
        };
        for path in want.difference(&have).filter(|p| !own(p)) {
            let kept = open.iter().any(|o| {
                o.is_empty()
                    || path.starts_with(&format!("{o}."))
                    || path.starts_with(&format!("{o}["))
                    || path.starts_with(&format!("{o}{{"))
            });
            if !kept {
                missing.push(format!("{kind}: {path}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "{} field(s) of Karpenter's CRDs that Fleetwright's would prune:\n{}",
        missing.len(),
        missing.join("\n")
    );
}
