//! The use cases end to end against moto (EC2, SSM, EventBridge, SQS) and the HTTP-level
//! Kubernetes API fake: a pending pod becomes a NodeClaim and a tagged instance, a spot warning
//! becomes a cordoned, drained node and a terminated instance, an SQS batch fails only its poison
//! message, and the webhook admits and nudges exactly once. The scenarios share one moto setup
//! and fake API per test and read as stories, so the file is kept whole though it is long.

mod common;
#[path = "../../kube/tests/fake_api/mod.rs"]
mod fake_api;
#[path = "../../aws/tests/support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::sync::Arc;

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use aws_lambda_events::event::sqs::SqsEvent;
use chrono::Utc;
use common::*;
use fake_api::FakeApi;
use fleetwright_aws::nudge::EventBridgeNudge;
use fleetwright_aws::{Ec2Cloud, LaunchRequest};
use fleetwright_cloud::Cloud;
use fleetwright_runtime::interruption::Interruption;
use fleetwright_runtime::metrics::{self, Metrics};
use fleetwright_runtime::nudge::CAPACITY_NEEDED;
use fleetwright_runtime::tick::Tick;
use fleetwright_runtime::webhook::Webhook;
use serde_json::{json, Value};
use support::{clients, sdk_config, Fixture, PARAMETER_ROOT};

const NODEPOOLS: &str = "/apis/karpenter.sh/v1/nodepools";
const NODECLASSES: &str = "/apis/karpenter.k8s.aws/v1/ec2nodeclasses";
const NODECLAIMS: &str = "/apis/karpenter.sh/v1/nodeclaims";
const PODS: &str = "/api/v1/pods";
const NODES: &str = "/api/v1/nodes";

async fn cloud(cluster: &str) -> (Arc<Ec2Cloud>, Fixture) {
    let aws = clients();
    let fx = Fixture::new(&aws, cluster).await;
    let cloud = Ec2Cloud::new(aws, cluster)
        .with_cluster_info(fx.cluster_info())
        .with_parameter_root(PARAMETER_ROOT);
    (Arc::new(cloud), fx)
}

fn nodepool() -> Value {
    json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default", "uid": "np-1"},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large", "c5.large"]},
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a", "us-east-1b"]}]}}}})
}

fn pod(name: &str, node: Option<&str>, owner: &str) -> Value {
    let mut p = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": owner, "name": "owner", "uid": "o-1", "controller": true}]},
        "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}});
    if let Some(node) = node {
        p["spec"]["nodeName"] = json!(node);
        p["status"] = json!({"phase": "Running"});
    }
    p
}

