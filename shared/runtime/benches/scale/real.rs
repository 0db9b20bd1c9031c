//! The scale benchmark on a real API server and etcd (`scripts/scale-bench.sh`, which starts
//! them with `scripts/control-plane.sh` and no controllers). A loader writes the synthetic
//! cluster through the API, as many requests in flight as the server takes; then one tick per
//! case runs in a process of its own, against that API server, with its phases timed:
//!
//! * **provisioning**: a dry run with pending pods too big for any node's free room;
//! * **consolidation**: those pods deleted, a tick with its writes decides a consolidation
//!   command and stores it for confirmation;
//! * **confirmation**: a tick 16 s later (its clock moved on) decides the same command again
//!   and carries it out through the real API: taints, annotations, the replacement NodeClaim.
//!
//! A third process times the list of every pod three ways (consistent pages of 500 and of 5,000,
//! and the watch cache's `resourceVersion=0`), three times each.
//!
//! No controller runs: with no kubelets the node lifecycle controller would taint every node
//! unreachable and evict its pods, and the garbage collector would delete pods whose owners the
//! loader does not create. What is measured is the API server and etcd serving the reads and
//! writes, which is the cost of Fleetwright's design.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use fleetwright_core::Catalog;
use fleetwright_runtime::settings::Settings;
use fleetwright_runtime::tick::{Tick, TickSummary};
use fleetwright_sim::SimCloud;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::Client;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use super::Shape;

/// Requests the loader keeps in flight.
const IN_FLIGHT: usize = 64;
/// How long the loader retries one write the API server did not answer (it is busy: the loader
/// keeps it so).
const RETRYING: Duration = Duration::from_secs(60);
/// The namespace of the pending pods, deleted between the two cases.
const BATCH: &str = "batch";

/// How big a case is.
#[derive(Clone, Copy, Debug)]
pub struct Size {
    pub nodes: usize,
    pub pods: usize,
    pub pending: usize,
}

impl Size {
    fn shape(self) -> Shape {
        Shape {
            nodes: self.nodes,
            pods: self.pods,
            pending: 0,
        }
    }
}

/// The label on every object the loader writes: it deletes nothing without it.
const LABEL: &str = "fleetwright.io/scale-bench";

/// The admin of the control plane `scripts/control-plane.sh` started for this run, and nothing
/// else: the kubeconfig is the one in its directory (never the ambient `KUBECONFIG`, which may
/// name a real cluster), and its server must be on loopback.
async fn client() -> Client {
    let dir = std::env::var("FLEETWRIGHT_CONTROL_PLANE_DIR").unwrap_or_else(|_| {
        panic!("FLEETWRIGHT_CONTROL_PLANE_DIR is unset: run under scripts/scale-bench.sh, which starts the control plane this writes to")
    });
    let path = std::path::Path::new(&dir).join("admin.kubeconfig");
    let config =
        kube::config::Kubeconfig::read_from(&path).expect("the control plane's kubeconfig");
    let servers: Vec<String> = config
        .clusters
        .iter()
        .filter_map(|c| c.cluster.as_ref()?.server.clone())
        .collect();
    assert!(
        !servers.is_empty() && servers.iter().all(|s| s.starts_with("https://127.0.0.1:")),
        "{}: the bench writes only to a control plane on loopback, not {servers:?}",
        path.display()
    );
    fleetwright_kube::client::kubeconfig_client(&path)
        .await
        .expect("a client")
}

/// One line of the bench's output.
fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout(), "{line}");
}

fn runtime(threads: usize) -> tokio::runtime::Runtime {
    let mut builder = if threads == 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(threads);
        b
    };
    builder.enable_all().build().expect("a runtime")
}

