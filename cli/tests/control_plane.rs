//! Against a real control plane (kube-apiserver, etcd, kube-controller-manager, kube-scheduler
//! and kwok, built from upstream sources by scripts/control-plane.sh): the CRDs and
//! `fleetwright manifests` apply, the API server refuses invalid objects, the RBAC the manifests
//! grant is enough for a whole tick and an interruption run under Fleetwright's own identity,
//! pagination, Lease races, NodeClaim status and finalizers, drains through the Eviction API
//! with the PDB controller's real status, Events, and the state ConfigMap under concurrent
//! writers.
//!
//! They need the control plane, so they are ignored by a plain `cargo test`; run them with
//!
//! ```sh
//! scripts/control-plane.sh run target/control-plane -- \
//!     cargo test -p fleetwright-cli --test control_plane -- --ignored --test-threads 1
//! ```
//!
//! which sets `KUBECONFIG` (an admin, for the fixtures) and `FLEETWRIGHT_KUBECONFIG` (the
//! `fleetwright` user in the group the manifests bind: the identity every call under test uses).

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use fleetwright_crds::NodeClaim;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use kube::Client;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(60);

async fn client(variable: &str) -> Client {
    // The product's log lines, shown with a failing test's output (RUST_LOG to change).
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,kube=warn,hyper=warn".into()),
        )
        .with_test_writer()
        .try_init();
    let path = std::env::var(variable)
        .unwrap_or_else(|_| panic!("{variable} is unset: run under scripts/control-plane.sh run"));
    fleetwright_kube::client::kubeconfig_client(std::path::Path::new(&path))
        .await
        .expect("a client")
}

async fn admin() -> Client {
    client("KUBECONFIG").await
}

/// The `fleetwright` user, bound only by the manifests' RBAC.
async fn fleetwright() -> Client {
    client("FLEETWRIGHT_KUBECONFIG").await
}

fn resource(object: &Value) -> (ApiResource, bool) {
    let (group, version) = match object["apiVersion"].as_str().unwrap().split_once('/') {
        Some((g, v)) => (g.to_string(), v.to_string()),
        None => (
            String::new(),
            object["apiVersion"].as_str().unwrap().to_string(),
        ),
    };
    let kind = object["kind"].as_str().unwrap();
    let (plural, namespaced) = match kind {
        "CustomResourceDefinition" => ("customresourcedefinitions", false),
        "Namespace" => ("namespaces", false),
        "ClusterRole" => ("clusterroles", false),
        "ClusterRoleBinding" => ("clusterrolebindings", false),
        "Role" => ("roles", true),
        "RoleBinding" => ("rolebindings", true),
        "NodePool" => ("nodepools", false),
        "NodeClaim" => ("nodeclaims", false),
        "EC2NodeClass" => ("ec2nodeclasses", false),
        "MutatingWebhookConfiguration" => ("mutatingwebhookconfigurations", false),
        other => panic!("no resource for kind {other}"),
    };
    let gvk = GroupVersionKind::gvk(&group, &version, kind);
    (ApiResource::from_gvk_with_plural(&gvk, plural), namespaced)
}

/// Server-side apply of one object (idempotent across tests).
async fn apply(client: &Client, object: &Value) -> Result<(), kube::Error> {
    let (resource, namespaced) = resource(object);
    let name = object["metadata"]["name"].as_str().unwrap();
    let api: Api<DynamicObject> = if namespaced {
        let ns = object["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default");
        Api::namespaced_with(client.clone(), ns, &resource)
    } else {
        Api::all_with(client.clone(), &resource)
    };
    let object: DynamicObject = serde_json::from_value(object.clone()).unwrap();
    api.patch(
        name,
        &PatchParams::apply("fleetwright-tests").force(),
        &Patch::Apply(&object),
    )
    .await
    .map(|_| ())
}

/// `fleetwright manifests` (CRDs, namespace, RBAC) applied as admin, and the CRDs established.
/// The webhook configuration is left out: its URL is a Lambda's, unreachable here.
async fn setup() -> Client {
    let admin = admin().await;
    let out = common::fleetwright(&[
        "manifests",
        "--function-url",
        "https://abcdefghijklmnopqrstuvwxyz012345.lambda-url.us-east-1.on.aws/",
        "--token",
        "0123456789abcdef0123456789abcdef",
        "--cluster-name",
        "control-plane",
    ]);
    let text = common::success(&out);
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let object: Value = serde::Deserialize::deserialize(doc).unwrap();
        if object.is_null() || object["kind"] == "MutatingWebhookConfiguration" {
            continue;
        }
        apply(&admin, &object).await.unwrap_or_else(|e| {
            panic!(
                "applying {} {}: {e}",
                object["kind"], object["metadata"]["name"]
            )
        });
    }
    for crd in [
        "nodepools.karpenter.sh",
        "nodeclaims.karpenter.sh",
        "ec2nodeclasses.karpenter.k8s.aws",
    ] {
        wait_for(|| async {
            let api: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
                Api::all(admin.clone());
            let crd = api.get(crd).await.ok()?;
            crd.status?
                .conditions?
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
                .then_some(())
        })
        .await
        .unwrap_or_else(|| panic!("CRD {crd} not established"));
    }
    admin
}

/// Creates namespace `name` (once).
async fn namespace(admin: &Client, name: &str) {
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(admin.clone());
    let object = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    match namespaces.create(&PostParams::default(), &object).await {
        Ok(_) => {}
        Err(e) if api_code(&e) == 409 => {}
        Err(e) => panic!("creating namespace {name}: {e}"),
    }
}

async fn wait_for<T, F, Fut>(mut probe: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = std::time::Instant::now();
    while start.elapsed() < WAIT {
        if let Some(v) = probe().await {
            return Some(v);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    None
}

fn nodepool(name: &str) -> Value {
    json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large", "m5.xlarge"]},
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a"]}]}},
            "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s"}}})
}

fn nodeclass() -> Value {
    json!({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
        "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}], "role": "node-role",
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "control-plane"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "control-plane"}}]}})
}

fn api_code(e: &kube::Error) -> u16 {
    match e {
        kube::Error::Api(r) => r.code,
        other => panic!("not an API error: {other}"),
    }
}

