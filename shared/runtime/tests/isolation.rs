//! One bad object or one failed call never stops the others, through whole ticks on the
//! in-memory Kubernetes API and the simulated cloud: a malformed NodePool, a pool whose
//! EC2NodeClass is missing, an eviction the API server refuses with 500, a stale instance
//! listing, a Node deleted by hand, a Node that cannot be deleted; and limits and zones as the
//! cloud can honour them.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use fleetwright_cloud::{
    Cloud, CloudError, Instance, LaunchRequest, Launched, ResolvedNodeClass, Termination,
    UnavailableOfferings,
};
use fleetwright_core::Catalog;
use fleetwright_crds::EC2NodeClass;
use fleetwright_runtime::settings::Settings;
use fleetwright_runtime::tick::Tick;
use fleetwright_sim::memory::{Fault, MemoryApi};
use fleetwright_sim::SimCloud;
use serde_json::{json, Value};

const NODEPOOLS: &str = "/apis/karpenter.sh/v1/nodepools";
const NODECLASSES: &str = "/apis/karpenter.k8s.aws/v1/ec2nodeclasses";
const NODECLAIMS: &str = "/apis/karpenter.sh/v1/nodeclaims";
const PODS: &str = "/api/v1/pods";
const NODES: &str = "/api/v1/nodes";

fn settings() -> Settings {
    Settings::from_lookup(|name| (name == "FLEETWRIGHT_CLUSTER_NAME").then(|| "iso".into()))
        .expect("valid settings")
}

fn noon() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-11-23T12:00:00Z")
        .unwrap()
        .with_timezone(&Utc)
}

fn stamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn sim_cloud() -> SimCloud {
    SimCloud::new("iso", Arc::new(Catalog::embedded().clone()))
}

