use super::*;
use crate::ami::Ami;

fn request(types: &[&str], capacity: &[&str], zones: &[&str]) -> LaunchRequest {
    LaunchRequest {
        nodeclaim: "default-abcde".into(),
        uid: Some("8c7a2f3e-0000-4000-8000-000000000001".into()),
        nodepool: "default".into(),
        nodeclass: "default".into(),
        instance_types: types.iter().map(|s| s.to_string()).collect(),
        capacity_types: capacity.iter().map(|s| s.to_string()).collect(),
        zones: zones.iter().map(|s| s.to_string()).collect(),
        labels: BTreeMap::new(),
        taints: Vec::new(),
        startup_taints: Vec::new(),
        overlays: Vec::new(),
        reservation_ids: None,
        partition: None,
    }
}

fn subnets() -> Vec<Subnet> {
    vec![
        Subnet {
            id: "subnet-a1".into(),
            zone: "us-east-1a".into(),
            available_ips: 10,
        },
        Subnet {
            id: "subnet-a2".into(),
            zone: "us-east-1a".into(),
            available_ips: 200,
        },
        Subnet {
            id: "subnet-b".into(),
            zone: "us-east-1b".into(),
            available_ips: 50,
        },
    ]
}

fn amis() -> Vec<Ami> {
    vec![
        Ami {
            id: "ami-x86".into(),
            arch: "amd64".into(),
            variant: Some(Variant::Standard),
            created: None,
        },
        Ami {
            id: "ami-arm".into(),
            arch: "arm64".into(),
            variant: Some(Variant::Standard),
            created: None,
        },
    ]
}

fn best(list: &[Subnet]) -> BTreeMap<&str, &Subnet> {
    let mut out: BTreeMap<&str, &Subnet> = BTreeMap::new();
    for s in list {
        if out
            .get(s.zone.as_str())
            .is_none_or(|b| b.available_ips < s.available_ips)
        {
            out.insert(&s.zone, s);
        }
    }
    out
}

#[test]
fn spot_is_preferred_when_allowed_and_offered() {
    let catalog = Catalog::embedded();
    assert_eq!(
        capacity_type(&request(&["m5.large"], &[], &[]), catalog, &[], Utc::now()),
        Some("spot")
    );
    assert_eq!(
        capacity_type(
            &request(&["m5.large"], &["on-demand"], &[]),
            catalog,
            &[],
            Utc::now()
        ),
        Some("on-demand")
    );
    let mut ice = catalog.clone();
    for zone in &catalog.zones["m5.large"] {
        ice.unavailable
            .insert(("spot".into(), "m5.large".into(), zone.clone()));
    }
    assert_eq!(
        capacity_type(&request(&["m5.large"], &[], &[]), &ice, &[], Utc::now()),
        Some("on-demand")
    );
    assert_eq!(
        capacity_type(&request(&["no.such"], &[], &[]), catalog, &[], Utc::now()),
        None
    );
}

fn reservation(id: &str, kind: &str, available: usize) -> ResolvedReservation {
    ResolvedReservation {
        id: id.into(),
        instance_type: "m5.large".into(),
        zone: "us-east-1a".into(),
        kind: kind.into(),
        interruptible: false,
        owner_id: "123456789012".into(),
        instance_match_criteria: "targeted".into(),
        end_time: None,
        available,
    }
}