fn objects(pairs: Vec<(&str, Vec<Value>)>) -> BTreeMap<String, Vec<Value>> {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

fn stored(api: &FakeApi, path: &str) -> Vec<Value> {
    api.state
        .lock()
        .unwrap()
        .objects
        .get(path)
        .cloned()
        .unwrap_or_default()
}

#[tokio::test]
async fn a_pending_pod_becomes_a_nodeclaim_and_a_tagged_instance_then_registers() {
    let (cloud, fx) = cloud("tick-e2e").await;
    let api = FakeApi::start(objects(vec![
        (NODEPOOLS, vec![nodepool()]),
        (
            NODECLASSES,
            vec![serde_json::to_value(fx.nodeclass("default")).unwrap()],
        ),
        (PODS, vec![pod("web-1", None, "ReplicaSet")]),
    ]))
    .await;
    let tick = Tick::new(cloud.clone(), api.client(), settings(&fx.cluster));
    let summary = tick.run(Utc::now(), "invocation-1").await.unwrap();
    assert_eq!(summary.pending_pods, 1);
    assert_eq!(summary.nodeclaims_created.len(), 1, "{summary:?}");
    assert_eq!(summary.launched.len(), 1, "{summary:?}");
    assert_eq!(summary.metrics.get(metrics::NODECLAIMS_CREATED), 1.0);
    assert_eq!(
        summary
            .metrics
            .get_by(metrics::NODECLAIMS_CREATED, metrics::REASON, "provisioning"),
        1.0
    );
    let name = &summary.nodeclaims_created[0];
    let launched = &summary.launched[0];

    let claim = stored(&api, NODECLAIMS)
        .into_iter()
        .find(|c| c["metadata"]["name"] == json!(name))
        .unwrap();
    let provider = format!("aws:///{}/{}", launched.zone, launched.instance_id);
    assert_eq!(claim["status"]["providerID"], json!(provider));
    assert_eq!(
        claim["metadata"]["labels"]["node.kubernetes.io/instance-type"],
        json!(launched.instance_type)
    );
    // The type's own labels, as Karpenter writes them at launch (pods select them; the
    // requirements drift check reads them).
    let family = launched.instance_type.split('.').next().unwrap();
    assert_eq!(
        claim["metadata"]["labels"]["karpenter.k8s.aws/instance-family"],
        json!(family)
    );
    assert!(claim["metadata"]["labels"]["karpenter.k8s.aws/instance-cpu"].is_string());
    // What drift detection compares later: both hashes as Karpenter computes them, in its
    // versions (the EC2NodeClass's with the CA of the cluster's kube-root-ca.crt), and the
    // subnet and security groups the instance got.
    let annotations = &claim["metadata"]["annotations"];
    assert_eq!(annotations["karpenter.sh/nodepool-hash-version"], "v3");
    assert_eq!(
        annotations["karpenter.k8s.aws/ec2nodeclass-hash-version"],
        "v6"
    );
    let pool: fleetwright_crds::NodePool =
        serde_json::from_value(stored(&api, NODEPOOLS)[0].clone()).unwrap();
    assert_eq!(
        annotations["karpenter.sh/nodepool-hash"],
        json!(fleetwright_crds::hash::nodepool_hash(&pool.spec.template).unwrap())
    );
    assert!(annotations["karpenter.k8s.aws/ec2nodeclass-hash"].is_string());
    assert!(annotations["fleetwright.io/subnet-id"]
        .as_str()
        .is_some_and(|s| s.starts_with("subnet-")));
    assert!(annotations["fleetwright.io/security-group-ids"]
        .as_str()
        .is_some_and(|s| s.starts_with("sg-")));
    let instance = cloud
        .instances()
        .await
        .unwrap()
        .into_iter()
        .find(|i| i.id == launched.instance_id)
        .unwrap();
    assert_eq!(instance.nodeclaim(), Some(name.as_str()));
    assert_eq!(instance.tags["karpenter.sh/nodepool"], "default");

    // The node joins; the next tick registers it and plans nothing new for the same pod.
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "ip-10-20-0-5.ec2.internal", "labels": {}},
        "spec": {"providerID": provider, "taints": [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}]},
        "status": {"allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": "29"}}});
    api.state
        .lock()
        .unwrap()
        .objects
        .insert(NODES.into(), vec![node]);
    let again = Tick::new(cloud.clone(), api.client(), settings(&fx.cluster))
        .run(Utc::now(), "invocation-2")
        .await
        .unwrap();
    assert_eq!(again.registered, vec![name.clone()]);
    assert!(
        again.nodeclaims_created.is_empty(),
        "the in-flight NodeClaim already covers the pod: {again:?}"
    );
    let node = &stored(&api, NODES)[0];
    assert!(
        node["spec"]["taints"].is_null(),
        "unregistered taint removed: {node}"
    );
    assert_eq!(
        node["metadata"]["labels"]["karpenter.sh/nodepool"],
        "default"
    );
    assert_eq!(
        node["metadata"]["labels"]["karpenter.k8s.aws/instance-family"],
        json!(family)
    );
    // Once the node is Ready, the third tick marks the NodeClaim Initialized. Its NodePool hash
    // is the one Fleetwright's earlier version wrote by then (as after an upgrade): the tick
    // re-stamps it with Karpenter's.
    let pool_hash = annotations["karpenter.sh/nodepool-hash"].clone();
    {
        let mut state = api.state.lock().unwrap();
        let nodes = state.objects.get_mut(NODES).unwrap();
        nodes[0]["status"]["conditions"] = json!([{"type": "Ready", "status": "True"}]);
        let claims = state.objects.get_mut(NODECLAIMS).unwrap();
        let annotations = &mut claims[0]["metadata"]["annotations"];
        annotations["karpenter.sh/nodepool-hash"] =
            json!(fleetwright_kube::convert::legacy_template_hash(&pool));
        annotations["karpenter.sh/nodepool-hash-version"] = json!("fleetwright-v2");
    }
    let third = Tick::new(cloud.clone(), api.client(), settings(&fx.cluster))
        .run(Utc::now(), "invocation-3")
        .await
        .unwrap();
    assert_eq!(third.initialized, vec![name.clone()]);
    assert_eq!(third.restamped, vec![name.clone()]);
    // The NodePool's status says what it holds, as Karpenter's does (`kubectl get nodepools`,
    // the scale subresource).
    let pool = &stored(&api, NODEPOOLS)[0];
    assert_eq!(pool["status"]["nodes"], 1, "{pool}");
    assert_eq!(pool["status"]["resources"]["nodes"], "1", "{pool}");
    let claim = stored(&api, NODECLAIMS)
        .into_iter()
        .find(|c| c["metadata"]["name"] == json!(name))
        .unwrap();
    let restamped = &claim["metadata"]["annotations"];
    assert_eq!(restamped["karpenter.sh/nodepool-hash"], pool_hash);
    assert_eq!(restamped["karpenter.sh/nodepool-hash-version"], "v3");
    let conditions: Vec<&str> = claim["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "True")
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert_eq!(conditions, vec!["Launched", "Registered", "Initialized"]);
    let requests = api.state.lock().unwrap().requests.clone();
    let lease_reads = requests
        .iter()
        .filter(|r| {
            r.starts_with(
                "GET /apis/coordination.k8s.io/v1/namespaces/karpenter/leases/fleetwright-tick",
            )
        })
        .count();
    assert_eq!(lease_reads, 3, "each tick takes the lease");
}

