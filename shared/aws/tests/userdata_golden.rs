//! Golden-file tests for the user data of each AMI family, with and without the user's own user
//! data. Regenerate with `UPDATE_GOLDEN=1 cargo test -p fleetwright-aws --test userdata_golden`
//! and review the diff.

use std::collections::BTreeMap;
use std::path::PathBuf;

use fleetwright_aws::cluster::ClusterInfo;
use fleetwright_aws::userdata::{self, NodeBootstrap};
use fleetwright_core::model::{Taint, TaintEffect};
use fleetwright_crds::{KubeletConfiguration, MaxPods};

fn cluster() -> ClusterInfo {
    ClusterInfo {
        name: "eks-dev".into(),
        endpoint: "https://ABCDEF0123456789.gr7.ap-northeast-2.eks.amazonaws.com".into(),
        certificate_authority: "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUMvakNDQWVhZ0F3SUJBZ0lCQURBTkJna3Foa2lHOXcwQkFRc0ZBREFWTVJNd0VRWURWUVFERXdwcmRXSmwKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=".into(),
        service_cidr: "172.20.0.0/16".into(),
        kubernetes_version: "1.32".into(),
    }
}

fn labels() -> BTreeMap<String, String> {
    [
        ("karpenter.sh/nodepool", "dev"),
        ("karpenter.sh/capacity-type", "spot"),
        ("role", "dev"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

fn taints() -> Vec<Taint> {
    vec![
        Taint {
            key: "dedicated".into(),
            value: "dev".into(),
            effect: TaintEffect::NoSchedule,
        },
        Taint {
            key: "karpenter.sh/unregistered".into(),
            value: String::new(),
            effect: TaintEffect::NoExecute,
        },
    ]
}

fn kubelet() -> KubeletConfiguration {
    KubeletConfiguration {
        max_pods: Some(MaxPods::Count(110)),
        system_reserved: Some(
            [
                ("cpu".to_string(), "100m".to_string()),
                ("memory".to_string(), "100Mi".to_string()),
            ]
            .into(),
        ),
        eviction_hard: Some([("memory.available".to_string(), "5%".to_string())].into()),
        ..Default::default()
    }
}

fn check(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with UPDATE_GOLDEN=1 to create it)",
            path.display()
        )
    });
    assert_eq!(actual, expected, "{name} differs from its golden file");
}

fn render(
    f: fn(&NodeBootstrap) -> Result<String, userdata::UserDataError>,
    custom: Option<&str>,
    kubelet: Option<&KubeletConfiguration>,
) -> String {
    let (cluster, labels, taints) = (cluster(), labels(), taints());
    f(&NodeBootstrap {
        cluster: &cluster,
        labels: &labels,
        taints: &taints,
        kubelet,
        custom,
    })
    .unwrap()
}

#[test]
fn al2023_nodeconfig() {
    check(
        "al2023.txt",
        &render(userdata::al2023, None, Some(&kubelet())),
    );
}

/// Karpenter v1.15's schemaless `spec.kubelet`: a field it does not map reaches AL2023's
/// NodeConfig as written, and never displaces what Fleetwright sets (the taints).
#[test]
fn al2023_passes_other_kubelet_fields_through() {
    let mut k = kubelet();
    k.extra
        .insert("cpuManagerPolicy".into(), serde_json::json!("static"));
    k.extra
        .insert("registryPullQPS".into(), serde_json::json!(10));
    k.extra
        .insert("registerWithTaints".into(), serde_json::json!([]));
    let text = render(userdata::al2023, None, Some(&k));
    assert!(text.contains("cpuManagerPolicy: static"), "{text}");
    assert!(text.contains("registryPullQPS: 10"), "{text}");
    assert!(text.contains("key: dedicated"), "the taints stay: {text}");
}

#[test]
fn al2023_user_parts_come_first() {
    let custom = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUNDARY\"\n\n--BOUNDARY\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n#!/bin/bash\necho \"custom setup\"\n\n--BOUNDARY--\n";
    let out = render(userdata::al2023, Some(custom), None);
    assert!(out.find("custom setup").unwrap() < out.find("kind: NodeConfig").unwrap());
    check("al2023-custom.txt", &out);
}

