use super::*;

fn tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn ownership_needs_both_tags() {
    let owned = tags(&[
        ("kubernetes.io/cluster/dev", "owned"),
        ("karpenter.sh/nodepool", "default"),
    ]);
    assert!(ownership_problem(&owned, "dev").is_none());
    assert!(ownership_problem(&owned, "prod")
        .unwrap()
        .contains("kubernetes.io/cluster/prod=owned"));
    let shared = tags(&[
        ("kubernetes.io/cluster/dev", "shared"),
        ("karpenter.sh/nodepool", "x"),
    ]);
    assert!(ownership_problem(&shared, "dev").is_some());
    let no_pool = tags(&[("kubernetes.io/cluster/dev", "owned")]);
    assert!(ownership_problem(&no_pool, "dev")
        .unwrap()
        .contains("nodepool"));
}
