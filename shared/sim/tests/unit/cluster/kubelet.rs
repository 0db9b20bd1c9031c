use super::*;
use fleetwright_cloud::Instance;

fn instance(id: &str) -> SimInstance {
    SimInstance {
        instance: Instance {
            id: id.into(),
            instance_type: "m6i.large".into(),
            zone: "us-east-1a".into(),
            state: "running".into(),
            capacity_type: "on-demand".into(),
            image_id: String::new(),
            subnet_id: String::new(),
            security_groups: Vec::new(),
            launch_time: Some(start()),
            tags: [(NODEPOOL.to_string(), "web".to_string())].into(),
            capacity_reservation_id: None,
            partition: None,
        },
        price: 0.1,
        warned: None,
    }
}

fn start() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-11-22T10:00:00Z")
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or_default()
}

fn at(seconds: i64) -> DateTime<Utc> {
    start() + Duration::seconds(seconds)
}

fn joined(cluster: &mut Cluster, live: &BTreeMap<String, SimInstance>) -> String {
    cluster.kubelet(live, at(60));
    let state = cluster.api.lock();
    state.objects[NODES][0]["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The Node of a vanished instance is deleted through the API: its finalizer holds it,
/// being deleted, until its owner removes the finalizer; and its kubelet registers no node
/// again for an instance whose Node was deleted.
#[test]
fn a_vanished_instances_node_is_held_by_its_finalizer_and_never_registered_again() {
    let mut cluster = Cluster::new(&[], BTreeMap::new(), 1);
    let live: BTreeMap<String, SimInstance> = [("i-1".to_string(), instance("i-1"))].into();
    let node = joined(&mut cluster, &live);
    cluster.api.lock().objects.get_mut(NODES).unwrap()[0]["metadata"]["finalizers"] =
        json!(["karpenter.sh/termination"]);
    cluster.set_clock(at(70));
    cluster.kubelet(&BTreeMap::new(), at(70));
    {
        let state = cluster.api.lock();
        let held = &state.objects[NODES][0];
        assert_eq!(held["metadata"]["name"], node.as_str());
        assert_eq!(
            held["metadata"]["deletionTimestamp"],
            "2026-11-22T10:01:10Z"
        );
    }
    cluster.api.lock().objects.get_mut(NODES).unwrap().clear();
    cluster.kubelet(&live, at(80));
    assert!(cluster.api.lock().objects[NODES].is_empty(), "not again");
}

/// By hand, only a node that has joined is deleted, and through the API: a finalizer
/// holds it.
#[test]
fn a_node_is_deleted_by_hand_only_once_it_has_joined() {
    let mut cluster = Cluster::new(&[], BTreeMap::new(), 1);
    let live: BTreeMap<String, SimInstance> = [("i-1".to_string(), instance("i-1"))].into();
    let node = joined(&mut cluster, &live);
    assert_eq!(
        cluster.delete_node_by_hand(|_| 0),
        None,
        "still unregistered"
    );
    {
        let mut state = cluster.api.lock();
        let n = &mut state.objects.get_mut(NODES).unwrap()[0];
        n["spec"]["taints"] = json!([]);
        n["metadata"]["finalizers"] = json!(["karpenter.sh/termination"]);
    }
    let (name, _) = cluster.delete_node_by_hand(|_| 0).unwrap();
    assert_eq!(name, node);
    let state = cluster.api.lock();
    assert!(!state.objects[NODES][0]["metadata"]["deletionTimestamp"].is_null());
}

/// A pod being deleted stays on its node until its containers exit: at once by default,
/// with slow exits within its grace period, and never while its node's kubelet is gone.
#[test]
fn a_pod_being_deleted_goes_when_it_exits_within_its_grace_period() {
    let mut cluster = Cluster::new(&[], BTreeMap::new(), 1);
    cluster.slow_exits = true;
    let live: BTreeMap<String, SimInstance> = [("i-1".to_string(), instance("i-1"))].into();
    let node = joined(&mut cluster, &live);
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "shop", "deletionTimestamp": "2026-11-22T10:02:00Z",
                "deletionGracePeriodSeconds": 60},
            "spec": {"nodeName": node}, "status": {"phase": "Running"}});
    cluster.api.lock().objects.insert(PODS.into(), vec![pod]);
    let exit = (fnv("shop/p") % 61) as i64;
    cluster.kubelet(&live, at(60 + exit - 1));
    assert_eq!(cluster.api.lock().objects[PODS].len(), 1, "still exiting");
    cluster.kubelet(&BTreeMap::new(), at(60 + exit));
    assert_eq!(
        cluster.api.lock().objects[PODS].len(),
        1,
        "its kubelet is gone"
    );
    let mut fast = Cluster::new(&[], BTreeMap::new(), 1);
    fast.api.lock().objects.insert(NODES.into(), Vec::new());
    let node = joined(&mut fast, &live);
    let mut pod = cluster.api.lock().objects[PODS][0].clone();
    pod["spec"]["nodeName"] = json!(node);
    fast.api.lock().objects.insert(PODS.into(), vec![pod]);
    fast.kubelet(&live, at(60));
    assert!(fast.api.lock().objects[PODS].is_empty(), "exits at once");
}