#[tokio::test]
#[ignore = "needs the control plane: scripts/control-plane.sh run DIR -- cargo test ... -- --ignored"]
async fn the_crds_and_manifests_apply_and_the_apiserver_refuses_invalid_objects() {
    let admin = setup().await;
    apply(&admin, &nodeclass()).await.unwrap();
    apply(&admin, &nodepool("valid")).await.unwrap();
    // Karpenter's own v1 example applies unchanged.
    let example = std::fs::read_to_string(common::fixture("v1-general-purpose.yaml")).unwrap();
    for doc in serde_yaml::Deserializer::from_str(&example) {
        let object: Value = serde::Deserialize::deserialize(doc).unwrap();
        if object["kind"] == "NodePool" || object["kind"] == "EC2NodeClass" {
            apply(&admin, &object)
                .await
                .unwrap_or_else(|e| panic!("{e}"));
        }
    }
    let mut bad_operator = nodepool("bad-operator");
    bad_operator["spec"]["template"]["spec"]["requirements"][0]["operator"] = json!("Within");
    let e = apply(&admin, &bad_operator).await.unwrap_err();
    assert_eq!(api_code(&e), 422, "{e}");
    assert!(e.to_string().contains("operator"), "{e}");
    let mut no_class = nodepool("no-class");
    no_class["spec"]["template"]["spec"]
        .as_object_mut()
        .unwrap()
        .remove("nodeClassRef");
    let e = apply(&admin, &no_class).await.unwrap_err();
    assert_eq!(api_code(&e), 422, "{e}");
    assert!(e.to_string().contains("nodeClassRef"), "{e}");
    let claim = json!({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "no-requirements"}, "spec": {"nodeClassRef":
            {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}});
    let e = apply(&admin, &claim).await.unwrap_err();
    assert_eq!(api_code(&e), 422, "{e}");
    assert!(e.to_string().contains("requirements"), "{e}");
}

/// Karpenter v1.x fields through the real API server: `Gte`/`Lte` requirements; a static
/// NodePool, refused with a weight or a limit other than `nodes`, scaled through the scale
/// subresource (`kubectl scale nodepool`), and never turned dynamic again.
#[tokio::test]
#[ignore = "needs the control plane: scripts/control-plane.sh run DIR -- cargo test ... -- --ignored"]
async fn static_nodepools_scale_through_the_subresource_and_are_validated_as_karpenter_does() {
    let admin = setup().await;
    apply(&admin, &nodeclass()).await.unwrap();
    let mut bounded = nodepool("bounded");
    bounded["spec"]["template"]["spec"]["requirements"]
        .as_array_mut()
        .unwrap()
        .push(json!({"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gte", "values": ["2"]}));
    apply(&admin, &bounded).await.unwrap();

    let mut fixed = nodepool("fixed");
    fixed["spec"]["replicas"] = json!(2);
    fixed["spec"]["limits"] = json!({"nodes": 4});
    apply(&admin, &fixed).await.unwrap();
    for (field, value, says) in [
        ("weight", json!(10), "weight"),
        ("limits", json!({"cpu": "100"}), "limits.nodes"),
    ] {
        let mut bad = nodepool(&format!("fixed-{field}"));
        bad["spec"]["replicas"] = json!(1);
        bad["spec"][field] = value;
        let e = apply(&admin, &bad).await.unwrap_err();
        assert_eq!(api_code(&e), 422, "{e}");
        assert!(e.to_string().contains(says), "{e}");
    }

    let pools: Api<fleetwright_crds::NodePool> = Api::all(admin.clone());
    pools
        .patch_scale(
            "fixed",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 5}})),
        )
        .await
        .unwrap();
    let scaled = pools.get("fixed").await.unwrap();
    assert_eq!(scaled.spec.replicas, Some(5));
    let mut dynamic = serde_json::to_value(&scaled).unwrap();
    dynamic["spec"].as_object_mut().unwrap().remove("replicas");
    let e = pools
        .replace(
            "fixed",
            &PostParams::default(),
            &serde_json::from_value(dynamic).unwrap(),
        )
        .await
        .unwrap_err();
    assert_eq!(api_code(&e), 422, "{e}");
    assert!(e.to_string().contains("static"), "{e}");
}

#[tokio::test]
#[ignore = "needs the control plane: scripts/control-plane.sh run DIR -- cargo test ... -- --ignored"]
async fn rbac_is_on_and_fleetwright_may_do_only_what_the_manifests_grant() {
    setup().await;
    let fw = fleetwright().await;
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::all(fw.clone());
    let e = secrets.list(&ListParams::default()).await.unwrap_err();
    assert_eq!(api_code(&e), 403, "{e}");
    let nodes: Api<Node> = Api::all(fw.clone());
    nodes.list(&ListParams::default()).await.unwrap();
    // The snapshot every tick starts from, read under Fleetwright's identity.
    fleetwright_kube::snapshot::SnapshotReader::new(fw)
        .read_dump()
        .await
        .unwrap();
}

/// `count` pods in namespace `ns` that no node can take, once kube-scheduler has marked every
/// one unschedulable (Karpenter and the reader count a pending pod from then on).
async fn unschedulable_pods(admin: &Client, ns: &str, count: usize) -> Api<Pod> {
    namespace(admin, ns).await;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), ns);
    for i in 0..count {
        let pod = json!({"metadata": {"name": format!("p-{i:02}"), "namespace": ns},
            "spec": {"containers": [{"name": "c", "image": "pause"}],
                "nodeSelector": {"no-such-node": "true"}}});
        match pods
            .create(
                &PostParams::default(),
                &serde_json::from_value(pod).unwrap(),
            )
            .await
        {
            Ok(_) => {}
            Err(e) if api_code(&e) == 409 => {}
            Err(e) => panic!("{e}"),
        }
    }
    wait_for(|| async {
        let listed = pods.list(&ListParams::default()).await.ok()?.items;
        let marked = listed.iter().filter(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| {
                    c.iter()
                        .any(|c| c.type_ == "PodScheduled" && c.status == "False")
                })
        });
        (marked.count() == count).then_some(())
    })
    .await
    .expect("kube-scheduler marked every pod unschedulable");
    pods
}

fn pods_in(dump: &fleetwright_kube::dump::ClusterDump, ns: &str) -> usize {
    dump.slim_pods
        .iter()
        .filter(|p| p.metadata.namespace.as_deref() == Some(ns))
        .count()
}

#[tokio::test]
#[ignore = "needs the control plane: scripts/control-plane.sh run DIR -- cargo test ... -- --ignored"]
async fn the_snapshot_reader_pages_through_real_continue_tokens() {
    let admin = setup().await;
    let ns = &format!("paging-{}", std::process::id());
    unschedulable_pods(&admin, ns, 23).await;
    let dump = fleetwright_kube::snapshot::SnapshotReader::new(fleetwright().await)
        .with_page_size(5)
        .read_dump()
        .await
        .unwrap();
    assert_eq!(pods_in(&dump, ns), 23, "every pod, through pages of 5");
}