fn class(name: &str) -> Value {
    json!({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
        "metadata": {"name": name, "uid": format!("nc-{name}")},
        "spec": {"role": "node-role", "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "iso"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "iso"}}]}})
}

/// A NodePool of `class`, with `spec` merged into its `spec` (and `template` into its template's
/// spec).
fn pool(name: &str, class: &str, template: Value, spec: Value) -> Value {
    let mut template_spec = json!({
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": class},
        "requirements": [
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]});
    for (k, v) in template.as_object().unwrap() {
        template_spec[k] = v.clone();
    }
    let mut pool = json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": name, "uid": format!("np-{name}")},
        "spec": {"template": {"spec": template_spec},
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"}}});
    for (k, v) in spec.as_object().unwrap() {
        pool["spec"][k] = v.clone();
    }
    pool
}

fn pending_pod(name: &str, cpu: &str, extra: Value) -> Value {
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
            "labels": {"app": "web"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "rs-web", "controller": true}]},
        "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}]},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}});
    for (k, v) in extra.as_object().unwrap() {
        pod["spec"][k] = v.clone();
    }
    pod
}

/// Every `method` request to `path` answers `status`, for good.
fn fail_always(api: &MemoryApi, method: &str, path: &str, status: u16) {
    api.lock().faults.push(Fault {
        method: method.into(),
        path: path.into(),
        status,
        skip: 0,
        times: usize::MAX,
    });
}

/// The `web` NodePool and its `default` EC2NodeClass, with `more`.
fn web_cluster(more: Vec<(&str, Vec<Value>)>) -> MemoryApi {
    let mut all = vec![
        (
            NODEPOOLS,
            vec![pool("web", "default", json!({}), json!({}))],
        ),
        (NODECLASSES, vec![class("default")]),
    ];
    all.extend(more);
    MemoryApi::new(objects(all))
}

fn objects(of: Vec<(&str, Vec<Value>)>) -> BTreeMap<String, Vec<Value>> {
    of.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

fn list(api: &MemoryApi, path: &str) -> Vec<Value> {
    api.lock().objects.get(path).cloned().unwrap_or_default()
}

fn names(api: &MemoryApi, path: &str) -> Vec<String> {
    list(api, path)
        .iter()
        .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_string))
        .collect()
}

fn pool_of(claim: &Value) -> String {
    claim["metadata"]["labels"]["karpenter.sh/nodepool"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn condition<'a>(object: &'a Value, type_: &str) -> Option<&'a Value> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// A NodePool with a duration Karpenter's CRD would have refused (`30 seconds`) is left out
/// with a condition and an Event that name the field, and the pool beside it provisions.
#[tokio::test]
async fn a_malformed_nodepool_is_reported_and_the_other_pool_provisions() {
    let broken = pool(
        "batch",
        "default",
        json!({}),
        json!({"disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30 seconds"}}),
    );
    let api = MemoryApi::new(objects(vec![
        (
            NODEPOOLS,
            vec![broken, pool("web", "default", json!({}), json!({}))],
        ),
        (NODECLASSES, vec![class("default")]),
        (PODS, vec![pending_pod("web-1", "1", json!({}))]),
    ]));
    let tick = Tick::new(sim_cloud(), api.client(), settings());

    let summary = tick.run(noon(), "iso").await.expect("the tick goes on");

    assert_eq!(summary.launched.len(), 1, "{summary:?}");
    let claims = list(&api, NODECLAIMS);
    assert_eq!(pool_of(&claims[0]), "web");
    let pools = list(&api, NODEPOOLS);
    let batch = pools
        .iter()
        .find(|p| p["metadata"]["name"] == "batch")
        .unwrap();
    let valid = condition(batch, "ValidationSucceeded").expect("the condition is written");
    assert_eq!(valid["status"], "False");
    let message = valid["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("consolidateAfter") && message.contains("30 seconds"),
        "{message}"
    );
    let events = api.lock().events.clone();
    assert!(
        events
            .iter()
            .any(|e| e["reason"] == "ValidationFailed" && e["involvedObject"]["name"] == "batch"),
        "{events:?}"
    );
    let again = tick
        .run(noon() + Duration::minutes(1), "iso")
        .await
        .expect("the next tick");
    assert!(again.skipped.is_none());
    let evented = api
        .lock()
        .events
        .iter()
        .filter(|e| e["reason"] == "ValidationFailed")
        .count();
    assert_eq!(evented, 1, "the same error is evented once");
}

/// A NodePool whose EC2NodeClass does not exist (or does not resolve) gets no NodeClaims,
/// whatever its weight: they could never launch. The pool that can launch takes the pod.
#[tokio::test]
async fn a_pool_whose_class_is_missing_or_invalid_is_not_planned() {
    let mut ubuntu = class("ubuntu");
    ubuntu["spec"]["amiSelectorTerms"] = json!([{"alias": "ubuntu@latest"}]);
    let heavy = |name: &str, class: &str| pool(name, class, json!({}), json!({"weight": 100}));
    let api = MemoryApi::new(objects(vec![
        (
            NODEPOOLS,
            vec![
                heavy("ghost", "missing"),
                heavy("focal", "ubuntu"),
                pool("web", "default", json!({}), json!({})),
            ],
        ),
        (NODECLASSES, vec![class("default"), ubuntu]),
        (PODS, vec![pending_pod("web-1", "1", json!({}))]),
    ]));
    let tick = Tick::new(sim_cloud(), api.client(), settings());

    let summary = tick.run(noon(), "iso").await.expect("the tick");

    let claims = list(&api, NODECLAIMS);
    let pools: Vec<String> = claims.iter().map(pool_of).collect();
    assert_eq!(pools, ["web"], "{summary:?}");
    assert!(summary.launch_failures.is_empty(), "{summary:?}");
    let classes = list(&api, NODECLASSES);
    let focal = classes
        .iter()
        .find(|c| c["metadata"]["name"] == "ubuntu")
        .unwrap();
    let ready = condition(focal, "Ready").expect("the class's status is written");
    assert_eq!(ready["status"], "False");
    assert!(
        ready["message"]
            .as_str()
            .unwrap_or_default()
            .contains("alias"),
        "{ready}"
    );
}

/// A NodeClaim launched a moment ago whose node has not joined (so its capacity is not known
/// yet) counts against its pool's limits as the largest type it may be: the next tick plans
/// nothing past the limit.
#[tokio::test]
async fn an_in_flight_nodeclaim_counts_against_its_pools_limits() {
    let now = noon();
    let batch = pool(
        "batch",
        "default",
        json!({"taints": [{"key": "batch", "effect": "NoSchedule"}]}),
        json!({"limits": {"cpu": "48"}}),
    );
    let in_flight = json!({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "batch-1", "uid": "uid-batch-1", "creationTimestamp": stamp(now - Duration::seconds(5)),
            "labels": {"karpenter.sh/nodepool": "batch"}, "finalizers": ["karpenter.sh/termination"]},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "taints": [{"key": "batch", "effect": "NoSchedule"}],
            "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5a.12xlarge"]}]}});
    // A type the in-flight claim is not: the pod needs a NodeClaim of its own.
    let tolerant = json!({"tolerations": [{"key": "batch", "operator": "Exists"}],
        "nodeSelector": {"karpenter.sh/nodepool": "batch", "node.kubernetes.io/instance-type": "c6a.2xlarge"}});
    let api = MemoryApi::new(objects(vec![
        (NODEPOOLS, vec![batch]),
        (NODECLASSES, vec![class("default")]),
        (NODECLAIMS, vec![in_flight]),
        (PODS, vec![pending_pod("job-1", "4", tolerant)]),
    ]));
    let tick = Tick::new(sim_cloud(), api.client(), settings());

    let summary = tick.run(now, "iso").await.expect("the tick");

    assert!(
        summary.nodeclaims_created.is_empty(),
        "48 of 48 CPUs are in flight: {summary:?}"
    );
    assert_eq!(summary.unschedulable.len(), 1, "{summary:?}");
}

