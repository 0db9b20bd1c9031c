//! Partition placement groups through a whole tick, on the in-memory Kubernetes API and the
//! simulated cloud (which makes a group with `partition` in its name a partition group of three
//! partitions), as Karpenter does it: pods spreading over
//! `karpenter.k8s.aws/placement-group-partition` get NodeClaims pinned one partition each,
//! launched into that partition and labelled with it; a NodeClaim that names no partition is
//! labelled empty at launch, EC2 picks, and the partition its instance landed in is written
//! back before its node may register.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use fleetwright_cloud::Cloud;
use fleetwright_core::Catalog;
use fleetwright_crds::NodeClaim;
use fleetwright_kube::dump::ClusterDump;
use fleetwright_runtime::settings::Settings;
use fleetwright_runtime::tick::{action::Action, decide, finish, Tick};
use fleetwright_sim::memory::MemoryApi;
use fleetwright_sim::SimCloud;
use serde_json::{json, Value};

const NODECLAIMS: &str = "/apis/karpenter.sh/v1/nodeclaims";
const PARTITION: &str = "karpenter.k8s.aws/placement-group-partition";
const GROUP_ID: &str = "karpenter.k8s.aws/placement-group-id";

fn class() -> Value {
    json!({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
        "metadata": {"name": "default", "uid": "uid-class", "resourceVersion": "1"},
        "spec": {"role": "KarpenterNodeRole-pg", "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "pg"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "pg"}}],
            "placementGroupSelector": {"name": "training-partition"}}})
}

fn pool(replicas: Option<i64>) -> Value {
    let mut p = json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "default", "uid": "uid-pool", "resourceVersion": "1"},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [{"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m5", "c5"]},
                             {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]}}}});
    if let Some(n) = replicas {
        p["spec"]["replicas"] = json!(n);
    }
    p
}

/// A pending pod of `app: mpi` that spreads over partitions (skew 1), one to a node.
fn spreading_pod(i: usize) -> Value {
    let selector = json!({"matchLabels": {"app": "mpi"}});
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("mpi-{i}"), "namespace": "default", "uid": format!("uid-mpi-{i}"),
            "labels": {"app": "mpi"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "mpi", "uid": "rs-1", "controller": true}]},
        "spec": {"containers": [{"name": "c", "image": "mpi", "resources": {"requests": {"cpu": "1"}}}],
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": PARTITION,
                "whenUnsatisfiable": "DoNotSchedule", "labelSelector": selector}],
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "kubernetes.io/hostname", "labelSelector": selector}]}}},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}})
}

fn tick_over(objects: Vec<(&str, Vec<Value>)>) -> (MemoryApi, Tick<Arc<SimCloud>>, Arc<SimCloud>) {
    let objects: BTreeMap<String, Vec<Value>> = objects
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    let api = MemoryApi::new(objects);
    let cloud = Arc::new(SimCloud::new("pg", Arc::new(Catalog::embedded().clone())));
    let settings =
        Settings::from_lookup(|name| (name == "FLEETWRIGHT_CLUSTER_NAME").then(|| "pg".into()))
            .expect("valid settings");
    let tick = Tick::new(cloud.clone(), api.client(), settings);
    (api, tick, cloud)
}

fn claims(api: &MemoryApi) -> Vec<Value> {
    api.lock()
        .objects
        .get(NODECLAIMS)
        .cloned()
        .unwrap_or_default()
}

fn label<'a>(claim: &'a Value, key: &str) -> Option<&'a str> {
    claim["metadata"]["labels"][key].as_str()
}

fn t0() -> DateTime<Utc> {
    "2026-11-25T10:00:00Z".parse().unwrap()
}

/// The partition of each live instance, by instance id.
async fn partitions(cloud: &SimCloud) -> BTreeMap<String, Option<i32>> {
    let owned = cloud.instances().await.expect("the simulated instances");
    owned.into_iter().map(|i| (i.id, i.partition)).collect()
}

fn instance_of(claim: &Value) -> String {
    let provider = claim["status"]["providerID"].as_str().expect("launched");
    provider.rsplit('/').next().unwrap().to_string()
}