/// `plan --kubeconfig` and `explain --kubeconfig` read the cluster as the tick does, under the
/// manifests' RBAC: the plan has the pending pods, the explanation finds the pool that holds
/// one, and nothing is written (every pod keeps its resourceVersion).
#[tokio::test]
#[ignore = "needs the control plane: scripts/control-plane.sh run DIR -- cargo test ... -- --ignored"]
async fn plan_reads_a_live_cluster_as_the_tick_does_and_writes_nothing() {
    let admin = setup().await;
    let ns = &format!("plan-live-{}", std::process::id());
    namespace(&admin, ns).await;
    apply(&admin, &nodeclass()).await.unwrap();
    apply(&admin, &nodepool("plan-live")).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(admin.clone(), ns);
    for i in 0..2 {
        // Only a node of this pool can hold it: kube-scheduler marks it unschedulable, and no
        // kwok node another test made takes it.
        let pod = json!({"metadata": {"name": format!("web-{i}"), "namespace": ns},
            "spec": {"nodeSelector": {"karpenter.sh/nodepool": "plan-live"},
                "containers": [{"name": "c", "image": "pause",
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}});
        pods.create(
            &PostParams::default(),
            &serde_json::from_value(pod).unwrap(),
        )
        .await
        .unwrap();
    }
    let versions = |list: Vec<Pod>| -> Vec<Option<String>> {
        list.into_iter()
            .map(|p| p.metadata.resource_version)
            .collect()
    };
    wait_for(|| async {
        let listed = pods.list(&ListParams::default()).await.ok()?.items;
        let marked = listed.iter().filter(|p| {
            let conditions = p.status.as_ref().and_then(|s| s.conditions.as_ref());
            conditions.is_some_and(|c| {
                c.iter()
                    .any(|c| c.type_ == "PodScheduled" && c.status == "False")
            })
        });
        (marked.count() == 2).then_some(())
    })
    .await
    .expect("kube-scheduler marked both pods unschedulable");
    let before = versions(pods.list(&ListParams::default()).await.unwrap().items);
    let kubeconfig = std::env::var("FLEETWRIGHT_KUBECONFIG").unwrap();
    let out = common::fleetwright(&["plan", "--kubeconfig", &kubeconfig]);
    let plan: Value = serde_json::from_str(&common::success(&out)).unwrap();
    let planned: Vec<&str> = plan["nodeclaims"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["pods"].as_array().unwrap())
        .filter_map(Value::as_str)
        .collect();
    for i in 0..2 {
        let key = format!("{ns}/web-{i}");
        assert!(planned.contains(&key.as_str()), "{key} not in {planned:?}");
    }
    let explained = common::fleetwright(&[
        "explain",
        "--kubeconfig",
        &kubeconfig,
        "--pod",
        &format!("{ns}/web-0"),
        "--output",
        "json",
    ]);
    let explanation: Value = serde_json::from_str(&common::success(&explained)).unwrap();
    assert!(
        explanation["nodepools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["nodepool"] == "plan-live" && v["compatible"] == true),
        "{explanation}"
    );
    let after = versions(pods.list(&ListParams::default()).await.unwrap().items);
    assert_eq!(before, after, "plan or explain wrote to the pods");
}

/// The API server compacts etcd every 10 s (scripts/control-plane.sh); a listing held half
/// read until then gets 410 Gone for its continue token, and the reader lists again.
#[tokio::test]
#[ignore = "needs the control plane: scripts/control-plane.sh run DIR -- cargo test ... -- --ignored"]
async fn a_listing_whose_continue_token_expired_starts_again() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let admin = setup().await;
    let ns = &format!("expired-{}", std::process::id());
    unschedulable_pods(&admin, ns, 12).await;
    let expired = Arc::new(AtomicBool::new(false));
    let hook: fleetwright_kube::snapshot::PageHook = {
        let (admin, expired) = (admin.clone(), expired.clone());
        Arc::new(move || {
            let (admin, expired) = (admin.clone(), expired.clone());
            Box::pin(async move {
                if expired.load(Ordering::SeqCst) {
                    return;
                }
                // A token taken now is no older than the reader's; once it is refused, so is
                // the reader's.
                let all: Api<Pod> = Api::all(admin);
                let first = all.list(&ListParams::default().limit(1)).await.unwrap();
                let token = first.metadata.continue_.expect("a continue token");
                let refused = wait_for(|| async {
                    match all
                        .list(&ListParams::default().limit(1).continue_token(&token))
                        .await
                    {
                        Err(e) if api_code(&e) == 410 => Some(()),
                        _ => None,
                    }
                })
                .await;
                expired.store(refused.is_some(), Ordering::SeqCst);
            })
        })
    };
    let dump = fleetwright_kube::snapshot::SnapshotReader::new(fleetwright().await)
        .with_page_size(5)
        .between_pages(hook)
        .read_dump()
        .await
        .unwrap();
    assert!(
        expired.load(Ordering::SeqCst),
        "the API server expired the continue token within a minute"
    );
    assert_eq!(pods_in(&dump, ns), 12, "every pod, after listing again");
}

#[tokio::test]
#[ignore = "needs the control plane: scripts/control-plane.sh run DIR -- cargo test ... -- --ignored"]
async fn two_ticks_racing_for_the_lease_leave_exactly_one_holder() {
    setup().await;
    let fw = fleetwright().await;
    let now = k8s_openapi::jiff::Timestamp::now();
    let term = Duration::from_secs(55);
    let name = format!("race-{}", std::process::id());
    for round in 0..5 {
        let lease = format!("{name}-{round}");
        let (a, b) = tokio::join!(
            fleetwright_kube::lease::try_acquire(
                fw.clone(),
                "karpenter",
                &lease,
                "tick-a",
                term,
                now
            ),
            fleetwright_kube::lease::try_acquire(
                fw.clone(),
                "karpenter",
                &lease,
                "tick-b",
                term,
                now
            ),
        );
        let held = [a.unwrap(), b.unwrap()];
        assert_eq!(
            held.iter().filter(|g| g.is_some()).count(),
            1,
            "round {round}"
        );
    }
}

#[tokio::test]
#[ignore = "needs the control plane: scripts/control-plane.sh run DIR -- cargo test ... -- --ignored"]
async fn a_nodeclaim_is_created_its_status_written_and_its_finalizer_holds_its_deletion() {
    let admin = setup().await;
    apply(&admin, &nodeclass()).await.unwrap();
    let fw = fleetwright().await;
    let claim: NodeClaim = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"generateName": "default-", "labels": {"karpenter.sh/nodepool": "default"},
            "finalizers": ["karpenter.sh/termination"]},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}]}}))
    .unwrap();
    let created = fleetwright_kube::executor::create_nodeclaim(fw.clone(), &claim)
        .await
        .unwrap();
    let name = created.metadata.name.clone().unwrap();
    fleetwright_kube::executor::update_nodeclaim_status(fw.clone(), &name, |current| {
        let mut status = current.status.clone().unwrap_or_default();
        status.provider_id = Some("aws:///us-east-1a/i-0123456789abcdef0".into());
        Some(status)
    })
    .await
    .unwrap();
    let api: Api<NodeClaim> = Api::all(admin.clone());
    let read = api.get(&name).await.unwrap();
    assert_eq!(
        read.status.unwrap().provider_id.as_deref(),
        Some("aws:///us-east-1a/i-0123456789abcdef0"),
        "the status subresource took the write"
    );
    fleetwright_kube::executor::delete_nodeclaim(fw.clone(), &name, false)
        .await
        .unwrap();
    let held = api.get(&name).await.unwrap();
    assert!(
        held.metadata.deletion_timestamp.is_some(),
        "the finalizer holds it"
    );
    api.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert!(
        wait_for(|| async { api.get_opt(&name).await.unwrap().is_none().then_some(()) })
            .await
            .is_some(),
        "gone once the finalizer is removed"
    );
}