/// Creates every object through the API, labelled as the bench's, `IN_FLIGHT` at a time. An
/// object already there is an error: the bench runs on a control plane of its own, started
/// empty, and writes nothing it did not create.
async fn create_all<K>(api: &Api<K>, objects: Vec<Value>) -> usize
where
    K: kube::Resource + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let count = objects.len();
    futures::stream::iter(objects)
        .map(|mut object| async move {
            object["metadata"]["labels"][LABEL] = json!("true");
            let object: K = serde_json::from_value(object).expect("a valid object");
            let what = format!("creating {:?}", object.meta().name);
            let post = PostParams::default();
            let create = || api.create(&post, &object);
            if let Err(e) = fleetwright_kube::retry::within(RETRYING, &what, create).await {
                panic!("{what}: {e}");
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<()>>()
        .await;
    count
}

/// Writes each object's `status` (which a create drops), `IN_FLIGHT` at a time.
async fn patch_statuses<K>(api: &Api<K>, objects: &[Value])
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    futures::stream::iter(objects)
        .map(|object| async move {
            let name = object["metadata"]["name"].as_str().unwrap_or_default();
            let patch = json!({"status": object["status"]});
            let (params, patch) = (PatchParams::default(), Patch::Merge(&patch));
            let write = || api.patch_status(name, &params, &patch);
            fleetwright_kube::retry::within(RETRYING, name, write)
                .await
                .unwrap_or_else(|e| panic!("writing the status of {name}: {e}"));
        })
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<()>>()
        .await;
}

async fn crds(admin: &Client) {
    let api: Api<CustomResourceDefinition> = Api::all(admin.clone());
    let text = fleetwright_crds::definitions_yaml().expect("the CRDs");
    let mut crds = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let crd: Value = serde::Deserialize::deserialize(doc).expect("a CRD");
        crds.push(crd);
    }
    let names: Vec<String> = crds
        .iter()
        .filter_map(|c| c["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    create_all(&api, crds).await;
    for name in names {
        for _ in 0..300 {
            let crd = api.get(&name).await.expect("the CRD");
            let established = crd.status.and_then(|s| s.conditions).is_some_and(|c| {
                c.iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
            });
            if established {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

async fn namespaces(admin: &Client) {
    let api: Api<Namespace> = Api::all(admin.clone());
    let names = ["apps", BATCH, "karpenter"];
    let objects = names
        .iter()
        .map(|n| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}))
        .collect();
    create_all(&api, objects).await;
}

/// Every node is as schedulable as a Ready node is: no admission plugin tainted it (the
/// not-ready taint a new Node gets, which only the node lifecycle controller takes off).
async fn untainted(api: &Api<Node>, nodes: &[Value]) {
    let Some(name) = nodes.first().and_then(|n| n["metadata"]["name"].as_str()) else {
        return;
    };
    let node = api.get(name).await.expect("the first node");
    let taints = node.spec.and_then(|s| s.taints).unwrap_or_default();
    assert!(
        taints.is_empty(),
        "node {name} was tainted on creation ({taints:?}): start the API server without the TaintNodesByCondition admission plugin"
    );
}

/// A pod as a kubelet reports it: Running, Ready, with its IPs and container status.
fn running(mut pod: Value, i: usize) -> Value {
    let ip = format!(
        "10.{}.{}.{}",
        100 + (i >> 16) % 100,
        (i >> 8) % 256,
        i % 256
    );
    let time = "2026-11-22T09:00:00Z";
    let condition = |t: &str| json!({"type": t, "status": "True", "lastTransitionTime": time});
    pod["status"] = json!({"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
        "hostIP": "10.0.0.1", "startTime": time, "qosClass": "Burstable",
        "conditions": [condition("Initialized"), condition("Ready"), condition("ContainersReady"), condition("PodScheduled")],
        "containerStatuses": [{"name": "app", "ready": true, "restartCount": 0, "started": true,
            "image": "public.ecr.aws/docker/library/nginx:1.27", "imageID": "public.ecr.aws/docker/library/nginx@sha256:0d17b565c37bcbd895e9d92315a05c1c3c9a29f762b011a10c54a66cd53c9b31",
            "containerID": format!("containerd://{i:064x}"), "state": {"running": {"startedAt": time}}}]});
    pod
}

/// The pending pods: 6 CPU and 24Gi, more than any node of the fleet has free.
fn pending_pods(count: usize) -> Vec<Value> {
    (0..count)
        .map(|i| {
            let mut pod = super::pod(
                &format!("batch-{i}"),
                ("ReplicaSet", "batch-7c9f8d6b5"),
                None,
                "6",
                "24Gi",
            );
            pod["metadata"]["namespace"] = json!(BATCH);
            pod
        })
        .collect()
}

/// The loader: every object of the cluster, written through the API.
pub fn load(size: Size) {
    runtime(2).block_on(async {
        let admin = client().await;
        let started = Instant::now();
        crds(&admin).await;
        namespaces(&admin).await;
        let mut cluster = super::cluster(size.shape());
        let mut take = |path: &str| cluster.remove(path).unwrap_or_default();
        let (nodes, claims, pods) = (
            take("/api/v1/nodes"),
            take("/apis/karpenter.sh/v1/nodeclaims"),
            take("/api/v1/pods"),
        );
        let daemonsets: Vec<Value> = take("/apis/apps/v1/daemonsets");
        create_all(&Api::<DaemonSet>::namespaced(admin.clone(), "kube-system"), daemonsets).await;
        let pools = take("/apis/karpenter.sh/v1/nodepools");
        create_all(&Api::<fleetwright_crds::NodePool>::all(admin.clone()), pools).await;
        let classes = take("/apis/karpenter.k8s.aws/v1/ec2nodeclasses");
        create_all(&Api::<fleetwright_crds::EC2NodeClass>::all(admin.clone()), classes).await;
        let node_api: Api<Node> = Api::all(admin.clone());
        create_all(&node_api, nodes.clone()).await;
        patch_statuses(&node_api, &nodes).await;
        untainted(&node_api, &nodes).await;
        let claim_api: Api<fleetwright_crds::NodeClaim> = Api::all(admin.clone());
        create_all(&claim_api, claims.clone()).await;
        patch_statuses(&claim_api, &claims).await;
        let bound: Vec<Value> = pods
            .into_iter()
            .enumerate()
            .map(|(i, p)| running(p, i))
            .collect();
        let (system, apps): (Vec<Value>, Vec<Value>) = bound
            .into_iter()
            .partition(|p| p["metadata"]["ownerReferences"][0]["kind"] == "DaemonSet");
        for (namespace, pods) in [("kube-system", system), ("apps", apps)] {
            let pods: Vec<Value> = pods
                .into_iter()
                .map(|mut p| {
                    p["metadata"]["namespace"] = json!(namespace);
                    p
                })
                .collect();
            let api: Api<Pod> = Api::namespaced(admin.clone(), namespace);
            create_all(&api, pods.clone()).await;
            patch_statuses(&api, &pods).await;
        }
        let pending = pending_pods(size.pending);
        let api: Api<Pod> = Api::namespaced(admin.clone(), BATCH);
        create_all(&api, pending.clone()).await;
        patch_statuses(&api, &pending).await;
        let objects = 2 * size.nodes + size.pods + size.pending;
        let seconds = started.elapsed().as_secs_f64();
        say(&format!(
            "scale (real API server): loaded {} nodes, {} NodeClaims and {} pods ({} pending) in {seconds:.0} s, {:.0} objects/s (each written twice: object, then status)",
            size.nodes,
            size.nodes,
            size.pods + size.pending,
            size.pending,
            objects as f64 / seconds
        ));
    });
}

/// Deletes the pending pods (unbound, so they go at once).
pub fn unload_pending() {
    runtime(1).block_on(async {
        let admin = client().await;
        let api: Api<Pod> = Api::namespaced(admin, BATCH);
        let ours = ListParams::default().labels(&format!("{LABEL}=true"));
        api.delete_collection(&DeleteParams::default(), &ours)
            .await
            .expect("deleting the pending pods");
        for _ in 0..600 {
            let left = api.list_metadata(&ours.clone().limit(1)).await;
            if left.is_ok_and(|l| l.items.is_empty()) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the pending pods were not deleted");
    });
}

/// Which tick a step runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Case {
    Provisioning,
    Consolidation,
    Confirmation,
}

/// One tick against the real API server, in the tick function's one-thread runtime.
pub fn tick(size: Size, case: Case) {
    let provisioning = case == Case::Provisioning;
    let settings = Settings::from_lookup(|name| match name {
        "FLEETWRIGHT_CLUSTER_NAME" => Some("scale".into()),
        "FLEETWRIGHT_DRY_RUN" => Some(provisioning.to_string()),
        _ => None,
    })
    .expect("valid settings");
    // The confirming tick runs as if a tick's wait had passed since the deciding one, and the
    // provisioning tick as the follow-up after the batch window (pods created within the last
    // second are planned together a moment later).
    let later = match case {
        Case::Confirmation => 16,
        Case::Provisioning => 2,
        Case::Consolidation => 0,
    };
    let now = Utc::now() + chrono::Duration::seconds(later);
    let (summary, elapsed) = runtime(1).block_on(async {
        let kube = client().await;
        let cloud = SimCloud::new("scale", Arc::new(Catalog::embedded().clone()));
        for i in 0..size.nodes {
            cloud.adopt(super::instance(i), 0.384);
        }
        let tick = Tick::new(cloud, kube, settings);
        let start = Instant::now();
        let summary = tick.run(now, "scale-bench").await.expect("the tick");
        (summary, start.elapsed())
    });
    let pending = if provisioning { size.pending } else { 0 };
    assert_eq!(
        summary.pending_pods, pending,
        "the tick saw every pending pod"
    );
    let what = match case {
        Case::Provisioning => provisioned(&summary, pending),
        Case::Consolidation => decided(&summary),
        Case::Confirmation => carried_out(&summary),
    };
    say(&format!(
        "scale (real API server): {} nodes, {} pods; {what}; {:.2} s wall ({}), peak RSS {:.0} MiB",
        size.nodes,
        size.pods + pending,
        elapsed.as_secs_f64(),
        phases(&summary),
        super::peak_rss_mib()
    ));
}

fn provisioned(summary: &TickSummary, pending: usize) -> String {
    assert!(
        summary.unschedulable.is_empty() && !summary.nodeclaims_created.is_empty(),
        "the tick planned NodeClaims for the pending pods: {:?}",
        summary.unschedulable
    );
    format!(
        "provisioning, a dry-run tick ({pending} pending): {} nodeclaims planned",
        summary.nodeclaims_created.len()
    )
}

fn decided(summary: &TickSummary) -> String {
    assert!(
        !summary.disruptions.is_empty(),
        "the tick decided to consolidate the half-empty fleet: {summary:?}"
    );
    format!(
        "consolidation, a tick with writes: decided {}",
        command(summary)
    )
}

fn carried_out(summary: &TickSummary) -> String {
    assert!(
        !summary.disruptions.is_empty() && summary.failures.is_empty(),
        "the tick carried the command out: {summary:?}"
    );
    // The first command is the one carried out; any after it were decided for confirmation.
    let nodes = summary
        .disruptions
        .first()
        .and_then(|d| d.split_once(':'))
        .map_or(0, |(_, nodes)| nodes.split(',').count());
    format!(
        "confirmation, a tick with writes: carried out {} ({nodes} nodes drained, {} NodeClaims deleted, {} replacement NodeClaims created)",
        command(summary),
        summary.disrupted.len(),
        summary.nodeclaims_created.len()
    )
}

fn command(summary: &TickSummary) -> String {
    summary.disruptions.join(" ").chars().take(48).collect()
}

fn phases(summary: &TickSummary) -> String {
    summary
        .phases
        .seconds()
        .iter()
        .map(|(phase, s)| format!("{phase} {s:.2}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Every pod listed three ways, three times each, decoded as the tick decodes them.
pub fn reads() {
    runtime(1).block_on(async {
        let admin = client().await;
        let api: Api<Pod> = Api::all(admin);
        let ways: [(&str, ListParams); 3] = [
            ("consistent, pages of 500", ListParams::default().limit(500)),
            (
                "consistent, pages of 5000",
                ListParams::default().limit(5000),
            ),
            (
                "watch cache (resourceVersion=0)",
                ListParams::default().match_any(),
            ),
        ];
        for (what, params) in ways {
            let mut times = Vec::new();
            let mut count = 0;
            for _ in 0..3 {
                let started = Instant::now();
                count = list_all(&api, &params).await;
                times.push(format!("{:.2}", started.elapsed().as_secs_f64()));
            }
            say(&format!(
                "scale (real API server): listing {count} pods, {what}: {} s",
                times.join(" / ")
            ));
        }
    });
}

async fn list_all(api: &Api<Pod>, params: &ListParams) -> usize {
    let mut params = params.clone();
    let mut count = 0;
    loop {
        let page = api.list(&params).await.expect("a page");
        count += page.items.len();
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(next) => params = params.continue_token(&next),
            None => return count,
        }
    }
}
