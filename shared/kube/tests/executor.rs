//! The executor against the HTTP-level fake API: a planned node becomes a NodeClaim with
//! Karpenter's shape, registration syncs labels and taints onto the node, and a 409 conflict
//! is retried by re-reading instead of overwriting.

mod fake_api;

use std::collections::BTreeMap;

use fake_api::FakeApi;
use fleetwright_core::{schedule, Catalog, ScheduleOptions};
use fleetwright_kube::crds::{NodeClaim, NodePool};
use fleetwright_kube::dump::typed;
use fleetwright_kube::executor::{
    cordoned, create_nodeclaim, nodeclaim_for, registered, update_node,
};
use k8s_openapi::api::core::v1::Node;
use serde_json::json;

fn pool() -> NodePool {
    typed(
        json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
               "metadata": {"name": "default", "uid": "pool-uid"},
               "spec": {"template": {"metadata": {"labels": {"team": "web"}},
                                     "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                                              "taints": [{"key": "dedicated", "value": "web", "effect": "NoSchedule"}],
                                              "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}],
                                              "expireAfter": "720h"}}}}),
        "NodePool",
    )
    .unwrap()
}

fn node(name: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Node",
           "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
           "spec": {"providerID": "aws:///us-east-1a/i-0123456789abcdef0",
                    "taints": [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}]}})
}

#[tokio::test]
async fn planned_node_becomes_a_nodeclaim_and_registration_syncs_the_node() {
    let pool = pool();
    let dump = format!(
        "{}\n---\napiVersion: v1\nkind: Pod\nmetadata: {{name: web-0, namespace: shop}}\nspec:\n  tolerations: [{{key: dedicated, value: web, effect: NoSchedule}}]\n  containers: [{{name: c, resources: {{requests: {{cpu: 500m}}}}}}]\n",
        serde_yaml::to_string(&pool).unwrap()
    );
    let snapshot = fleetwright_kube::snapshot_from_yaml(&dump, "test").unwrap();
    let plan = schedule(&snapshot, Catalog::embedded(), &ScheduleOptions::default());
    let claim = nodeclaim_for(&pool, None, &plan.nodeclaims[0]);

    let mut objects = BTreeMap::new();
    objects.insert("/api/v1/nodes".to_string(), vec![node("ip-10-0-1-1")]);
    let api = FakeApi::start(objects).await;
    let created: NodeClaim = create_nodeclaim(api.client(), &claim).await.unwrap();
    let name = created.metadata.name.clone().unwrap();
    assert!(name.starts_with("default-"), "{name}");
    let meta = &created.metadata;
    assert_eq!(
        meta.finalizers.as_deref(),
        Some(&["karpenter.sh/termination".to_string()][..])
    );
    assert_eq!(meta.owner_references.as_ref().unwrap()[0].uid, "pool-uid");
    let labels = meta.labels.clone().unwrap();
    assert_eq!(labels["karpenter.sh/nodepool"], "default");
    assert_eq!(labels["team"], "web");
    assert_eq!(labels["karpenter.sh/capacity-type"], "on-demand");
    let spec = &created.spec;
    assert!(spec
        .requirements
        .iter()
        .any(|r| r.key == "node.kubernetes.io/instance-type" && !r.values.is_empty()));
    assert_eq!(
        spec.resources.as_ref().unwrap().requests["cpu"],
        json!("500m")
    );
    assert_eq!(spec.expire_after.as_deref(), Some("720h"));
    assert_eq!(spec.node_class_ref.as_ref().unwrap().name, "default");

    // Registration: labels and taints land on the node, the unregistered taint goes, and a
    // concurrent writer's 409 is retried by re-reading.
    api.state.lock().unwrap().node_conflicts = 2;
    let changed = update_node(api.client(), "ip-10-0-1-1", |n: &Node| {
        registered(n, &created)
    })
    .await
    .unwrap();
    assert!(changed);
    let stored = api.state.lock().unwrap().objects["/api/v1/nodes"][0].clone();
    assert_eq!(
        stored["metadata"]["labels"]["karpenter.sh/nodepool"],
        "default"
    );
    assert_eq!(
        stored["metadata"]["labels"]["kubernetes.io/hostname"],
        "ip-10-0-1-1"
    );
    assert_eq!(
        stored["metadata"]["finalizers"],
        json!(["karpenter.sh/termination"])
    );
    let taints = stored["spec"]["taints"].as_array().unwrap();
    assert!(taints.iter().any(|t| t["key"] == "dedicated"));
    assert!(taints
        .iter()
        .all(|t| t["key"] != "karpenter.sh/unregistered"));
    let puts = api
        .requests_to("/api/v1/nodes/ip-10-0-1-1")
        .iter()
        .filter(|r| r.starts_with("PUT"))
        .count();
    assert_eq!(puts, 3, "two conflicts, then success");

    // Idempotent: registering again changes nothing and writes nothing.
    assert!(
        !update_node(api.client(), "ip-10-0-1-1", |n: &Node| registered(
            n, &created
        ))
        .await
        .unwrap()
    );
    // Cordon adds karpenter.sh/disrupted:NoSchedule once.
    assert!(update_node(api.client(), "ip-10-0-1-1", cordoned)
        .await
        .unwrap());
    assert!(!update_node(api.client(), "ip-10-0-1-1", cordoned)
        .await
        .unwrap());
    let stored = api.state.lock().unwrap().objects["/api/v1/nodes"][0].clone();
    let disrupted = stored["spec"]["taints"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["key"] == "karpenter.sh/disrupted")
        .count();
    assert_eq!(disrupted, 1);
}

