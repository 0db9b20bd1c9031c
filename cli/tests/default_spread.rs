//! `fleetwright plan --scheduler-config` with Karpenter v1.15's scheduler config: the cluster's
//! default topology spread is given to the pods that declare none, with the selector
//! kube-scheduler deduces from the Services and the controller that select them; a pod with its
//! own spread keeps it; a config kube-scheduler would refuse is refused, naming the field.

mod common;

use std::collections::BTreeSet;

use common::{fleetwright, write_temp};
use serde_json::Value;

const CLUSTER: &str = r#"apiVersion: v1
kind: List
items:
- apiVersion: karpenter.sh/v1
  kind: NodePool
  metadata: {name: default}
  spec:
    template:
      spec:
        nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
        requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.xlarge, m5.2xlarge]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a, us-east-1b, us-east-1c]}
- apiVersion: karpenter.k8s.aws/v1
  kind: EC2NodeClass
  metadata: {name: default}
  spec: {role: KarpenterNodeRole, amiSelectorTerms: [{alias: al2023@latest}], subnetSelectorTerms: [{tags: {a: b}}], securityGroupSelectorTerms: [{tags: {a: b}}]}
- apiVersion: v1
  kind: Service
  metadata: {name: web, namespace: shop}
  spec:
    selector: {app: web}
    ports: [{port: 80}]
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: web, namespace: shop}
  spec:
    replicas: 6
    selector: {matchLabels: {app: web}}
    template:
      metadata: {labels: {app: web}}
      spec:
        containers: [{name: web, image: nginx, resources: {requests: {cpu: 500m, memory: 512Mi}}}]
"#;

const ZONE_DEFAULT: &str = "podTopologySpread:
  defaultConstraints:
  - maxSkew: 1
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: DoNotSchedule
";

fn plan(extra: &[&str]) -> Value {
    let cluster = write_temp("default-spread.yaml", CLUSTER);
    let mut args = vec!["plan", "--cluster", &cluster, "-o", "json"];
    args.extend_from_slice(extra);
    let out = fleetwright(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stderr: {stderr}");
    serde_json::from_slice(&out.stdout).expect("JSON")
}

/// The JSON plan of `text` under the scheduler config at `config`; it must succeed.
fn plan_with(name: &str, text: &str, config: &str) -> Value {
    let cluster = write_temp(name, text);
    let out = fleetwright(&[
        "plan",
        "--cluster",
        &cluster,
        "-o",
        "json",
        "--scheduler-config",
        config,
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stderr: {stderr}");
    serde_json::from_slice(&out.stdout).expect("JSON")
}

/// The zones the plan's NodeClaims are pinned to.
fn zones(plan: &Value) -> BTreeSet<String> {
    plan["nodeclaims"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| {
            let zones = c["zones"].as_array()?;
            (zones.len() == 1).then(|| zones[0].as_str().unwrap().to_string())
        })
        .collect()
}

#[test]
fn a_default_zone_spread_spreads_a_deployment_that_declares_none() {
    let without = plan(&[]);
    assert!(
        zones(&without).len() <= 1,
        "without a default the six pods pack together: {without}"
    );
    let config = write_temp("scheduler-config.yaml", ZONE_DEFAULT);
    let with = plan(&["--scheduler-config", &config]);
    assert_eq!(
        zones(&with).len(),
        3,
        "two pods a zone, as kube-scheduler will bind them: {with}"
    );
}

#[test]
fn a_pod_that_declares_its_own_spread_keeps_it() {
    let own = CLUSTER.replace(
        "containers: [{name: web",
        "topologySpreadConstraints: [{maxSkew: 6, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: web}}}]\n        containers: [{name: web",
    );
    let config = write_temp("scheduler-config-own.yaml", ZONE_DEFAULT);
    let plan = plan_with("own-spread.yaml", &own, &config);
    assert!(
        zones(&plan).len() <= 1,
        "its own spread, not the default: {plan}"
    );
}

#[test]
fn a_config_kube_scheduler_would_refuse_is_refused_naming_the_field() {
    let config = write_temp(
        "bad-scheduler-config.yaml",
        "podTopologySpread:\n  defaultConstraints:\n  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: web}}}\n",
    );
    let cluster = write_temp("default-spread-bad.yaml", CLUSTER);
    let out = fleetwright(&["plan", "--cluster", &cluster, "--scheduler-config", &config]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("podTopologySpread.defaultConstraints[0].labelSelector"),
        "{stderr}"
    );
}

/// Pending pods of a Deployment as `kubectl get pods,deployments` dumps them: owned by a
/// ReplicaSet the file lacks, with no Service. The Deployment's selector and the pods'
/// `pod-template-hash` stand for the ReplicaSet's, as the Deployment controller makes it; with
/// the Deployment missing too, nothing can be deduced and the pods are not spread.
#[test]
fn pods_of_a_deployment_whose_replicaset_is_not_in_the_dump_are_spread_by_the_deployment() {
    let pools = CLUSTER
        .split("- apiVersion: v1\n  kind: Service")
        .next()
        .unwrap();
    let pods: String = (0..6)
        .map(|i| {
            format!(
                r#"- apiVersion: v1
  kind: Pod
  metadata:
    name: web-7d4b9c6f5-{i}
    namespace: shop
    labels: {{app: web, pod-template-hash: 7d4b9c6f5}}
    ownerReferences: [{{apiVersion: apps/v1, kind: ReplicaSet, name: web-7d4b9c6f5, uid: u1, controller: true}}]
  spec:
    containers: [{{name: web, image: nginx, resources: {{requests: {{cpu: 500m, memory: 512Mi}}}}}}]
  status:
    phase: Pending
    conditions: [{{type: PodScheduled, status: "False", reason: Unschedulable}}]
"#
            )
        })
        .collect();
    let deployment = r#"- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: web, namespace: shop}
  spec:
    replicas: 6
    selector: {matchLabels: {app: web}}
    template:
      metadata: {labels: {app: web}}
      spec:
        containers: [{name: web, image: nginx, resources: {requests: {cpu: 500m, memory: 512Mi}}}]
"#;
    let config = write_temp("scheduler-config-rs.yaml", ZONE_DEFAULT);
    let run = |name: &str, text: String| plan_with(name, &text, &config);
    let with_deployment = run(
        "pods-and-deployment.yaml",
        format!("{pools}{pods}{deployment}"),
    );
    assert_eq!(zones(&with_deployment).len(), 3, "{with_deployment}");
    assert_eq!(
        with_deployment["nodeclaims"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["pods"].as_array().unwrap().len())
            .sum::<usize>(),
        6
    );
    let pods_only = run("pods-only.yaml", format!("{pools}{pods}"));
    assert!(zones(&pods_only).len() <= 1, "{pods_only}");
    let cluster = write_temp("pods-only-note.yaml", &format!("{pools}{pods}"));
    let out = fleetwright(&["plan", "--cluster", &cluster, "--scheduler-config", &config]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("6 pending pod(s) get no default topology spread"),
        "the user is told why: {stderr}"
    );
}