#[test]
fn al2_bootstrap_script() {
    let out = render(
        userdata::al2,
        Some("#!/bin/bash\necho before-bootstrap"),
        Some(&kubelet()),
    );
    assert!(out.find("before-bootstrap").unwrap() < out.find("/etc/eks/bootstrap.sh").unwrap());
    check("al2.txt", &out);
}

#[test]
fn bottlerocket_settings_merged_over_the_users_toml() {
    let custom = "[settings.kubernetes]\ncluster-name = \"overridden\"\n\n[settings.kubernetes.node-labels]\nteam = \"platform\"\n\n[settings.host-containers.admin]\nenabled = true\n";
    let out = render(userdata::bottlerocket, Some(custom), Some(&kubelet()));
    let doc: toml::Table = out.parse().unwrap();
    let k8s = &doc["settings"]["kubernetes"];
    assert_eq!(
        k8s["cluster-name"].as_str(),
        Some("eks-dev"),
        "cluster fields win"
    );
    assert_eq!(
        k8s["node-labels"]["team"].as_str(),
        Some("platform"),
        "user labels kept"
    );
    assert_eq!(
        doc["settings"]["host-containers"]["admin"]["enabled"].as_bool(),
        Some(true)
    );
    check("bottlerocket.txt", &out);
}

#[test]
fn bottlerocket_rejects_invalid_toml_by_field() {
    let (cluster, labels, taints) = (cluster(), labels(), taints());
    let err = userdata::bottlerocket(&NodeBootstrap {
        cluster: &cluster,
        labels: &labels,
        taints: &taints,
        kubelet: None,
        custom: Some("[settings\nbroken"),
    })
    .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("userData: not valid Bottlerocket TOML"),
        "{err}"
    );
}

/// Karpenter v1.15's kubelet expressions reach the node as their values for its instance type,
/// never as the expressions (the kubelet could not read one); reservations round up as
/// Karpenter writes them, and quantities stay as written.
#[test]
fn kubelet_expressions_reach_user_data_evaluated_per_instance_type() {
    let catalog = fleetwright_core::Catalog::embedded();
    let raw = |name: &str| {
        catalog
            .raw
            .iter()
            .find(|r| r.instance_type == name)
            .unwrap()
    };
    let kubelet = KubeletConfiguration {
        max_pods: Some(MaxPods::Expression("min(vcpus * 8, 110)".into())),
        kube_reserved: Some(
            [
                ("memory".to_string(), "11 * max_pods + 255".to_string()),
                ("ephemeral-storage".to_string(), "2Gi".to_string()),
            ]
            .into(),
        ),
        ..Default::default()
    };
    assert!(userdata::has_expressions(&kubelet).unwrap());
    let small = userdata::evaluated(&kubelet, raw("m5.large")).unwrap();
    let large = userdata::evaluated(&kubelet, raw("m5.4xlarge")).unwrap();
    assert_eq!(small.max_pods, Some(MaxPods::Count(16)));
    assert_eq!(large.max_pods, Some(MaxPods::Count(110)));
    // 11 × 16 + 255 = 431, up to 432Mi; 11 × 110 + 255 = 1465, up to 1472Mi.
    let reserved = |k: &KubeletConfiguration| k.kube_reserved.clone().unwrap();
    assert_eq!(reserved(&small)["memory"], "432Mi");
    assert_eq!(reserved(&large)["memory"], "1472Mi");
    assert_eq!(reserved(&small)["ephemeral-storage"], "2Gi");

    let al2023 = render(userdata::al2023, None, Some(&small));
    assert!(al2023.contains("maxPods: 16"), "{al2023}");
    assert!(al2023.contains("memory: 432Mi"), "{al2023}");
    assert!(!al2023.contains("vcpus"), "{al2023}");
    let al2 = render(userdata::al2, None, Some(&large));
    assert!(al2.contains("--max-pods=110"), "{al2}");
    let bottlerocket = render(userdata::bottlerocket, None, Some(&small));
    assert!(bottlerocket.contains("max-pods = 16"), "{bottlerocket}");

    let bad = KubeletConfiguration {
        max_pods: Some(MaxPods::Expression("memory_mib / (vcpus - 2)".into())),
        ..Default::default()
    };
    let err = userdata::evaluated(&bad, raw("m5.large")).unwrap_err();
    assert!(
        err.0.contains("spec.kubelet.maxPods") && err.0.contains("m5.large"),
        "{}",
        err.0
    );
}