/// Launches one m5.large in us-east-1a for NodeClaim `nodeclaim` of the default pool.
async fn launch_m5_large(
    cloud: &Ec2Cloud,
    fx: &Fixture,
    nodeclaim: &str,
    capacity_type: &str,
) -> fleetwright_aws::Launched {
    let request = LaunchRequest {
        nodeclaim: nodeclaim.into(),
        uid: None,
        nodepool: "default".into(),
        nodeclass: "default".into(),
        instance_types: vec!["m5.large".into()],
        capacity_types: vec![capacity_type.into()],
        zones: vec!["us-east-1a".into()],
        labels: Default::default(),
        taints: Vec::new(),
        startup_taints: Vec::new(),
        overlays: Vec::new(),
        reservation_ids: None,
        partition: None,
    };
    cloud
        .launch(&request, &fx.nodeclass("default"), Utc::now())
        .await
        .unwrap()
}

/// A launched spot instance with its NodeClaim, node and two pods (one DaemonSet pod) in the fake.
async fn interrupted_cluster(cluster: &str) -> (Arc<Ec2Cloud>, FakeApi, String) {
    let (cloud, fx) = cloud(cluster).await;
    let launched = launch_m5_large(&cloud, &fx, "default-spot", "spot").await;
    let claim = json!({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "default-spot", "uid": "nc-1", "finalizers": ["karpenter.sh/termination"],
            "labels": {"karpenter.sh/nodepool": "default", "node.kubernetes.io/instance-type": "m5.large",
                       "topology.kubernetes.io/zone": "us-east-1a", "karpenter.sh/capacity-type": "spot"}},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                 "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}]},
        "status": {"providerID": launched.provider_id(), "nodeName": "node-1"}});
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1", "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {"providerID": launched.provider_id()}});
    let api = FakeApi::start(objects(vec![
        (NODEPOOLS, vec![nodepool()]),
        (
            NODECLASSES,
            vec![serde_json::to_value(fx.nodeclass("default")).unwrap()],
        ),
        (NODECLAIMS, vec![claim]),
        (NODES, vec![node]),
        (
            PODS,
            vec![
                pod("web-1", Some("node-1"), "ReplicaSet"),
                pod("agent", Some("node-1"), "DaemonSet"),
            ],
        ),
    ]))
    .await;
    (cloud, api, launched.instance_id)
}

async fn instance_state(cloud: &Ec2Cloud, id: &str) -> String {
    let instance = support::describe_instance(&cloud.clients().ec2, id).await;
    instance
        .state()
        .unwrap()
        .name()
        .unwrap()
        .as_str()
        .to_string()
}