#[tokio::test]
async fn endless_conflicts_give_up_with_a_clear_error() {
    let mut objects = BTreeMap::new();
    objects.insert("/api/v1/nodes".to_string(), vec![node("n1")]);
    let api = FakeApi::start(objects).await;
    api.state.lock().unwrap().node_conflicts = 100;
    let err = update_node(api.client(), "n1", cordoned)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("n1") && err.contains("conflict"), "{err}");
}

/// 2026-01-01T01:00:00Z: an hour after the pods' start time.
const NOW: i64 = 1_767_229_200;

fn pod_json(name: &str, extra: serde_json::Value) -> k8s_openapi::api::core::v1::Pod {
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "shop"},
                         "spec": {"nodeName": "n1", "containers": [{"name": "c"}]}, "status": {"phase": "Running"}});
    if let Some(meta) = extra.get("metadata") {
        for (k, v) in meta.as_object().unwrap() {
            pod["metadata"][k] = v.clone();
        }
    }
    for part in ["spec", "status"] {
        for (k, v) in extra
            .get(part)
            .and_then(|p| p.as_object())
            .into_iter()
            .flatten()
        {
            pod[part][k] = v.clone();
        }
    }
    serde_json::from_value(pod).unwrap()
}

#[tokio::test]
async fn cordon_and_drain_leave_the_pdb_blocked_pod_and_evict_the_rest() {
    use fleetwright_kube::executor::drain;
    let mut objects = BTreeMap::new();
    objects.insert("/api/v1/nodes".to_string(), vec![node("n1")]);
    let api = FakeApi::start(objects).await;
    api.state.lock().unwrap().pdb_blocked = vec!["shop/checkout-0".into()];
    assert!(update_node(api.client(), "n1", cordoned).await.unwrap());
    let pods = vec![
        pod_json("web-0", json!({})),
        pod_json("web-1", json!({})),
        pod_json("checkout-0", json!({})),
        pod_json(
            "agent-x",
            json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "u", "controller": true}]}}),
        ),
        pod_json(
            "static-x",
            json!({"metadata": {"annotations": {"kubernetes.io/config.mirror": "abc"}}}),
        ),
        pod_json(
            "batch-0",
            json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}}),
        ),
    ];
    let outcome = drain(api.client(), &pods, &[], NOW).await;
    assert_eq!(outcome.evicted, vec!["shop/web-0", "shop/web-1"]);
    let blocked: Vec<&str> = outcome.blocked.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(blocked, vec!["shop/checkout-0", "shop/batch-0"]);
    assert!(
        outcome.blocked[0].1.contains("disruption budget"),
        "{:?}",
        outcome.blocked
    );
    assert_eq!(
        api.state.lock().unwrap().evicted,
        vec!["shop/web-0", "shop/web-1"]
    );
    // DaemonSet and mirror pods were never sent to the Eviction API.
    let evictions = api
        .state
        .lock()
        .unwrap()
        .requests
        .iter()
        .filter(|r| r.contains("/eviction"))
        .count();
    assert_eq!(evictions, 3, "web-0, web-1 and the refused checkout-0");
}