/// A spread over zones has as its domains the zones the EC2NodeClass has subnets in, not every
/// zone the region offers: each NodeClaim it plans can launch.
#[tokio::test]
async fn a_zone_spread_plans_only_zones_with_subnets() {
    let spread = json!({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}}]});
    let pods: Vec<Value> = (1..=6)
        .map(|i| pending_pod(&format!("web-{i}"), "1", spread.clone()))
        .collect();
    let api = web_cluster(vec![(PODS, pods)]);
    let tick = Tick::new(sim_cloud(), api.client(), settings());

    let summary = tick.run(noon(), "iso").await.expect("the tick");

    assert!(summary.launch_failures.is_empty(), "{summary:?}");
    assert!(!summary.launched.is_empty(), "{summary:?}");
    for launch in &summary.launched {
        assert!(
            fleetwright_sim::cloud::ZONES.contains(&launch.zone.as_str()),
            "{launch:?}"
        );
    }
}

fn node(name: &str, instance: &str, pool: &str, extra: Value) -> Value {
    let mut node = json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": format!("uid-{name}"), "creationTimestamp": "2026-11-23T10:00:00Z",
            "finalizers": ["karpenter.sh/termination"],
            "labels": {"karpenter.sh/nodepool": pool, "node.kubernetes.io/instance-type": "m5.large",
                "topology.kubernetes.io/zone": "us-east-1a", "karpenter.sh/capacity-type": "on-demand",
                "kubernetes.io/arch": "amd64", "karpenter.sh/registered": "true", "karpenter.sh/initialized": "true"}},
        "spec": {"providerID": format!("aws:///us-east-1a/{instance}")},
        "status": {"conditions": [{"type": "Ready", "status": "True"}],
            "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
            "allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": "29"}}});
    for (k, v) in extra.as_object().unwrap() {
        node["metadata"][k] = v.clone();
    }
    node
}