#[tokio::test]
async fn a_spot_warning_drains_and_deletes_the_nodeclaim_and_the_tick_terminates_after_the_pods() {
    let (cloud, api, instance) = interrupted_cluster("spot-e2e").await;
    let nudges = Recorder::default();
    let use_case = Interruption::new(
        cloud.clone(),
        api.client(),
        nudges.clone(),
        settings("spot-e2e"),
    );
    let event: EventBridgeEvent<Value> =
        serde_json::from_value(event_json("spot-interruption.json", &instance)).unwrap();
    let mut metrics = Metrics::default();
    let outcomes = use_case
        .handle_event(&event, Utc::now(), &mut metrics)
        .await
        .unwrap();
    assert_eq!(outcomes.len(), 1);
    assert_eq!(
        metrics.get_by(
            metrics::INTERRUPTION_RECEIVED,
            metrics::KIND,
            "spotInterruption"
        ),
        1.0
    );
    let node = &stored(&api, NODES)[0];
    let taints = node["spec"]["taints"].as_array().unwrap();
    assert!(taints
        .iter()
        .any(|t| t["key"] == "karpenter.sh/disrupted" && t["effect"] == "NoSchedule"));
    assert_eq!(
        api.state.lock().unwrap().evicted,
        vec!["default/web-1"],
        "the DaemonSet pod stays"
    );
    assert_eq!(
        instance_state(&cloud, &instance).await,
        "running",
        "the pods get their graceful shutdown before the instance goes"
    );
    let claims = stored(&api, NODECLAIMS);
    assert!(
        !claims[0]["metadata"]["deletionTimestamp"].is_null(),
        "the NodeClaim is deleting, held by its finalizer: {claims:?}"
    );
    assert!(cloud
        .unavailable()
        .is_unavailable("spot", "m5.large", "us-east-1a", Utc::now()));
    assert_eq!(nudges.0.lock().unwrap()[0].0, CAPACITY_NEEDED);
    assert!(
        !api.state.lock().unwrap().events.is_empty(),
        "a SpotInterrupted event is recorded"
    );

    // The tick waits for the evicted pod, then terminates once the kubelet has removed it.
    // The evicted pod, still on the interrupted node, gets its new capacity planned ahead (as
    // Karpenter's provisioner plans the pods of deleting nodes).
    let interrupted = claims[0]["metadata"]["name"].clone();
    let tick = Tick::new(cloud.clone(), api.client(), settings("spot-e2e"));
    let waiting = tick.run(Utc::now(), "t1").await.unwrap();
    assert!(waiting.terminated.is_empty(), "{waiting:?}");
    assert_eq!(waiting.nodeclaims_created.len(), 1, "{waiting:?}");
    assert_eq!(instance_state(&cloud, &instance).await, "running");
    api.state
        .lock()
        .unwrap()
        .objects
        .get_mut(PODS)
        .unwrap()
        .retain(|p| p["metadata"]["name"] != "web-1");
    let done = tick.run(Utc::now(), "t2").await.unwrap();
    assert!(
        ["shutting-down", "terminated"].contains(&instance_state(&cloud, &instance).await.as_str()),
        "{done:?}"
    );
    assert!(
        stored(&api, NODECLAIMS)
            .iter()
            .all(|c| c["metadata"]["name"] != interrupted),
        "the NodeClaim goes once its instance is terminating"
    );
    // Deleted by the interruption function, not by a disruption command.
    assert_eq!(
        done.metrics
            .get_by(metrics::NODECLAIMS_TERMINATED, metrics::REASON, "deleted"),
        1.0
    );
}

