//! The run against a real cluster touches only what it created: its guard refuses a cluster in
//! use before any write, also when a check fails; its clean-up deletes only its own objects; its
//! writes and deletes refuse anyone else's; its node names and the example scenarios' names
//! cannot be a real cluster's. Against the in-memory API server, which answers every list with
//! every object whatever the label selector, so the per-object checks are what is tested.

use std::collections::BTreeMap;

use fleetwright_sim::memory::{Fault, MemoryApi};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams};
use serde_json::{json, Value};

use super::owned::{self, Run, RUN_LABEL};
use super::Live;
use crate::simulate::scenario::Scenario;

const NODES: &str = "/api/v1/nodes";
const CLAIMS: &str = "/apis/karpenter.sh/v1/nodeclaims";
const DAEMONSETS: &str = "/apis/apps/v1/daemonsets";

/// A scenario as the examples were before: a DaemonSet named as the VPC CNI's.
const SCENARIO: &str = r#"
name: guard
duration: 1m
objects:
- apiVersion: karpenter.k8s.aws/v1
  kind: EC2NodeClass
  metadata: {name: default}
  spec: {amiSelectorTerms: [{alias: al2023@latest}], role: R,
    subnetSelectorTerms: [{tags: {a: b}}], securityGroupSelectorTerms: [{tags: {a: b}}]}
- apiVersion: karpenter.sh/v1
  kind: NodePool
  metadata: {name: default}
  spec:
    template:
      spec:
        nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
        requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [spot]}]
- apiVersion: apps/v1
  kind: DaemonSet
  metadata: {name: aws-node, namespace: kube-system}
  spec:
    selector: {matchLabels: {k8s-app: aws-node}}
    template:
      metadata: {labels: {k8s-app: aws-node}}
      spec: {containers: [{name: aws-node, image: amazon-k8s-cni}]}
"#;

fn node(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": "7",
            "labels": labels, "finalizers": ["example.com/keep"]},
        "spec": {"providerID": "aws:///us-east-1a/i-0123456789abcdef0"}})
}

fn claim(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": "7",
            "labels": labels, "finalizers": ["karpenter.sh/termination"]},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": []}})
}

/// The VPC CNI's DaemonSet, as on every EKS cluster.
fn aws_node() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "aws-node", "namespace": "kube-system", "uid": "uid-aws-node", "resourceVersion": "7"},
        "spec": {"selector": {"matchLabels": {"k8s-app": "aws-node"}},
            "template": {"metadata": {"labels": {"k8s-app": "aws-node"}},
                "spec": {"containers": [{"name": "aws-node", "image": "amazon-k8s-cni"}]}}}})
}

fn server(objects: &[(&str, Vec<Value>)]) -> MemoryApi {
    let objects: BTreeMap<String, Vec<Value>> = objects
        .iter()
        .map(|(path, items)| (path.to_string(), items.clone()))
        .collect();
    MemoryApi::new(objects)
}

fn live(api: &MemoryApi, run: &str) -> Live {
    let scenario = Scenario::parse(SCENARIO, "the guard's scenario").unwrap();
    let base = crate::simulate::region_catalog(&scenario.objects).unwrap();
    let catalog = crate::simulate::catalog(scenario.seed, base);
    let client = api.client();
    let mut live = Live::new(
        scenario,
        client.clone(),
        client,
        catalog,
        Default::default(),
        None,
    )
    .unwrap();
    live.run = Run::with_id(run);
    live
}

/// Every request that was not a read.
fn writes(api: &MemoryApi) -> Vec<String> {
    api.lock()
        .requests
        .iter()
        .filter(|r| !r.starts_with("GET "))
        .cloned()
        .collect()
}

fn stored(api: &MemoryApi, path: &str) -> Vec<Value> {
    api.lock().objects.get(path).cloned().unwrap_or_default()
}

/// Runs what `live::run` runs when the preparation fails: the preparation, then the clean-up.
async fn refused(api: &MemoryApi) -> String {
    let mut live = live(api, "r1");
    let error = live.prepare().await.expect_err("the guard refuses");
    live.clean_up().await;
    format!("{error:#}")
}

