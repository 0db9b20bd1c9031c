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
        "refused.yaml: document 8: not YAML:",
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
        let warning =
            format!("EC2NodeClass default: field {field}: required, so `kubectl apply` refuses");
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

/// An object the timeline applies is read before the run as the scenario's own are: a bad
/// operator stops the run with the object, field and step named; a misspelt key warns, and
/// `--strict` refuses it.
#[test]
fn an_object_the_timeline_applies_is_checked_before_the_run() {
    let text = std::fs::read_to_string(repo("examples/simulate/requirements-drift.yaml")).unwrap();
    let anchor =
        "          - {key: karpenter.k8s.aws/instance-size, operator: In, values: [\"xlarge\"]}";
    assert!(
        text.contains(anchor),
        "the example applies a NodePool with a size requirement"
    );
    let bad = text.replacen(
        anchor,
        &anchor.replace("operator: In", "operator: Within"),
        1,
    );
    let out = fleetwright(&[
        "simulate",
        "--scenario",
        &write_temp("apply-bad.yaml", &bad),
        "--speed",
        "0",
    ]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("NodePool general") && err.contains("\"Within\""),
        "{err}"
    );
    assert!(
        err.contains("once the timeline applies NodePool general at 180s"),
        "{err}"
    );

    let typo = text.replacen(
        "      disruption:\n        consolidationPolicy: WhenEmpty\n        consolidateAfter: 1m",
        "      disruption:\n        consolidationPolicy: WhenEmpty\n        consolidateAftr: 1m",
        1,
    );
    assert_ne!(
        typo, text,
        "the applied NodePool has a consolidateAfter to misspell"
    );
    let file = write_temp("apply-typo.yaml", &typo);
    let out = fleetwright(&["--strict", "simulate", "--scenario", &file, "--speed", "0"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("NodePool general: field spec.disruption.consolidateAftr"),
        "{err}"
    );
}

/// `--strict` names the objects set aside as well as the keys it refuses, all in one run; a
/// NodePool without a `nodeClassRef` says that field is required; a workload at zero replicas
/// is checked as the API server checks it; `plan --actions` exits 1 on the same input as `plan`;
/// `explain` on a pod that was set aside says so.
#[test]
fn every_problem_is_named_in_one_run_whatever_the_verb() {
    let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: default}\nspec:\n  replicas: 0\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: api}}\n    spec:\n      containers: [{name: c}]\n";
    let orphan = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: classless}\nspec:\n  template:\n    spec:\n      requirements: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]\n";
    let text = [
        CLASS.to_string(),
        POOL.replace("requirements:", "requirments:"),
        pod("over", "  containers: [{name: c, resources: {requests: {cpu: \"2\"}, limits: {cpu: \"1\"}}}]\n"),
        deployment.to_string(),
        orphan.to_string(),
    ]
    .join("---\n");
    let file = write_temp("every-problem.yaml", &text);
    let strict = fleetwright(&["--strict", "plan", "--cluster", &file]);
    let err = stderr(&strict);
    assert_eq!(strict.status.code(), Some(1), "{err}");
    for expected in [
        "Pod default/over: field spec.containers[0].resources.requests",
        "Deployment default/web: field spec.template.metadata.labels",
        "spec.template.spec.requirments",
    ] {
        assert!(err.contains(expected), "{expected} not in:\n{err}");
    }
    let actions = fleetwright(&["plan", "--actions", "--cluster", &file]);
    let err = stderr(&actions);
    assert_eq!(actions.status.code(), Some(1), "{err}");
    assert!(
        err.contains("NodePool \"classless\": spec.template.spec.nodeClassRef: required"),
        "{err}"
    );
    let explain = fleetwright(&["explain", "--cluster", &file, "--pod", "default/over"]);
    let err = stderr(&explain);
    assert!(
        err.contains("it is in") && err.contains("was left out"),
        "{err}"
    );
}

/// An object without `apiVersion` is warned about, and a file with no object says so.
#[test]
fn a_missing_api_version_and_an_empty_file_are_named() {
    let text = pod("p", "  containers: [{name: c}]\n").replace("apiVersion: v1\n", "");
    let out = fleetwright(&["plan", "--cluster", &write_temp("no-version.yaml", &text)]);
    assert!(
        stderr(&out).contains("Pod default/p: field apiVersion: required"),
        "{}",
        stderr(&out)
    );
    let out = fleetwright(&[
        "plan",
        "--cluster",
        &write_temp("empty.yaml", "# nothing yet\n"),
    ]);
    assert!(stderr(&out).contains("no object in it"), "{}", stderr(&out));
}