#[tokio::test]
async fn an_sqs_batch_fails_only_its_poison_message_and_drains_once() {
    let (cloud, api, instance) = interrupted_cluster("sqs-e2e").await;
    let nudges = Recorder::default();
    let use_case = Interruption::new(
        cloud.clone(),
        api.client(),
        nudges.clone(),
        settings("sqs-e2e"),
    );
    let mut batch = event_json("sqs-batch.json", &instance);
    let valid = batch["Records"][0].clone();
    let mut poison = valid.clone();
    poison["messageId"] = json!("poison-1");
    poison["body"] = json!("{\"this is\": not an event");
    let mut duplicate = valid.clone();
    duplicate["messageId"] = json!("duplicate-1");
    batch["Records"] = json!([valid, poison, duplicate]);
    let batch: SqsEvent = serde_json::from_value(batch).unwrap();
    let response = use_case
        .handle_sqs(batch, Utc::now(), &mut Metrics::default())
        .await;
    let failed: Vec<&str> = response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.as_str())
        .collect();
    assert_eq!(failed, vec!["poison-1"]);
    assert_eq!(
        api.state.lock().unwrap().evicted,
        vec!["default/web-1"],
        "drained once"
    );
    assert_eq!(nudges.count(), 1, "the duplicate does nothing");
    assert_eq!(
        instance_state(&cloud, &instance).await,
        "running",
        "the tick terminates it once the pods are gone"
    );
}

