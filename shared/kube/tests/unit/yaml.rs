use super::*;
use serde_json::json;

#[test]
fn ambiguous_strings_are_quoted_and_the_output_reads_back_the_same() {
    let value = json!({
        "metadata": {"name": "dev"},
        "spec": {
            "tags": {"auto-delete": "no", "Name": "karpenter/dev", "on": "ON", "n": "1e3"},
            "values": ["3", "c", "12:30", "2026-01-01"],
            "nested": [{"key": "a", "values": ["x", "y"]}, {"empty": {}}, ["a", "b"]],
            "empty": [], "number": 30, "flag": true, "nothing": null
        }
    });
    let text = to_string(&value);
    assert!(text.contains("auto-delete: \"no\""), "{text}");
    assert!(text.contains("\"on\": \"ON\""), "{text}");
    assert!(text.contains("- \"3\""), "{text}");
    assert!(text.contains("- c\n"), "{text}");
    let back: Value = serde_yaml::from_str(&text).unwrap();
    assert_eq!(back, value, "{text}");
}