/// A NodeClaim that allows `reserved` launches into a reservation of one of its types with
/// instances left, at the reserved price, and only into the reservations its requirements
/// name; a used-up or expiring one (a capacity block 40 minutes from its end) takes nothing.
#[test]
fn reserved_is_preferred_when_allowed_and_a_reservation_has_room() {
    let catalog = Catalog::embedded();
    let now = Utc::now();
    let both = request(&["m5.large", "m5.xlarge"], &["reserved", "on-demand"], &[]);
    let open = [reservation("cr-1", "default", 2)];
    assert_eq!(capacity_type(&both, catalog, &open, now), Some("reserved"));
    let list = subnets();
    let out = reserved_overrides(&both, catalog, &open, &best(&list), &amis(), now);
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].reservation.as_deref(), Some("cr-1"));
    assert_eq!(out[0].zone, "us-east-1a");
    assert!(out[0].price < 1e-6);
    let od_only = request(&["m5.large"], &["on-demand"], &[]);
    assert_eq!(
        capacity_type(&od_only, catalog, &open, now),
        Some("on-demand")
    );
    let full = [reservation("cr-1", "default", 0)];
    assert_eq!(capacity_type(&both, catalog, &full, now), Some("on-demand"));
    let mut ending = reservation("cr-2", "capacity-block", 2);
    ending.end_time = Some(now + chrono::Duration::minutes(30));
    assert_eq!(
        capacity_type(&both, catalog, &[ending.clone()], now),
        Some("on-demand")
    );
    ending.end_time = Some(now + chrono::Duration::minutes(41));
    assert_eq!(
        capacity_type(&both, catalog, &[ending], now),
        Some("reserved")
    );
    let mut named = both.clone();
    named.reservation_ids = Some(vec!["cr-9".into()]);
    assert_eq!(
        capacity_type(&named, catalog, &open, now),
        Some("on-demand")
    );
    let b_only = request(&["m5.large"], &["reserved"], &["us-east-1b"]);
    assert_eq!(capacity_type(&b_only, catalog, &open, now), None);
}

#[test]
fn overrides_use_the_roomiest_subnet_the_right_ami_and_allowed_zones() {
    let catalog = Catalog::embedded();
    let list = subnets();
    let req = request(
        &["m6g.large", "m5.large"],
        &[],
        &["us-east-1a", "us-east-1b"],
    );
    let out = overrides(&req, catalog, "on-demand", &best(&list), &amis());
    assert!(!out.is_empty());
    assert!(out
        .iter()
        .all(|o| o.zone == "us-east-1a" || o.zone == "us-east-1b"));
    assert!(out
        .iter()
        .filter(|o| o.zone == "us-east-1a")
        .all(|o| o.subnet_id == "subnet-a2"));
    assert!(out
        .iter()
        .filter(|o| o.instance_type == "m6g.large")
        .all(|o| o.image_id == "ami-arm"));
    assert!(out
        .iter()
        .filter(|o| o.instance_type == "m5.large")
        .all(|o| o.image_id == "ami-x86"));
    assert!(out.windows(2).all(|w| w[0].price <= w[1].price));
    // A GPU type has no nvidia AMI here, so it is left out.
    let gpu = overrides(
        &request(&["g5.xlarge"], &[], &[]),
        catalog,
        "on-demand",
        &best(&list),
        &amis(),
    );
    assert!(gpu.is_empty());
}

#[test]
fn at_most_sixty_instance_types() {
    let catalog = Catalog::embedded();
    let types: Vec<&str> = catalog
        .raw
        .iter()
        .filter(|r| {
            r.processor_info
                .supported_architectures
                .iter()
                .any(|a| a == "x86_64")
        })
        .filter(|r| r.gpu_info.is_none() && r.neuron_info.is_none())
        .map(|r| r.instance_type.as_str())
        .take(150)
        .collect();
    let list = subnets();
    let out = overrides(
        &request(&types, &[], &[]),
        catalog,
        "on-demand",
        &best(&list),
        &amis(),
    );
    let distinct: std::collections::BTreeSet<&str> =
        out.iter().map(|o| o.instance_type.as_str()).collect();
    assert_eq!(distinct.len(), MAX_INSTANCE_TYPES);
}

