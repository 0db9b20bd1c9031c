use super::*;

fn class(family: &str, kubelet: serde_json::Value) -> EC2NodeClass {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "nodes"},
        "spec": {
            "amiSelectorTerms": [{"alias": format!("{family}@latest")}],
            "role": "r",
            "subnetSelectorTerms": [{"tags": {"a": "b"}}],
            "securityGroupSelectorTerms": [{"tags": {"a": "b"}}],
            "kubelet": kubelet
        }
    }))
    .unwrap()
}

fn error(family: &str, kubelet: serde_json::Value) -> Option<String> {
    nodeclass_settings(&class(family, kubelet), false)
        .err()
        .map(|e| e.to_string())
}

#[test]
fn only_al2023_takes_kubelet_fields_karpenter_does_not_map() {
    let upstream =
        serde_json::json!({"maxPods": 50, "registryPullQPS": 10, "cpuManagerPolicy": "static"});
    assert_eq!(error("al2023", upstream.clone()), None);
    for family in ["al2", "bottlerocket", "windows2022"] {
        let e = error(family, upstream.clone()).expect(family);
        assert!(
            e.contains("EC2NodeClass nodes")
                && e.contains("spec.kubelet")
                && e.contains("UnsupportedKubeletConfiguration")
                && e.contains("cpuManagerPolicy, registryPullQPS"),
            "{e}"
        );
    }
    let mapped =
        serde_json::json!({"maxPods": 50, "imageGCHighThresholdPercent": 80, "cpuCFSQuota": true});
    assert_eq!(error("al2", mapped), None);
}

#[test]
fn bottlerocket_takes_no_pods_per_core_and_no_family_but_al2023_two_dns_entries() {
    let per_core = serde_json::json!({"podsPerCore": 4});
    assert!(error("bottlerocket", per_core.clone()).is_some_and(|e| e.contains("podsPerCore")));
    assert_eq!(error("al2", per_core), None);
    let dns = serde_json::json!({"clusterDNS": ["10.100.0.10", "169.254.20.10"]});
    assert!(error("al2", dns.clone()).is_some_and(|e| e.contains("clusterDNS")));
    assert_eq!(error("al2023", dns), None);
}
