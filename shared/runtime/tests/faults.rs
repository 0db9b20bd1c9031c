//! The use cases under faults, on the in-memory Kubernetes API and the simulated cloud: a
//! refused or failing termination is reported and retried by a later tick, and never stops the
//! rest of the tick (the other deletions, garbage collection, the state write); 429s and 5xx
//! from the API server are retried on reads; an invocation near its deadline stops between
//! actions (the tick) or leaves its messages to SQS (interruption), and the next one finishes.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use fleetwright_cloud::{
    Cloud, CloudError, Instance, LaunchRequest, Launched, ResolvedNodeClass, Termination,
    UnavailableOfferings,
};
use fleetwright_core::Catalog;
use fleetwright_crds::EC2NodeClass;
use fleetwright_runtime::settings::Settings;
use fleetwright_runtime::tick::Tick;
use fleetwright_sim::memory::MemoryApi;
use fleetwright_sim::SimCloud;
use serde_json::{json, Value};

const NODECLAIMS: &str = "/apis/karpenter.sh/v1/nodeclaims";

/// The simulated cloud, except that terminating `refused` fails as EC2 would on an outage, and
/// with `catalog_down` the catalog (prices, offerings) cannot be read.
struct FailingTermination {
    inner: SimCloud,
    refused: String,
    catalog_down: bool,
}

impl Cloud for FailingTermination {
    async fn catalog(&self, now: DateTime<Utc>) -> Result<Arc<Catalog>, CloudError> {
        if self.catalog_down {
            return Err(CloudError::Api {
                operation: "GetProducts",
                code: "ServiceUnavailable".into(),
                message: "the pricing API is down".into(),
            });
        }
        self.inner.catalog(now).await
    }
    async fn nodeclass(
        &self,
        nodeclass: &EC2NodeClass,
        now: DateTime<Utc>,
    ) -> Result<ResolvedNodeClass, CloudError> {
        self.inner.nodeclass(nodeclass, now).await
    }
    async fn launch(
        &self,
        req: &LaunchRequest,
        nodeclass: &EC2NodeClass,
        now: DateTime<Utc>,
    ) -> Result<Launched, CloudError> {
        self.inner.launch(req, nodeclass, now).await
    }
    async fn terminate(&self, instance_id: &str) -> Result<Termination, CloudError> {
        if instance_id == self.refused {
            return Err(CloudError::Api {
                operation: "TerminateInstances",
                code: "InternalError".into(),
                message: "An internal error has occurred".into(),
            });
        }
        self.inner.terminate(instance_id).await
    }
    async fn instances(&self) -> Result<Vec<Instance>, CloudError> {
        self.inner.instances().await
    }
    async fn describe(&self, ids: &[String]) -> Result<Vec<Instance>, CloudError> {
        self.inner.describe(ids).await
    }
    fn mark_unavailable(&self, c: &str, t: &str, z: &str, now: DateTime<Utc>) {
        self.inner.mark_unavailable(c, t, z, now)
    }
    fn unavailable(&self) -> UnavailableOfferings {
        self.inner.unavailable()
    }
    fn restore_unavailable(&self, saved: &UnavailableOfferings) {
        self.inner.restore_unavailable(saved)
    }
}

fn deleting_claim(name: &str, instance: &str) -> Value {
    json!({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": "1",
            "creationTimestamp": "2026-11-23T18:00:00Z", "deletionTimestamp": "2026-11-23T19:00:00Z",
            "finalizers": ["karpenter.sh/termination"], "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": []},
        "status": {"providerID": format!("aws:///us-east-1a/{instance}")}})
}

fn settings() -> Settings {
    Settings::from_lookup(|name| (name == "FLEETWRIGHT_CLUSTER_NAME").then(|| "faults".into()))
        .expect("valid settings")
}

/// The instant every test here runs at.
fn half_past_seven() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-11-23T19:30:00Z")
        .unwrap()
        .with_timezone(&Utc)
}

/// The simulated cloud over the embedded catalog, for cluster `faults`.
fn sim_cloud() -> SimCloud {
    SimCloud::new("faults", Arc::new(Catalog::embedded().clone()))
}

