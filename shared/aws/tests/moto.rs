//! Integration tests of the AWS adapter against a local moto server (started by scripts/test.sh):
//! the real SDK clients, real request and response shapes.

mod support;

use std::collections::BTreeSet;

use aws_sdk_ec2::types::{Filter, ResourceType, Tag, TagSpecification};
use base64::Engine;
use chrono::{Duration, Utc};
use fleetwright_aws::ami::Variant;
use fleetwright_aws::cloud::{Cloud, Ec2Cloud};
use fleetwright_aws::instances::{self, Termination};
use fleetwright_aws::{AwsError, LaunchRequest};
use fleetwright_core::NodeClassSettings;
use support::*;

fn request(nodeclaim: &str, types: &[&str], capacity: &[&str]) -> LaunchRequest {
    LaunchRequest {
        nodeclaim: nodeclaim.into(),
        uid: None,
        nodepool: "default".into(),
        nodeclass: "default".into(),
        instance_types: types.iter().map(|s| s.to_string()).collect(),
        capacity_types: capacity.iter().map(|s| s.to_string()).collect(),
        zones: vec!["us-east-1a".into(), "us-east-1b".into()],
        labels: [("team".to_string(), "web".to_string())].into(),
        taints: Vec::new(),
        startup_taints: Vec::new(),
        overlays: Vec::new(),
        reservation_ids: None,
        partition: None,
    }
}

async fn cloud_for(cluster: &str) -> (Ec2Cloud, Fixture) {
    let clients = clients();
    let fixture = Fixture::new(&clients, cluster).await;
    let cloud = Ec2Cloud::new(clients, cluster)
        .with_cluster_info(fixture.cluster_info())
        .with_parameter_root(PARAMETER_ROOT);
    (cloud, fixture)
}

async fn describe(cloud: &Ec2Cloud, id: &str) -> aws_sdk_ec2::types::Instance {
    describe_instance(&cloud.clients().ec2, id).await
}

/// The data of every version of every launch template a cluster owns.
async fn template_data(
    ec2: &aws_sdk_ec2::Client,
    cluster: &str,
) -> Vec<aws_sdk_ec2::types::ResponseLaunchTemplateData> {
    let owned = Filter::builder()
        .name(format!("tag:kubernetes.io/cluster/{cluster}"))
        .values("owned")
        .build();
    let templates = ec2
        .describe_launch_templates()
        .filters(owned)
        .send()
        .await
        .unwrap();
    let mut out = Vec::new();
    for t in templates.launch_templates() {
        let versions = ec2
            .describe_launch_template_versions()
            .launch_template_name(t.launch_template_name().unwrap())
            .send()
            .await
            .unwrap();
        let data = versions.launch_template_versions().iter();
        out.extend(data.filter_map(|v| v.launch_template_data().cloned()));
    }
    out
}

fn tag<'a>(i: &'a aws_sdk_ec2::types::Instance, key: &str) -> Option<&'a str> {
    i.tags()
        .iter()
        .find(|t| t.key() == Some(key))
        .and_then(|t| t.value())
}

#[tokio::test]
async fn catalog_discovery_reads_the_apis_instance_types_and_zones() {
    let clients = clients();
    let catalog = fleetwright_aws::catalog::discover(
        &clients.ec2,
        REGION,
        fleetwright_core::Catalog::embedded_prices(),
    )
    .await
    .unwrap();
    assert!(catalog.raw.len() > 500, "only {} types", catalog.raw.len());
    let m5 = catalog
        .raw
        .iter()
        .find(|r| r.instance_type == "m5.large")
        .unwrap();
    assert_eq!(m5.v_cpu_info.default_v_cpus, 2);
    assert_eq!(m5.memory_info.size_in_mib, 8192);
    assert!(m5.network_info.maximum_network_interfaces >= 3);
    assert!(catalog.zones["m5.large"].contains("us-east-1a"));
    let types = catalog.instance_types(&NodeClassSettings::default());
    let resolved = types.iter().find(|t| t.name == "m5.large").unwrap();
    assert_eq!(resolved.capacity.pods, 29, "ENI-limited max pods");
    assert_eq!(resolved.allocatable.cpu, 1930);
    // Before a spot refresh, spot costs what on-demand costs.
    assert_eq!(
        catalog.spot_price("m5.large", "us-east-1a"),
        catalog.on_demand.get("m5.large").copied()
    );
}