/// A Node kwok keeps Ready (it runs the pods bound to it).
fn kwok_node(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}},
        "spec": {},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
            "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"}}})
}

async fn ensure_node(admin: &Client, name: &str) {
    let nodes: Api<Node> = Api::all(admin.clone());
    match nodes
        .create(
            &PostParams::default(),
            &serde_json::from_value(kwok_node(name)).unwrap(),
        )
        .await
    {
        Ok(_) => {}
        Err(e) if api_code(&e) == 409 => {}
        Err(e) => panic!("{e}"),
    }
}

#[tokio::test]
#[ignore = "needs the control plane: scripts/control-plane.sh run DIR -- cargo test ... -- --ignored"]
async fn a_drain_waits_for_the_pdb_the_controller_manager_computes_then_evicts() {
    let admin = setup().await;
    let ns = &format!("drain-{}", std::process::id());
    namespace(&admin, ns).await;
    let node = format!("kwok-{ns}");
    ensure_node(&admin, &node).await;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), ns);
    for i in 0..2 {
        let pod = json!({"metadata": {"name": format!("web-{i}"), "namespace": ns, "labels": {"app": "web"}},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "pause"}],
                "tolerations": [{"operator": "Exists"}]}});
        let _ = pods
            .create(
                &PostParams::default(),
                &serde_json::from_value(pod).unwrap(),
            )
            .await;
    }
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(admin.clone(), ns);
    let pdb = json!({"metadata": {"name": "web", "namespace": ns},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}});
    let _ = pdbs
        .create(
            &PostParams::default(),
            &serde_json::from_value(pdb).unwrap(),
        )
        .await;
    // kwok runs the pods; the disruption controller sees both healthy and allows nothing.
    let healthy = wait_for(|| async {
        let status = pdbs.get("web").await.ok()?.status?;
        (status.current_healthy == 2).then_some(status.disruptions_allowed)
    })
    .await
    .expect("the PDB controller counted both pods healthy (kwok made them Ready)");
    assert_eq!(healthy, 0);
    let fw = fleetwright().await;
    let running: Vec<Pod> = pods.list(&ListParams::default()).await.unwrap().items;
    let outcome = fleetwright_kube::executor::drain(
        fw.clone(),
        &running,
        &[],
        chrono::Utc::now().timestamp(),
    )
    .await;
    assert!(outcome.evicted.is_empty(), "{outcome:?}");
    assert_eq!(outcome.blocked.len(), 2, "{outcome:?}");
    pdbs.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"minAvailable": 1}})),
    )
    .await
    .unwrap();
    wait_for(|| async {
        let status = pdbs.get("web").await.ok()?.status?;
        (status.disruptions_allowed == 1).then_some(())
    })
    .await
    .expect("the PDB allows one");
    let outcome =
        fleetwright_kube::executor::drain(fw, &running, &[], chrono::Utc::now().timestamp()).await;
    assert_eq!(outcome.evicted.len(), 1, "{outcome:?}");
    assert_eq!(outcome.blocked.len(), 1, "{outcome:?}");
}

#[tokio::test]
#[ignore = "needs the control plane: scripts/control-plane.sh run DIR -- cargo test ... -- --ignored"]
async fn events_are_recorded_under_fleetwrights_identity() {
    let admin = setup().await;
    ensure_node(&admin, "kwok-events").await;
    let node = k8s_openapi::api::core::v1::ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: Some("kwok-events".into()),
        ..Default::default()
    };
    fleetwright_kube::executor::record_event(
        fleetwright().await,
        &node,
        false,
        "DisruptionBlocked",
        "a test event",
        k8s_openapi::jiff::Timestamp::now(),
    )
    .await
    .unwrap();
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(admin, "default");
    let found = events
        .list(&ListParams::default().fields("involvedObject.name=kwok-events"))
        .await
        .unwrap();
    assert!(found
        .items
        .iter()
        .any(|e| e.reason.as_deref() == Some("DisruptionBlocked")));
}

#[tokio::test]
#[ignore = "needs the control plane: scripts/control-plane.sh run DIR -- cargo test ... -- --ignored"]
async fn the_state_configmap_keeps_every_concurrent_writers_update() {
    setup().await;
    let fw = fleetwright().await;
    let key = format!("concurrent-{}", std::process::id());
    let writers = (0..8).map(|i| {
        let (fw, key) = (fw.clone(), key.clone());
        tokio::spawn(async move {
            fleetwright_kube::state::modify(
                fw,
                "karpenter",
                &key,
                |current: Option<BTreeMap<String, u32>>| {
                    let mut map = current.unwrap_or_default();
                    map.insert(format!("writer-{i}"), i);
                    map
                },
            )
            .await
        })
    });
    for w in futures_join(writers.collect()).await {
        w.unwrap();
    }
    let all: BTreeMap<String, u32> = fleetwright_kube::state::load(fw, "karpenter", &key)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(all.len(), 8, "{all:?}");
    let _ = Api::<ConfigMap>::namespaced(admin().await, "karpenter")
        .delete("unused", &DeleteParams::default())
        .await;
}

async fn futures_join<T>(
    handles: Vec<tokio::task::JoinHandle<Result<T, fleetwright_kube::KubeError>>>,
) -> Vec<Result<T, fleetwright_kube::KubeError>> {
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.expect("the writer ran"));
    }
    out
}

