//! Launch-template garbage collection against moto: a template no launch has used for an hour is
//! deleted, one used lately is kept, and so is every template this cluster's code did not make
//! (another cluster's, one without the ownership tags); a launch after a collection creates its
//! template again.

mod support;

use aws_sdk_ec2::types::{Filter, RequestLaunchTemplateData, ResourceType};
use chrono::{Duration, Utc};
use fleetwright_aws::cloud::{Cloud, Ec2Cloud};
use fleetwright_aws::LaunchRequest;
use support::*;

const CLUSTER: &str = "collect";

fn request(nodeclaim: &str) -> LaunchRequest {
    serde_json::from_value(serde_json::json!({
        "nodeclaim": nodeclaim, "nodepool": "default", "nodeclass": "default",
        "instanceTypes": ["m5.large"], "capacityTypes": ["on-demand"],
        "zones": ["us-east-1a"], "labels": {}, "taints": [], "startupTaints": [],
    }))
    .unwrap()
}

/// Creates a launch template with these tags, as something other than this launch path would.
async fn put_template(ec2: &aws_sdk_ec2::Client, name: &str, tags: &[(&str, &str)]) {
    ec2.create_launch_template()
        .launch_template_name(name)
        .launch_template_data(
            RequestLaunchTemplateData::builder()
                .image_id("ami-1")
                .build(),
        )
        .tag_specifications(tag_spec(ResourceType::LaunchTemplate, tags))
        .send()
        .await
        .expect("CreateLaunchTemplate");
}

/// The names of this test's templates (either cluster's) that start with `prefix`, sorted.
async fn names(ec2: &aws_sdk_ec2::Client, prefix: &str) -> Vec<String> {
    let all = ec2
        .describe_launch_templates()
        .filters(
            Filter::builder()
                .name("tag:karpenter.k8s.aws/cluster")
                .values(CLUSTER)
                .values("collect-other")
                .build(),
        )
        .max_results(200)
        .send()
        .await
        .expect("DescribeLaunchTemplates");
    let mut out: Vec<String> = all
        .launch_templates()
        .iter()
        .filter_map(|t| t.launch_template_name().map(str::to_string))
        .filter(|n| n.starts_with(prefix))
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn launch_templates_no_launch_used_for_an_hour_are_deleted_and_only_this_clusters() {
    let clients = clients();
    let fx = Fixture::new(&clients, CLUSTER).await;
    let ec2 = clients.ec2.clone();
    let cloud = Ec2Cloud::new(clients, CLUSTER)
        .with_cluster_info(fx.cluster_info())
        .with_parameter_root(PARAMETER_ROOT);
    let class = fx.nodeclass("default");
    let now = Utc::now();
    cloud
        .launch(&request("default-gc1"), &class, now)
        .await
        .unwrap();
    let ours = names(&ec2, &format!("fleetwright/{CLUSTER}/")).await;
    assert_eq!(ours.len(), 1, "{ours:?}");
    let used = ours[0].clone();

    // Left behind by an earlier class or AMI (the tags this cluster's launches put on one).
    let owned = [
        ("kubernetes.io/cluster/collect", "owned"),
        ("karpenter.k8s.aws/cluster", CLUSTER),
        ("eks:eks-cluster-name", CLUSTER),
        ("karpenter.sh/nodepool", "default"),
        ("karpenter.k8s.aws/ec2nodeclass", "retired"),
    ];
    let leftover = format!("fleetwright/{CLUSTER}/0000leftover");
    put_template(&ec2, &leftover, &owned).await;
    // Not this code's: another cluster's, and one whose ownership tag is missing.
    let other = "fleetwright/collect-other/0000";
    put_template(
        &ec2,
        other,
        &[
            ("kubernetes.io/cluster/collect-other", "owned"),
            ("karpenter.k8s.aws/cluster", "collect-other"),
            ("eks:eks-cluster-name", "collect-other"),
            ("karpenter.sh/nodepool", "default"),
        ],
    )
    .await;
    let untagged = format!("fleetwright/{CLUSTER}/0000untagged");
    put_template(&ec2, &untagged, &owned[1..]).await;

    // Young templates are kept.
    assert!(cloud
        .collect_launch_templates(now)
        .await
        .unwrap()
        .is_empty());

    // Ninety minutes on, a launch uses the first template again; half an hour after that, only
    // the leftover is old and unused.
    let later = now + Duration::minutes(90);
    cloud
        .launch(&request("default-gc2"), &class, later)
        .await
        .unwrap();
    let deleted = cloud
        .collect_launch_templates(later + Duration::minutes(30))
        .await
        .unwrap();
    assert_eq!(deleted, vec![leftover.clone()]);
    let left = names(&ec2, "fleetwright/collect").await;
    let mut expected = vec![other.to_string(), untagged.clone(), used.clone()];
    expected.sort();
    assert_eq!(left, expected);

    // Hours later the used one is collected too, and the next launch makes it again.
    let much_later = now + Duration::hours(5);
    let deleted = cloud.collect_launch_templates(much_later).await.unwrap();
    assert_eq!(deleted, vec![used.clone()]);
    cloud
        .launch(&request("default-gc3"), &class, much_later)
        .await
        .expect("the launch creates its template again");
    let mut expected = vec![untagged, used];
    expected.sort();
    assert_eq!(
        names(&ec2, &format!("fleetwright/{CLUSTER}/")).await,
        expected
    );
    assert_eq!(names(&ec2, other).await, [other.to_string()]);
}