#[tokio::test]
async fn the_webhook_admits_and_puts_exactly_one_pending_pod_event() {
    let aws = clients();
    let queue = aws
        .sqs
        .create_queue()
        .queue_name("webhook-nudges")
        .send()
        .await
        .unwrap()
        .queue_url()
        .unwrap()
        .to_string();
    let arn = aws
        .sqs
        .get_queue_attributes()
        .queue_url(&queue)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
        .send()
        .await
        .unwrap()
        .attributes()
        .unwrap()[&aws_sdk_sqs::types::QueueAttributeName::QueueArn]
        .clone();
    let events = aws_sdk_eventbridge::Client::new(&sdk_config(None));
    events
        .put_rule()
        .name("fleetwright-nudges")
        .event_pattern(
            r#"{"source":["fleetwright"],"detail-type":["Pending Pod","Capacity Needed"],"detail":{"cluster":["dev"]}}"#,
        )
        .send()
        .await
        .unwrap();
    events
        .put_targets()
        .rule("fleetwright-nudges")
        .targets(
            aws_sdk_eventbridge::types::Target::builder()
                .id("tick")
                .arn(arn)
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
    let webhook = Webhook::new(
        EventBridgeNudge {
            client: events,
            bus: "default".into(),
            cluster: "dev".into(),
        },
        None,
    );

    let request: Value = serde_json::from_str(&event_text("webhook-admission.json")).unwrap();
    use base64::Engine;
    let body = base64::engine::general_purpose::STANDARD
        .decode(request["body"].as_str().unwrap())
        .unwrap();
    let now = Utc::now();
    for _ in 0..3 {
        let answer = webhook.handle("/admit", &body, now).await;
        assert_eq!(answer.status, 200);
        assert_eq!(answer.body["response"]["allowed"], true);
        assert_eq!(
            answer.body["response"]["uid"],
            "705ab4f5-6393-11e8-b7cc-42010a800002"
        );
        assert!(answer.body["response"]["patch"].is_null(), "never mutates");
    }
    let mut bound: Value = serde_json::from_slice(&body).unwrap();
    bound["request"]["object"]["spec"]["nodeName"] = json!("node-1");
    let later = now + chrono::Duration::seconds(5);
    assert_eq!(
        webhook
            .handle("/admit", bound.to_string().as_bytes(), later)
            .await
            .status,
        200
    );

    let received = aws
        .sqs
        .receive_message()
        .queue_url(&queue)
        .max_number_of_messages(10)
        .wait_time_seconds(1)
        .send()
        .await
        .unwrap();
    let messages = received.messages();
    assert_eq!(
        messages.len(),
        1,
        "bursts coalesce and bound pods are not nudged"
    );
    let event: Value = serde_json::from_str(messages[0].body().unwrap()).unwrap();
    assert_eq!(event["detail-type"], "Pending Pod");
    assert_eq!(event["detail"]["name"], "inflate-5db4558c8-00000");
    assert_eq!(event["detail"]["cluster"], "dev");
}

#[tokio::test]
async fn the_webhook_refuses_garbage_oversized_bodies_and_a_wrong_token() {
    let nudges = Recorder::default();
    let webhook = Webhook::new(nudges.clone(), Some("s3cr3t-token-0123456789".into()));
    let now = Utc::now();
    let ok_path = "/admit/s3cr3t-token-0123456789";
    assert_eq!(webhook.handle(ok_path, b"not json", now).await.status, 400);
    assert_eq!(
        webhook
            .handle(ok_path, br#"{"kind": "Pod"}"#, now)
            .await
            .status,
        400
    );
    assert_eq!(
        webhook
            .handle(ok_path, &vec![b' '; (1 << 20) + 1], now)
            .await
            .status,
        400
    );
    let body = event_text("webhook-admission.json");
    assert_eq!(
        webhook
            .handle("/admit/wrong", body.as_bytes(), now)
            .await
            .status,
        403
    );
    assert_eq!(
        webhook.handle("/admit", body.as_bytes(), now).await.status,
        403
    );
    assert_eq!(nudges.count(), 0);
}

#[tokio::test]
async fn an_empty_node_is_confirmed_then_tainted_drained_and_deleted_then_terminated() {
    let (cloud, fx) = cloud("tick-disrupt").await;
    let launched = launch_m5_large(&cloud, &fx, "default-empty", "on-demand").await;
    let labels = json!({"karpenter.sh/nodepool": "default", "node.kubernetes.io/instance-type": "m5.large",
        "topology.kubernetes.io/zone": "us-east-1a", "karpenter.sh/capacity-type": "on-demand",
        "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux"});
    let condition = |t: &str| json!({"type": t, "status": "True", "reason": t, "message": "", "lastTransitionTime": "2026-11-22T08:00:00Z"});
    let created = (Utc::now() - chrono::Duration::hours(1))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let claim = json!({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "default-empty", "uid": "nc-e", "creationTimestamp": created, "finalizers": ["karpenter.sh/termination"], "labels": labels},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []},
        "status": {"providerID": launched.provider_id(), "nodeName": "node-e",
            "conditions": [condition("Launched"), condition("Registered"), condition("Initialized")]}});
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-e", "labels": labels, "creationTimestamp": created},
        "spec": {"providerID": launched.provider_id()},
        "status": {"allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": "29"}, "conditions": [{"type": "Ready", "status": "True"}]}});
    // A second empty node that must stay: annotated do-not-disrupt.
    let kept_provider = "aws:///us-east-1a/i-0000000000000keep";
    let mut kept_claim = claim.clone();
    kept_claim["metadata"]["name"] = json!("default-kept");
    kept_claim["metadata"]["uid"] = json!("nc-k");
    kept_claim["status"]["providerID"] = json!(kept_provider);
    kept_claim["status"]["nodeName"] = json!("node-k");
    let mut kept_node = node.clone();
    kept_node["metadata"]["name"] = json!("node-k");
    kept_node["metadata"]["annotations"] = json!({"karpenter.sh/do-not-disrupt": "true"});
    kept_node["spec"]["providerID"] = json!(kept_provider);
    let mut pool = nodepool();
    pool["spec"]["disruption"] = json!({"consolidationPolicy": "WhenEmpty", "consolidateAfter": "0s", "budgets": [{"nodes": "100%"}]});
    let api = FakeApi::start(objects(vec![
        (NODEPOOLS, vec![pool]),
        (
            NODECLASSES,
            vec![serde_json::to_value(fx.nodeclass("default")).unwrap()],
        ),
        (NODECLAIMS, vec![claim, kept_claim]),
        (NODES, vec![node, kept_node]),
        (PODS, vec![pod("agent", Some("node-e"), "DaemonSet")]),
    ]))
    .await;
    let start = Utc::now();
    let tick = |n: i64| {
        let (cloud, client, settings) = (cloud.clone(), api.client(), settings(&fx.cluster));
        async move {
            Tick::new(cloud, client, settings)
                .run(
                    start + chrono::Duration::seconds(20 * n),
                    &format!("tick-{n}"),
                )
                .await
                .unwrap()
        }
    };
    let tainted = |api: &FakeApi| {
        stored(api, NODES)[0]["spec"]["taints"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["key"] == "karpenter.sh/disrupted"))
    };

    let first = tick(0).await;
    assert_eq!(first.disruptions, vec!["empty/delete:node-e"], "{first:?}");
    assert!(!tainted(&api), "a decision waits for confirmation");

    let second = tick(1).await;
    assert_eq!(second.disruptions, vec!["empty/delete:node-e"]);
    let blocked: Vec<Value> = api
        .state
        .lock()
        .unwrap()
        .events
        .iter()
        .filter(|e| e["reason"] == "DisruptionBlocked")
        .cloned()
        .collect();
    assert_eq!(
        blocked.len(),
        1,
        "evented once, not every tick: {blocked:?}"
    );
    assert_eq!(blocked[0]["involvedObject"]["name"], "node-k");
    assert!(blocked[0]["message"]
        .as_str()
        .unwrap()
        .contains("karpenter.sh/do-not-disrupt"));
    assert!(tainted(&api), "the confirmed command taints the node");
    let claim = &stored(&api, NODECLAIMS)[0];
    assert_eq!(
        claim["metadata"]["annotations"]["fleetwright.io/disruption"],
        "empty/delete"
    );
    let events = api.state.lock().unwrap().events.clone();
    let taken = events
        .iter()
        .find(|e| e["reason"] == "DisruptionTerminating")
        .unwrap_or_else(|| panic!("no DisruptionTerminating event in {events:?}"));
    assert_eq!(taken["involvedObject"]["name"], "node-e");
    assert!(
        taken["message"]
            .as_str()
            .unwrap()
            .starts_with("Disrupting Node: empty/delete, savings $0.0960/h"),
        "{taken}"
    );

    // Counted with Karpenter v1.15's labels; its one pod, a DaemonSet's, does not move.
    let labels = [
        ("reason", "empty"),
        ("nodepool", "default"),
        ("capacity_type", "on-demand"),
        ("consolidation_policy", "when_empty"),
        ("termination_mode", "graceful"),
    ];
    let m = &second.metrics;
    assert_eq!(
        m.sum_by(metrics::NODECLAIMS_DISRUPTED, &labels),
        1.0,
        "{m:?}"
    );
    assert_eq!(m.sum_by(metrics::PODS_DISRUPTION_INITIATED, &labels), 0.0);
    // A delete command has no replacement to wait for: the same tick drains and deletes.
    assert_eq!(second.disrupted, vec!["default-empty"], "{second:?}");
    assert!(
        api.state.lock().unwrap().evicted.is_empty(),
        "DaemonSet pods are not evicted"
    );

    let third = tick(2).await;
    assert_eq!(
        third.terminated,
        vec![launched.instance_id.clone()],
        "{third:?}"
    );
    let state = instance_state(&cloud, &launched.instance_id).await;
    assert!(state == "shutting-down" || state == "terminated", "{state}");
}