fn claim(name: &str, instance: &str, pool: &str, annotations: Value) -> Value {
    json!({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "uid": format!("uid-{name}"), "creationTimestamp": "2026-11-23T10:00:00Z",
            "finalizers": ["karpenter.sh/termination"], "annotations": annotations,
            "labels": {"karpenter.sh/nodepool": pool, "node.kubernetes.io/instance-type": "m5.large",
                "topology.kubernetes.io/zone": "us-east-1a", "karpenter.sh/capacity-type": "on-demand"}},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": []},
        "status": {"providerID": format!("aws:///us-east-1a/{instance}"), "nodeName": format!("node-{name}"),
            "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
            "conditions": [
                {"type": "Launched", "status": "True", "reason": "Launched", "lastTransitionTime": "2026-11-23T10:00:00Z"},
                {"type": "Registered", "status": "True", "reason": "Registered", "lastTransitionTime": "2026-11-23T10:00:00Z"},
                {"type": "Initialized", "status": "True", "reason": "Initialized", "lastTransitionTime": "2026-11-23T10:00:00Z"}]}})
}

fn bound_pod(name: &str, node: &str) -> Value {
    let mut pod = pending_pod(name, "100m", json!({"nodeName": node}));
    pod["status"] = json!({"phase": "Running", "startTime": "2026-11-23T10:00:00Z"});
    pod
}

/// A pod whose eviction the API server refuses with 500 (two PDBs cover it) stays, and its
/// node's drain waits; the other command's drain, and the rest of the tick, go on.
#[tokio::test]
async fn an_eviction_error_stops_neither_the_other_drains_nor_the_tick() {
    let annotated = |command: &str| json!({"fleetwright.io/disruption": command});
    let tainted = json!({});
    let api = web_cluster(vec![
        (
            NODECLAIMS,
            vec![
                claim(
                    "web-stuck",
                    "i-000000000000000a1",
                    "web",
                    annotated("empty/delete"),
                ),
                claim(
                    "web-going",
                    "i-000000000000000a2",
                    "web",
                    annotated("underutilized/delete"),
                ),
            ],
        ),
        (
            NODES,
            vec![
                node(
                    "node-web-stuck",
                    "i-000000000000000a1",
                    "web",
                    tainted.clone(),
                ),
                node("node-web-going", "i-000000000000000a2", "web", tainted),
            ],
        ),
        (
            PODS,
            vec![
                bound_pod("two-pdbs", "node-web-stuck"),
                bound_pod("movable", "node-web-going"),
            ],
        ),
    ]);
    fail_always(
        &api,
        "POST",
        "/api/v1/namespaces/default/pods/two-pdbs/eviction",
        500,
    );
    let cloud = Listing::of(&["i-000000000000000a1", "i-000000000000000a2"]);
    let tick = Tick::new(cloud, api.client(), settings());

    let summary = tick.run(noon(), "iso").await.expect("the tick goes on");

    assert_eq!(summary.disrupted, vec!["web-going"], "{summary:?}");
    assert!(api.lock().evicted.contains(&"default/movable".to_string()));
    assert!(
        api.lock()
            .singles
            .contains_key("/api/v1/namespaces/karpenter/configmaps/fleetwright-state"),
        "the end-of-tick state write ran"
    );
}

/// A Node deleted by hand has its NodeClaim deleted, so the node is drained and its instance
/// terminated instead of the Node staying Terminating for ever.
#[tokio::test]
async fn a_node_deleted_by_hand_takes_its_nodeclaim_with_it() {
    let deleting = json!({"deletionTimestamp": "2026-11-23T11:59:00Z"});
    let api = web_cluster(vec![
        (
            NODECLAIMS,
            vec![claim("web-1", "i-000000000000000b1", "web", json!({}))],
        ),
        (
            NODES,
            vec![node("node-web-1", "i-000000000000000b1", "web", deleting)],
        ),
    ]);
    let tick = Tick::new(
        Listing::of(&["i-000000000000000b1"]),
        api.client(),
        settings(),
    );

    tick.run(noon(), "iso").await.expect("the tick");

    let claims = list(&api, NODECLAIMS);
    assert!(
        claims
            .iter()
            .all(|c| !c["metadata"]["deletionTimestamp"].is_null()),
        "the NodeClaim is being deleted: {claims:?}"
    );
}

