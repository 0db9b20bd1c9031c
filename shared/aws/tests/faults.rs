//! Fault injection: the SDK's HTTP client answers chosen actions with AWS-shaped errors or
//! documents (capacity errors, throttling, spot prices) and passes the rest to moto.

mod support;

use chrono::Utc;
use fleetwright_aws::cloud::{Cloud, Ec2Cloud};
use fleetwright_aws::{AwsClients, AwsError, LaunchRequest};
use fleetwright_core::{schedule, ScheduleOptions};
use support::*;

const SNAPSHOT: &str = r#"
apiVersion: v1
kind: List
items:
- apiVersion: karpenter.sh/v1
  kind: NodePool
  metadata: {name: default}
  spec:
    template:
      spec:
        nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
        requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: ["m5.large"]}
        - {key: topology.kubernetes.io/zone, operator: In, values: ["us-east-1a", "us-east-1b"]}
        - {key: karpenter.sh/capacity-type, operator: In, values: ["spot", "on-demand"]}
- apiVersion: karpenter.k8s.aws/v1
  kind: EC2NodeClass
  metadata: {name: default}
  spec:
    amiSelectorTerms: [{alias: al2023@latest}]
    role: node-role
    subnetSelectorTerms: [{tags: {karpenter.sh/discovery: ice}}]
    securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: ice}}]
- apiVersion: v1
  kind: Pod
  metadata: {name: web-1, namespace: default}
  spec:
    containers:
    - name: web
      image: nginx
      resources: {requests: {cpu: "1"}}
  status:
    phase: Pending
    conditions:
    - {type: PodScheduled, status: "False", reason: Unschedulable}
"#;

