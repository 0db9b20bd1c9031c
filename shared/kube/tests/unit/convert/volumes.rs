use super::*;
use serde_json::json;

fn of<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
    serde_json::from_value(value).unwrap()
}

fn pvc(name: &str, volume: Option<&str>, class: Option<&str>) -> PersistentVolumeClaim {
    of(json!({
        "metadata": {"name": name, "namespace": "db"},
        "spec": {"volumeName": volume, "storageClassName": class},
    }))
}

/// A claim's driver is its bound volume's (CSI, or in-tree EBS by its CSI name), else its
/// class's provisioner (in-tree by its CSI name); a bound volume with no CSI driver, or a
/// claim with no class, is not counted.
#[test]
fn a_claims_driver_comes_from_its_volume_else_its_class() {
    let pvs: Vec<PersistentVolume> = vec![
        of(
            json!({"metadata": {"name": "pv-csi", "labels": {ZONE: "us-east-1a"}},
            "spec": {"csi": {"driver": "efs.csi.aws.com", "volumeHandle": "h"}}}),
        ),
        of(json!({"metadata": {"name": "pv-tree"},
            "spec": {"awsElasticBlockStore": {"volumeID": "vol-1"}}})),
        of(json!({"metadata": {"name": "pv-nfs"},
            "spec": {"nfs": {"server": "s", "path": "/"}}})),
    ];
    let classes: Vec<StorageClass> = vec![
        of(json!({"metadata": {"name": "gp3"}, "provisioner": "ebs.csi.aws.com"})),
        of(json!({"metadata": {"name": "gp2"}, "provisioner": "kubernetes.io/aws-ebs"})),
    ];
    let pvcs = vec![
        pvc("csi", Some("pv-csi"), Some("gp3")),
        pvc("tree", Some("pv-tree"), None),
        pvc("nfs", Some("pv-nfs"), Some("gp3")),
        pvc("new-gp3", None, Some("gp3")),
        pvc("new-gp2", None, Some("gp2")),
        pvc("no-class", None, None),
        pvc("gone-class", None, Some("deleted")),
    ];
    let got = claims(&pvcs, &pvs, &classes);
    let driver = |c: &str| got.drivers.get(&("db".into(), c.into())).cloned();
    assert_eq!(driver("csi").as_deref(), Some("efs.csi.aws.com"));
    assert_eq!(driver("tree").as_deref(), Some(EBS_CSI_DRIVER));
    assert_eq!(driver("nfs"), None);
    assert_eq!(driver("new-gp3").as_deref(), Some(EBS_CSI_DRIVER));
    assert_eq!(driver("new-gp2").as_deref(), Some(EBS_CSI_DRIVER));
    assert_eq!(driver("no-class"), None);
    assert_eq!(driver("gone-class"), None);
    let zones = got.zones.get(&("db".into(), "csi".into())).unwrap();
    assert_eq!(zones.iter().collect::<Vec<_>>(), ["us-east-1a"]);
}

/// A pod counts each claim once, generic ephemeral volumes by their `<pod>-<volume>` claim.
#[test]
fn a_pod_counts_each_claim_once_ephemeral_ones_included() {
    let classes: Vec<StorageClass> = vec![of(
        json!({"metadata": {"name": "gp3"}, "provisioner": "ebs.csi.aws.com"}),
    )];
    let pvcs = vec![
        pvc("data", None, Some("gp3")),
        pvc("web-0-scratch", None, Some("gp3")),
    ];
    let facts = claims(&pvcs, &[], &classes);
    let pod: Pod = of(json!({
        "metadata": {"name": "web-0", "namespace": "db"},
        "spec": {"containers": [{"name": "c"}], "volumes": [
            {"name": "a", "persistentVolumeClaim": {"claimName": "data"}},
            {"name": "b", "persistentVolumeClaim": {"claimName": "data"}},
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
            {"name": "tmp", "emptyDir": {}},
        ]},
    }));
    let converted = crate::convert::pod(&pod, &facts).unwrap();
    assert_eq!(
        converted.volumes,
        [
            (EBS_CSI_DRIVER.to_string(), "db/data".to_string()),
            (EBS_CSI_DRIVER.to_string(), "db/web-0-scratch".to_string()),
        ]
    );
}

#[test]
fn a_csinode_gives_its_nodes_limit_per_driver() {
    let csinodes: Vec<CSINode> = vec![
        of(json!({"metadata": {"name": "n1"}, "spec": {"drivers": [
            {"name": "ebs.csi.aws.com", "nodeID": "i-1", "allocatable": {"count": 25}},
            {"name": "efs.csi.aws.com", "nodeID": "i-1"},
        ]}})),
        of(json!({"metadata": {"name": "n2"}, "spec": {"drivers": []}})),
    ];
    let limits = volume_limits(&csinodes);
    assert_eq!(limits.len(), 1);
    assert_eq!(limits["n1"], [("ebs.csi.aws.com".to_string(), 25)].into());
}