#[tokio::test]
async fn a_drain_past_its_termination_grace_period_deletes_the_pods_a_pdb_holds() {
    let (cloud, fx) = cloud("tick-grace").await;
    let launched = launch_m5_large(&cloud, &fx, "default-old", "on-demand").await;
    let condition = |t: &str| json!({"type": t, "status": "True", "reason": t, "message": "", "lastTransitionTime": "2026-11-22T08:00:00Z"});
    let now = Utc::now();
    let stamp = |t: chrono::DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    // An expiry already in progress: tainted, annotated, its drain started `started_ago` ago.
    let cluster = |started_ago: i64| {
        let claim = json!({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "default-old", "uid": "nc-o", "finalizers": ["karpenter.sh/termination"],
                "labels": {"karpenter.sh/nodepool": "default"},
                "annotations": {"fleetwright.io/disruption": "expired/delete",
                                "fleetwright.io/drain-started": stamp(now - chrono::Duration::seconds(started_ago))}},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                     "requirements": [], "terminationGracePeriod": "10m"},
            "status": {"providerID": launched.provider_id(), "nodeName": "node-o",
                "conditions": [condition("Launched"), condition("Registered"), condition("Initialized")]}});
        let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-o", "labels": {"karpenter.sh/nodepool": "default"}},
            "spec": {"providerID": launched.provider_id(), "taints": [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]},
            "status": {"allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": "29"}, "conditions": [{"type": "Ready", "status": "True"}]}});
        let mut guarded = pod("checkout-1", Some("node-o"), "ReplicaSet");
        guarded["metadata"]["namespace"] = json!("shop");
        objects(vec![
            (NODEPOOLS, vec![nodepool()]),
            (
                NODECLASSES,
                vec![serde_json::to_value(fx.nodeclass("default")).unwrap()],
            ),
            (NODECLAIMS, vec![claim]),
            (NODES, vec![node]),
            (PODS, vec![guarded]),
        ])
    };
    for (started_ago, past_deadline) in [(60, false), (11 * 60, true)] {
        let api = FakeApi::start(cluster(started_ago)).await;
        api.state
            .lock()
            .unwrap()
            .pdb_blocked
            .push("shop/checkout-1".into());
        let summary = Tick::new(cloud.clone(), api.client(), settings(&fx.cluster))
            .run(now, "tick-grace")
            .await
            .unwrap();
        let pods_left = stored(&api, PODS).len();
        let claim = &stored(&api, NODECLAIMS)[0];
        if past_deadline {
            assert_eq!(pods_left, 0, "the PDB-held pod is deleted at the deadline");
            assert_eq!(summary.disrupted, vec!["default-old"], "{summary:?}");
            assert!(claim["metadata"]["deletionTimestamp"].is_string());
        } else {
            assert_eq!(pods_left, 1, "before the deadline the PDB is respected");
            assert!(summary.disrupted.is_empty(), "{summary:?}");
            assert!(api.state.lock().unwrap().evicted.is_empty());
        }
    }
}