#[tokio::test]
async fn pods_spreading_over_partitions_get_a_nodeclaim_launched_into_each_partition() {
    let pods: Vec<Value> = (0..6).map(spreading_pod).collect();
    let (api, tick, cloud) = tick_over(vec![
        ("/apis/karpenter.sh/v1/nodepools", vec![pool(None)]),
        ("/apis/karpenter.k8s.aws/v1/ec2nodeclasses", vec![class()]),
        ("/api/v1/pods", pods),
    ]);
    let summary = tick.run(t0(), "pg-1").await.expect("the tick");
    assert_eq!(summary.launched.len(), 6, "{summary:?}");
    let placed = partitions(&cloud).await;
    let mut per_partition: BTreeMap<String, usize> = BTreeMap::new();
    for claim in claims(&api) {
        assert_eq!(label(&claim, GROUP_ID), Some("pg-training-partition"));
        let partition = label(&claim, PARTITION)
            .expect("a partition label")
            .to_string();
        let instance = placed[&instance_of(&claim)];
        assert_eq!(
            instance.map(|p| p.to_string()).as_deref(),
            Some(partition.as_str()),
            "the instance went to the partition its NodeClaim names"
        );
        *per_partition.entry(partition).or_default() += 1;
    }
    assert_eq!(
        per_partition,
        BTreeMap::from([("1".into(), 2), ("2".into(), 2), ("3".into(), 2)])
    );
}

#[tokio::test]
async fn a_nodeclaim_naming_no_partition_gets_the_one_ec2_chose_before_it_registers() {
    let (api, tick, cloud) = tick_over(vec![
        ("/apis/karpenter.sh/v1/nodepools", vec![pool(Some(3))]),
        ("/apis/karpenter.k8s.aws/v1/ec2nodeclasses", vec![class()]),
    ]);
    let summary = tick.run(t0(), "pg-1").await.expect("the tick");
    assert_eq!(summary.launched.len(), 3, "{summary:?}");
    let placed = partitions(&cloud).await;
    let mut seen = Vec::new();
    for claim in claims(&api) {
        let chosen = placed[&instance_of(&claim)].expect("EC2 placed it in a partition");
        assert_eq!(
            label(&claim, PARTITION),
            Some(chosen.to_string().as_str()),
            "the tick's end wrote back the partition EC2 chose"
        );
        seen.push(chosen);
    }
    seen.sort();
    assert_eq!(seen, [1, 2, 3], "EC2 spreads a group's instances");
}

#[test]
fn a_node_waits_to_register_until_its_partition_is_known() {
    let claim: NodeClaim = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "default-a", "labels": {PARTITION: "", GROUP_ID: "pg-1"}},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": []},
        "status": {"providerID": "aws:///us-east-1a/i-0123456789abcdef0"}}))
    .unwrap();
    let node = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "ip-10-0-0-1"},
        "spec": {"providerID": "aws:///us-east-1a/i-0123456789abcdef0"}}))
    .unwrap();
    let dump = ClusterDump {
        nodes: vec![node],
        ..Default::default()
    };
    let waiting = [claim.clone()];
    assert!(decide::registrations(&dump, &waiting).is_empty());

    let mut instance = instance("i-0123456789abcdef0");
    assert!(finish::partition_labels(&waiting, std::slice::from_ref(&instance)).is_empty());
    instance.partition = Some(2);
    let labelled = finish::partition_labels(&waiting, &[instance]);
    assert!(
        matches!(&labelled[..], [Action::LabelPartition { nodeclaim, partition }]
            if nodeclaim == "default-a" && partition == "2"),
        "{labelled:?}"
    );

    let mut known = claim;
    known
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .insert(PARTITION.into(), "2".into());
    assert_eq!(decide::registrations(&dump, &[known]).len(), 1);
}

fn instance(id: &str) -> fleetwright_cloud::Instance {
    fleetwright_cloud::Instance {
        id: id.into(),
        instance_type: "m5.large".into(),
        zone: "us-east-1a".into(),
        state: "running".into(),
        capacity_type: "on-demand".into(),
        image_id: String::new(),
        subnet_id: String::new(),
        security_groups: Vec::new(),
        launch_time: None,
        tags: BTreeMap::new(),
        capacity_reservation_id: None,
        partition: None,
    }
}