/// A pod two PDBs cover gets a 500 from the Eviction API, and one an eviction-denying webhook
/// guards gets a 403: each is recorded as failed, and the drain goes on to the other pods.
#[tokio::test]
async fn an_eviction_error_fails_that_pod_alone_and_the_drain_goes_on() {
    use fleetwright_kube::executor::drain;
    use fleetwright_sim::memory::Fault;
    let api = FakeApi::start(BTreeMap::new()).await;
    let fault = |pod: &str, status: u16| Fault {
        method: "POST".into(),
        path: format!("/api/v1/namespaces/shop/pods/{pod}/eviction"),
        status,
        skip: 0,
        times: 100,
    };
    api.state.lock().unwrap().faults = vec![fault("two-pdbs", 500), fault("webhook", 403)];
    let pods = vec![
        pod_json("two-pdbs", json!({})),
        pod_json("webhook", json!({})),
        pod_json("web-0", json!({})),
    ];
    let outcome = drain(api.client(), &pods, &[], NOW).await;
    assert_eq!(outcome.evicted, vec!["shop/web-0"]);
    let failed: Vec<&str> = outcome.failed.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(failed, vec!["shop/two-pdbs", "shop/webhook"]);
    assert!(!outcome.done());
}

/// A `do-not-disrupt` duration is read at the instant the caller gives (a simulation's is
/// virtual), never at the machine's: 20 minutes from the pod's start hold it at 10 and free it
/// at 30.
#[tokio::test]
async fn a_do_not_disrupt_duration_is_read_at_the_callers_instant() {
    use fleetwright_kube::executor::drain;
    let api = FakeApi::start(BTreeMap::new()).await;
    let started = NOW - 3600;
    let pods = vec![pod_json(
        "batch-0",
        json!({
            "metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "20m"}},
            "status": {"startTime": "2026-01-01T00:00:00Z"},
        }),
    )];
    let early = drain(api.client(), &pods, &[], started + 600).await;
    assert!(early.evicted.is_empty(), "{early:?}");
    assert_eq!(early.blocked.len(), 1, "{early:?}");
    let late = drain(api.client(), &pods, &[], started + 1800).await;
    assert_eq!(late.evicted, vec!["shop/batch-0"]);
}

#[tokio::test]
async fn critical_pods_wait_until_the_others_are_gone() {
    use fleetwright_kube::executor::drain;
    let api = FakeApi::start(BTreeMap::new()).await;
    api.state.lock().unwrap().pdb_blocked = vec!["shop/web-0".into()];
    let critical = pod_json(
        "dns-0",
        json!({"spec": {"priorityClassName": "system-cluster-critical"}}),
    );
    let pods = vec![pod_json("web-0", json!({})), critical.clone()];
    let first = drain(api.client(), &pods, &[], NOW).await;
    assert_eq!(first.deferred, vec!["shop/dns-0"]);
    assert!(first.evicted.is_empty());
    // An evicted pod is still shutting down: the critical pod waits until it is gone too.
    let evicting = drain(
        api.client(),
        &[pod_json("web-1", json!({})), critical.clone()],
        &[],
        NOW,
    )
    .await;
    assert_eq!(evicting.evicted, vec!["shop/web-1"]);
    assert_eq!(evicting.deferred, vec!["shop/dns-0"]);
    // Once the others are gone, the critical pod is evicted.
    let second = drain(api.client(), std::slice::from_ref(&critical), &[], NOW).await;
    assert_eq!(second.evicted, vec!["shop/dns-0"]);

    // A pod the caller holds (do-not-disrupt) is blocked without an API call, and the
    // critical pod waits for it as for any other blocked pod.
    let kept = pod_json(
        "batch-0",
        json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}}),
    );
    let third = drain(api.client(), &[critical], &[kept], NOW).await;
    assert_eq!(third.deferred, vec!["shop/dns-0"], "{third:?}");
    assert_eq!(third.blocked.len(), 1, "{third:?}");
    // Sent, it would read as evicted (the fake has no such pod: a 404 is "already gone").
    assert!(third.evicted.is_empty() && !third.done(), "{third:?}");
}