fn claim_names(api: &MemoryApi) -> Vec<String> {
    api.lock()
        .objects
        .get(NODECLAIMS)
        .map(|claims| {
            claims
                .iter()
                .filter_map(|c| c["metadata"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn a_failed_termination_is_reported_and_the_rest_of_the_tick_runs() {
    let objects: BTreeMap<String, Vec<Value>> = [(
        NODECLAIMS.to_string(),
        vec![
            deleting_claim("default-stuck", "i-0000000000000000a"),
            deleting_claim("default-going", "i-0000000000000000b"),
        ],
    )]
    .into();
    let api = MemoryApi::new(objects);
    let cloud = FailingTermination {
        inner: sim_cloud(),
        refused: "i-0000000000000000a".into(),
        catalog_down: false,
    };
    let tick = Tick::new(cloud, api.client(), settings());
    let now = half_past_seven();

    let summary = tick
        .run(now, "faults")
        .await
        .expect("a refused termination does not fail the tick");

    assert_eq!(summary.terminated, vec!["i-0000000000000000b"]);
    assert_eq!(summary.termination_failures.len(), 1, "{summary:?}");
    assert!(
        summary.termination_failures[0].contains("default-stuck")
            && summary.termination_failures[0].contains("InternalError"),
        "{summary:?}"
    );
    assert_eq!(
        claim_names(&api),
        vec!["default-stuck"],
        "the stuck NodeClaim keeps its finalizer, so a later tick retries it"
    );
    assert!(
        api.lock()
            .singles
            .contains_key("/api/v1/namespaces/karpenter/configmaps/fleetwright-state"),
        "the end-of-tick state write ran"
    );
}

fn launched_claim(name: &str, instance: &str, launched: &str) -> Value {
    json!({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": "1",
            "creationTimestamp": launched, "finalizers": ["karpenter.sh/termination"],
            "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": []},
        "status": {"providerID": format!("aws:///us-east-1a/{instance}"), "nodeName": format!("node-{name}"),
            "conditions": [{"type": "Launched", "status": "True", "reason": "Launched", "lastTransitionTime": launched}]}})
}

fn node(name: &str, instance: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": "1",
            "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {"providerID": format!("aws:///us-east-1a/{instance}")},
        "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}})
}

/// An instance that died without a warning (or was terminated outside Fleetwright) leaves a
/// NodeClaim whose capacity does not exist: the tick deletes it and its node, so the pods are
/// planned again. A NodeClaim launched a moment ago is left alone while the listing catches up.
#[tokio::test]
async fn a_nodeclaim_whose_instance_is_gone_is_deleted_with_its_node() {
    let objects: BTreeMap<String, Vec<Value>> = [
        (
            NODECLAIMS.to_string(),
            vec![
                launched_claim(
                    "default-dead",
                    "i-00000000000000dead",
                    "2026-11-23T19:00:00Z",
                ),
                launched_claim(
                    "default-fresh",
                    "i-0000000000000fresh",
                    "2026-11-23T19:29:50Z",
                ),
            ],
        ),
        (
            "/api/v1/nodes".to_string(),
            vec![node("node-default-dead", "i-00000000000000dead")],
        ),
    ]
    .into();
    let api = MemoryApi::new(objects);
    let cloud = sim_cloud();
    let tick = Tick::new(cloud, api.client(), settings());
    let now = half_past_seven();

    let summary = tick.run(now, "faults").await.expect("the tick");

    assert_eq!(
        summary.stranded_deleted,
        vec!["default-dead"],
        "{summary:?}"
    );
    assert_eq!(claim_names(&api), vec!["default-fresh"]);
    let nodes = api
        .lock()
        .objects
        .get("/api/v1/nodes")
        .cloned()
        .unwrap_or_default();
    assert!(
        nodes.is_empty(),
        "the dead instance's node goes too: {nodes:?}"
    );
}

/// A phase that fails (here the disruption phase, which cannot read the catalog) fails the
/// tick, but the phases after it still run: a NodeClaim whose instance is gone is forgotten and
/// the state is written, instead of waiting for a tick in which nothing fails.
#[tokio::test]
async fn a_failed_phase_still_lets_the_tick_forget_stranded_nodeclaims_and_save_its_state() {
    let objects: BTreeMap<String, Vec<Value>> = [
        (
            NODECLAIMS.to_string(),
            vec![launched_claim(
                "default-dead",
                "i-00000000000000dead",
                "2026-11-23T19:00:00Z",
            )],
        ),
        (
            "/api/v1/nodes".to_string(),
            vec![node("node-default-dead", "i-00000000000000dead")],
        ),
    ]
    .into();
    let api = MemoryApi::new(objects);
    let cloud = FailingTermination {
        inner: sim_cloud(),
        refused: String::new(),
        catalog_down: true,
    };
    let tick = Tick::new(cloud, api.client(), settings());

    let error = tick
        .run(half_past_seven(), "faults")
        .await
        .expect_err("the phase's error is the tick's");

    assert!(error.to_string().contains("GetProducts"), "{error}");
    assert!(claim_names(&api).is_empty(), "the stranded NodeClaim went");
    assert!(
        api.lock()
            .singles
            .contains_key("/api/v1/namespaces/karpenter/configmaps/fleetwright-state"),
        "the end-of-tick state write ran"
    );
}

fn nodepool_and_class() -> Vec<(String, Vec<Value>)> {
    let pool = json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "default", "uid": "np-1"},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]},
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a"]}]}}}});
    let class = json!({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
        "metadata": {"name": "default", "uid": "nc-1"},
        "spec": {"role": "node-role", "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "faults"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "faults"}}]}});
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-1", "namespace": "default", "uid": "uid-web-1",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "rs-1", "controller": true}]},
        "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}});
    vec![
        ("/apis/karpenter.sh/v1/nodepools".into(), vec![pool]),
        (
            "/apis/karpenter.k8s.aws/v1/ec2nodeclasses".into(),
            vec![class],
        ),
        ("/api/v1/pods".into(), vec![pod]),
    ]
}

/// A CreateFleet whose answer is lost (a timeout, a 5xx) may have launched: the NodeClaim is
/// kept, and the next tick finds the instance by its tag and records it instead of launching a
/// second one. (Deleting the NodeClaim, as before, left that instance running unclaimed until
/// garbage collection, and planned its pods onto another launch.)
#[tokio::test]
async fn a_launch_whose_answer_was_lost_keeps_its_nodeclaim_and_the_next_tick_adopts_it() {
    let api = MemoryApi::new(nodepool_and_class().into_iter().collect());
    let cloud = Arc::new(sim_cloud());
    cloud.inject(fleetwright_sim::cloud::CloudFault {
        operation: "CreateFleet",
        code: "RequestTimeout".into(),
        times: 1,
        after_launch: true,
    });
    let tick = Tick::new(cloud.clone(), api.client(), settings());
    let now = half_past_seven();

    let first = tick.run(now, "faults-1").await.expect("the tick");
    assert_eq!(first.launch_failures.len(), 1, "{first:?}");
    let names = claim_names(&api);
    assert_eq!(names.len(), 1, "the NodeClaim is kept: {first:?}");
    assert_eq!(cloud.live().len(), 1, "the lost answer's launch happened");

    let second = tick
        .run(now + chrono::Duration::seconds(20), "faults-2")
        .await
        .expect("the tick");
    let live: Vec<String> = cloud.live().into_keys().collect();
    assert_eq!(live.len(), 1, "no second instance: {second:?}");
    let claims = api.lock().objects.get(NODECLAIMS).cloned().unwrap();
    let provider = claims[0]["status"]["providerID"]
        .as_str()
        .unwrap_or_default();
    assert!(
        provider.ends_with(&live[0]),
        "the NodeClaim records the instance it launched: {provider} vs {live:?}"
    );
}

/// A tick cut off before it released the Lease (its release never reaches the API server)
/// holds back no scheduled tick: the default term is shorter than the one-minute schedule.
#[tokio::test]
async fn a_tick_that_never_released_its_lease_holds_back_no_scheduled_tick() {
    use fleetwright_sim::memory::Fault;
    let api = MemoryApi::new(BTreeMap::new());
    api.lock().faults.push(Fault {
        method: "PUT".into(),
        path: "/apis/coordination.k8s.io/".into(),
        status: 503,
        skip: 0,
        times: usize::MAX,
    });
    let tick = Tick::new(sim_cloud(), api.client(), settings());
    let now = half_past_seven();
    let first = tick.run(now, "cut-off").await.expect("the tick");
    assert!(first.skipped.is_none());
    api.lock().faults.clear();
    let nudged = tick
        .run(now + chrono::Duration::seconds(30), "nudged")
        .await
        .expect("the tick");
    assert!(
        nudged.skipped.is_some(),
        "the Lease still holds a nudge back"
    );
    let scheduled = tick
        .run(now + chrono::Duration::seconds(60), "scheduled")
        .await
        .expect("the tick");
    assert!(
        scheduled.skipped.is_none(),
        "the next scheduled tick runs: {scheduled:?}"
    );
}

/// The Kubernetes side: throttling and server errors on the cluster read are retried, so a
/// 429 or a 503 does not end the tick; an API server that keeps failing fails the tick with the
/// list it could not read (and the next tick starts over).
#[tokio::test]
async fn transient_api_errors_on_the_read_are_retried_and_a_persistent_one_is_named() {
    use fleetwright_sim::memory::Fault;
    let objects: BTreeMap<String, Vec<Value>> = [(
        NODECLAIMS.to_string(),
        vec![deleting_claim("default-going", "i-0000000000000000b")],
    )]
    .into();
    let api = MemoryApi::new(objects);
    let fault = |path: &str, status, times| Fault {
        method: "GET".into(),
        path: path.into(),
        status,
        skip: 0,
        times,
    };
    api.lock().faults = vec![
        fault("/api/v1/pods", 429, 1),
        fault("/api/v1/nodes", 503, 2),
        fault(NODECLAIMS, 500, 1),
    ];
    let cloud = sim_cloud();
    let tick = Tick::new(cloud, api.client(), settings());
    let now = half_past_seven();
    let summary = tick
        .run(now, "faults")
        .await
        .expect("transient errors are retried");
    assert_eq!(summary.terminated, vec!["i-0000000000000000b"]);
    assert!(api.lock().faults.iter().all(|f| f.times == 0));

    api.lock().faults = vec![fault("/api/v1/nodes", 503, 100)];
    let err = tick.run(now, "faults").await.unwrap_err().to_string();
    assert!(err.contains("listing Node"), "{err}");
    let left = api.lock().faults[0].times;
    assert_eq!(
        100 - left,
        fleetwright_kube::retry::ATTEMPTS as usize,
        "retried a bounded number of times"
    );
}

/// A tick whose invocation is about to be cut off starts no action, says so, and leaves a state
/// the next tick completes.
#[tokio::test]
async fn a_tick_near_its_deadline_stops_between_actions_and_the_next_one_finishes() {
    use fleetwright_runtime::deadline::Deadline;
    let objects: BTreeMap<String, Vec<Value>> = [(
        NODECLAIMS.to_string(),
        vec![deleting_claim("default-going", "i-0000000000000000b")],
    )]
    .into();
    let api = MemoryApi::new(objects);
    let cloud = Arc::new(sim_cloud());
    let now = half_past_seven();
    let cut = Tick::new(cloud.clone(), api.client(), settings())
        .with_deadline(Deadline::at(std::time::Instant::now()));
    let summary = cut.run(now, "faults").await.unwrap();
    assert!(summary.stopped_early.is_some(), "{summary:?}");
    assert!(summary.terminated.is_empty());
    assert_eq!(claim_names(&api), vec!["default-going"]);

    let next = Tick::new(cloud, api.client(), settings());
    let summary = next.run(now, "faults").await.unwrap();
    assert_eq!(summary.terminated, vec!["i-0000000000000000b"]);
    assert!(claim_names(&api).is_empty());
}

struct NoNudge;

impl fleetwright_runtime::nudge::Nudge for NoNudge {
    async fn nudge(&self, _: &str, _: Value) -> Result<(), CloudError> {
        Ok(())
    }
}

/// An SQS batch whose invocation is about to be cut off handles nothing more and fails the
/// messages it has not started, so SQS redelivers them instead of losing them to the timeout.
#[tokio::test]
async fn an_sqs_batch_near_its_deadline_leaves_its_messages_to_redelivery() {
    use aws_lambda_events::event::sqs::SqsEvent;
    use fleetwright_runtime::deadline::Deadline;
    use fleetwright_runtime::interruption::Interruption;
    use fleetwright_runtime::metrics::Metrics;
    let api = MemoryApi::new(BTreeMap::new());
    let cloud = sim_cloud();
    let warning = json!({"version": "0", "id": "e-1", "detail-type": "EC2 Spot Instance Interruption Warning",
        "source": "aws.ec2", "account": "123456789012", "time": "2026-11-23T19:30:00Z", "region": "us-east-1",
        "resources": [], "detail": {"instance-id": "i-0000000000000000a", "instance-action": "terminate"}});
    let batch: SqsEvent = serde_json::from_value(json!({"Records": [
        {"messageId": "m-1", "body": warning.to_string()},
        {"messageId": "m-2", "body": warning.to_string()},
    ]}))
    .unwrap();
    let use_case = Interruption::new(cloud, api.client(), NoNudge, settings())
        .with_deadline(Deadline::at(std::time::Instant::now()));
    let response = use_case
        .handle_sqs(batch, Utc::now(), &mut Metrics::default())
        .await;
    let failed: Vec<&str> = response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.as_str())
        .collect();
    assert_eq!(failed, ["m-1", "m-2"]);
}

/// A spot storm's SQS batch reads the cluster once, not once per message (finding: every record
/// re-read the whole cluster in a 30 s function).
#[tokio::test]
async fn an_sqs_batch_reads_the_cluster_once_for_all_its_messages() {
    use aws_lambda_events::event::sqs::SqsEvent;
    use fleetwright_runtime::interruption::Interruption;
    use fleetwright_runtime::metrics::Metrics;
    let api = MemoryApi::new(BTreeMap::new());
    let cloud = sim_cloud();
    let records: Vec<Value> = (0..5)
        .map(|i| {
            let warning = json!({"version": "0", "id": format!("e-{i}"), "detail-type": "EC2 Spot Instance Interruption Warning",
                "source": "aws.ec2", "account": "123456789012", "time": "2026-11-23T19:30:00Z", "region": "us-east-1",
                "resources": [], "detail": {"instance-id": format!("i-000000000000000{i}"), "instance-action": "terminate"}});
            json!({"messageId": format!("m-{i}"), "body": warning.to_string()})
        })
        .collect();
    let batch: SqsEvent = serde_json::from_value(json!({ "Records": records })).unwrap();
    let use_case = Interruption::new(cloud, api.client(), NoNudge, settings());
    let response = use_case
        .handle_sqs(batch, Utc::now(), &mut Metrics::default())
        .await;
    assert!(response.batch_item_failures.is_empty());
    assert_eq!(
        api.requests_to(NODECLAIMS).len(),
        1,
        "one read for five messages"
    );
}

/// A write that fails for one NodeClaim does not stop the tick's other work: the other stranded
/// NodeClaim is still let go, the failure is reported, and the next tick finishes the first.
#[tokio::test]
async fn a_failed_write_for_one_nodeclaim_leaves_the_others_to_proceed() {
    use fleetwright_sim::memory::Fault;
    let objects: BTreeMap<String, Vec<Value>> = [(
        NODECLAIMS.to_string(),
        ["default-one", "default-two"]
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let mut claim = launched_claim(
                    name,
                    &format!("i-000000000000000{i}"),
                    "2026-11-23T19:00:00Z",
                );
                claim["status"]["conditions"].as_array_mut().unwrap().push(
                    json!({"type": "Registered", "status": "True", "reason": "Registered",
                        "lastTransitionTime": "2026-11-23T19:01:00Z"}),
                );
                claim
            })
            .collect(),
    )]
    .into();
    let api = MemoryApi::new(objects);
    // A 500 on every attempt: a single one is retried and lands.
    api.lock().faults.push(Fault {
        method: "PUT".into(),
        path: NODECLAIMS.into(),
        status: 500,
        skip: 0,
        times: fleetwright_kube::retry::ATTEMPTS as usize,
    });
    let cloud = sim_cloud();
    let tick = Tick::new(cloud, api.client(), settings());
    let now = half_past_seven();
    let summary = tick.run(now, "faults").await.expect("the tick goes on");
    assert_eq!(summary.failures.len(), 1, "{summary:?}");
    assert_eq!(claim_names(&api).len(), 1, "the other NodeClaim went");
    tick.run(now, "faults").await.unwrap();
    assert!(
        claim_names(&api).is_empty(),
        "the next tick finishes the first"
    );
}
