//! The snapshot reader against the HTTP-level fake API: a seeded cluster of 500 pods read over
//! three pages converts into the core model, with only bound and truly pending pods kept.

mod fake_api;

use std::collections::BTreeMap;

use fake_api::FakeApi;
use fleetwright_kube::snapshot::SnapshotReader;
use serde_json::{json, Value};

fn pods() -> Vec<Value> {
    let unschedulable =
        json!([{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]);
    let container = json!([{"name": "app", "image": "nginx", "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}}}]);
    (0..500)
        .map(|i| {
            let mut pod = json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("web-{i}"), "namespace": "shop", "labels": {"app": "web"}},
                "spec": {"containers": container.clone()},
                "status": {"phase": "Pending"}
            });
            match i {
                0..=479 => {
                    pod["spec"]["nodeName"] = json!(format!("node-{}", i % 10));
                    pod["status"]["phase"] = json!("Running");
                }
                480..=494 => pod["status"]["conditions"] = unschedulable.clone(),
                495..=497 => {} // not yet seen by kube-scheduler
                _ => {
                    pod["status"]["conditions"] = unschedulable.clone();
                    pod["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "u1", "controller": true}]);
                }
            }
            pod
        })
        .collect()
}

fn nodes() -> Vec<Value> {
    (0..10)
        .map(|i| {
            json!({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": format!("node-{i}"), "labels": {
                    "topology.kubernetes.io/zone": "us-east-1a", "karpenter.sh/nodepool": "default",
                    "node.kubernetes.io/instance-type": "m5.xlarge"}},
                "spec": {"providerID": format!("aws:///us-east-1a/i-{i:017x}")},
                "status": {"allocatable": {"cpu": "3920m", "memory": "14Gi", "pods": "58"},
                           "capacity": {"cpu": "4", "memory": "15Gi", "pods": "58"},
                           "conditions": [{"type": "Ready", "status": "True"}]}
            })
        })
        .collect()
}

#[tokio::test]
async fn reads_500_pods_over_three_pages_and_converts() {
    let mut objects = BTreeMap::new();
    objects.insert("/api/v1/pods".to_string(), pods());
    objects.insert("/api/v1/nodes".to_string(), nodes());
    objects.insert(
        "/apis/karpenter.sh/v1/nodepools".to_string(),
        vec![json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
                    "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                             "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}]}},
                             "limits": {"cpu": 1000}}})],
    );
    objects.insert(
        "/apis/karpenter.k8s.aws/v1/ec2nodeclasses".to_string(),
        vec![json!({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
                    "spec": {"role": "node-role", "amiSelectorTerms": [{"alias": "al2023@latest"}], "kubelet": {"maxPods": 58}}})],
    );
    let api = FakeApi::start(objects).await;
    let reader = SnapshotReader::new(api.client()).with_page_size(200);
    let snapshot = reader.read().await.expect("snapshot");

    let pages = api.requests_to("/api/v1/pods");
    assert_eq!(pages.len(), 3, "{pages:?}");
    assert!(pages[0].contains("limit=200") && !pages[0].contains("continue="));
    assert!(
        pages[1].contains("continue=200") && pages[2].contains("continue=400"),
        "{pages:?}"
    );

    // 480 bound + 15 pending; the 3 unseen and 2 DaemonSet pods are left out.
    assert_eq!(snapshot.pods.len(), 495);
    let pending: Vec<_> = snapshot
        .pods
        .iter()
        .filter(|p| p.node_name.is_none())
        .collect();
    assert_eq!(pending.len(), 15);
    assert!(pending
        .iter()
        .all(|p| p.namespace == "shop" && p.requests.cpu == 250 && p.requests.memory == 256 << 20));
    assert_eq!(snapshot.nodes.len(), 10);
    assert!(snapshot
        .nodes
        .iter()
        .all(|n| n.ready && n.allocatable.cpu == 3920));
    assert_eq!(snapshot.nodepools.len(), 1);
    assert_eq!(
        snapshot.nodepools[0].limits.as_ref().unwrap().cpu,
        1_000_000
    );
    assert_eq!(snapshot.node_classes["default"].kubelet.max_pods, Some(58));
    // Consistent kinds are paginated; the cache-safe ones read the watch cache.
    for path in [
        "/api/v1/nodes",
        "/apis/karpenter.sh/v1/nodeclaims",
        "/apis/karpenter.sh/v1/nodepools",
    ] {
        let reqs = api.requests_to(path);
        assert_eq!(reqs.len(), 1, "{path}: {reqs:?}");
        assert!(
            reqs[0].contains("limit=200") && !reqs[0].contains("resourceVersion=0"),
            "{reqs:?}"
        );
    }
    for path in [
        "/apis/apps/v1/daemonsets",
        "/apis/policy/v1/poddisruptionbudgets",
        "/api/v1/persistentvolumes",
    ] {
        let reqs = api.requests_to(path);
        assert_eq!(reqs.len(), 1, "{path}: {reqs:?}");
        assert!(reqs[0].contains("resourceVersion=0"), "{reqs:?}");
    }
    assert!(!api.requests_to("/api/v1/pods")[0].contains("resourceVersion=0"));
}

