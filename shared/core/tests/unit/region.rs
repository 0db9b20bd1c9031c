use super::*;

#[test]
fn zones_name_their_region() {
    assert_eq!(
        of_zone("ap-northeast-2a").as_deref(),
        Some("ap-northeast-2")
    );
    assert_eq!(of_zone("us-west-2-lax-1a").as_deref(), Some("us-west-2"));
    assert_eq!(of_zone("us-gov-west-1b").as_deref(), Some("us-gov-west-1"));
    assert_eq!(of_zone("eu-west-1").as_deref(), Some("eu-west-1"));
    assert_eq!(of_zone("zone-a"), None);
    assert_eq!(of_zone("Us-east-1a"), None);
    assert_eq!(
        zone_of_provider_id("aws:///eu-west-1c/i-0abc"),
        Some("eu-west-1c")
    );
    assert_eq!(zone_of_provider_id("kwok://node-1"), None);
}

/// A dump with no nodes still names its region through its EC2NodeClasses' subnet zones.
#[test]
fn a_classes_subnet_zones_name_the_region() {
    let mut snapshot = Snapshot::default();
    snapshot.node_classes.insert(
        "default".into(),
        crate::catalog::NodeClassSettings {
            zones: Some(["eu-west-1a".to_string(), "eu-west-1b".to_string()].into()),
            ..Default::default()
        },
    );
    let inferred = infer(&snapshot).unwrap();
    assert_eq!(inferred.region, "eu-west-1");
    assert!(
        inferred.evidence.contains("EC2NodeClass subnets"),
        "{}",
        inferred.evidence
    );
}
