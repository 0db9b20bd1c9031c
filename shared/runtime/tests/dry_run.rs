//! The dry run against the plan of a dump: a tick with `FLEETWRIGHT_DRY_RUN=true` writes nothing
//! but its own Lease, and the actions it reports are the ones `fleetwright plan --actions`
//! decides for the same cluster (both run the one tick state machine).

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use fleetwright_cloud::Cloud;
use fleetwright_core::Catalog;
use fleetwright_kube::snapshot::SnapshotReader;
use fleetwright_runtime::settings::Settings;
use fleetwright_runtime::tick::{apply_settings, decide_all, Tick};
use fleetwright_sim::memory::MemoryApi;
use fleetwright_sim::SimCloud;
use serde_json::{json, Value};

fn settings(dry_run: bool) -> Settings {
    Settings::from_lookup(|name| match name {
        "FLEETWRIGHT_CLUSTER_NAME" => Some("dry".into()),
        "FLEETWRIGHT_DRY_RUN" => Some(dry_run.to_string()),
        _ => None,
    })
    .expect("valid settings")
}

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .unwrap()
        .with_timezone(&Utc)
}

fn class() -> Value {
    json!({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
        "metadata": {"name": "default", "uid": "nc-default"},
        "spec": {"role": "node-role", "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "dry"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "dry"}}]}})
}

fn pool(name: &str, capacity: &str) -> Value {
    json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": name, "uid": format!("np-{name}")},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": [capacity]},
                {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}},
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"}}})
}

fn pending_pod(name: &str, cpu: &str, selector: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "rs-web", "controller": true}]},
        "spec": {"nodeSelector": selector,
            "containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": cpu, "memory": "512Mi"}}}]},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}})
}