fn spot_history(entries: &[(&str, &str, &str)]) -> String {
    let items: String = entries
        .iter()
        .map(|(t, zone, price)| {
            format!("<item><instanceType>{t}</instanceType><productDescription>Linux/UNIX</productDescription><spotPrice>{price}</spotPrice><timestamp>2026-11-22T10:00:00.000Z</timestamp><availabilityZone>{zone}</availabilityZone></item>")
        })
        .collect();
    format!("<DescribeSpotPriceHistoryResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"><requestId>r-1</requestId><spotPriceHistorySet>{items}</spotPriceHistorySet></DescribeSpotPriceHistoryResponse>")
}

fn fleet_errors(errors: &[(&str, &str, &str)]) -> String {
    let items: String = errors
        .iter()
        .map(|(t, zone, code)| {
            format!("<item><launchTemplateAndOverrides><launchTemplateSpecification><launchTemplateName>lt</launchTemplateName><version>1</version></launchTemplateSpecification><overrides><instanceType>{t}</instanceType><availabilityZone>{zone}</availabilityZone></overrides></launchTemplateAndOverrides><lifecycle>spot</lifecycle><errorCode>{code}</errorCode><errorMessage>There is no Spot capacity available that matches your request.</errorMessage></item>")
        })
        .collect();
    format!("<CreateFleetResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"><requestId>r-2</requestId><fleetId>fleet-0123456789abcdef0</fleetId><errorSet>{items}</errorSet><fleetInstanceSet/></CreateFleetResponse>")
}

fn request(nodeclaim: &str) -> LaunchRequest {
    LaunchRequest {
        nodeclaim: nodeclaim.into(),
        uid: None,
        nodepool: "default".into(),
        nodeclass: "default".into(),
        instance_types: vec!["m5.large".into()],
        capacity_types: Vec::new(),
        zones: vec!["us-east-1a".into(), "us-east-1b".into()],
        labels: Default::default(),
        taints: Vec::new(),
        startup_taints: Vec::new(),
        overlays: Vec::new(),
        reservation_ids: None,
        partition: None,
    }
}

#[tokio::test]
async fn insufficient_capacity_marks_the_offering_unavailable_and_the_next_plan_avoids_it() {
    let faults = FaultInjector::default();
    let clients = AwsClients::new(&sdk_config(Some(faults.client())));
    let fx = Fixture::new(&clients, "ice").await;
    let cloud = Ec2Cloud::new(clients, "ice")
        .with_cluster_info(fx.cluster_info())
        .with_parameter_root(PARAMETER_ROOT);
    faults.inject(
        "DescribeSpotPriceHistory",
        200,
        &spot_history(&[
            ("m5.large", "us-east-1a", "0.030000"),
            ("m5.large", "us-east-1b", "0.031000"),
        ]),
        1,
    );
    let snapshot = fleetwright_kube::snapshot_from_yaml(SNAPSHOT, "ice.yaml").unwrap();
    let now = Utc::now();

    let before = schedule(
        &snapshot,
        &cloud.catalog(now).await.unwrap(),
        &ScheduleOptions::default(),
    );
    assert!(
        (before.cost.hourly - 0.030).abs() < 1e-9,
        "spot at the injected price: {}",
        before.cost.hourly
    );

    faults.inject(
        "CreateFleet",
        200,
        &fleet_errors(&[
            ("m5.large", "us-east-1a", "InsufficientInstanceCapacity"),
            ("m5.large", "us-east-1b", "InsufficientInstanceCapacity"),
        ]),
        1,
    );
    let err = cloud
        .launch(&request("default-ice"), &fx.nodeclass("default"), now)
        .await
        .unwrap_err();
    let AwsError::NothingLaunched {
        errors,
        capacity_type,
        ..
    } = &err
    else {
        panic!("expected NothingLaunched, got {err}");
    };
    assert_eq!(capacity_type, "spot");
    assert_eq!(errors.len(), 2);
    assert!(
        err.to_string()
            .contains("m5.large/us-east-1a: InsufficientInstanceCapacity"),
        "{err}"
    );
    for zone in ["us-east-1a", "us-east-1b"] {
        assert!(cloud
            .unavailable()
            .is_unavailable("spot", "m5.large", zone, now));
        assert!(!cloud
            .unavailable()
            .is_unavailable("on-demand", "m5.large", zone, now));
    }

    // The next plan prices the pod on on-demand, and the next launch falls back to it.
    let after = schedule(
        &snapshot,
        &cloud.catalog(now).await.unwrap(),
        &ScheduleOptions::default(),
    );
    let on_demand = fleetwright_core::Catalog::embedded_prices()["m5.large"];
    assert!(
        (after.cost.hourly - on_demand).abs() < 1e-9,
        "{}",
        after.cost.hourly
    );
    let launched = cloud
        .launch(&request("default-ice"), &fx.nodeclass("default"), now)
        .await
        .unwrap();
    assert_eq!(launched.capacity_type, "on-demand");
    let fleets = faults.requests("CreateFleet");
    assert_eq!(fleets.len(), 2);
    assert!(
        fleets[1].contains("DefaultTargetCapacityType=on-demand"),
        "{}",
        fleets[1]
    );

    // A cold start that restores the persisted state avoids the offering too.
    let saved = serde_json::to_string(&cloud.unavailable()).unwrap();
    let cold = Ec2Cloud::new(AwsClients::new(&sdk_config(None)), "ice")
        .with_cluster_info(fx.cluster_info())
        .with_parameter_root(PARAMETER_ROOT);
    cold.restore_unavailable(&serde_json::from_str(&saved).unwrap());
    let catalog = cold.catalog(now).await.unwrap();
    assert!(catalog
        .unavailable
        .contains(&("spot".into(), "m5.large".into(), "us-east-1a".into())));
    // Three minutes later it is available again.
    let later = now + chrono::Duration::minutes(3);
    assert!(cold.catalog(later).await.unwrap().unavailable.is_empty());
}

/// An invocation launched, was cut off before recording the instance, and the retry's
/// DescribeInstances does not list the instance yet (eventual consistency). Its CreateFleet,
/// with the same token and another subnet pick, is refused as IdempotentParameterMismatch: the
/// instance found by tag is the launch, and no second one starts.
#[tokio::test]
async fn an_idempotent_parameter_mismatch_adopts_the_earlier_launch() {
    let faults = FaultInjector::default();
    let clients = AwsClients::new(&sdk_config(Some(faults.client())));
    let fx = Fixture::new(&clients, "mismatch").await;
    let cloud = Ec2Cloud::new(clients, "mismatch")
        .with_cluster_info(fx.cluster_info())
        .with_parameter_root(PARAMETER_ROOT);
    let now = Utc::now();
    let first = cloud
        .launch(&request("default-retry"), &fx.nodeclass("default"), now)
        .await
        .unwrap();
    faults.inject(
        "DescribeInstances",
        200,
        "<DescribeInstancesResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"><requestId>r</requestId><reservationSet/></DescribeInstancesResponse>",
        1,
    );
    faults.inject(
        "CreateFleet",
        400,
        &ec2_error(
            "IdempotentParameterMismatch",
            "The client token you have provided is associated with a resource that is already deleted or has different parameters.",
        ),
        1,
    );
    let again = cloud
        .launch(&request("default-retry"), &fx.nodeclass("default"), now)
        .await
        .unwrap();
    assert_eq!(again.instance_id, first.instance_id);
    assert_eq!(faults.requests("CreateFleet").len(), 2);
    let owned = cloud.instances().await.unwrap();
    assert_eq!(owned.len(), 1, "{owned:?}");
}

/// A NodeClaim gets one instance for life: when the instance an earlier, unrecorded launch
/// started has died already, a retried launch fails, naming that dead instance (the tick then
/// lets the NodeClaim go and plans its pods again), instead of starting a second one.
#[tokio::test]
async fn a_nodeclaim_whose_first_instance_died_is_not_launched_again() {
    let faults = FaultInjector::default();
    let clients = AwsClients::new(&sdk_config(Some(faults.client())));
    let fx = Fixture::new(&clients, "once").await;
    let cloud = Ec2Cloud::new(clients, "once")
        .with_cluster_info(fx.cluster_info())
        .with_parameter_root(PARAMETER_ROOT);
    let now = Utc::now();
    let first = cloud
        .launch(&request("default-once"), &fx.nodeclass("default"), now)
        .await
        .unwrap();
    cloud.terminate(&first.instance_id).await.unwrap();
    let again = cloud
        .launch(&request("default-once"), &fx.nodeclass("default"), now)
        .await
        .expect_err("a dead instance is not a launch");
    assert!(
        again.to_string().contains(&first.instance_id),
        "the error names the dead instance: {again}"
    );
    assert_eq!(faults.requests("CreateFleet").len(), 1, "no second launch");
}

/// A CreateFleet whose outcome is unknown (a 5xx on every attempt) keeps its NodeClaim, and the
/// next tick launches it again with what then holds: here an offering was marked unavailable
/// meanwhile, so the retry asks for fewer offerings. Its ClientToken is the first call's, so EC2
/// takes it as the same launch and cannot start a second instance if the first call did launch.
#[tokio::test]
async fn a_retried_launch_keeps_its_client_token_when_the_offerings_change() {
    let faults = FaultInjector::default();
    let clients = AwsClients::new(&sdk_config(Some(faults.client())));
    let fx = Fixture::new(&clients, "token").await;
    let cloud = Ec2Cloud::new(clients, "token")
        .with_cluster_info(fx.cluster_info())
        .with_parameter_root(PARAMETER_ROOT);
    let now = Utc::now();
    let mut req = request("default-token");
    req.uid = Some("5d0c6f1e-7a43-4c8e-9a51-2b7f0e6c1d42".into());
    req.capacity_types = vec!["on-demand".into()];
    faults.inject(
        "CreateFleet",
        503,
        &ec2_error("ServiceUnavailable", "The service is unavailable."),
        fleetwright_aws::clients::MAX_ATTEMPTS as usize,
    );
    let err = cloud
        .launch(&req, &fx.nodeclass("default"), now)
        .await
        .unwrap_err();
    assert!(err.outcome_unknown(), "{err}");
    cloud.mark_unavailable("on-demand", "m5.large", "us-east-1a", now);
    cloud
        .launch(&req, &fx.nodeclass("default"), now)
        .await
        .expect("the retry launches");

    let fleets = faults.requests("CreateFleet");
    let param = |body: &str, name: &str| {
        body.split('&')
            .filter(|kv| kv.starts_with(name))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let zones = |body: &str| {
        param(body, "LaunchTemplateConfigs.1.Overrides.")
            .into_iter()
            .filter(|kv| kv.contains("AvailabilityZone="))
            .count()
    };
    let (first, last) = (&fleets[0], fleets.last().unwrap());
    assert!(
        zones(first) > zones(last),
        "the retry asks for fewer offerings:\n{first}\n{last}"
    );
    let tokens: std::collections::BTreeSet<Vec<String>> =
        fleets.iter().map(|b| param(b, "ClientToken=")).collect();
    assert_eq!(tokens.len(), 1, "one token for every call: {tokens:?}");
    assert_eq!(tokens.first().unwrap().len(), 1);
}

#[tokio::test]
async fn throttling_is_retried_with_backoff() {
    let faults = FaultInjector::default();
    let clients = AwsClients::new(&sdk_config(Some(faults.client())));
    let cloud = Ec2Cloud::new(clients, "throttled");
    faults.inject(
        "DescribeInstances",
        503,
        &ec2_error("RequestLimitExceeded", "Request limit exceeded."),
        2,
    );
    let instances = cloud.instances().await.unwrap();
    assert!(instances.is_empty());
    assert_eq!(
        faults.requests("DescribeInstances").len(),
        3,
        "two throttled attempts, then success"
    );

    faults.inject(
        "DescribeInstances",
        500,
        &ec2_error("InternalError", "An internal error has occurred"),
        9,
    );
    let err = cloud.instances().await.unwrap_err();
    assert_eq!(err.code(), Some("InternalError"));
    assert_eq!(
        faults.requests("DescribeInstances").len(),
        3 + fleetwright_aws::clients::MAX_ATTEMPTS as usize,
        "5xx retried up to the attempt limit"
    );
}

#[tokio::test]
async fn spot_prices_come_from_the_price_history_newest_first() {
    let faults = FaultInjector::default();
    let cloud = Ec2Cloud::new(
        AwsClients::new(&sdk_config(Some(faults.client()))),
        "prices",
    );
    let body = spot_history(&[
        ("c5.large", "us-east-1a", "0.040000"),
        ("c5.large", "us-east-1c", "0.041000"),
    ]);
    faults.inject("DescribeSpotPriceHistory", 200, &body, 1);
    let now = Utc::now();
    let catalog = cloud.catalog(now).await.unwrap();
    assert_eq!(catalog.spot_price("c5.large", "us-east-1a"), Some(0.04));
    assert_eq!(catalog.spot_price("c5.large", "us-east-1c"), Some(0.041));
    let request = &faults.requests("DescribeSpotPriceHistory")[0];
    assert!(
        request.contains("Linux%2FUNIX") && request.contains("Amazon%20VPC"),
        "{request}"
    );
    // Warm containers reuse the prices for 12 hours.
    cloud
        .catalog(now + chrono::Duration::hours(11))
        .await
        .unwrap();
    assert_eq!(faults.requests("DescribeSpotPriceHistory").len(), 1);
}

#[tokio::test]
async fn launches_of_one_tick_share_one_catalog_until_something_changes() {
    let cloud = Ec2Cloud::new(AwsClients::new(&sdk_config(None)), "shared-catalog");
    let now = Utc::now();
    let first = cloud.catalog(now).await.unwrap();
    let second = cloud.catalog(now).await.unwrap();
    assert!(
        std::sync::Arc::ptr_eq(&first, &second),
        "an unchanged catalog is not copied again"
    );
    cloud.mark_unavailable("spot", "m5.large", "us-east-1a", now);
    let third = cloud.catalog(now).await.unwrap();
    assert!(!std::sync::Arc::ptr_eq(&first, &third));
    assert!(third
        .unavailable
        .contains(&("spot".into(), "m5.large".into(), "us-east-1a".into())));
}

fn price_list_page(name: &str) -> String {
    let path = format!(
        "{}/tests/golden/price-list/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A cloud in eu-west-1, whose prices the embedded us-east-1 table only estimates.
fn eu_west_cloud(faults: &FaultInjector, cluster: &str) -> Ec2Cloud {
    let config = sdk_config(Some(faults.client()))
        .to_builder()
        .region(aws_config::Region::new("eu-west-1"))
        .build();
    Ec2Cloud::new(AwsClients::new(&config), cluster)
}

#[tokio::test]
async fn on_demand_prices_come_from_the_price_list_api_for_the_clusters_region() {
    let faults = FaultInjector::default();
    let cloud = eu_west_cloud(&faults, "price-list");
    let pricing_region = cloud.clients().pricing.config().region().cloned();
    assert_eq!(
        pricing_region.as_ref().map(|r| r.as_ref()),
        Some("eu-central-1")
    );
    for page in ["shared-1", "shared-2", "metal-1"] {
        faults.inject("GetProducts", 200, &price_list_page(page), 1);
    }
    let now = Utc::now();
    let catalog = cloud.catalog(now).await.unwrap();

    let price = |t: &str| catalog.on_demand.get(t).copied();
    assert_eq!(price("m5.large"), Some(0.107), "the list's first page");
    assert_eq!(price("r5.large"), Some(0.141), "its second page");
    assert_eq!(price("m5.metal"), Some(5.136), "bare metal, read apart");
    // The region's prices are about 11.5 % above the embedded us-east-1 table's (the median of
    // the listed types' ratios), and a type the list does not price follows them.
    let table = fleetwright_core::Catalog::embedded_prices();
    let scale = 0.107 / table["m5.large"];
    let close = |a: Option<f64>, b: f64| a.is_some_and(|a| (a - b).abs() < 1e-9);
    assert!(
        close(price("m7i.large"), table["m7i.large"] * scale),
        "a type listed at zero is priced as an unlisted one: {:?}",
        price("m7i.large")
    );
    assert!(
        close(price("t3.micro"), table["t3.micro"] * scale),
        "a type the list leaves out follows the region's prices: {:?}",
        price("t3.micro")
    );
    assert!(
        catalog.price_notes()[0].contains("AWS Price List API for eu-west-1"),
        "{:?}",
        catalog.price_notes()
    );

    let requests = faults.requests("GetProducts");
    assert_eq!(requests.len(), 3, "two pages of instances, one of metal");
    let filter = |f: &str, v: &str| format!(r#""Field":"{f}","Value":"{v}""#);
    for request in &requests {
        for (f, v) in [
            ("regionCode", "eu-west-1"),
            ("operatingSystem", "Linux"),
            ("preInstalledSw", "NA"),
            ("capacitystatus", "Used"),
            ("marketoption", "OnDemand"),
        ] {
            assert!(request.contains(&filter(f, v)), "{f} in {request}");
        }
    }
    assert!(
        requests[1].contains("eyJwYWdlIjoyfQ=="),
        "the next page is asked for by its token"
    );
    assert!(requests[2].contains(&filter("productFamily", "Compute Instance (bare metal)")));

    // A warm container reuses them for 12 hours.
    cloud
        .catalog(now + chrono::Duration::hours(11))
        .await
        .unwrap();
    assert_eq!(faults.requests("GetProducts").len(), 3);
}

#[tokio::test]
async fn a_price_list_that_cannot_be_read_leaves_the_table_and_is_not_asked_every_tick() {
    let faults = FaultInjector::default();
    let cloud = eu_west_cloud(&faults, "price-list-down");
    faults.inject("GetProducts", 403, r#"{"__type":"AccessDeniedException","message":"not authorized to perform: pricing:GetProducts"}"#, 1);
    let now = Utc::now();
    let catalog = cloud.catalog(now).await.unwrap();
    let table = fleetwright_core::Catalog::embedded_prices();
    assert_eq!(catalog.on_demand.get("m5.large"), table.get("m5.large"));
    assert!(
        catalog.price_notes()[0]
            .contains("estimates: the embedded us-east-1 price table stands in for eu-west-1"),
        "{:?}",
        catalog.price_notes()
    );
    cloud
        .catalog(now + chrono::Duration::minutes(59))
        .await
        .unwrap();
    assert_eq!(
        faults.requests("GetProducts").len(),
        1,
        "not asked again within the hour"
    );

    // An hour on it is asked again, and its prices replace the table's.
    for page in ["shared-1", "shared-2", "metal-1"] {
        faults.inject("GetProducts", 200, &price_list_page(page), 1);
    }
    let later = now + chrono::Duration::minutes(61);
    let catalog = cloud.catalog(later).await.unwrap();
    assert_eq!(catalog.on_demand.get("m5.large"), Some(&0.107));

    // A refresh that fails keeps the prices last read.
    faults.inject(
        "GetProducts",
        500,
        r#"{"__type":"InternalErrorException","message":"internal"}"#,
        9,
    );
    let catalog = cloud
        .catalog(later + chrono::Duration::hours(13))
        .await
        .unwrap();
    assert_eq!(catalog.on_demand.get("m5.large"), Some(&0.107));
}
