//! The CRDs Fleetwright publishes against Karpenter's v1 example manifests: every example parses
//! into the typed resources with no field lost, every field it uses is in the published
//! openAPIV3Schema, and the examples convert into the core model.

use std::path::PathBuf;

use fleetwright_kube::crds::{definitions, EC2NodeClass, NodeClaim, NodePool};
use fleetwright_kube::dump::typed;
use serde::Deserialize;
use serde_json::Value;

const EXAMPLES: [&str; 6] = [
    "general-purpose",
    "spot",
    "100-cpu-limit",
    "multiple-arch",
    "min-values-family",
    "bottlerocket",
];

fn documents(name: &str) -> Vec<Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(format!("tests/fixtures/karpenter-v1/{name}.yaml"));
    let text = std::fs::read_to_string(path).unwrap();
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).unwrap())
        .filter(|v| !v.is_null())
        .collect()
}

fn roundtrip(doc: &Value) -> Value {
    match doc["kind"].as_str().unwrap() {
        "NodePool" => {
            serde_json::to_value(typed::<NodePool>(doc.clone(), "NodePool").unwrap()).unwrap()
        }
        "EC2NodeClass" => {
            serde_json::to_value(typed::<EC2NodeClass>(doc.clone(), "EC2NodeClass").unwrap())
                .unwrap()
        }
        "NodeClaim" => {
            serde_json::to_value(typed::<NodeClaim>(doc.clone(), "NodeClaim").unwrap()).unwrap()
        }
        other => panic!("unexpected kind {other}"),
    }
}

/// Every leaf path of `doc`, with array indices dropped.
fn paths(prefix: &str, v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                paths(&format!("{prefix}.{k}"), child, out);
            }
        }
        Value::Array(items) => {
            for item in items {
                paths(prefix, item, out);
            }
        }
        _ => out.push(prefix.to_string()),
    }
}

/// Whether the schema defines `path` (dot-separated, starting below the object root).
fn schema_has(schema: &Value, path: &[&str]) -> bool {
    let Some((first, rest)) = path.split_first() else {
        return true;
    };
    if schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)) {
        return true;
    }
    if let Some(items) = schema.get("items") {
        return schema_has(items, path);
    }
    if let Some(child) = schema.get("properties").and_then(|p| p.get(*first)) {
        return schema_has(child, rest);
    }
    schema
        .get("additionalProperties")
        .is_some_and(|a| a.is_object() && schema_has(a, rest) || a == &Value::Bool(true))
}

#[test]
fn examples_round_trip_without_losing_fields() {
    for name in EXAMPLES {
        for doc in documents(name) {
            let back = roundtrip(&doc);
            let (mut want, mut got) = (Vec::new(), Vec::new());
            paths("", &doc, &mut want);
            paths("", &back, &mut got);
            for p in &want {
                assert!(got.contains(p), "{name}: {p} lost in the round trip");
            }
            assert_eq!(doc["spec"], back["spec"], "{name}: spec changed");
        }
    }
}

#[test]
fn published_schemas_cover_every_example_field() {
    let crds: Vec<Value> = definitions()
        .into_iter()
        .map(|c| serde_json::to_value(c).unwrap())
        .collect();
    for name in EXAMPLES {
        for doc in documents(name) {
            let kind = doc["kind"].as_str().unwrap();
            let crd = crds
                .iter()
                .find(|c| c["spec"]["names"]["kind"] == kind)
                .expect("crd for kind");
            let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
            assert!(
                !schema_has(schema, &["spec", "noSuchField"]),
                "the schema walk must be able to fail"
            );
            let mut want = Vec::new();
            paths("", &doc["spec"], &mut want);
            for p in want {
                let parts: Vec<&str> = p.trim_start_matches('.').split('.').collect();
                let mut full = vec!["spec"];
                full.extend(parts.iter().copied());
                // Label and annotation keys contain dots; stop at the map.
                if let Some(i) = full.iter().position(|s| {
                    matches!(
                        *s,
                        "labels"
                            | "annotations"
                            | "tags"
                            | "limits"
                            | "systemReserved"
                            | "kubeReserved"
                            | "evictionHard"
                    )
                }) {
                    full.truncate(i + 1);
                }
                assert!(
                    schema_has(schema, &full),
                    "{name}: {kind} schema lacks {}",
                    full.join(".")
                );
            }
        }
    }
}

#[test]
fn crds_are_cluster_scoped_with_status_and_printer_columns() {
    for crd in definitions() {
        let v = serde_json::to_value(&crd).unwrap();
        assert_eq!(v["spec"]["scope"], "Cluster");
        let version = &v["spec"]["versions"][0];
        let expected = if v["spec"]["names"]["kind"] == "NodeOverlay" {
            "v1alpha1"
        } else {
            "v1"
        };
        assert_eq!(version["name"], expected);
        assert!(
            version["subresources"]["status"].is_object(),
            "{}",
            v["metadata"]["name"]
        );
        assert!(version["additionalPrinterColumns"]
            .as_array()
            .is_some_and(|c| !c.is_empty()));
    }
    let names: Vec<String> = definitions()
        .iter()
        .map(|c| c.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "nodepools.karpenter.sh",
            "nodeclaims.karpenter.sh",
            "ec2nodeclasses.karpenter.k8s.aws",
            "nodeoverlays.karpenter.sh"
        ]
    );
}

#[test]
fn examples_convert_into_the_core_model() {
    for name in EXAMPLES {
        let text = std::fs::read_to_string(
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join(format!("tests/fixtures/karpenter-v1/{name}.yaml")),
        )
        .unwrap();
        let snapshot = fleetwright_kube::snapshot_from_yaml(&text, name).unwrap();
        assert!(!snapshot.nodepools.is_empty(), "{name}");
    }
    let text = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/karpenter-v1/min-values-family.yaml"),
    )
    .unwrap();
    let snapshot = fleetwright_kube::snapshot_from_yaml(&text, "min-values").unwrap();
    let family = snapshot.nodepools[0]
        .requirements
        .get("karpenter.k8s.aws/instance-family")
        .unwrap();
    assert_eq!(family.min_values, Some(5));
    let text = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/karpenter-v1/bottlerocket.yaml"),
    )
    .unwrap();
    let snapshot = fleetwright_kube::snapshot_from_yaml(&text, "bottlerocket").unwrap();
    let settings = &snapshot.node_classes["bottlerocket"];
    assert_eq!(settings.kubelet.max_pods, Some(110));
    assert_eq!(settings.root_volume_bytes, Some(20 << 30));
    let limited = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/karpenter-v1/100-cpu-limit.yaml"),
    )
    .unwrap();
    let snapshot = fleetwright_kube::snapshot_from_yaml(&limited, "limited").unwrap();
    assert_eq!(snapshot.nodepools[0].limits.as_ref().unwrap().cpu, 100_000);
    assert_eq!(snapshot.nodepools[0].weight, 10);
}
