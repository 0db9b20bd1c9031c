//! What the API server would refuse in a file written by hand, through the built binary: each
//! such object is named with its field and left out (or, for an EC2NodeClass without its
//! selector terms, warned about), and every other object is still planned. A document that is
//! not YAML is one such object too, and a scenario's objects are all checked before it runs.

mod common;

use common::{fleetwright, repo, write_temp};
use serde_json::Value;

const CLASS: &str = "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: default}\nspec:\n  amiSelectorTerms: [{alias: al2023@latest}]\n  role: R\n  subnetSelectorTerms: [{tags: {k: v}}]\n  securityGroupSelectorTerms: [{tags: {k: v}}]\n";

const POOL: &str = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: default}\nspec:\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n      requirements: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]\n";

fn pod(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default}}\nspec:\n{spec}"
    )
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).to_string()
}

fn planned_pods(out: &std::process::Output) -> Vec<String> {
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut pods: Vec<String> = (plan["nodeclaims"].as_array().unwrap().iter())
        .flat_map(|c| c["pods"].as_array().unwrap().iter())
        .map(|p| p.as_str().unwrap().to_string())
        .collect();
    pods.sort();
    pods
}

/// Each object below is one the API server refuses; the good pod beside them is planned, and
/// the command exits 1 once it has printed the plan.
#[test]
fn objects_the_api_server_refuses_are_named_and_the_rest_is_planned() {
    let cpu = "  containers: [{name: c, resources: {requests: {cpu: \"1\"}}}]\n";
    let text = [
        CLASS.to_string(),
        POOL.to_string(),
        pod("good", cpu),
        pod("empty", "  containers: []\n"),
        pod(
            "over",
            "  containers: [{name: c, resources: {requests: {cpu: \"2\"}, limits: {cpu: \"1\"}}}]\n",
        ),
        pod(
            "equals",
            &format!("{cpu}  tolerations: [{{key: team, operator: Equals, value: a}}]\n"),
        ),
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: default}\nspec:\n  replicas: 2\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: api}}\n    spec:\n      containers: [{name: c, resources: {requests: {cpu: \"1\"}}}]\n".to_string(),
        "kind: Pod\n  metadata: broken\n spec: [\n".to_string(),
    ]
    .join("---\n");
    let out = fleetwright(&["plan", "--cluster", &write_temp("refused.yaml", &text)]);
    let err = stderr(&out);
    for expected in [
        "Pod default/empty: field spec.containers: required",
        "Pod default/over: field spec.containers[0].resources.requests: cpu \"2\" must be less than or equal to its limit \"1\"",
        "Pod default/equals: field spec.tolerations[0].operator: \"Equals\" is not one of \"Equal\", \"Exists\"",
        "Deployment default/web: field spec.template.metadata.labels: the selector does not select them",
        "(document 8): not YAML:",
    ] {
        assert!(err.contains(expected), "{expected} not in:\n{err}");
    }
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(planned_pods(&out), ["default/good"], "{err}");
}

/// An EC2NodeClass without the selector terms its CRD requires is planned from (they change
/// nothing a plan computes) with a warning per field, and `--strict` refuses it.
#[test]
fn a_nodeclass_without_its_required_terms_is_warned_about_and_strict_refuses_it() {
    let class = "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: default}\nspec:\n  amiFamily: AL2023\n  amiSelectorTerms: [{id: ami-0123456789abcdef0}]\n  role: R\n";
    let cpu = "  containers: [{name: c, resources: {requests: {cpu: \"1\"}}}]\n";
    let text = [class.to_string(), POOL.to_string(), pod("good", cpu)].join("---\n");
    let file = write_temp("no-subnets.yaml", &text);
    let out = fleetwright(&["plan", "--cluster", &file]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    for field in [
        "spec.subnetSelectorTerms",
        "spec.securityGroupSelectorTerms",
    ] {
        let warning = format!("EC2NodeClass default: field {field}: required by Karpenter's CRD");
        assert!(err.contains(&warning), "{warning} not in:\n{err}");
    }
    assert!(!err.contains("spec.amiFamily"), "{err}");
    assert_eq!(planned_pods(&out), ["default/good"]);
    let strict = fleetwright(&["--strict", "plan", "--cluster", &file]);
    assert_eq!(strict.status.code(), Some(1), "{}", stderr(&strict));
}

/// A scenario's workload whose template does not convert is named before the run starts, even
/// at zero replicas (the timeline scales it up later), rather than warned about on every tick.
#[test]
fn a_scenario_with_an_object_that_does_not_read_is_refused_before_it_runs() {
    let text = std::fs::read_to_string(repo("examples/simulate/inflate.yaml")).unwrap();
    let bad = text.replacen("requests: {cpu: \"1\"}", "requests: {cpu: \"one\"}", 1);
    assert_ne!(bad, text, "the example has a `cpu: \"1\"` request to break");
    let file = write_temp("inflate-bad-cpu.yaml", &bad);
    let out = fleetwright(&["simulate", "--scenario", &file, "--speed", "0"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("Deployment default/inflate: field spec.template.spec.containers[0]"),
        "{err}"
    );
    assert!(err.contains("\"one\""), "{err}");
}