/// The Node of a NodeClaim being deleted cannot be deleted (the API server answers 500): the
/// NodeClaim keeps its finalizer, so the next tick finishes the job.
#[tokio::test]
async fn a_node_that_cannot_be_deleted_keeps_its_nodeclaim_for_the_next_tick() {
    let mut going = claim("web-1", "i-000000000000000c1", "web", json!({}));
    going["metadata"]["deletionTimestamp"] = json!("2026-11-23T11:59:00Z");
    let api = web_cluster(vec![
        (NODECLAIMS, vec![going]),
        (
            NODES,
            vec![node("node-web-1", "i-000000000000000c1", "web", json!({}))],
        ),
    ]);
    fail_always(&api, "DELETE", "/api/v1/nodes/node-web-1", 500);
    let tick = Tick::new(
        Listing::of(&["i-000000000000000c1"]),
        api.client(),
        settings(),
    );

    tick.run(noon(), "iso").await.expect("the tick");

    assert_eq!(names(&api, NODECLAIMS), ["web-1"]);
    api.lock().faults.clear();
    tick.run(noon() + Duration::minutes(1), "iso")
        .await
        .expect("the next tick");
    assert!(names(&api, NODECLAIMS).is_empty());
    assert!(names(&api, NODES).is_empty());
}

/// The simulated cloud, except that its instances are `running` (each id, running and owned)
/// and its listing of owned instances is `listed` (None: the same): a listing that succeeds and
/// comes back empty (stale, or the tags were removed) makes every NodeClaim look stranded, and
/// only the lookup by id tells.
struct Listing {
    inner: Arc<SimCloud>,
    running: Vec<String>,
    listed: Option<Vec<String>>,
}

fn running(id: &str) -> Instance {
    Instance {
        id: id.to_string(),
        instance_type: "m5.large".into(),
        zone: "us-east-1a".into(),
        state: "running".into(),
        capacity_type: "on-demand".into(),
        image_id: "ami-1".into(),
        subnet_id: "subnet-us-east-1a".into(),
        security_groups: Vec::new(),
        launch_time: Some(noon() - Duration::hours(2)),
        tags: [
            ("kubernetes.io/cluster/iso".to_string(), "owned".to_string()),
            ("karpenter.sh/nodepool".to_string(), "web".to_string()),
        ]
        .into(),
        capacity_reservation_id: None,
        partition: None,
    }
}

impl Listing {
    fn of(ids: &[&str]) -> Listing {
        Listing {
            inner: Arc::new(sim_cloud()),
            running: ids.iter().map(|i| i.to_string()).collect(),
            listed: None,
        }
    }
}