#[tokio::test]
async fn status_conditions_delete_with_finalizer_and_events() {
    use fleetwright_kube::executor::{
        condition, delete_nodeclaim, record_event, update_nodeclaim_status, with_condition,
    };
    let api = FakeApi::start(BTreeMap::new()).await;
    let planned = fleetwright_core::plan::NewNodeClaim {
        nodepool: "default".into(),
        instance_types: vec!["m5.large".into()],
        capacity_types: vec!["spot".into()],
        zones: vec!["us-east-1a".into()],
        pods: vec!["shop/web-0".into()],
        requests: fleetwright_core::Resources::new(500, 512 << 20),
        price: 0.03,
        requirements: vec![],
        labels: Default::default(),
        taints: vec![],
        startup_taints: vec![],
        node_class: "default".into(),
        min_values_relaxed: None,
        reservation: None,
    };
    let created = create_nodeclaim(api.client(), &nodeclaim_for(&pool(), None, &planned))
        .await
        .unwrap();
    let name = created.metadata.name.clone().unwrap();

    // Launched, then Registered with providerID and nodeName; repeating is a no-op.
    let launched = |c: &NodeClaim| {
        let mut s = with_condition(
            &c.status.clone().unwrap_or_default(),
            condition("Launched", true, "Launched", "2026-11-22T10:00:00Z"),
        )?;
        s.provider_id = Some("aws:///us-east-1a/i-0abc".into());
        Some(s)
    };
    assert!(update_nodeclaim_status(api.client(), &name, launched)
        .await
        .unwrap());
    assert!(
        !update_nodeclaim_status(api.client(), &name, |c: &NodeClaim| with_condition(
            c.status.as_ref()?,
            condition("Launched", true, "Launched", "later")
        ))
        .await
        .unwrap()
    );
    let registered = |c: &NodeClaim| {
        let mut s = with_condition(
            c.status.as_ref()?,
            condition("Registered", true, "Registered", "2026-11-22T10:01:00Z"),
        )?;
        s.node_name = Some("ip-10-0-1-1".into());
        Some(s)
    };
    assert!(update_nodeclaim_status(api.client(), &name, registered)
        .await
        .unwrap());
    let stored = api.state.lock().unwrap().objects["/apis/karpenter.sh/v1/nodeclaims"][0].clone();
    assert_eq!(stored["status"]["providerID"], "aws:///us-east-1a/i-0abc");
    assert_eq!(stored["status"]["nodeName"], "ip-10-0-1-1");
    let types: Vec<&str> = stored["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["Launched", "Registered"]);
    assert_eq!(
        stored["status"]["conditions"][0]["lastTransitionTime"],
        "2026-11-22T10:00:00Z"
    );

    // Deleting keeps the object while the instance is not yet confirmed terminating...
    assert!(!delete_nodeclaim(api.client(), &name, false).await.unwrap());
    let still = api.state.lock().unwrap().objects["/apis/karpenter.sh/v1/nodeclaims"].clone();
    assert_eq!(still.len(), 1);
    assert!(!still[0]["metadata"]["deletionTimestamp"].is_null());
    // ...and the finalizer goes once it is.
    assert!(delete_nodeclaim(api.client(), &name, true).await.unwrap());
    assert!(api.state.lock().unwrap().objects["/apis/karpenter.sh/v1/nodeclaims"].is_empty());

    // Nodes follow the same rule.
    {
        let mut st = api.state.lock().unwrap();
        let mut n = node("ip-10-0-1-1");
        n["metadata"]["finalizers"] = json!(["karpenter.sh/termination"]);
        st.objects.insert("/api/v1/nodes".into(), vec![n]);
    }
    assert!(
        !fleetwright_kube::executor::delete_node(api.client(), "ip-10-0-1-1", false)
            .await
            .unwrap()
    );
    assert_eq!(api.state.lock().unwrap().objects["/api/v1/nodes"].len(), 1);
    assert!(
        fleetwright_kube::executor::delete_node(api.client(), "ip-10-0-1-1", true)
            .await
            .unwrap()
    );
    assert!(api.state.lock().unwrap().objects["/api/v1/nodes"].is_empty());
    assert!(
        fleetwright_kube::executor::delete_node(api.client(), "ip-10-0-1-1", true)
            .await
            .unwrap(),
        "already gone is fine"
    );

    // Events carry Karpenter's reasons.
    let pod_ref = k8s_openapi::api::core::v1::ObjectReference {
        kind: Some("Pod".into()),
        namespace: Some("shop".into()),
        name: Some("web-0".into()),
        ..Default::default()
    };
    let now = k8s_openapi::jiff::Timestamp::from_second(1_795_000_000).unwrap();
    record_event(
        api.client(),
        &pod_ref,
        false,
        "Nominated",
        &format!("Pod should schedule on: nodeclaim/{name}"),
        now,
    )
    .await
    .unwrap();
    let events = api.state.lock().unwrap().events.clone();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["reason"], "Nominated");
    assert_eq!(events[0]["involvedObject"]["name"], "web-0");
    assert_eq!(events[0]["type"], "Normal");
    assert_eq!(events[0]["source"]["component"], "fleetwright");
}

#[tokio::test]
async fn an_invalid_nodeclaim_is_refused_with_422_and_named() {
    let api = FakeApi::start(BTreeMap::new()).await;
    let mut claim: NodeClaim = typed(
        json!({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {}, "spec": {}}),
        "NodeClaim",
    )
    .unwrap();
    claim.metadata.generate_name = None;
    let err = create_nodeclaim(api.client(), &claim)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("creating NodeClaim"), "{err}");
    assert!(err.contains("422") || err.contains("Invalid"), "{err}");
}