#[tokio::test]
#[ignore = "needs the control plane: scripts/control-plane.sh run DIR -- cargo test ... -- --ignored"]
async fn a_whole_tick_and_an_interruption_run_under_the_manifests_rbac() {
    let admin = setup().await;
    apply(&admin, &nodeclass()).await.unwrap();
    apply(&admin, &nodepool("default")).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "default");
    let pod = json!({"metadata": {"name": "inflate-0", "namespace": "default", "labels": {"app": "inflate"}},
        "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "1"}}}],
            "nodeSelector": {"karpenter.sh/nodepool": "default"}}});
    let _ = pods
        .create(
            &PostParams::default(),
            &serde_json::from_value(pod).unwrap(),
        )
        .await;
    // The scheduler finds no node and marks it Unschedulable, as it does before Karpenter acts.
    wait_for(|| async {
        let p = pods.get("inflate-0").await.ok()?;
        let unschedulable = p
            .status?
            .conditions?
            .iter()
            .any(|c| c.type_ == "PodScheduled" && c.status == "False");
        unschedulable.then_some(())
    })
    .await
    .expect("kube-scheduler marked the pod unschedulable");

    let catalog = Arc::new(fleetwright_core::Catalog::embedded().clone());
    let cloud = Arc::new(fleetwright_sim::SimCloud::new("control-plane", catalog));
    let settings = fleetwright_runtime::settings::Settings::from_lookup(|k| match k {
        "FLEETWRIGHT_CLUSTER_NAME" => Some("control-plane".into()),
        _ => None,
    })
    .unwrap();
    let fw = fleetwright().await;
    let tick = fleetwright_runtime::tick::Tick::new(cloud.clone(), fw.clone(), settings.clone());
    let first = tick.run(Utc::now(), "cp-1").await.unwrap();
    assert!(first.failures.is_empty(), "{:?}", first.failures);
    assert_eq!(first.nodeclaims_created.len(), 1, "{first:?}");
    assert_eq!(first.launched.len(), 1, "{first:?}");
    let launched = &first.launched[0];

    // The instance's kubelet joins: a Node with the instance's providerID, which kwok keeps Ready.
    let node_name = format!("ip-{}.ec2.internal", launched.instance_id);
    let mut node = kwok_node(&node_name);
    node["spec"]["providerID"] =
        json!(format!("aws:///{}/{}", launched.zone, launched.instance_id));
    node["spec"]["taints"] = json!([{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}]);
    node["metadata"]["labels"]["karpenter.sh/nodepool"] = json!("default");
    Api::<Node>::all(admin.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(node).unwrap(),
        )
        .await
        .unwrap();
    let registered = wait_for(|| async {
        let s = tick.run(Utc::now(), "cp-2").await.ok()?;
        assert!(s.failures.is_empty(), "{:?}", s.failures);
        (!s.registered.is_empty() || !s.initialized.is_empty()).then_some(s)
    })
    .await
    .expect("the tick registered the node");
    assert!(registered.failures.is_empty());
    // The real scheduler binds the pod once the node is registered and Ready.
    wait_for(|| async {
        pods.get("inflate-0")
            .await
            .ok()?
            .spec?
            .node_name
            .filter(|n| *n == node_name)
    })
    .await
    .expect("kube-scheduler bound the pod to the new node");
    // The tick wrote the NodePool's status under the same identity (its RBAC lets it read the
    // object it updates).
    let pools: Api<fleetwright_crds::NodePool> = Api::all(admin.clone());
    let pool = pools.get("default").await.unwrap();
    let status = pool.status.unwrap_or_default();
    assert_eq!(status.nodes, Some(1), "status.nodes");
    let ready = |c: &[fleetwright_crds::Condition]| {
        c.iter().any(|x| x.type_ == "Ready" && x.status == "True")
    };
    assert!(ready(&status.conditions), "{:?}", status.conditions);
    // And the EC2NodeClass's: what it resolved to, and Ready, as `kubectl describe` shows.
    let classes: Api<fleetwright_crds::EC2NodeClass> = Api::all(admin.clone());
    let class = classes
        .get("default")
        .await
        .unwrap()
        .status
        .unwrap_or_default();
    assert!(
        !class.subnets.is_empty() && !class.amis.is_empty(),
        "{class:?}"
    );
    assert!(ready(&class.conditions), "{:?}", class.conditions);
    // The NodeClaim's drift hashes are Karpenter's own: its EC2NodeClass hash takes the CA the
    // controller manager publishes into every namespace (kube-root-ca.crt), read under the
    // manifests' RBAC, as Karpenter running in this cluster would hash it.
    let root_ca: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(admin.clone(), &settings.namespace);
    let ca = root_ca.get("kube-root-ca.crt").await.unwrap().data.unwrap()["ca.crt"].clone();
    let claim = Api::<NodeClaim>::all(admin.clone())
        .get(&first.nodeclaims_created[0])
        .await
        .unwrap();
    let annotations = claim.metadata.annotations.unwrap_or_default();
    let spec = classes.get("default").await.unwrap().spec;
    assert_eq!(
        annotations["karpenter.k8s.aws/ec2nodeclass-hash-version"],
        "v6"
    );
    assert_eq!(
        annotations["karpenter.k8s.aws/ec2nodeclass-hash"],
        fleetwright_crds::hash::ec2nodeclass_hash(
            &spec,
            &fleetwright_kube::dump::ca_bundle_of(&ca)
        )
        .unwrap()
    );
    assert_eq!(annotations["karpenter.sh/nodepool-hash-version"], "v3");

    // A spot-style interruption of that instance, handled under the same identity.
    let nudges = fleetwright_runtime::nudge::Recorder::default();
    let interruption = fleetwright_runtime::interruption::Interruption::new(
        cloud.clone(),
        fw.clone(),
        nudges,
        settings,
    );
    let event = json!({"version": "0", "id": "cp-spot", "detail-type": "EC2 Instance State-change Notification",
        "source": "aws.ec2", "account": "123456789012", "time": Utc::now().to_rfc3339(), "region": "us-east-1",
        "resources": [], "detail": {"instance-id": launched.instance_id, "state": "stopping"}});
    let event = serde_json::from_value(event).unwrap();
    let mut metrics = fleetwright_runtime::metrics::Metrics::default();
    interruption
        .handle_event(&event, Utc::now(), &mut metrics)
        .await
        .unwrap();
    let claims: Api<NodeClaim> = Api::all(admin.clone());
    let claim = claims.get(&first.nodeclaims_created[0]).await.unwrap();
    assert!(
        claim.metadata.deletion_timestamp.is_some(),
        "the interruption deleted the NodeClaim"
    );
    // kube-controller-manager's ReplicaSet would replace the pod; here the tick finishes the
    // deletion once the pod has left (evicted by the drain).
    let done = wait_for(|| async {
        let s = tick.run(Utc::now(), "cp-3").await.ok()?;
        assert!(s.failures.is_empty(), "{:?}", s.failures);
        (!s.terminated.is_empty()).then_some(s)
    })
    .await
    .expect("the tick terminated the instance after the drain");
    assert_eq!(done.terminated, vec![launched.instance_id.clone()]);
}