impl Cloud for Listing {
    async fn catalog(&self, now: DateTime<Utc>) -> Result<Arc<Catalog>, CloudError> {
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
        if self.running.iter().any(|r| r == instance_id) {
            return Ok(Termination::Terminating);
        }
        self.inner.terminate(instance_id).await
    }
    async fn instances(&self) -> Result<Vec<Instance>, CloudError> {
        let ids = self.listed.clone().unwrap_or_else(|| self.running.clone());
        let mut out: Vec<Instance> = ids.iter().map(|i| running(i)).collect();
        if self.listed.is_none() {
            out.extend(self.inner.instances().await?);
        }
        Ok(out)
    }
    async fn describe(&self, ids: &[String]) -> Result<Vec<Instance>, CloudError> {
        let mut out: Vec<Instance> = ids
            .iter()
            .filter(|i| self.running.contains(i))
            .map(|i| running(i))
            .collect();
        out.extend(self.inner.describe(ids).await?);
        Ok(out)
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

#[tokio::test]
async fn an_empty_instance_listing_deletes_no_nodeclaim_whose_instance_runs() {
    let pods: Vec<Value> = (1..=3)
        .map(|i| pending_pod(&format!("web-{i}"), "3", json!({})))
        .collect();
    let api = web_cluster(vec![(PODS, pods)]);
    let cloud = Arc::new(sim_cloud());
    let first = Tick::new(cloud.clone(), api.client(), settings());
    let launched = first.run(noon(), "iso").await.expect("the first tick");
    assert!(!launched.launched.is_empty(), "{launched:?}");
    let before = names(&api, NODECLAIMS);

    let empty = Listing {
        inner: cloud.clone(),
        running: Vec::new(),
        listed: Some(Vec::new()),
    };
    let stale = Tick::new(empty, api.client(), settings());
    let summary = stale
        .run(noon() + Duration::minutes(10), "iso")
        .await
        .expect("the tick");

    assert!(summary.stranded_deleted.is_empty(), "{summary:?}");
    assert_eq!(names(&api, NODECLAIMS), before);
    assert_eq!(cloud.live().len(), before.len());
}

/// A pod no pool can take (a typo in its nodeSelector) holds up no disruption: the empty node
/// beside it is still consolidated.
#[tokio::test]
async fn an_unschedulable_pod_does_not_stop_consolidation() {
    let typo = json!({"nodeSelector": {"karpenter.sh/nodepool": "wbe"}});
    let api = web_cluster(vec![
        (
            NODECLAIMS,
            vec![claim("web-1", "i-000000000000000d1", "web", json!({}))],
        ),
        (
            NODES,
            vec![node("node-web-1", "i-000000000000000d1", "web", json!({}))],
        ),
        (PODS, vec![pending_pod("typo-1", "1", typo)]),
    ]);
    let tick = Tick::new(
        Listing::of(&["i-000000000000000d1"]),
        api.client(),
        settings(),
    );

    let summary = tick.run(noon(), "iso").await.expect("the tick");

    assert_eq!(summary.unschedulable.len(), 1, "{summary:?}");
    assert!(
        summary.disruptions.iter().any(|d| d.contains("node-web-1")),
        "the empty node is decided for disruption: {summary:?}"
    );
}

/// Karpenter running beside Fleetwright (a migration step missed) would have each take the
/// other's fresh instances for garbage: while Karpenter's leader Lease is held, the tick does
/// nothing, and says why.
#[tokio::test]
async fn a_tick_does_nothing_while_karpenters_lease_is_held() {
    let api = web_cluster(vec![(PODS, vec![pending_pod("web-1", "1", json!({}))])]);
    let lease = |renewed: DateTime<Utc>| {
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "karpenter-leader-election", "namespace": "kube-system"},
            "spec": {"holderIdentity": "karpenter-6f7d9_1a2b", "leaseDurationSeconds": 15,
                "renewTime": renewed.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)}})
    };
    let path =
        "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/karpenter-leader-election";
    api.lock().singles.insert(path.into(), lease(noon()));
    let tick = Tick::new(sim_cloud(), api.client(), settings());

    let summary = tick.run(noon(), "iso").await.expect("the tick");

    let skipped = summary.skipped.clone().unwrap_or_default();
    assert!(skipped.contains("Karpenter"), "{summary:?}");
    assert!(names(&api, NODECLAIMS).is_empty());

    // Once Karpenter is gone (its Lease no longer renewed), the tick acts.
    api.lock()
        .singles
        .insert(path.into(), lease(noon() - Duration::minutes(10)));
    let summary = tick.run(noon(), "iso").await.expect("the tick");
    assert!(summary.skipped.is_none(), "{summary:?}");
    assert_eq!(names(&api, NODECLAIMS).len(), 1);
}

