use super::*;

#[test]
fn every_malformed_pool_copies_the_first_with_the_highest_weight_and_one_fault() {
    let pool = json!({"kind": "NodePool", "metadata": {"name": "web", "uid": "u"},
            "spec": {"template": {"spec": {"nodeClassRef": {"name": "default"}}},
                "disruption": {"consolidateAfter": "30s"}}, "status": {"x": 1}});
    let class = json!({"kind": "EC2NodeClass", "metadata": {"name": "default"},
            "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}]}});
    let variants = malformed(&pool, Some(&class));
    assert_eq!(variants.len(), 5);
    for (what, objects) in &variants {
        let p = objects.last().unwrap();
        assert!(p["metadata"]["name"]
            .as_str()
            .unwrap()
            .starts_with(BROKEN_PREFIX));
        assert_eq!(p["spec"]["weight"], 100, "{what}");
        assert!(p["status"].is_null(), "{what}");
    }
    assert_eq!(
        variants[0].1[0]["spec"]["disruption"]["consolidateAfter"],
        "30 seconds"
    );
    assert_eq!(
        variants[4].1[0]["spec"]["amiSelectorTerms"][0]["alias"],
        "ubuntu@latest"
    );
}