#[tokio::test]
async fn on_demand_prices_are_read_page_by_page_from_the_price_list_api() {
    // scripts/moto-server.py serves GetProducts from the embedded us-east-1 table.
    let clients = clients();
    let prices = fleetwright_aws::pricing::on_demand_prices(&clients.pricing, REGION)
        .await
        .unwrap();
    let table = fleetwright_core::Catalog::embedded_prices();
    assert_eq!(prices.len(), table.len(), "every page read, metal included");
    assert_eq!(prices.get("m5.large"), table.get("m5.large"));
    assert_eq!(prices.get("m5.metal"), table.get("m5.metal"));

    let err = fleetwright_aws::pricing::on_demand_prices(&clients.pricing, "eu-west-1")
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("no on-demand prices for eu-west-1"),
        "{err}"
    );

    let cloud = fleetwright_aws::Ec2Cloud::new(clients, "priced");
    let catalog = cloud.catalog(Utc::now()).await.unwrap();
    assert_eq!(
        catalog.on_demand_prices,
        fleetwright_core::catalog::OnDemandPrices::PriceList
    );
}

#[tokio::test]
async fn subnets_and_security_groups_are_found_by_tag_and_by_id() {
    let (cloud, fx) = cloud_for("disco").await;
    let resolved = cloud
        .nodeclass(&fx.nodeclass("default"), Utc::now())
        .await
        .unwrap();
    let ids: BTreeSet<&str> = resolved.subnets.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, fx.subnets.values().map(String::as_str).collect());
    assert_eq!(resolved.security_groups, vec![fx.security_group.clone()]);
    assert!(resolved.subnets.iter().all(|s| s.available_ips > 0));

    let mut by_id = fx.nodeclass("by-id");
    by_id.spec.subnet_selector_terms =
        vec![serde_json::from_value(serde_json::json!({"id": fx.subnets["us-east-1b"]})).unwrap()];
    by_id.spec.security_group_selector_terms =
        vec![serde_json::from_value(serde_json::json!({"name": "disco-nodes"})).unwrap()];
    let resolved = cloud.nodeclass(&by_id, Utc::now()).await.unwrap();
    assert_eq!(resolved.subnets.len(), 1);
    assert_eq!(resolved.subnets[0].zone, "us-east-1b");
    assert_eq!(resolved.security_groups, vec![fx.security_group.clone()]);

    let mut nothing = fx.nodeclass("nothing");
    nothing.spec.subnet_selector_terms = vec![serde_json::from_value(
        serde_json::json!({"tags": {"karpenter.sh/discovery": "no-such-cluster"}}),
    )
    .unwrap()];
    let err = cloud
        .nodeclass(&nothing, Utc::now())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("EC2NodeClass nothing") && err.contains("subnetSelectorTerms"),
        "{err}"
    );
}