/// An EC2 event about an instance this cluster does not own costs one list of NodeClaims: no
/// pod is read.
#[tokio::test]
async fn an_interruption_for_a_foreign_instance_reads_no_pods() {
    use fleetwright_runtime::interruption::Interruption;
    use fleetwright_runtime::metrics::Metrics;
    let api = MemoryApi::new(objects(vec![
        (
            NODECLAIMS,
            vec![claim("web-1", "i-000000000000000e1", "web", json!({}))],
        ),
        (
            NODES,
            vec![node("node-web-1", "i-000000000000000e1", "web", json!({}))],
        ),
        (PODS, vec![bound_pod("web-1", "node-web-1")]),
    ]));
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../events/spot-interruption.json"),
    )
    .unwrap()
    .replace("i-0abcdef1234567890", "i-0f0re1gn00000000");
    let event: aws_lambda_events::event::eventbridge::EventBridgeEvent<Value> =
        serde_json::from_str(&text).unwrap();
    let nudges = fleetwright_runtime::nudge::Recorder::default();
    let use_case = Interruption::new(sim_cloud(), api.client(), nudges, settings());

    let outcomes = use_case
        .handle_event(&event, noon(), &mut Metrics::default())
        .await
        .expect("handled");

    assert!(
        outcomes.iter().all(|o| o.nodeclaim.is_none()),
        "{outcomes:?}"
    );
    let requests = api.lock().requests.clone();
    assert!(
        !requests.iter().any(|r| r.contains("/pods")),
        "{requests:?}"
    );
}

/// A burst of nudges costs one read: a nudge sent before the last tick started is already
/// answered by that tick's read; one sent after it runs a tick.
#[tokio::test]
async fn a_nudge_answered_by_a_later_tick_skips() {
    let api = web_cluster(vec![(PODS, vec![pending_pod("web-1", "1", json!({}))])]);
    let tick = Tick::new(sim_cloud(), api.client(), settings());
    tick.run(noon(), "scheduled").await.expect("the tick");

    let at = |s: i64| noon() + Duration::seconds(s);
    let early = tick
        .run_nudged(at(2), "nudged", at(-3))
        .await
        .expect("the tick");
    assert!(early.skipped.is_some(), "{early:?}");
    let close = tick
        .run_nudged(at(3), "nudged", at(-1))
        .await
        .expect("the tick");
    assert!(
        close.skipped.is_none(),
        "a second or two before the tick, its read may predate the pod: {close:?}"
    );
    let late = tick
        .run_nudged(at(9), "nudged", at(8))
        .await
        .expect("the tick");
    assert!(late.skipped.is_none(), "{late:?}");
}

/// A confirmed replacement whose command cannot be recorded on its candidate (every write of
/// the candidate fails) is deleted again before it launches: a persistent failure does not add
/// a replacement NodeClaim on every decision.
#[tokio::test]
async fn a_disruption_that_cannot_start_leaves_no_replacement_behind() {
    let mut big = claim("web-big", "i-000000000000000f1", "web", json!({}));
    big["metadata"]["labels"]["node.kubernetes.io/instance-type"] = json!("m5.8xlarge");
    let mut node = node("node-web-big", "i-000000000000000f1", "web", json!({}));
    node["metadata"]["labels"]["node.kubernetes.io/instance-type"] = json!("m5.8xlarge");
    node["status"]["capacity"] = json!({"cpu": "32", "memory": "128Gi", "pods": "234"});
    node["status"]["allocatable"] = json!({"cpu": "31850m", "memory": "124Gi", "pods": "234"});
    let api = web_cluster(vec![
        (NODECLAIMS, vec![big]),
        (NODES, vec![node]),
        (PODS, vec![bound_pod("small", "node-web-big")]),
    ]);
    fail_always(&api, "PUT", "/apis/karpenter.sh/v1/nodeclaims/web-big", 500);
    let tick = Tick::new(
        Listing::of(&["i-000000000000000f1"]),
        api.client(),
        settings(),
    );

    let mut started = 0;
    for minute in 0..4 {
        let summary = tick
            .run(noon() + Duration::minutes(minute), "iso")
            .await
            .expect("the tick");
        started += summary.nodeclaims_created.len();
        assert_eq!(names(&api, NODECLAIMS), ["web-big"], "{summary:?}");
    }
    assert!(started > 0, "a replacement was decided and created");
}