#[tokio::test]
async fn a_cluster_with_a_node_the_cni_daemonset_and_a_nodeclaim_is_refused_before_any_write() {
    let before = [
        (
            NODES,
            vec![node(
                "ip-10-0-1-2.ec2.internal",
                json!({"eks.amazonaws.com/nodegroup": "ng-1"}),
            )],
        ),
        (DAEMONSETS, vec![aws_node()]),
        (
            CLAIMS,
            vec![claim(
                "someone-elses",
                json!({"karpenter.sh/nodepool": "default"}),
            )],
        ),
    ];
    let api = server(&before);
    let message = refused(&api).await;
    for named in [
        "Node ip-10-0-1-2.ec2.internal",
        "NodeClaim someone-elses",
        "scripts/control-plane.sh",
    ] {
        assert!(message.contains(named), "{named} in: {message}");
    }
    assert_eq!(writes(&api), Vec::<String>::new(), "no write at all");
    for (path, objects) in before {
        assert_eq!(stored(&api, path), objects, "{path} as it was");
    }
}

#[tokio::test]
async fn a_cluster_of_a_managed_node_group_is_refused_before_any_write() {
    // No NodeClaim and no node labelled for a NodePool: a cluster without Karpenter.
    let before = [
        (
            NODES,
            vec![node(
                "ip-10-0-1-2.ec2.internal",
                json!({"eks.amazonaws.com/nodegroup": "ng-1"}),
            )],
        ),
        (DAEMONSETS, vec![aws_node()]),
    ];
    let api = server(&before);
    let message = refused(&api).await;
    assert!(
        message.contains("Node ip-10-0-1-2.ec2.internal"),
        "{message}"
    );
    assert_eq!(writes(&api), Vec::<String>::new());
    assert_eq!(stored(&api, DAEMONSETS), vec![aws_node()]);
}

#[tokio::test]
async fn a_nodeclaim_list_that_fails_refuses() {
    for status in [500, 403] {
        let api = server(&[]);
        api.lock().faults.push(Fault {
            method: "GET".into(),
            path: CLAIMS.into(),
            status,
            skip: 0,
            times: 1000,
        });
        let message = refused(&api).await;
        assert!(
            message.contains("listing every NodeClaim"),
            "{status}: {message}"
        );
        assert_eq!(writes(&api), Vec::<String>::new(), "{status}");
    }
}

#[tokio::test]
async fn a_node_list_that_fails_refuses() {
    let api = server(&[]);
    api.lock().faults.push(Fault {
        method: "GET".into(),
        path: NODES.into(),
        status: 403,
        skip: 0,
        times: 1000,
    });
    let message = refused(&api).await;
    assert!(message.contains("listing every Node"), "{message}");
    assert_eq!(writes(&api), Vec::<String>::new());
}

#[tokio::test]
async fn pods_and_the_ticks_state_of_another_fleetwright_are_refused() {
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-1", "namespace": "default", "uid": "uid-web-1"},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
    let api = server(&[("/api/v1/pods", vec![pod])]);
    let state = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "fleetwright-state", "namespace": "karpenter", "resourceVersion": "3"}, "data": {}});
    api.lock().singles.insert(
        "/api/v1/namespaces/karpenter/configmaps/fleetwright-state".into(),
        state,
    );
    let message = refused(&api).await;
    assert!(message.contains("Pod default/web-1"), "{message}");
    assert!(
        message.contains("ConfigMap karpenter/fleetwright-state"),
        "{message}"
    );
    assert_eq!(writes(&api), Vec::<String>::new());
}

#[tokio::test]
async fn an_empty_cluster_passes_the_guard() {
    let api = server(&[]);
    let run = Run::with_id("r1");
    let state = super::guard::State {
        namespace: "karpenter",
        lease: "fleetwright-tick",
        configmap: "fleetwright-state",
    };
    super::guard::refuse_a_cluster_in_use(&api.client(), &run, &state)
        .await
        .unwrap();
}