#[tokio::test]
async fn api_errors_name_the_kind() {
    // A fake that serves nothing Karpenter-specific: listing NodePools answers 404.
    let api = FakeApi::start(BTreeMap::new()).await;
    let config = kube::Config::new(
        format!("http://{}/missing-prefix", api.addr)
            .parse()
            .unwrap(),
    );
    let reader = SnapshotReader::new(kube::Client::try_from(config).unwrap());
    let err = reader.read().await.unwrap_err().to_string();
    assert!(err.starts_with("listing "), "{err}");
}

/// An in-memory API server with 500 pods and their nodes, whose pod listings lose their continue
/// token (410 Gone) at the second page, `listings` times in a row.
fn expiring_tokens(listings: usize) -> fleetwright_sim::memory::MemoryApi {
    use fleetwright_sim::memory::{Fault, MemoryApi};
    let mut objects = BTreeMap::new();
    objects.insert("/api/v1/pods".to_string(), pods());
    objects.insert("/api/v1/nodes".to_string(), nodes());
    let api = MemoryApi::new(objects);
    for _ in 0..listings {
        api.lock().faults.push(Fault {
            method: "GET".into(),
            path: "/api/v1/pods".into(),
            status: 410,
            skip: 1,
            times: 1,
        });
    }
    api
}

/// A listing whose continue token expires between pages (410 Gone, as the API server answers
/// once the snapshot it paged through is compacted) starts again from the first page, and keeps
/// no pod twice.
#[tokio::test]
async fn a_listing_whose_continue_token_expired_starts_again() {
    let api = expiring_tokens(1);
    let dump = SnapshotReader::new(api.client())
        .with_page_size(200)
        .read_dump()
        .await
        .expect("the listing starts again");
    let kept = dump.converted_pods.as_ref().map_or(0, Vec::len);
    let names: std::collections::BTreeSet<_> = dump
        .slim_pods
        .iter()
        .map(|p| p.metadata.name.clone())
        .collect();
    assert_eq!(names.len(), dump.slim_pods.len(), "no pod twice");
    assert_eq!(kept, dump.slim_pods.len());
    assert_eq!(
        api.requests_to("/api/v1/pods").len(),
        5,
        "page 1, the expired page 2, then pages 1 to 3 again"
    );
}

/// A listing whose continue token expires on every try (pods listed more slowly than etcd keeps
/// its snapshots) ends with one consistent read of the whole list, instead of failing the tick
/// on every invocation.
#[tokio::test]
async fn a_listing_that_always_loses_its_continue_token_is_read_whole() {
    use fleetwright_kube::snapshot::RELISTS;
    let api = expiring_tokens(RELISTS as usize + 1);
    let dump = SnapshotReader::new(api.client())
        .with_page_size(200)
        .read_dump()
        .await
        .expect("the whole list is read");
    let expected = SnapshotReader::new(expiring_tokens(0).client())
        .read_dump()
        .await
        .unwrap();
    assert_eq!(dump.slim_pods, expected.slim_pods, "every pod, once");
    let requests = api.requests_to("/api/v1/pods");
    let last = requests.last().unwrap();
    for absent in ["continue=", "limit=", "resourceVersion="] {
        assert!(!last.contains(absent), "{absent} in {requests:#?}");
    }
}

/// With a default topology spread, the read also lists Services and controllers (page by page),
/// and each pod without spread constraints gets the default with the selector
/// kube-scheduler deduces. Without one, none of those kinds is read.
#[tokio::test]
async fn default_spread_reads_the_selectors_it_deduces_from_and_only_then() {
    let owned = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8f", "uid": "rs1", "controller": true}]);
    let mut objects = BTreeMap::new();
    objects.insert(
        "/api/v1/pods".to_string(),
        vec![json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-1", "namespace": "shop", "labels": {"app": "web", "pod-template-hash": "5d8f"}, "ownerReferences": owned},
            "spec": {"containers": [{"name": "app", "image": "nginx"}]},
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
        })],
    );
    objects.insert(
        "/api/v1/services".to_string(),
        vec![json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "shop"},
                    "spec": {"selector": {"app": "web"}}})],
    );
    objects.insert(
        "/apis/apps/v1/replicasets".to_string(),
        vec![json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web-5d8f", "namespace": "shop"},
                    "spec": {"selector": {"matchLabels": {"pod-template-hash": "5d8f"}}}})],
    );
    let api = FakeApi::start(objects).await;
    let plain = SnapshotReader::new(api.client()).read().await.unwrap();
    assert!(plain.pods[0].spread.is_empty());
    assert!(api.requests_to("/api/v1/services").is_empty());

    let zone = fleetwright_core::default_spread::DefaultSpread::new(
        1,
        "topology.kubernetes.io/zone",
        true,
    );
    let snapshot = SnapshotReader::new(api.client())
        .with_default_spread(vec![zone])
        .read()
        .await
        .unwrap();
    let spread = &snapshot.pods[0].spread;
    assert_eq!(spread.len(), 1);
    assert_eq!(spread[0].topology_key, "topology.kubernetes.io/zone");
    let keys: Vec<&str> = spread[0].selector.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(
        keys,
        ["app", "pod-template-hash"],
        "the Service's selector and the ReplicaSet's, both"
    );
    assert_eq!(api.requests_to("/api/v1/services").len(), 1);
    let statefulsets = api.requests_to("/apis/apps/v1/statefulsets");
    assert_eq!(statefulsets.len(), 1);
    assert!(
        statefulsets[0].contains(&format!(
            "limit={}",
            fleetwright_kube::snapshot::DEFAULT_PAGE_SIZE
        )),
        "read page by page, keeping only selectors: {statefulsets:?}"
    );
}
