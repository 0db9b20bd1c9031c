use super::*;
use fleetwright_cloud::ami::{Ami, AmiFamily};
use fleetwright_cloud::nodeclass::{ResolvedReservation, Subnet};

fn class() -> EC2NodeClass {
    serde_json::from_value(
        json!({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}], "role": "node",
                "subnetSelectorTerms": [{"tags": {"a": "b"}}],
                "securityGroupSelectorTerms": [{"tags": {"a": "b"}}]}}),
    )
    .unwrap()
}

fn resolved() -> ResolvedNodeClass {
    ResolvedNodeClass {
        name: "default".into(),
        family: AmiFamily::AL2023,
        subnets: vec![Subnet {
            id: "subnet-1".into(),
            zone: "us-east-1a".into(),
            available_ips: 100,
        }],
        security_groups: vec!["sg-1".into()],
        amis: vec![Ami {
            id: "ami-1".into(),
            arch: "amd64".into(),
            variant: None,
            created: None,
        }],
        instance_profile: "profile-1".into(),
        reservations: vec![ResolvedReservation {
            id: "cr-1".into(),
            instance_type: "m5.large".into(),
            zone: "us-east-1a".into(),
            kind: "default".into(),
            interruptible: false,
            owner_id: "123".into(),
            instance_match_criteria: "targeted".into(),
            end_time: None,
            available: 3,
        }],
        placement_group: None,
    }
}

fn of<'a>(status: &'a EC2NodeClassStatus, type_: &str) -> &'a Condition {
    status.conditions.iter().find(|c| c.type_ == type_).unwrap()
}

#[test]
fn a_resolved_class_lists_what_it_selects_and_is_ready_with_stable_transition_times() {
    let t0: DateTime<Utc> = "2026-11-25T10:00:00Z".parse().unwrap();
    let status = nodeclass_status(&class(), &Ok(resolved()), t0);
    assert_eq!(
        status.subnets,
        vec![json!({"id": "subnet-1", "zone": "us-east-1a"})]
    );
    assert_eq!(status.security_groups, vec![json!({"id": "sg-1"})]);
    assert_eq!(status.amis[0]["id"], "ami-1");
    assert_eq!(status.instance_profile.as_deref(), Some("profile-1"));
    assert_eq!(
        status.capacity_reservations[0].available_instance_count,
        Some(3)
    );
    for type_ in [
        conditions::SUBNETS_READY,
        conditions::SECURITY_GROUPS_READY,
        conditions::AMIS_READY,
        "PlacementGroupReady",
        conditions::READY,
    ] {
        assert_eq!(of(&status, type_).status, "True", "{type_}");
    }
    let mut written = class();
    written.status = Some(status.clone());
    let later = t0 + chrono::Duration::minutes(5);
    let again = nodeclass_status(&written, &Ok(resolved()), later);
    assert_eq!(again, status, "nothing changed, nothing to write");
    let dump = ClusterDump {
        nodeclasses: vec![written.clone()],
        ..Default::default()
    };
    let ok = Resolutions::from([("default".to_string(), Ok(resolved()))]);
    assert!(nodeclass_statuses(&dump, &ok, later).is_empty());

    let why = "EC2NodeClass default: field subnetSelectorTerms: no subnet matches".to_string();
    let failed = nodeclass_status(&written, &Err(why.clone()), later);
    assert_eq!(of(&failed, conditions::SUBNETS_READY).status, "False");
    assert_eq!(
        of(&failed, conditions::SUBNETS_READY).reason.as_deref(),
        Some("SubnetsNotFound")
    );
    assert_eq!(
        of(&failed, conditions::SUBNETS_READY).message.as_deref(),
        Some(why.as_str())
    );
    assert_eq!(
        of(&failed, conditions::SECURITY_GROUPS_READY).status,
        "True"
    );
    assert_eq!(
        of(&failed, conditions::SECURITY_GROUPS_READY).last_transition_time,
        of(&status, conditions::SECURITY_GROUPS_READY).last_transition_time,
        "unchanged conditions keep their time"
    );
    assert_eq!(of(&failed, conditions::READY).status, "False");
    assert_eq!(
        failed.subnets, status.subnets,
        "the lists last resolved are kept"
    );
    // A placement group EC2 does not know: PlacementGroupReady says so, and the class is
    // not Ready (nothing launches for it).
    let why_group =
        "EC2NodeClass default: field placementGroupSelector: placement group \"pg-a\" not found";
    let unplaced = nodeclass_status(&written, &Err(why_group.to_string()), later);
    assert_eq!(of(&unplaced, "PlacementGroupReady").status, "False");
    assert_eq!(
        of(&unplaced, "PlacementGroupReady").reason.as_deref(),
        Some("PlacementGroupNotFound")
    );
    assert_eq!(of(&unplaced, conditions::SUBNETS_READY).status, "True");
    assert_eq!(of(&unplaced, conditions::READY).status, "False");
    let classes = classes_ready(&dump, &Resolutions::from([("default".into(), Err(why))]));
    assert!(!classes["default"]);
    assert!(
        classes_ready(&dump, &Resolutions::new())["default"],
        "from status"
    );
}

#[test]
fn an_invalid_nodepool_says_which_field_and_is_not_ready() {
    let now = Utc::now();
    let why = "NodePool batch: spec.disruption.consolidateAfter: invalid duration \"30 seconds\"";
    let out = nodepool_conditions(&[], Some(true), Some(why), now);
    let of = |t: &str| out.iter().find(|c| c.type_ == t).unwrap();
    assert_eq!(of(conditions::VALIDATION_SUCCEEDED).status, "False");
    assert_eq!(
        of(conditions::VALIDATION_SUCCEEDED).reason.as_deref(),
        Some("NodePoolValidationFailed")
    );
    assert_eq!(
        of(conditions::VALIDATION_SUCCEEDED).message.as_deref(),
        Some(why)
    );
    assert_eq!(of(conditions::READY).status, "False");
}

#[test]
fn a_nodepool_is_ready_only_while_its_class_is() {
    let now: DateTime<Utc> = "2026-11-25T10:00:00Z".parse().unwrap();
    let get = |c: &[Condition], t: &str| {
        c.iter()
            .find(|x| x.type_ == t)
            .map(|x| (x.status.clone(), x.reason.clone().unwrap_or_default()))
    };
    let ready = nodepool_conditions(&[], Some(true), None, now);
    assert_eq!(
        get(&ready, conditions::READY),
        Some(("True".into(), conditions::READY.into()))
    );
    assert_eq!(
        get(&ready, conditions::VALIDATION_SUCCEEDED).unwrap().0,
        "True"
    );
    let not = nodepool_conditions(&ready, Some(false), None, now);
    assert_eq!(
        get(&not, conditions::NODE_CLASS_READY),
        Some(("False".into(), "NodeClassNotReady".into()))
    );
    assert_eq!(get(&not, conditions::READY).unwrap().0, "False");
    let missing = nodepool_conditions(&[], None, None, now);
    assert_eq!(
        get(&missing, conditions::NODE_CLASS_READY).unwrap().1,
        "NodeClassNotFound"
    );
    assert_eq!(
        nodepool_conditions(&ready, Some(true), None, now + chrono::Duration::hours(1)),
        ready
    );
}