/// A cluster with work of several kinds: pods for two pools, and (after one live tick) a pool
/// whose nodes were launched, some of them with nodes joined.
fn cluster() -> MemoryApi {
    let objects: BTreeMap<String, Vec<Value>> = [
        (
            "/apis/karpenter.sh/v1/nodepools",
            vec![pool("web", "on-demand"), pool("batch", "spot")],
        ),
        ("/apis/karpenter.k8s.aws/v1/ec2nodeclasses", vec![class()]),
        (
            "/api/v1/pods",
            vec![
                pending_pod("web-1", "1", json!({"karpenter.sh/nodepool": "web"})),
                pending_pod("web-2", "3", json!({"karpenter.sh/nodepool": "web"})),
                pending_pod("batch-1", "2", json!({"karpenter.sh/nodepool": "batch"})),
            ],
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    MemoryApi::new(objects)
}

/// The writes the API server took (anything but a read).
fn writes(api: &MemoryApi) -> Vec<String> {
    api.lock()
        .requests
        .iter()
        .filter(|r| !r.starts_with("GET "))
        .cloned()
        .collect()
}

/// What `plan --actions` decides for the cluster as the API server holds it now.
async fn planned(api: &MemoryApi, cloud: &Arc<SimCloud>, now: DateTime<Utc>) -> Vec<Value> {
    // As `plan --kubeconfig` and the tick read it, with the cluster's CA bundle.
    let mut dump = SnapshotReader::new(api.client())
        .with_ca_bundle(None, "karpenter")
        .read_dump()
        .await
        .unwrap();
    let (mut snapshot, rejected) = fleetwright_kube::convert::take_snapshot_isolating(&mut dump);
    assert!(rejected.is_empty(), "{rejected:?}");
    apply_settings(&mut snapshot, &settings(true));
    let catalog = cloud.catalog(now).await.unwrap();
    let actions = decide_all(&dump, &snapshot, &catalog, now, Default::default());
    actions
        .iter()
        .map(|a| serde_json::to_value(a).unwrap())
        .collect()
}

/// The dry run's actions, checked to be `plan --actions`' for the cluster as it is now (but
/// those only a tick that reads the cloud decides).
async fn same_as_plan(
    summary: &fleetwright_runtime::tick::TickSummary,
    api: &MemoryApi,
    cloud: &Arc<SimCloud>,
    now: DateTime<Utc>,
) -> Vec<Value> {
    let reported: Vec<Value> = summary
        .actions
        .iter()
        .filter(|a| !cloud_only(a))
        .cloned()
        .collect();
    let plan: Vec<Value> = planned(api, cloud, now)
        .await
        .into_iter()
        .filter(|a| !cloud_only(a))
        .collect();
    assert_eq!(
        reported,
        plan,
        "dry run {:?}\nplan {:?}",
        kinds(&reported),
        kinds(&plan)
    );
    reported
}

/// Actions only a tick that reads the cloud decides (a dump has no cloud to read).
fn cloud_only(action: &Value) -> bool {
    matches!(
        action["action"].as_str(),
        Some("saveUnavailable" | "nodeClassStatus" | "collectGarbage" | "forgetNodeClaim")
    )
}

fn kinds(actions: &[Value]) -> Vec<&str> {
    actions
        .iter()
        .filter_map(|a| a["action"].as_str())
        .collect()
}

#[tokio::test]
async fn a_dry_run_writes_only_its_lease_and_reports_what_plan_actions_decides() {
    let api = cluster();
    let cloud = Arc::new(SimCloud::new("dry", Arc::new(Catalog::embedded().clone())));
    let now = at("2026-11-23T12:00:00Z");
    // One live tick first, so the cluster also holds NodeClaims in flight and class statuses.
    let live = Tick::new(cloud.clone(), api.client(), settings(false));
    live.run(now, "live").await.expect("the live tick");
    api.lock()
        .objects
        .get_mut("/api/v1/pods")
        .unwrap()
        .push(pending_pod(
            "web-3",
            "2",
            json!({"karpenter.sh/nodepool": "web"}),
        ));
    let later = now + chrono::Duration::seconds(30);
    let before = writes(&api).len();

    let dry = Tick::new(cloud.clone(), api.client(), settings(true));
    let summary = dry.run(later, "dry").await.expect("the dry run");

    let written = writes(&api)[before..].to_vec();
    assert!(
        written.iter().all(|w| own_lease(w)),
        "a dry run writes its Lease and state ConfigMap, nothing else: {written:?}"
    );
    assert!(summary.dry_run);
    let reported = same_as_plan(&summary, &api, &cloud, later).await;
    for kind in ["createNodeClaim", "launch", "poolStatus"] {
        assert!(
            kinds(&reported).contains(&kind),
            "{kind}: {:?}",
            kinds(&reported)
        );
    }
}

/// The `web` pool and its class, with these NodeClaims and Nodes.
fn web_pool_with(claims: Vec<Value>, nodes: Vec<Value>) -> MemoryApi {
    let objects: BTreeMap<String, Vec<Value>> = [
        (
            "/apis/karpenter.sh/v1/nodepools",
            vec![pool("web", "on-demand")],
        ),
        ("/apis/karpenter.k8s.aws/v1/ec2nodeclasses", vec![class()]),
        ("/apis/karpenter.sh/v1/nodeclaims", claims),
        ("/api/v1/nodes", nodes),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    MemoryApi::new(objects)
}

fn node(name: &str, instance: &str, extra: Value) -> Value {
    let mut node = json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": format!("uid-{name}"), "creationTimestamp": "2026-11-23T10:00:00Z",
            "finalizers": ["karpenter.sh/termination"],
            "labels": {"karpenter.sh/nodepool": "web", "node.kubernetes.io/instance-type": "m5.large",
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

fn claim(name: &str, instance: &str, node: &str, conditions: &[&str]) -> Value {
    let conditions: Vec<Value> = conditions
        .iter()
        .map(|c| json!({"type": c, "status": "True", "reason": c, "lastTransitionTime": "2026-11-23T10:00:00Z"}))
        .collect();
    json!({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "uid": format!("uid-{name}"), "creationTimestamp": "2026-11-23T10:00:00Z",
            "finalizers": ["karpenter.sh/termination"],
            "labels": {"karpenter.sh/nodepool": "web", "node.kubernetes.io/instance-type": "m5.large",
                "topology.kubernetes.io/zone": "us-east-1a", "karpenter.sh/capacity-type": "on-demand"}},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": []},
        "status": {"providerID": format!("aws:///us-east-1a/{instance}"), "nodeName": node,
            "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"}, "conditions": conditions}})
}

/// With nothing pending, the lifecycle and disruption phases: a node joined but not registered,
/// a node deleted by hand, an empty node consolidation would remove.
#[tokio::test]
async fn a_dry_run_of_lifecycle_and_disruption_reports_what_plan_actions_decides() {
    let all = ["Launched", "Registered", "Initialized"];
    let api = web_pool_with(
        vec![
            claim("web-joined", "i-0000000000000000a", "", &["Launched"]),
            claim("web-empty", "i-0000000000000000b", "node-empty", &all),
            claim("web-deleted", "i-0000000000000000c", "node-deleted", &all),
        ],
        vec![
            node("node-joined", "i-0000000000000000a", json!({})),
            node("node-empty", "i-0000000000000000b", json!({})),
            node(
                "node-deleted",
                "i-0000000000000000c",
                json!({"deletionTimestamp": "2026-11-23T11:59:00Z"}),
            ),
        ],
    );
    let cloud = Arc::new(SimCloud::new("dry", Arc::new(Catalog::embedded().clone())));
    let now = at("2026-11-23T12:00:00Z");

    let dry = Tick::new(cloud.clone(), api.client(), settings(true));
    let summary = dry.run(now, "dry").await.expect("the dry run");

    let written = writes(&api);
    assert!(
        written.iter().all(|w| own_lease(w)),
        "a dry run writes its Lease and state ConfigMap, nothing else: {written:?}"
    );
    let reported = same_as_plan(&summary, &api, &cloud, now).await;
    for kind in ["register", "initialize", "nodeDeleted", "savePending"] {
        assert!(
            kinds(&reported).contains(&kind),
            "{kind}: {:?}",
            kinds(&reported)
        );
    }
    assert!(
        !kinds(&reported).contains(&"giveUp"),
        "a node that joined while no tick ran is registered, not given up in the same tick"
    );
}

/// A write to one of the tick's own objects: its Lease (created, or `fleetwright-tick`
/// updated) or its state ConfigMap (where a dry run keeps its shadow record).
fn own_lease(write: &str) -> bool {
    let path = write.split_once(' ').map(|(_, p)| p).unwrap_or_default();
    let path = path.split('?').next().unwrap_or_default();
    let leases = "/apis/coordination.k8s.io/v1/namespaces/karpenter/leases";
    let configmaps = "/api/v1/namespaces/karpenter/configmaps";
    [
        leases.to_string(),
        format!("{leases}/fleetwright-tick"),
        configmaps.to_string(),
        format!("{configmaps}/fleetwright-state"),
    ]
    .contains(&path.to_string())
}

/// Another autoscaler acts between two shadow ticks: it removes an empty node and adds a node.
/// The second tick's record names both, beside what Fleetwright would have done, and the
/// comparison counts the node both would remove; nothing but Fleetwright's own objects is
/// written.
#[tokio::test]
async fn a_shadow_tick_records_what_the_other_autoscaler_did_beside_what_it_would_do() {
    let all = ["Launched", "Registered", "Initialized"];
    let api = web_pool_with(
        vec![claim(
            "web-empty",
            "i-0000000000000000b",
            "node-empty",
            &all,
        )],
        vec![node("node-empty", "i-0000000000000000b", json!({}))],
    );
    let cloud = Arc::new(SimCloud::new("dry", Arc::new(Catalog::embedded().clone())));
    let dry = Tick::new(cloud.clone(), api.client(), settings(true));
    let now = at("2026-11-23T12:00:00Z");
    dry.run(now, "dry").await.expect("the first shadow tick");
    {
        // The other autoscaler: the empty node goes, a new one comes.
        let mut state = api.lock();
        for path in ["/apis/karpenter.sh/v1/nodeclaims", "/api/v1/nodes"] {
            state.objects.get_mut(path).unwrap().clear();
        }
        state
            .objects
            .get_mut("/apis/karpenter.sh/v1/nodeclaims")
            .unwrap()
            .push(claim(
                "karpenter-new",
                "i-0000000000000000d",
                "node-new",
                &all,
            ));
        state.objects.get_mut("/api/v1/nodes").unwrap().push(node(
            "node-new",
            "i-0000000000000000d",
            json!({}),
        ));
    }
    let second = dry
        .run(now + chrono::Duration::minutes(1), "dry")
        .await
        .expect("the second shadow tick");

    let written = writes(&api);
    assert!(
        written.iter().all(|w| own_lease(w)),
        "shadow mode writes its Lease and state ConfigMap, nothing else: {written:?}"
    );
    let stored = fleetwright_kube::state::load::<fleetwright_runtime::shadow::Shadow>(
        api.client(),
        "karpenter",
        fleetwright_runtime::shadow::SHADOW_KEY,
    )
    .await
    .unwrap()
    .expect("the shadow records are kept");
    assert_eq!(stored.records.len(), 2);
    let first = &stored.records[0];
    assert!(
        first
            .would_disrupt
            .iter()
            .any(|d| d.ends_with(": node-empty")),
        "Fleetwright would remove the empty node: {first:?}"
    );
    let last = &stored.records[1];
    assert_eq!(
        last.other_created,
        ["Node node-new", "NodeClaim karpenter-new"],
        "{last:?}"
    );
    assert_eq!(
        last.other_deleted,
        ["Node node-empty", "NodeClaim web-empty"],
        "{last:?}"
    );
    assert!(
        last.fleet_hourly.is_some() && last.planned_hourly.is_some(),
        "{last:?}"
    );
    let compared = fleetwright_runtime::shadow::compare(&stored.records);
    assert_eq!(compared.disrupted_by_both, ["node-empty"], "{compared:?}");
    assert_eq!(compared.other_created_nodeclaims, 1);
    assert!(
        second
            .metrics
            .get(fleetwright_runtime::metrics::SHADOW_OTHER_DELETED)
            == 2.0,
        "{:?}",
        second.metrics
    );
}
