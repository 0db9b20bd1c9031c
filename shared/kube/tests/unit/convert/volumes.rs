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
        pvc("gone-class", None, Some("deleted")),
    ];
    let got = claims(&pvcs, &pvs, &classes, false);
    let driver = |c: &str| got.drivers.get(&("db".into(), c.into())).cloned();
    assert_eq!(driver("csi").as_deref(), Some("efs.csi.aws.com"));
    assert_eq!(driver("tree").as_deref(), Some(EBS_CSI_DRIVER));
    assert_eq!(driver("nfs"), None);
    assert_eq!(driver("new-gp3").as_deref(), Some(EBS_CSI_DRIVER));
    assert_eq!(driver("new-gp2").as_deref(), Some(EBS_CSI_DRIVER));
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
    let facts = claims(&pvcs, &[], &classes, false);
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

fn pending(name: &str, claim: &str) -> Pod {
    of(json!({
        "metadata": {"name": name, "namespace": "db"},
        "spec": {"containers": [{"name": "c"}], "volumes": [
            {"name": "tmp", "emptyDir": {}},
            {"name": "data", "persistentVolumeClaim": {"claimName": claim}},
        ]},
    }))
}

/// A pending pod whose claim kube-scheduler would never bind is refused, named with its field
/// and the claim; one whose claim is fine, and a bound pod whatever its claims, convert.
#[test]
fn a_pending_pod_whose_claim_would_never_bind_is_named_with_the_claim() {
    let classes: Vec<StorageClass> = vec![
        of(
            json!({"metadata": {"name": "gp3", "annotations": {DEFAULT_CLASS: "true"}},
            "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer"}),
        ),
        of(
            json!({"metadata": {"name": "now"}, "provisioner": "ebs.csi.aws.com",
            "volumeBindingMode": "Immediate"}),
        ),
    ];
    let mut deleting = pvc("deleting", None, Some("gp3"));
    deleting.metadata.deletion_timestamp = Some(of(json!("2026-11-25T12:00:00Z")));
    let pvcs = vec![
        pvc("ok", None, Some("gp3")),
        pvc("defaulted", None, None),
        pvc("typo", None, Some("gp-3")),
        pvc("immediate", None, Some("now")),
        pvc("lost-volume", Some("pv-gone"), Some("gp3")),
        deleting,
    ];
    let pvs: Vec<PersistentVolume> =
        vec![of(json!({"metadata": {"name": "pv-other"}, "spec": {}}))];
    let facts = claims(&pvcs, &pvs, &classes, true);
    let convert = |claim: &str| crate::convert::pod(&pending("p", claim), &facts);
    assert!(convert("ok").is_ok());
    assert_eq!(
        convert("defaulted").unwrap().volumes,
        [(EBS_CSI_DRIVER.to_string(), "db/defaulted".to_string())]
    );
    for (claim, says) in [
        ("missing", "persistentvolumeclaim db/missing not found"),
        ("typo", "storageClassName gp-3, which does not exist"),
        ("immediate", "binds it Immediate"),
        (
            "lost-volume",
            "persistentvolume pv-gone, which does not exist",
        ),
        ("deleting", "is being deleted"),
    ] {
        let error = convert(claim).unwrap_err().to_string();
        assert!(error.contains("Pod db/p"), "{error}");
        assert!(
            error.contains("spec.volumes[1].persistentVolumeClaim.claimName"),
            "{error}"
        );
        assert!(error.contains(says), "{claim}: {error}");
    }
    let mut bound = pending("p", "missing");
    bound.spec.as_mut().unwrap().node_name = Some("n1".into());
    assert!(crate::convert::pod(&bound, &facts).is_ok());
    // A dump that holds no claims checks none.
    assert!(crate::convert::pod(&pending("p", "missing"), &claims(&[], &[], &[], false)).is_ok());
}

/// An unbound claim's StorageClass `allowedTopologies` pin the pod's zones, by either zone key.
#[test]
fn a_storage_class_s_allowed_topologies_pin_an_unbound_claim_s_zones() {
    let classes: Vec<StorageClass> = vec![
        of(
            json!({"metadata": {"name": "gp3-1b"}, "provisioner": "ebs.csi.aws.com",
            "allowedTopologies": [{"matchLabelExpressions": [
                {"key": EBS_CSI_ZONE, "values": ["us-east-1b"]}]}]}),
        ),
        of(
            json!({"metadata": {"name": "gp3-ac"}, "provisioner": "ebs.csi.aws.com",
            "allowedTopologies": [
                {"matchLabelExpressions": [{"key": ZONE, "values": ["us-east-1a"]}]},
                {"matchLabelExpressions": [{"key": ZONE, "values": ["us-east-1c"]}]}]}),
        ),
    ];
    let pvcs = vec![
        pvc("b", None, Some("gp3-1b")),
        pvc("ac", None, Some("gp3-ac")),
    ];
    let facts = claims(&pvcs, &[], &classes, true);
    let zones = |claim: &str| {
        let pod = crate::convert::pod(&pending("p", claim), &facts).unwrap();
        pod.volume_zones.unwrap().into_iter().collect::<Vec<_>>()
    };
    assert_eq!(zones("b"), ["us-east-1b"]);
    assert_eq!(zones("ac"), ["us-east-1a", "us-east-1c"]);
}