/// The webhook use case behind an HTTPS server on loopback, with the serving certificate
/// scripts/control-plane.sh made (signed by the cluster's CA). Returns its port.
async fn serve_webhook(
    webhook: Arc<fleetwright_runtime::webhook::Webhook<fleetwright_runtime::nudge::Recorder>>,
) -> u16 {
    use http_body_util::BodyExt;
    let dir = std::path::PathBuf::from(
        std::env::var("FLEETWRIGHT_CONTROL_PLANE_DIR")
            .expect("run under scripts/control-plane.sh run"),
    );
    let cert = rustls::pki_types::CertificateDer::from(
        std::fs::read(dir.join("webhook.crt.der")).unwrap(),
    );
    let key = rustls::pki_types::PrivateKeyDer::try_from(
        std::fs::read(dir.join("webhook.key.der")).unwrap(),
    )
    .unwrap();
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let (acceptor, webhook) = (acceptor.clone(), webhook.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper::service::service_fn(
                    move |request: hyper::Request<hyper::body::Incoming>| {
                        let webhook = webhook.clone();
                        async move {
                            let path = request.uri().path().to_string();
                            let body = request.into_body().collect().await?.to_bytes();
                            let answer = webhook.handle(&path, &body, Utc::now()).await;
                            Ok::<_, hyper::Error>(
                                hyper::Response::builder()
                                    .status(answer.status)
                                    .header("content-type", "application/json")
                                    .body(http_body_util::Full::new(bytes::Bytes::from(
                                        answer.body.to_string(),
                                    )))
                                    .unwrap(),
                            )
                        }
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    port
}

#[tokio::test]
#[ignore = "needs the control plane: scripts/control-plane.sh run DIR -- cargo test ... -- --ignored"]
async fn the_apiserver_calls_the_webhook_through_its_mutatingwebhookconfiguration() {
    let admin = setup().await;
    let token = "0123456789abcdef0123456789abcdef";
    let nudges = fleetwright_runtime::nudge::Recorder::default();
    let webhook = Arc::new(fleetwright_runtime::webhook::Webhook::new(
        nudges.clone(),
        Some(token.into()),
    ));
    let port = serve_webhook(webhook).await;
    // The configuration `fleetwright manifests` prints, pointed at the loopback server, with the
    // cluster's CA as its bundle (a Function URL needs none: its certificate is public).
    let out = common::fleetwright(&[
        "manifests",
        "--function-url",
        &format!("https://127.0.0.1:{port}/"),
        "--token",
        token,
        "--cluster-name",
        "control-plane",
    ]);
    let text = common::success(&out);
    let mut configuration = serde_yaml::Deserializer::from_str(&text)
        .map(|doc| <Value as serde::Deserialize>::deserialize(doc).unwrap())
        .find(|o| o["kind"] == "MutatingWebhookConfiguration")
        .expect("the manifests hold a MutatingWebhookConfiguration");
    let ca = std::fs::read(
        std::path::Path::new(&std::env::var("FLEETWRIGHT_CONTROL_PLANE_DIR").unwrap())
            .join("ca.crt"),
    )
    .unwrap();
    use base64::Engine;
    for hook in configuration["webhooks"].as_array_mut().unwrap() {
        hook["clientConfig"]["caBundle"] =
            json!(base64::engine::general_purpose::STANDARD.encode(&ca));
    }
    apply(&admin, &configuration).await.unwrap();
    let ns = format!("webhook-{}", std::process::id());
    namespace(&admin, &ns).await;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), &ns);
    // The configuration may take a moment to reach the admission chain: create pods until one
    // is reviewed.
    let nudged = wait_for(|| async {
        let name = format!("web-{}", Utc::now().timestamp_micros());
        let pod = json!({"metadata": {"name": name, "namespace": ns},
            "spec": {"containers": [{"name": "c", "image": "pause"}]}});
        pods.create(
            &PostParams::default(),
            &serde_json::from_value(pod).unwrap(),
        )
        .await
        .unwrap();
        let seen = nudges.recorded();
        seen.into_iter().find(|(_, d)| d["namespace"] == json!(ns))
    })
    .await
    .expect("the API server sent an AdmissionReview the webhook answered with a nudge");
    assert_eq!(nudged.0, fleetwright_runtime::nudge::PENDING_POD);
    // A Node of a NodePool created (a kubelet joining) is reviewed and nudges; one of no
    // NodePool (a managed node group's) is not sent at all. Each is deleted again at once. The
    // webhook sends at most one nudge a second: the pod's must be a second old.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let nodes: Api<Node> = Api::all(admin.clone());
    let stamp = Utc::now().timestamp_micros();
    let (ours, other) = (format!("joining-{stamp}"), format!("unpooled-{stamp}"));
    for (name, labels) in [
        (&other, json!({})),
        (&ours, json!({"karpenter.sh/nodepool": "webhook-test"})),
    ] {
        let node = json!({"metadata": {"name": name, "labels": labels}});
        nodes
            .create(
                &PostParams::default(),
                &serde_json::from_value(node).unwrap(),
            )
            .await
            .unwrap();
        nodes.delete(name, &DeleteParams::default()).await.unwrap();
    }
    let joined: Vec<(String, Value)> = nudges
        .recorded()
        .into_iter()
        .filter(|(_, d)| d["name"] == json!(ours) || d["name"] == json!(other))
        .collect();
    assert_eq!(joined.len(), 1, "{joined:?}");
    assert_eq!(joined[0].0, fleetwright_runtime::nudge::NODE_JOINED);
    assert_eq!(joined[0].1["name"], json!(ours));
    let mutating: Api<DynamicObject> = Api::all_with(admin, &resource(&configuration).0);
    mutating
        .delete("fleetwright", &DeleteParams::default())
        .await
        .unwrap();
}

/// The README's story (`examples/simulate/control-plane.yaml`: scale up, a spot interruption,
/// a load drop, the deletion) through `fleetwright simulate --kubeconfig`: the real
/// controller-manager runs the Deployment, kube-scheduler binds, kwok runs the nodes, and tick
/// and interruption run under Fleetwright's identity. It needs a cluster of its own (no other
/// test's NodeClaims), so CI runs it on a second control plane:
/// `scripts/control-plane.sh run DIR -- cargo test ... -- --ignored --exact the_readme_story_ends_with_every_pod_running_and_no_node_left`.
#[tokio::test]
#[ignore = "needs a control plane of its own: see the doc comment"]
async fn the_readme_story_ends_with_every_pod_running_and_no_node_left() {
    let admin = setup().await;
    let out = common::fleetwright(&[
        "simulate",
        "--kubeconfig",
        &std::env::var("KUBECONFIG").unwrap(),
        "--controller-kubeconfig",
        &std::env::var("FLEETWRIGHT_KUBECONFIG").unwrap(),
        "--scenario",
        &common::repo("examples/simulate/control-plane.yaml"),
        "--output",
        "json",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let report: Value = serde_json::from_str(&common::success(&out)).unwrap();
    let context = format!("{report:#}\n{stderr}");
    for step in report["steps"].as_array().unwrap() {
        if step["action"].as_str().unwrap().starts_with("scale") {
            assert!(
                step["allRunningAfter"].is_i64(),
                "every replica Running after `{}`: {context}",
                step["action"]
            );
        }
    }
    let interruption = &report["interruptions"][0];
    assert!(
        interruption["podsDisplaced"].as_u64() > Some(0),
        "{context}"
    );
    assert!(interruption["goneAt"].is_i64(), "{context}");
    // The displaced pods run again before the load drop: on a replacement, or on room the
    // fleet already had. Which node kube-scheduler filled, and so whether the fleet has room
    // for its pods, is wall-clock chance; with no launch for the pool after the warning, every
    // replica running is the proof that the pods found room.
    let before_drop = report["samples"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["t"] == 120)
        .expect("a sample at the load drop");
    assert_eq!(before_drop["runningPods"], 10, "{context}");
    assert_eq!(before_drop["pendingPods"], 0, "{context}");
    if interruption["replacement"].is_null() {
        assert!(
            interruption["maxPendingSeconds"].as_i64() <= Some(30),
            "no replacement, so no displaced pod waited for a node: {context}"
        );
    }
    assert_eq!(report["finalNodes"], 0, "no node left: {context}");
    assert_eq!(report["finalHourlyCost"], 0.0, "{context}");
    assert_eq!(
        report["instancesLaunched"], report["instancesTerminated"],
        "{context}"
    );
    let last = report["samples"].as_array().unwrap().last().unwrap();
    assert_eq!(last["pendingPods"], 0, "{context}");
    assert!(!stderr.contains("left at the end"), "{context}");
    // Nothing of the run is left in the cluster.
    let claims: Api<NodeClaim> = Api::all(admin.clone());
    assert!(claims
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .is_empty());
    let nodes: Api<Node> = Api::all(admin.clone());
    let pooled = nodes
        .list(&ListParams::default().labels("karpenter.sh/nodepool"))
        .await
        .unwrap();
    assert!(pooled.items.is_empty(), "{:?}", pooled.items);
    // Nothing the run labelled is left, and what it did not create is still there.
    let run = ListParams::default().labels("fleetwright.io/simulate-run");
    assert!(nodes.list(&run).await.unwrap().items.is_empty());
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> = Api::all(admin.clone());
    assert!(deployments.list(&run).await.unwrap().items.is_empty());
    let maps: Api<ConfigMap> = Api::namespaced(admin.clone(), "karpenter");
    assert!(maps.list(&run).await.unwrap().items.is_empty());
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(admin);
    assert!(
        namespaces.get_opt("karpenter").await.unwrap().is_some(),
        "the manifests' namespace stays"
    );
}

/// The objects of a cluster in use that a wrong kube context would point `simulate` at: an EC2
/// node of a managed node group, the VPC CNI's DaemonSet, and another autoscaler's NodeClaim.
fn in_use() -> [(Value, ApiResource, Option<&'static str>); 3] {
    let daemonset = json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "aws-node", "namespace": "kube-system"},
        "spec": {"selector": {"matchLabels": {"k8s-app": "aws-node"}},
            "template": {"metadata": {"labels": {"k8s-app": "aws-node"}},
                "spec": {"containers": [{"name": "aws-node", "image": "amazon-k8s-cni"}]}}}});
    let node = json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "ip-10-0-1-2.ec2.internal", "labels": {"eks.amazonaws.com/nodegroup": "ng-1"}}});
    let claim = json!({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "someone-elses", "labels": {"karpenter.sh/nodepool": "default"},
            "finalizers": ["karpenter.sh/termination"]},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}]}});
    let gvk = |g: &str, v: &str, k: &str, plural: &str| {
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(g, v, k), plural)
    };
    [
        (node, gvk("", "v1", "Node", "nodes"), None),
        (
            daemonset,
            gvk("apps", "v1", "DaemonSet", "daemonsets"),
            Some("kube-system"),
        ),
        (
            claim,
            gvk("karpenter.sh", "v1", "NodeClaim", "nodeclaims"),
            None,
        ),
    ]
}