/// A deleting NodeClaim whose pod the Eviction API keeps refusing with an error (here a webhook's
/// 403) is not held up for good: after a while the pod, which nothing protects, is deleted with
/// its own grace period, and the NodeClaim finishes once it is gone.
#[tokio::test]
async fn a_deleting_node_whose_evictions_keep_failing_is_not_held_for_good() {
    let mut going = claim("web-1", "i-000000000000000g1", "web", json!({}));
    going["metadata"]["deletionTimestamp"] = json!("2026-11-23T11:59:00Z");
    let api = web_cluster(vec![
        (NODECLAIMS, vec![going]),
        (
            NODES,
            vec![node("node-web-1", "i-000000000000000g1", "web", json!({}))],
        ),
        (PODS, vec![bound_pod("guarded", "node-web-1")]),
    ]);
    fail_always(
        &api,
        "POST",
        "/api/v1/namespaces/default/pods/guarded/eviction",
        403,
    );
    let tick = Tick::new(
        Listing::of(&["i-000000000000000g1"]),
        api.client(),
        settings(),
    );

    // The pod still on the deleting node gets its new capacity planned ahead, as Karpenter's
    // provisioner plans the pods of deleting nodes: one NodeClaim, once.
    let first = tick.run(noon(), "iso").await.expect("the tick");
    assert_eq!(first.nodeclaims_created.len(), 1, "{first:?}");
    let web_1 = "web-1".to_string();
    assert!(names(&api, NODECLAIMS).contains(&web_1), "still draining");
    let second = tick
        .run(noon() + Duration::minutes(2), "iso")
        .await
        .expect("the tick");
    assert!(second.nodeclaims_created.is_empty(), "{second:?}");
    assert!(names(&api, NODECLAIMS).contains(&web_1), "still draining");
    tick.run(noon() + Duration::minutes(6), "iso")
        .await
        .expect("the tick");
    assert!(!names(&api, PODS).contains(&"guarded".to_string()));
    assert!(
        names(&api, NODECLAIMS).contains(&web_1),
        "the instance waits for the pod it deleted"
    );
    let summary = tick
        .run(noon() + Duration::minutes(7), "iso")
        .await
        .expect("the tick");
    assert!(!names(&api, NODECLAIMS).contains(&web_1), "{summary:?}");
}

/// A Node being deleted that carries the termination finalizer but that no NodeClaim accounts
/// for (its NodeClaim went first) is let go, instead of staying Terminating for good.
#[tokio::test]
async fn a_deleting_node_without_a_nodeclaim_is_let_go() {
    let deleting = json!({"deletionTimestamp": "2026-11-23T11:59:00Z"});
    let api = web_cluster(vec![(
        NODES,
        vec![node("node-orphan", "i-000000000000000h1", "web", deleting)],
    )]);
    let tick = Tick::new(sim_cloud(), api.client(), settings());

    tick.run(noon(), "iso").await.expect("the tick");

    assert!(names(&api, NODES).is_empty(), "{:?}", names(&api, NODES));
}

/// Only the latest tick's follow-up runs: one asked for by a tick that a later tick has
/// superseded is skipped, and the latest tick's own runs.
#[tokio::test]
async fn a_follow_up_superseded_by_a_later_tick_skips() {
    let api = web_cluster(vec![(PODS, vec![pending_pod("web-1", "1", json!({}))])]);
    let tick = Tick::new(sim_cloud(), api.client(), settings());
    let at = |s: i64| noon() + Duration::seconds(s);
    tick.run(at(20), "scheduled").await.expect("the tick");

    let older = tick
        .run_follow_up(at(25), "follow-up", at(0))
        .await
        .expect("the tick");
    assert!(older.skipped.is_some(), "{older:?}");
    // The tick at 20 is the latest (the follow-up above did not run): its own follow-up runs.
    let latest = tick
        .run_follow_up(at(35), "follow-up", at(20))
        .await
        .expect("the tick");
    assert!(latest.skipped.is_none(), "{latest:?}");
}