#[tokio::test]
async fn the_clean_up_deletes_only_this_runs_objects() {
    let ours = json!({RUN_LABEL: "r1", "karpenter.sh/nodepool": "default"});
    let foreign_node = node(
        "ip-10-0-1-2.ec2.internal",
        json!({"karpenter.sh/nodepool": "default"}),
    );
    let earlier_node = node("simulated-r0-ip-10-0-1-4", json!({RUN_LABEL: "r0"}));
    let foreign_claim = claim("someone-elses", json!({"karpenter.sh/nodepool": "default"}));
    let earlier_claim = claim("default-r0", json!({RUN_LABEL: "r0"}));
    let api = server(&[
        (
            NODES,
            vec![
                foreign_node.clone(),
                earlier_node.clone(),
                node("simulated-r1-ip-10-0-1-3", ours.clone()),
            ],
        ),
        (DAEMONSETS, vec![aws_node()]),
        (
            CLAIMS,
            vec![
                foreign_claim.clone(),
                earlier_claim.clone(),
                claim("default-abcde", ours),
            ],
        ),
    ]);
    let mut live = live(&api, "r1");
    live.prepared = true;
    // The kubelet's record names a node that a foreign one took the place of too: the record
    // alone is no licence to delete.
    live.nodes.insert(
        "ip-10-0-1-2.ec2.internal".into(),
        "aws:///us-east-1a/i-1".into(),
    );
    live.nodes.insert(
        "simulated-r1-ip-10-0-1-3".into(),
        "aws:///us-east-1a/i-2".into(),
    );
    live.clean_up().await;
    assert_eq!(stored(&api, NODES), vec![foreign_node, earlier_node]);
    assert_eq!(stored(&api, CLAIMS), vec![foreign_claim, earlier_claim]);
    assert_eq!(stored(&api, DAEMONSETS), vec![aws_node()]);
    let foreign = [
        "ip-10-0-1-2.ec2.internal",
        "simulated-r0-",
        "someone-elses",
        "default-r0",
        "aws-node",
    ];
    for write in writes(&api) {
        assert!(!foreign.iter().any(|f| write.contains(f)), "{write}");
    }
}

#[tokio::test]
async fn a_create_answered_409_is_refused_and_never_adopted() {
    let api = server(&[]);
    let path = "/api/v1/namespaces/karpenter/configmaps/fleetwright-state";
    let theirs = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "fleetwright-state", "namespace": "karpenter", "resourceVersion": "3"},
        "data": {"offerings": "{}"}});
    api.lock().singles.insert(path.into(), theirs.clone());
    let run = Run::with_id("r1");
    let maps: Api<ConfigMap> = Api::namespaced(api.client(), "karpenter");
    let mut mine = json!({"metadata": {"name": "fleetwright-state", "namespace": "karpenter"}});
    run.stamp(&mut mine);
    let error = owned::create(
        &maps,
        &run,
        "ConfigMap",
        &serde_json::from_value(mine).unwrap(),
    )
    .await
    .expect_err("409 is a refusal");
    assert!(error.downcast_ref::<owned::Taken>().is_some(), "{error:#}");
    assert!(format!("{error:#}").contains("already exists and this run did not create it"));
    let changed = owned::replace(&maps, &run, "ConfigMap", "fleetwright-state", |_| true).await;
    assert!(changed.is_err(), "not this run's: not replaced");
    let deleted = owned::delete(
        &maps,
        &run,
        "ConfigMap",
        "fleetwright-state",
        &DeleteParams::default(),
    )
    .await;
    assert!(deleted.is_err(), "not this run's: not deleted");
    assert_eq!(api.lock().singles.get(path), Some(&theirs));
}

#[test]
fn simulated_node_names_are_no_ec2_names_and_carry_the_run() {
    let run = Run::fresh();
    let name = super::kubelet::node_name(&run, "ip-10-0-1-2.ec2.internal");
    assert!(name.contains(run.id()), "{name}");
    assert!(
        !name.starts_with("ip-") && !name.starts_with("i-") && !name.contains("internal"),
        "{name}"
    );
    assert!(name.len() <= 63, "{name} is a valid hostname label value");
    assert_ne!(run, Run::fresh(), "each run its own id");
}