/// What a write by the run would change: uid, spec generation, labels and finalizers.
fn identity(object: &DynamicObject) -> Value {
    let m = &object.metadata;
    json!({"uid": m.uid, "generation": m.generation, "labels": m.labels, "finalizers": m.finalizers})
}

fn dynamic(admin: &Client, resource: &ApiResource, namespace: Option<&str>) -> Api<DynamicObject> {
    match namespace {
        Some(ns) => Api::namespaced_with(admin.clone(), ns, resource),
        None => Api::all_with(admin.clone(), resource),
    }
}

#[tokio::test]
#[ignore = "needs the control plane: scripts/control-plane.sh run DIR -- cargo test ... -- --ignored"]
async fn simulate_refuses_a_cluster_in_use_before_any_write_and_leaves_it_as_it_was() {
    let admin = setup().await;
    apply(&admin, &nodeclass()).await.unwrap();
    let mut versions = Vec::new();
    for (object, resource, namespace) in in_use() {
        let api = dynamic(&admin, &resource, namespace);
        let name = object["metadata"]["name"].as_str().unwrap();
        let object: DynamicObject = serde_json::from_value(object.clone()).unwrap();
        let created = match api.create(&PostParams::default(), &object).await {
            Ok(o) => o,
            Err(e) if api_code(&e) == 409 => api.get(name).await.unwrap(),
            Err(e) => panic!("{e}"),
        };
        versions.push((api, name.to_string(), identity(&created)));
    }
    // The example scenarios as they were: a DaemonSet named as the VPC CNI's.
    let scenario = std::fs::read_to_string(common::repo("examples/simulate/control-plane.yaml"))
        .unwrap()
        .replace(
            "name: simulated-node-agent\n    namespace: default",
            "name: aws-node\n    namespace: kube-system",
        );
    assert!(scenario.contains("name: aws-node"));
    let out = common::fleetwright(&[
        "simulate",
        "--kubeconfig",
        &std::env::var("KUBECONFIG").unwrap(),
        "--scenario",
        &common::write_temp("old-names.yaml", &scenario),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    for named in [
        "Node ip-10-0-1-2.ec2.internal",
        "NodeClaim someone-elses",
        "scripts/control-plane.sh",
    ] {
        assert!(stderr.contains(named), "{named} in: {stderr}");
    }
    // Controllers of the cluster may write a status, a taint or an annotation meanwhile; what
    // the run would have changed is the object itself: its uid, spec generation, labels and
    // finalizers, and whether it is being deleted.
    for (api, name, before) in &versions {
        let now = api.get(name).await.expect("left in place");
        assert_eq!(&identity(&now), before, "{name} as it was");
        assert!(
            now.metadata.deletion_timestamp.is_none(),
            "{name} not deleted"
        );
    }
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(admin.clone(), "default");
    assert!(
        deployments.get_opt("inflate").await.unwrap().is_none(),
        "nothing created"
    );
    // The test's own objects go, so that the tests after it see none of them.
    for (api, name, _) in versions {
        let _ = api
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"finalizers": null}})),
            )
            .await;
        let _ = api.delete(&name, &DeleteParams::default()).await;
    }
}