#[tokio::test]
async fn a_deleted_nodeclaim_is_drained_and_terminated_once_its_pods_are_gone_or_stuck() {
    let (cloud, fx) = cloud("tick-deleted").await;
    let launched = launch_m5_large(&cloud, &fx, "default-gone", "on-demand").await;
    let condition = |t: &str| json!({"type": t, "status": "True", "reason": t, "message": "", "lastTransitionTime": "2026-11-22T08:00:00Z"});
    // Deleted by hand (`kubectl delete nodeclaim`): the finalizer holds it.
    let claim = json!({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "default-gone", "uid": "nc-g", "finalizers": ["karpenter.sh/termination"],
            "deletionTimestamp": Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []},
        "status": {"providerID": launched.provider_id(), "nodeName": "node-g",
            "conditions": [condition("Launched"), condition("Registered"), condition("Initialized")]}});
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-g", "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {"providerID": launched.provider_id()},
        "status": {"allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": "29"}, "conditions": [{"type": "Ready", "status": "True"}]}});
    let api = FakeApi::start(objects(vec![
        (NODEPOOLS, vec![nodepool()]),
        (
            NODECLASSES,
            vec![serde_json::to_value(fx.nodeclass("default")).unwrap()],
        ),
        (NODECLAIMS, vec![claim]),
        (NODES, vec![node]),
        (PODS, vec![pod("web-1", Some("node-g"), "ReplicaSet")]),
    ]))
    .await;
    let tick = || Tick::new(cloud.clone(), api.client(), settings(&fx.cluster));

    let first = tick().run(Utc::now(), "deleted-1").await.unwrap();
    assert!(
        first.terminated.is_empty(),
        "a pod is still there: {first:?}"
    );
    assert_eq!(api.state.lock().unwrap().evicted, vec!["default/web-1"]);
    assert_eq!(
        instance_state(&cloud, &launched.instance_id).await,
        "running"
    );

    // The pod is shutting down within its grace period: still waited for.
    let set_deletion = |at: chrono::DateTime<Utc>| {
        let mut state = api.state.lock().unwrap();
        let pods = state.objects.get_mut(PODS).unwrap();
        pods[0]["metadata"]["deletionTimestamp"] =
            json!(at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
    };
    set_deletion(Utc::now() + chrono::Duration::seconds(30));
    let second = tick().run(Utc::now(), "deleted-2").await.unwrap();
    assert!(second.terminated.is_empty(), "{second:?}");

    // Stuck terminating well past its deadline (a dead kubelet): no longer waited for.
    set_deletion(Utc::now() - chrono::Duration::minutes(5));
    let third = tick().run(Utc::now(), "deleted-3").await.unwrap();
    assert_eq!(
        third.terminated,
        vec![launched.instance_id.clone()],
        "{third:?}"
    );
}
