use super::*;
use serde::Deserialize;

fn read(text: &str) -> (Value, Vec<Vec<Step>>) {
    let de = serde_yaml::Deserializer::from_str(text).next().unwrap();
    document(de).unwrap()
}

#[test]
fn a_key_given_twice_is_found_with_its_object() {
    let text = "kind: List\nitems:\n- kind: NodePool\n  metadata: {name: a}\n- kind: NodePool\n  metadata: {name: b}\n  spec:\n    template:\n      spec:\n        requirements: []\n        requirements: [{key: x, operator: Exists}]\n";
    let (value, duplicates) = read(text);
    assert_eq!(duplicates.len(), 1);
    let (object, path) = locate(&value, &duplicates[0], "t");
    assert_eq!(object, "NodePool b");
    assert_eq!(path, "spec.template.spec.requirements");
    assert_eq!(
        value["items"][1]["spec"]["template"]["spec"]["requirements"][0]["key"],
        "x"
    );
}

#[test]
fn merge_keys_are_applied_and_the_mapping_own_keys_win() {
    let text = "base: &b {operator: In, values: [a]}\nr:\n  <<: *b\n  key: k\n  values: [z]\n";
    let (value, duplicates) = read(text);
    assert!(duplicates.is_empty(), "{duplicates:?}");
    assert_eq!(value["r"]["operator"], "In");
    assert_eq!(value["r"]["values"][0], "z");
    assert!(value["r"].get("<<").is_none());
}

#[test]
fn the_same_key_in_two_mappings_is_no_duplicate() {
    let (value, duplicates) = read("a: {x: 1}\nb: {x: 2.5, y: [true, null, s]}\n");
    assert!(duplicates.is_empty(), "{duplicates:?}");
    assert_eq!(value["b"]["y"][2], "s");
    assert_eq!(value["b"]["x"], 2.5);
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct Inner {
    key: String,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct Outer {
    spec: Option<Vec<Inner>>,
}

#[test]
fn a_key_no_field_reads_is_named_by_its_path() {
    let value = serde_json::json!({"metadata": {"name": "n"}, "spec": [{"key": "k", "opertor": "In"}], "sepc": 1});
    let (_, mut unknown): (Outer, _) = typed_noting(value, "Thing").unwrap();
    unknown.sort();
    assert_eq!(unknown, vec!["metadata", "sepc", "spec[0].opertor"]);
}