/// The writes Fleetwright's identity made since `since` (RFC 3339), from the API server's audit
/// log: `<verb> <resource> <namespace>/<name>`.
fn fleetwright_writes(since: &str) -> Vec<String> {
    let dir = std::env::var("FLEETWRIGHT_CONTROL_PLANE_DIR").unwrap();
    let log = std::fs::read_to_string(format!("{dir}/audit.log")).unwrap_or_default();
    log.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|e| e["user"]["username"] == "fleetwright")
        .filter(|e| e["requestReceivedTimestamp"].as_str().unwrap_or_default() >= since)
        .map(|e| {
            let o = &e["objectRef"];
            format!(
                "{} {} {}/{}",
                e["verb"].as_str().unwrap_or_default(),
                o["resource"].as_str().unwrap_or_default(),
                o["namespace"].as_str().unwrap_or_default(),
                o["name"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

/// Shadow mode beside another autoscaler: Karpenter's leader Lease is held, and a stand-in for
/// Karpenter creates the NodeClaim and Node for a pending pod. A tick with
/// `FLEETWRIGHT_DRY_RUN=true` records what it would have done beside what the stand-in did,
/// `fleetwright shadow --kubeconfig` prints the comparison, and the audit log shows that
/// Fleetwright wrote nothing but its own Lease and state ConfigMap.
#[tokio::test]
#[ignore = "needs the control plane: scripts/control-plane.sh run DIR -- cargo test ... -- --ignored"]
async fn shadow_mode_beside_another_autoscaler_writes_only_its_own_objects() {
    let admin = setup().await;
    let since = Utc::now()
        .checked_sub_signed(chrono::Duration::seconds(1))
        .unwrap()
        .to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    apply(&admin, &nodeclass()).await.unwrap();
    apply(&admin, &nodepool("shadow")).await.unwrap();
    let ns = &format!("shadow-{}", std::process::id());
    namespace(&admin, ns).await;
    // Karpenter runs: its leader Lease is held and renewed.
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(admin.clone(), "kube-system");
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
        k8s_openapi::jiff::Timestamp::now(),
    );
    let lease = json!({"metadata": {"name": "karpenter-leader-election", "namespace": "kube-system"},
        "spec": {"holderIdentity": "karpenter-7d9f", "leaseDurationSeconds": 3600}});
    let mut lease: k8s_openapi::api::coordination::v1::Lease =
        serde_json::from_value(lease).unwrap();
    if let Some(spec) = lease.spec.as_mut() {
        spec.renew_time = Some(now.clone());
        spec.acquire_time = Some(now);
    }
    let _ = leases.create(&PostParams::default(), &lease).await;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), ns);
    let pod = json!({"metadata": {"name": "web-0", "namespace": ns},
        "spec": {"nodeSelector": {"karpenter.sh/nodepool": "shadow"},
            "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "1"}}}]}});
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(pod).unwrap(),
    )
    .await
    .unwrap();
    wait_for(|| async {
        let p = pods.get("web-0").await.ok()?;
        let conditions = p.status?.conditions?;
        conditions
            .iter()
            .any(|c| c.type_ == "PodScheduled" && c.status == "False")
            .then_some(())
    })
    .await
    .expect("kube-scheduler marked the pod unschedulable");

    let catalog = Arc::new(fleetwright_core::Catalog::embedded().clone());
    let cloud = Arc::new(fleetwright_sim::SimCloud::new("control-plane", catalog));
    let settings = fleetwright_runtime::settings::Settings::from_lookup(|k| match k {
        "FLEETWRIGHT_CLUSTER_NAME" => Some("control-plane".into()),
        "FLEETWRIGHT_DRY_RUN" => Some("true".into()),
        _ => None,
    })
    .unwrap();
    let tick = fleetwright_runtime::tick::Tick::new(cloud, fleetwright().await, settings);
    let first = tick.run(Utc::now(), "shadow-1").await.unwrap();
    assert!(first.skipped.is_none(), "{first:?}");
    assert!(
        first
            .actions
            .iter()
            .any(|a| a["action"] == "createNodeClaim" && a["nodepool"] == "shadow"),
        "the dry run says it would create a NodeClaim: {:?}",
        first.actions
    );

    // The stand-in for Karpenter launches a node for the pod.
    let claims: Api<NodeClaim> = Api::all(admin.clone());
    let claim = json!({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "shadow-karpenter-1", "labels": {"karpenter.sh/nodepool": "shadow"}},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}]}});
    claims
        .create(
            &PostParams::default(),
            &serde_json::from_value(claim).unwrap(),
        )
        .await
        .unwrap();
    let mut node = kwok_node("shadow-karpenter-node-1");
    node["metadata"]["labels"]["karpenter.sh/nodepool"] = json!("shadow");
    node["metadata"]["labels"]["node.kubernetes.io/instance-type"] = json!("m5.large");
    Api::<Node>::all(admin.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(node).unwrap(),
        )
        .await
        .unwrap();
    let second = tick.run(Utc::now(), "shadow-2").await.unwrap();
    assert!(second.skipped.is_none(), "{second:?}");

    let kubeconfig = std::env::var("FLEETWRIGHT_KUBECONFIG").unwrap();
    let out = common::fleetwright(&["shadow", "--kubeconfig", &kubeconfig, "-o", "json"]);
    let shown: Value = serde_json::from_str(&common::success(&out)).unwrap();
    assert!(shown["window"]["ticks"].as_u64().unwrap() >= 2, "{shown}");
    assert!(
        shown["window"]["otherCreatedNodeclaims"].as_u64().unwrap() >= 1,
        "the stand-in's NodeClaim is counted: {shown}"
    );
    let table = common::fleetwright(&["shadow", "--kubeconfig", &kubeconfig]);
    assert!(
        common::success(&table).contains("the cluster's autoscaler created"),
        "{}",
        common::success(&table)
    );

    let written = fleetwright_writes(&since);
    assert!(
        !written.is_empty(),
        "the audit log holds Fleetwright's writes"
    );
    let own = |w: &String| {
        [
            "create leases karpenter/fleetwright-tick",
            "update leases karpenter/fleetwright-tick",
            "create configmaps karpenter/fleetwright-state",
            "update configmaps karpenter/fleetwright-state",
        ]
        .contains(&w.as_str())
    };
    let others: Vec<&String> = written.iter().filter(|w| !own(w)).collect();
    assert!(
        others.is_empty(),
        "shadow mode wrote only its Lease and state ConfigMap; also: {others:?}"
    );
    let lease = leases.get("karpenter-leader-election").await.unwrap();
    assert_eq!(
        lease.spec.and_then(|s| s.holder_identity).as_deref(),
        Some("karpenter-7d9f"),
        "Karpenter's Lease is untouched"
    );
}