#[tokio::test]
async fn an_ami_alias_resolves_through_the_ssm_parameters() {
    let (cloud, fx) = cloud_for("amis").await;
    let resolved = cloud
        .nodeclass(&fx.nodeclass("default"), Utc::now())
        .await
        .unwrap();
    let find = |arch: &str, variant| {
        resolved
            .amis
            .iter()
            .find(|a| a.arch == arch && a.variant == Some(variant))
            .map(|a| a.id.clone())
    };
    assert_eq!(
        find("amd64", Variant::Standard),
        Some(fx.amis["amd64"].clone())
    );
    assert_eq!(
        find("arm64", Variant::Standard),
        Some(fx.amis["arm64"].clone())
    );
    assert_eq!(
        find("amd64", Variant::Nvidia),
        Some(fx.amis["amd64-nvidia"].clone())
    );
    assert_eq!(
        resolved.amis.len(),
        3,
        "parameters that do not exist are skipped"
    );

    let mut pinned = fx.nodeclass("pinned");
    pinned.spec.ami_selector_terms =
        vec![serde_json::from_value(serde_json::json!({"alias": "al2023@v19990101"})).unwrap()];
    let err = cloud
        .nodeclass(&pinned, Utc::now())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("amiSelectorTerms[0].alias") && err.contains("no resources"),
        "{err}"
    );
}

/// A dry run's cloud resolves an EC2NodeClass with a role and names its instance profile, but
/// creates nothing in IAM (shadow mode writes nothing to the account).
#[tokio::test]
async fn a_read_only_cloud_creates_no_instance_profile() {
    let (_, fx) = cloud_for("readonly").await;
    let cloud = Ec2Cloud::new(clients(), "readonly")
        .with_cluster_info(fx.cluster_info())
        .with_parameter_root(PARAMETER_ROOT)
        .read_only();
    let mut class = fx.nodeclass("default");
    class.spec.instance_profile = None;
    class.spec.role = Some("KarpenterNodeRole-readonly".into());
    let resolved = cloud.nodeclass(&class, Utc::now()).await.unwrap();
    let found = cloud
        .clients()
        .iam
        .get_instance_profile()
        .instance_profile_name(&resolved.instance_profile)
        .send()
        .await;
    assert!(found.is_err(), "no instance profile was created: {found:?}");
}