/// The token names the NodeClaim only: the retry of a launch whose invocation was cut off
/// is the same launch to EC2 whatever offerings, prices, subnets, images or capacity type it
/// asks for this time, so EC2 cannot launch a second instance for it.
#[test]
fn the_client_token_depends_on_the_nodeclaim_alone() {
    let catalog = Catalog::embedded();
    let list = subnets();
    let req = request(&["m5.large", "m5.xlarge"], &[], &[]);
    let uid = req.uid.as_deref();
    let spot = overrides(&req, catalog, "spot", &best(&list), &amis());
    let token = client_token(&req.nodeclaim, uid);
    assert_eq!(token, client_token("default-abcde", uid));
    assert!(token.len() <= 64, "EC2 takes at most 64 characters");

    // What a retry may ask for differently: fewer offerings (one marked unavailable
    // meanwhile), another order, prices, subnets and image, another capacity type.
    let mut retried = spot[1..].to_vec();
    retried.reverse();
    for o in &mut retried {
        o.price *= 1.5;
        o.subnet_id = format!("{}-other", o.subnet_id);
        o.image_id = "ami-newer".into();
    }
    let od = overrides(&req, catalog, "on-demand", &best(&list), &amis());
    assert_ne!(spot, retried);
    assert_ne!(spot, od);
    for (capacity_type, offered) in [("spot", &spot), ("spot", &retried), ("on-demand", &od)] {
        assert_eq!(
            token,
            fleet_token(&req, capacity_type, offered),
            "{capacity_type}: {offered:?}"
        );
    }

    // Another NodeClaim, or one that reuses a deleted NodeClaim's name, is another launch.
    assert_ne!(token, client_token("default-fghij", uid));
    assert_ne!(token, client_token("default-abcde", Some("another-uid")));
}

/// The token CreateFleet is given for a request, its capacity type and its overrides.
fn fleet_token(req: &LaunchRequest, _capacity_type: &str, _overrides: &[Override]) -> String {
    client_token(&req.nodeclaim, req.uid.as_deref())
}

#[test]
fn fleetwright_tags_cannot_be_overridden_by_user_tags() {
    let user: BTreeMap<String, String> = [
        ("team".to_string(), "web".to_string()),
        ("karpenter.sh/nodepool".to_string(), "evil".to_string()),
    ]
    .into();
    let tags = instance_tags("dev", &request(&["m5.large"], &[], &[]), &user);
    assert_eq!(tags["team"], "web");
    assert_eq!(tags["karpenter.sh/nodepool"], "default");
    assert_eq!(tags["kubernetes.io/cluster/dev"], "owned");
    assert_eq!(tags["eks:eks-cluster-name"], "dev");
    assert_eq!(tags["karpenter.sh/nodeclaim"], "default-abcde");
    assert_eq!(tags["Name"], "default/default-abcde");
}

#[test]
fn a_launch_request_comes_from_a_nodeclaim() {
    let claim: NodeClaim = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "default-x1", "labels": {"karpenter.sh/nodepool": "default", "team": "a"}},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [
                    {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large", "c5.large"]},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
                    {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a"]}
                ],
                "taints": [{"key": "gpu", "effect": "NoSchedule"}],
                "startupTaints": [{"key": "init", "value": "x", "effect": "NoExecute"}]
            }
        })).unwrap();
    let req = LaunchRequest::from_nodeclaim(&claim).unwrap();
    assert_eq!(req.instance_types, vec!["m5.large", "c5.large"]);
    assert_eq!(req.capacity_types, vec!["spot"]);
    assert_eq!(req.zones, vec!["us-east-1a"]);
    assert_eq!(req.taints[0].to_string(), "gpu:NoSchedule");
    assert_eq!(req.startup_taints[0].to_string(), "init=x:NoExecute");
    let mut bad = claim.clone();
    bad.spec.taints[0].effect = "Sometimes".into();
    let err = LaunchRequest::from_nodeclaim(&bad).unwrap_err().to_string();
    assert!(
        err.contains("default-x1") && err.contains("spec.taints"),
        "{err}"
    );
}