#[test]
fn stamping_labels_the_object_and_its_template() {
    let run = Run::with_id("r1");
    let mut deployment = json!({"kind": "Deployment", "metadata": {"name": "inflate"},
        "spec": {"template": {"metadata": {"labels": {"app": "inflate"}}}}});
    run.stamp(&mut deployment);
    assert_eq!(deployment["metadata"]["labels"][RUN_LABEL], "r1");
    assert_eq!(
        deployment["spec"]["template"]["metadata"]["labels"][RUN_LABEL],
        "r1"
    );
    assert_eq!(
        deployment["spec"]["template"]["metadata"]["labels"]["app"],
        "inflate"
    );
    let mut cron = json!({"kind": "CronJob", "metadata": {"name": "nightly"},
        "spec": {"jobTemplate": {"spec": {"template": {"spec": {}}}}}});
    run.stamp(&mut cron);
    let pods = &cron["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"];
    assert_eq!(pods[RUN_LABEL], "r1");
    assert!(cron["spec"]["template"].is_null(), "no template made up");
}

/// Names that real clusters use, which no scenario may create: the EKS add-ons' and
/// kube-system's.
const REAL_NAMES: [&str; 8] = [
    "aws-node",
    "kube-proxy",
    "coredns",
    "ebs-csi-node",
    "ebs-csi-controller",
    "eks-pod-identity-agent",
    "karpenter",
    "metrics-server",
];

#[test]
fn no_scenario_creates_an_object_named_as_a_real_clusters() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/simulate");
    let mut scenarios = vec![(
        "the default".to_string(),
        crate::simulate::scenario::DEFAULT.to_string(),
    )];
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            scenarios.push((
                path.display().to_string(),
                std::fs::read_to_string(&path).unwrap(),
            ));
        }
    }
    for (source, text) in scenarios {
        let scenario = Scenario::parse(&text, &source).unwrap();
        for object in &scenario.objects {
            let name = object["metadata"]["name"].as_str().unwrap_or_default();
            let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
            assert!(
                !REAL_NAMES.contains(&name),
                "{source}: {} {name}",
                object["kind"]
            );
            assert!(
                !namespace.starts_with("kube-"),
                "{source}: {} {namespace}/{name}",
                object["kind"]
            );
        }
    }
}

#[tokio::test]
async fn a_node_of_anyone_else_that_appears_during_the_run_stops_it() {
    let ours = json!({RUN_LABEL: "r1"});
    let api = server(&[
        (NODES, vec![node("simulated-r1-ip-10-0-1-3", ours.clone())]),
        (CLAIMS, vec![claim("default-abcde", ours)]),
    ]);
    let mut live = live(&api, "r1");
    live.still_alone(5).await.expect("only this run's objects");
    api.lock()
        .objects
        .get_mut(NODES)
        .unwrap()
        .push(node("ip-10-0-1-2.ec2.internal", json!({})));
    let error = live
        .still_alone(10)
        .await
        .expect_err("a node of anyone else's");
    assert!(
        format!("{error:#}").contains("Node ip-10-0-1-2.ec2.internal"),
        "{error:#}"
    );
    assert_eq!(writes(&api), Vec::<String>::new());
}

/// A check that keeps failing stops the run once none has passed for a while: the run must
/// not go on without knowing what the tick would act on.
#[tokio::test]
async fn a_check_that_keeps_failing_stops_the_run() {
    use fleetwright_sim::memory::Fault;
    let api = server(&[(NODES, vec![])]);
    let mut live = live(&api, "r1");
    live.still_alone(0).await.expect("only this run's objects");
    api.lock().faults.push(Fault {
        method: "GET".into(),
        path: NODES.into(),
        status: 403,
        skip: 0,
        times: usize::MAX,
    });
    live.still_alone(5)
        .await
        .expect("one failed check is tried again");
    live.still_alone(10).await.expect("and again");
    let error = live
        .still_alone(15)
        .await
        .expect_err("no check has passed for 15 s");
    assert!(
        format!("{error:#}").contains("could not check"),
        "{error:#}"
    );
}