#[tokio::test]
async fn a_role_gets_an_instance_profile_created_once() {
    let (cloud, fx) = cloud_for("profiles").await;
    let iam = &cloud.clients().iam;
    iam.create_role()
        .role_name("KarpenterNodeRole-profiles")
        .assume_role_policy_document(r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#)
        .send()
        .await
        .unwrap();
    let mut class = fx.nodeclass("default");
    class.spec.instance_profile = None;
    class.spec.role = Some("KarpenterNodeRole-profiles".into());
    let first = cloud
        .nodeclass(&class, Utc::now())
        .await
        .unwrap()
        .instance_profile;
    let cold = Ec2Cloud::new(clients(), "profiles")
        .with_cluster_info(fx.cluster_info())
        .with_parameter_root(PARAMETER_ROOT);
    let second = cold
        .nodeclass(&class, Utc::now())
        .await
        .unwrap()
        .instance_profile;
    assert_eq!(first, second);
    let profile = iam
        .get_instance_profile()
        .instance_profile_name(&first)
        .send()
        .await
        .unwrap();
    let roles: Vec<&str> = profile
        .instance_profile()
        .unwrap()
        .roles()
        .iter()
        .map(|r| r.role_name())
        .collect();
    assert_eq!(roles, vec!["KarpenterNodeRole-profiles"]);
}

#[tokio::test]
async fn a_launch_template_is_created_once_and_reused() {
    let (cloud, fx) = cloud_for("templates").await;
    let class = fx.nodeclass("default");
    let first = cloud
        .launch(
            &request("default-lt1", &["m5.large"], &["on-demand"]),
            &class,
            Utc::now(),
        )
        .await
        .unwrap();
    let second = cloud
        .launch(
            &request("default-lt2", &["m5.large"], &["on-demand"]),
            &class,
            Utc::now(),
        )
        .await
        .unwrap();
    assert_ne!(first.instance_id, second.instance_id);
    // A cold container finds the template by name instead of creating another.
    let cold = Ec2Cloud::new(clients(), "templates")
        .with_cluster_info(fx.cluster_info())
        .with_parameter_root(PARAMETER_ROOT);
    cold.launch(
        &request("default-lt3", &["m5.large"], &["on-demand"]),
        &class,
        Utc::now(),
    )
    .await
    .unwrap();

    let ec2 = &cloud.clients().ec2;
    let templates = ec2
        .describe_launch_templates()
        .filters(
            Filter::builder()
                .name("tag:kubernetes.io/cluster/templates")
                .values("owned")
                .build(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(
        templates.launch_templates().len(),
        1,
        "one template for one (AMI, user data)"
    );
    let name = templates.launch_templates()[0]
        .launch_template_name()
        .unwrap()
        .to_string();
    assert!(name.starts_with("fleetwright/templates/"), "{name}");
    let versions = ec2
        .describe_launch_template_versions()
        .launch_template_name(&name)
        .send()
        .await
        .unwrap();
    let data = versions.launch_template_versions()[0]
        .launch_template_data()
        .unwrap();
    assert_eq!(data.image_id(), Some(fx.amis["amd64"].as_str()));
    let metadata = data.metadata_options().unwrap();
    assert_eq!(metadata.http_tokens().map(|t| t.as_str()), Some("required"));
    assert_eq!(metadata.http_put_response_hop_limit(), Some(1));
    let root = &data.block_device_mappings()[0];
    assert_eq!(root.device_name(), Some("/dev/xvda"));
    let ebs = root.ebs().unwrap();
    assert_eq!((ebs.volume_size(), ebs.encrypted()), (Some(20), Some(true)));
    assert_eq!(ebs.volume_type().map(|v| v.as_str()), Some("gp3"));
    let user_data = base64::engine::general_purpose::STANDARD
        .decode(data.user_data().unwrap())
        .unwrap();
    let user_data = String::from_utf8(user_data).unwrap();
    assert!(user_data.contains("kind: NodeConfig"), "{user_data}");
    assert!(
        user_data.contains("karpenter.sh/unregistered"),
        "{user_data}"
    );
    assert!(
        user_data.contains("karpenter.sh/capacity-type=on-demand"),
        "{user_data}"
    );
}

/// An EC2NodeClass's `capacityReservationSelectorTerms` resolve through DescribeCapacityReservations
/// (moto has no reservations; scripts/moto-server.py adds them), and a NodeClaim that allows
/// `reserved` launches into the reservation: capacity type `reserved`, the reservation named on
/// the launch, and a launch template that targets it.
#[tokio::test]
async fn a_capacity_reservation_is_resolved_and_launched_into() {
    let (cloud, fx) = cloud_for("reserved").await;
    let ec2 = &cloud.clients().ec2;
    let team = [("team", "reserved-test")];
    let created = ec2
        .create_capacity_reservation()
        .instance_type("m5.large")
        .instance_platform(aws_sdk_ec2::types::CapacityReservationInstancePlatform::LinuxUnix)
        .availability_zone("us-east-1a")
        .instance_count(2)
        .instance_match_criteria(aws_sdk_ec2::types::InstanceMatchCriteria::Targeted)
        .tag_specifications(tag_spec(ResourceType::CapacityReservation, &team))
        .send()
        .await
        .expect("CreateCapacityReservation");
    let id = created
        .capacity_reservation()
        .and_then(|r| r.capacity_reservation_id())
        .unwrap()
        .to_string();
    let mut class = fx.nodeclass("default");
    class.spec.capacity_reservation_selector_terms = vec![fleetwright_crds::SelectorTerm {
        tags: team
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Default::default()
    }];
    let resolved = cloud.nodeclass(&class, Utc::now()).await.unwrap();
    let found: Vec<(&str, &str, &str, usize)> = resolved
        .reservations
        .iter()
        .map(|r| {
            (
                r.id.as_str(),
                r.instance_type.as_str(),
                r.zone.as_str(),
                r.available,
            )
        })
        .collect();
    assert_eq!(found, [(id.as_str(), "m5.large", "us-east-1a", 2)]);
    assert_eq!(resolved.reservations[0].instance_match_criteria, "targeted");

    let launched = cloud
        .launch(
            &request(
                "default-rsv1",
                &["m5.large", "c5.large"],
                &["reserved", "on-demand"],
            ),
            &class,
            Utc::now(),
        )
        .await
        .unwrap();
    assert_eq!(launched.capacity_type, "reserved");
    assert_eq!(
        (launched.instance_type.as_str(), launched.zone.as_str()),
        ("m5.large", "us-east-1a")
    );
    assert_eq!(
        launched.reservation.as_ref().map(|r| r.id.as_str()),
        Some(id.as_str())
    );
    assert_eq!(
        launched
            .reservation
            .as_ref()
            .and_then(|r| r.kind.as_deref()),
        Some("default")
    );
    let targets: Vec<String> = template_data(ec2, "reserved")
        .await
        .iter()
        .filter_map(|d| d.capacity_reservation_specification())
        .filter_map(|c| c.capacity_reservation_target())
        .filter_map(|t| t.capacity_reservation_id())
        .map(str::to_string)
        .collect();
    assert_eq!(
        targets,
        std::slice::from_ref(&id),
        "one template, targeting the reservation"
    );
    // A NodeClaim that does not allow `reserved` never takes it.
    let od = cloud
        .launch(
            &request("default-rsv2", &["m5.large"], &["on-demand"]),
            &class,
            Utc::now(),
        )
        .await
        .unwrap();
    assert_eq!(
        (od.capacity_type.as_str(), od.reservation.is_none()),
        ("on-demand", true)
    );
}

/// An EC2NodeClass's `placementGroupSelector` is resolved through DescribePlacementGroups, by
/// name or by id, to the group's id (the `karpenter.k8s.aws/placement-group-id` label of its
/// nodes, and what placement-group drift compares); a group EC2 does not know fails the class,
/// naming the selector.
#[tokio::test]
async fn a_placement_group_is_resolved_by_name_or_id_and_an_unknown_one_is_named() {
    let (cloud, fx) = cloud_for("placed").await;
    let created = cloud
        .clients()
        .ec2
        .create_placement_group()
        .group_name("training")
        .strategy(aws_sdk_ec2::types::PlacementStrategy::Partition)
        .partition_count(3)
        .send()
        .await
        .expect("CreatePlacementGroup");
    let id = created
        .placement_group()
        .and_then(|g| g.group_id())
        .unwrap()
        .to_string();
    let with = |name: Option<&str>, id: Option<&str>| {
        let mut class = fx.nodeclass("default");
        class.spec.placement_group_selector = Some(fleetwright_crds::PlacementGroupSelector {
            name: name.map(str::to_string),
            id: id.map(str::to_string),
        });
        class
    };
    let by_name = cloud
        .nodeclass(&with(Some("training"), None), Utc::now())
        .await
        .unwrap()
        .placement_group
        .unwrap();
    assert_eq!(
        (
            by_name.id.as_str(),
            by_name.name.as_str(),
            by_name.strategy.as_str()
        ),
        (id.as_str(), "training", "partition")
    );
    assert_eq!(by_name.partitions, Some(3));
    let by_id = cloud
        .nodeclass(&with(None, Some(&id)), Utc::now())
        .await
        .unwrap();
    assert_eq!(by_id.placement_group.unwrap().name, "training");
    // A NodeClaim pinned to partition 2 launches through a template that targets it.
    let mut pinned = request("default-pg", &["m5.large"], &["on-demand"]);
    pinned.partition = Some(2);
    let launched = cloud
        .launch(&pinned, &with(Some("training"), None), Utc::now())
        .await
        .expect("a launch into the group");
    assert_eq!(launched.partition, Some(2));
    let placements: Vec<(Option<String>, Option<i32>)> =
        template_data(&cloud.clients().ec2, "placed")
            .await
            .iter()
            .filter_map(|d| d.placement())
            .map(|p| (p.group_name().map(str::to_string), p.partition_number()))
            .collect();
    assert_eq!(placements, [(Some("training".to_string()), Some(2))]);
    let none = cloud
        .nodeclass(&fx.nodeclass("default"), Utc::now())
        .await
        .unwrap();
    assert_eq!(none.placement_group, None);
    let err = cloud
        .nodeclass(&with(Some("inference"), None), Utc::now())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("placementGroupSelector") && err.contains("inference"),
        "{err}"
    );
}

#[tokio::test]
async fn create_fleet_launches_tagged_spot_and_on_demand_instances_in_the_chosen_subnets() {
    let (cloud, fx) = cloud_for("fleet").await;
    let class = fx.nodeclass("default");
    let subnets: BTreeSet<&str> = fx.subnets.values().map(String::as_str).collect();
    for (nodeclaim, capacity, lifecycle) in [
        ("default-spot1", vec!["spot", "on-demand"], Some("spot")),
        ("default-od1", vec!["on-demand"], None),
    ] {
        let launched = cloud
            .launch(
                &request(nodeclaim, &["m5.large", "c5.large"], &capacity),
                &class,
                Utc::now(),
            )
            .await
            .unwrap();
        assert_eq!(launched.capacity_type, capacity[0]);
        assert!(launched.provider_id().starts_with("aws:///us-east-1"));
        let i = describe(&cloud, &launched.instance_id).await;
        assert_eq!(i.instance_lifecycle().map(|l| l.as_str()), lifecycle);
        assert!(
            subnets.contains(i.subnet_id().unwrap()),
            "launched outside the node class's subnets"
        );
        assert_eq!(tag(&i, "kubernetes.io/cluster/fleet"), Some("owned"));
        assert_eq!(tag(&i, "eks:eks-cluster-name"), Some("fleet"));
        assert_eq!(tag(&i, "karpenter.sh/nodepool"), Some("default"));
        assert_eq!(tag(&i, "karpenter.sh/nodeclaim"), Some(nodeclaim));
        assert_eq!(tag(&i, "karpenter.k8s.aws/ec2nodeclass"), Some("default"));
        assert_eq!(tag(&i, "team"), Some("platform"));
        assert!(tag(&i, "Name").is_some());
        assert!(["m5.large", "c5.large"].contains(&launched.instance_type.as_str()));
    }
}

#[tokio::test]
async fn a_retried_launch_for_the_same_nodeclaim_does_not_create_a_second_instance() {
    let (cloud, fx) = cloud_for("retry").await;
    let class = fx.nodeclass("default");
    let req = request("default-once", &["m5.large"], &[]);
    let first = cloud.launch(&req, &class, Utc::now()).await.unwrap();
    let cold = Ec2Cloud::new(clients(), "retry")
        .with_cluster_info(fx.cluster_info())
        .with_parameter_root(PARAMETER_ROOT);
    let again = cold.launch(&req, &class, Utc::now()).await.unwrap();
    // The retry reads the instance back with DescribeInstances. Its security groups are what
    // EC2 reports; moto does not apply a launch template's groups, so those may differ here.
    let same = |l: &fleetwright_aws::Launched| fleetwright_aws::Launched {
        security_groups: Vec::new(),
        ..l.clone()
    };
    assert_eq!(same(&first), same(&again));
    assert_eq!(first.security_groups.len(), 1, "{first:?}");
    let owned = cloud.instances().await.unwrap();
    assert_eq!(
        owned
            .iter()
            .filter(|i| i.nodeclaim() == Some("default-once"))
            .count(),
        1
    );
}

async fn run_untracked(cloud: &Ec2Cloud, tags: &[(&str, &str)]) -> String {
    let mut call = cloud
        .clients()
        .ec2
        .run_instances()
        .image_id("ami-12c6146b")
        .instance_type(aws_sdk_ec2::types::InstanceType::M5Large)
        .min_count(1)
        .max_count(1);
    if !tags.is_empty() {
        call = call.tag_specifications(
            TagSpecification::builder()
                .resource_type(ResourceType::Instance)
                .set_tags(Some(
                    tags.iter()
                        .map(|(k, v)| Tag::builder().key(*k).value(*v).build())
                        .collect(),
                ))
                .build(),
        );
    }
    call.send().await.unwrap().instances()[0]
        .instance_id()
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn termination_is_refused_for_instances_this_cluster_did_not_launch() {
    let (cloud, fx) = cloud_for("guard").await;
    let untagged = run_untracked(&cloud, &[]).await;
    let other = run_untracked(
        &cloud,
        &[
            ("kubernetes.io/cluster/someone-else", "owned"),
            ("karpenter.sh/nodepool", "default"),
        ],
    )
    .await;
    let no_pool = run_untracked(&cloud, &[("kubernetes.io/cluster/guard", "owned")]).await;
    for id in [&untagged, &other, &no_pool] {
        let err = cloud.terminate(id).await.unwrap_err();
        assert!(matches!(err, AwsError::Refused { .. }), "{err}");
        assert!(err.to_string().contains(id.as_str()), "{err}");
        let state = describe(&cloud, id)
            .await
            .state()
            .unwrap()
            .name()
            .unwrap()
            .as_str()
            .to_string();
        assert_eq!(state, "running", "a refused instance is left alone");
    }
    let ours = cloud
        .launch(
            &request("default-term", &["m5.large"], &[]),
            &fx.nodeclass("default"),
            Utc::now(),
        )
        .await
        .unwrap();
    assert_eq!(
        cloud.terminate(&ours.instance_id).await.unwrap(),
        Termination::Terminating
    );
    assert_eq!(
        cloud.terminate(&ours.instance_id).await.unwrap(),
        Termination::AlreadyGone
    );
    assert_eq!(
        cloud.terminate("i-0000000000000dead").await.unwrap(),
        Termination::AlreadyGone
    );
}

/// A repair's reboot goes through RebootInstances only for an instance this cluster launched:
/// any other is refused in code (and left running); one that is gone answers false.
#[tokio::test]
async fn a_reboot_is_refused_for_instances_this_cluster_did_not_launch() {
    let (cloud, fx) = cloud_for("reboots").await;
    let other = run_untracked(
        &cloud,
        &[
            ("kubernetes.io/cluster/someone-else", "owned"),
            ("karpenter.sh/nodepool", "default"),
        ],
    )
    .await;
    for id in [run_untracked(&cloud, &[]).await, other] {
        let err = cloud.reboot(&id, "default-reboot").await.unwrap_err();
        assert!(
            matches!(
                err,
                AwsError::Refused {
                    action: "reboot",
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains(id.as_str()), "{err}");
    }
    let ours = cloud
        .launch(
            &request("default-reboot", &["m5.large"], &[]),
            &fx.nodeclass("default"),
            Utc::now(),
        )
        .await
        .unwrap();
    // Ours, but not the NodeClaim's: refused too.
    let err = cloud
        .reboot(&ours.instance_id, "default-other")
        .await
        .unwrap_err();
    assert!(matches!(err, AwsError::Refused { .. }), "{err}");
    assert!(cloud
        .reboot(&ours.instance_id, "default-reboot")
        .await
        .unwrap());
    let state = describe(&cloud, &ours.instance_id).await;
    assert_eq!(state.state().unwrap().name().unwrap().as_str(), "running");
    cloud.terminate(&ours.instance_id).await.unwrap();
    assert!(
        !cloud
            .reboot(&ours.instance_id, "default-reboot")
            .await
            .unwrap(),
        "terminated"
    );
    assert!(!cloud
        .reboot("i-0000000000000dead", "default-reboot")
        .await
        .unwrap());
}

#[tokio::test]
async fn orphans_are_owned_instances_without_a_nodeclaim_past_the_grace_period() {
    let (cloud, fx) = cloud_for("orphans").await;
    let class = fx.nodeclass("default");
    let kept = cloud
        .launch(
            &request("default-kept", &["m5.large"], &[]),
            &class,
            Utc::now(),
        )
        .await
        .unwrap();
    let lost = cloud
        .launch(
            &request("default-lost", &["m5.large"], &[]),
            &class,
            Utc::now(),
        )
        .await
        .unwrap();
    run_untracked(&cloud, &[]).await;
    let owned = cloud.instances().await.unwrap();
    assert_eq!(owned.len(), 2, "only this cluster's instances are listed");
    let claimed: BTreeSet<String> = [kept.instance_id.clone()].into();
    let later = Utc::now() + Duration::seconds(60);
    let orphans: Vec<&str> = instances::orphans(&owned, &claimed, later)
        .iter()
        .map(|i| i.id.as_str())
        .collect();
    assert_eq!(orphans, vec![lost.instance_id.as_str()]);
    assert!(
        instances::orphans(&owned, &claimed, Utc::now() - Duration::seconds(5)).is_empty(),
        "young instances are never orphans"
    );
}

#[tokio::test]
async fn the_webhook_token_is_read_decrypted_from_its_securestring_parameter() {
    let clients = clients();
    let name = format!("/fleetwright/moto-{}/webhook-token", std::process::id());
    clients
        .ssm
        .put_parameter()
        .name(&name)
        .value("0123456789abcdef0123456789abcdef")
        .r#type(aws_sdk_ssm::types::ParameterType::SecureString)
        .overwrite(true)
        .send()
        .await
        .unwrap();
    let token = fleetwright_aws::secret::parameter(&clients.ssm, &name)
        .await
        .unwrap();
    assert_eq!(token, "0123456789abcdef0123456789abcdef");
    let missing = fleetwright_aws::secret::parameter(&clients.ssm, "/fleetwright/none")
        .await
        .unwrap_err();
    assert!(
        missing.to_string().contains("GetParameter")
            && missing.to_string().contains("ParameterNotFound"),
        "{missing}"
    );
}

/// A follow-up is a real SQS message, held back by the delay the tick asked for and saying when
/// it is due.
#[tokio::test]
async fn a_follow_up_is_a_delayed_message_that_says_when_it_is_due() {
    let clients = clients();
    let queue = clients
        .sqs
        .create_queue()
        .queue_name("fleetwright-follow-up-test")
        .send()
        .await
        .expect("a queue");
    let queue_url = queue.queue_url().expect("its URL").to_string();
    let follow_up = fleetwright_aws::follow_up::SqsFollowUp {
        client: clients.sqs.clone(),
        queue_url: queue_url.clone(),
        cluster: "follow-up".into(),
    };
    let now = Utc::now();
    let started = now - Duration::seconds(3);
    follow_up.send(started, now, 2).await.expect("sent");
    let receive = || {
        clients
            .sqs
            .receive_message()
            .queue_url(&queue_url)
            .max_number_of_messages(10)
            .send()
    };
    let early = receive().await.expect("received");
    assert!(early.messages().is_empty(), "held back by its delay");
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    let later = receive().await.expect("received");
    let text = later.messages()[0].body().expect("a body");
    let body: serde_json::Value = serde_json::from_str(text).expect("JSON");
    assert_eq!(body["detail"]["cluster"], "follow-up");
    let due: chrono::DateTime<Utc> = body["time"].as_str().unwrap().parse().unwrap();
    assert_eq!(due.timestamp(), (now + Duration::seconds(2)).timestamp());
    let requested_by = fleetwright_aws::follow_up::requested_by(text).expect("its requester");
    assert_eq!(requested_by.timestamp_millis(), started.timestamp_millis());
}
