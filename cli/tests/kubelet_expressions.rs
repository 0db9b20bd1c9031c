//! `fleetwright plan` on Karpenter v1.15 EC2NodeClasses whose kubelet settings are CEL
//! expressions (`maxPods: "min(vcpus * 8, 110)"`): the pod density per instance type changes
//! the plan, the `NodeClassCEL` gate is off unless asked for, and a class whose expression is
//! wrong is named and left out while the other pools plan.

mod common;

use common::{fleetwright, write_temp};
use serde_json::Value;

/// A NodePool of on-demand m5.large nodes of class `class`, with `weight`.
fn pool(name: &str, class: &str, weight: u32) -> String {
    format!(
        r#"- apiVersion: karpenter.sh/v1
  kind: NodePool
  metadata: {{name: {name}}}
  spec:
    weight: {weight}
    template:
      spec:
        nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: {class}}}
        requirements:
        - {{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}}
        - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
"#
    )
}

/// An EC2NodeClass with `kubelet` as its settings (YAML flow mapping), or none.
fn class(name: &str, kubelet: Option<&str>) -> String {
    let kubelet = kubelet
        .map(|k| format!(", kubelet: {k}"))
        .unwrap_or_default();
    format!(
        r#"- apiVersion: karpenter.k8s.aws/v1
  kind: EC2NodeClass
  metadata: {{name: {name}}}
  spec: {{role: KarpenterNodeRole, amiSelectorTerms: [{{alias: al2023@latest}}], subnetSelectorTerms: [{{tags: {{a: b}}}}], securityGroupSelectorTerms: [{{tags: {{a: b}}}}]{kubelet}}}
"#
    )
}

/// Forty pending pods of 10m CPU: pod density, not CPU, decides how many nodes they need.
fn tiny_pods() -> String {
    (0..40)
        .map(|i| {
            format!(
                r#"- apiVersion: v1
  kind: Pod
  metadata: {{name: tiny-{i}, namespace: default}}
  spec:
    containers: [{{name: c, image: nginx, resources: {{requests: {{cpu: 10m, memory: 16Mi}}}}}}]
"#
            )
        })
        .collect()
}

fn dump(items: &[String]) -> String {
    format!("apiVersion: v1\nkind: List\nitems:\n{}", items.concat())
}

/// The plan of a dump, and what was said on stderr. A dump whose every object can be used
/// exits 0; one with an EC2NodeClass set aside still prints the plan of the others, and exits
/// non-zero.
fn plan(name: &str, text: &str, extra: &[&str]) -> (Value, String) {
    let path = write_temp(name, text);
    let mut args = vec!["plan", "--cluster", &path, "--now", "2026-11-22T09:00:00Z"];
    args.extend_from_slice(extra);
    let out = fleetwright(&args);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let set_aside = stderr.contains("could not be used");
    assert_eq!(out.status.success(), !set_aside, "stderr: {stderr}");
    (serde_json::from_slice(&out.stdout).expect("JSON"), stderr)
}

/// Pods per planned NodeClaim, by pool.
fn pods_per_claim(plan: &Value) -> Vec<(String, usize)> {
    plan["nodeclaims"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["nodepool"].as_str().unwrap().to_string(),
                c["pods"].as_array().unwrap().len(),
            )
        })
        .collect()
}

#[test]
fn a_max_pods_expression_sets_the_pod_density_of_each_node() {
    let fixed = dump(&[
        pool("default", "default", 1),
        class("default", None),
        tiny_pods(),
    ]);
    let (plan_fixed, _) = plan("eni-limited.yaml", &fixed, &[]);
    // ENI-limited, an m5.large holds 29 pods: two nodes for forty.
    let claims = pods_per_claim(&plan_fixed);
    assert_eq!(claims.len(), 2, "{claims:?}");
    assert!(claims.iter().all(|(_, pods)| *pods <= 29), "{claims:?}");

    let expression = dump(&[
        pool("default", "default", 1),
        class("default", Some(r#"{maxPods: "min(vcpus * 8, 110)"}"#)),
        tiny_pods(),
    ]);
    let (plan_cel, _) = plan("max-pods-cel.yaml", &expression, &["--node-class-cel"]);
    // 2 vCPUs × 8 = 16 pods per m5.large: three nodes for forty.
    let claims = pods_per_claim(&plan_cel);
    assert_eq!(claims.len(), 3, "{claims:?}");
    assert!(claims.iter().all(|(_, pods)| *pods <= 16), "{claims:?}");
    assert_eq!(claims.iter().map(|(_, p)| p).sum::<usize>(), 40);
}

#[test]
fn without_the_gate_a_class_with_an_expression_is_not_ready_and_says_how_to_turn_it_on() {
    let text = dump(&[
        pool("cel", "cel", 50),
        pool("default", "default", 1),
        class("cel", Some(r#"{maxPods: "min(vcpus * 8, 110)"}"#)),
        class("default", None),
        tiny_pods(),
    ]);
    let (plan, stderr) = plan("gate-off.yaml", &text, &[]);
    assert!(
        stderr.contains("1 object(s) of the input could not be used"),
        "a class set aside makes the exit non-zero: {stderr}"
    );
    assert!(
        stderr.contains("EC2NodeClass cel: field spec.kubelet.maxPods")
            && stderr.contains("NodeClassCEL")
            && stderr.contains("--node-class-cel"),
        "{stderr}"
    );
    let claims = pods_per_claim(&plan);
    assert!(
        !claims.is_empty() && claims.iter().all(|(p, _)| p == "default"),
        "{claims:?}"
    );
}

#[test]
fn an_invalid_expression_is_named_and_the_other_pool_still_plans() {
    let text = dump(&[
        pool("web", "web", 50),
        pool("default", "default", 1),
        class("web", Some(r#"{maxPods: "vcpus * 1.5"}"#)),
        class("default", None),
        tiny_pods(),
    ]);
    let (plan, stderr) = plan("invalid-cel.yaml", &text, &["--node-class-cel"]);
    assert!(
        stderr.contains("1 object(s) of the input could not be used"),
        "a class set aside makes the exit non-zero: {stderr}"
    );
    assert!(
        stderr.contains(
            "EC2NodeClass web: field spec.kubelet.maxPods: invalid CEL expression \"vcpus * 1.5\""
        ) && stderr.contains("found no matching overload for '_*_' applied to '(int, double)'"),
        "{stderr}"
    );
    let claims = pods_per_claim(&plan);
    assert!(
        !claims.is_empty() && claims.iter().all(|(p, _)| p == "default"),
        "{claims:?}"
    );
    assert_eq!(claims.iter().map(|(_, p)| p).sum::<usize>(), 40);
}

#[test]
fn an_expression_that_fails_for_an_instance_type_names_it_and_the_other_pool_still_plans() {
    let text = dump(&[
        pool("web", "web", 50),
        pool("default", "default", 1),
        class(
            "web",
            Some(r#"{maxPods: "110", kubeReserved: {memory: "memory_mib / (vcpus - 2)"}}"#),
        ),
        class("default", None),
        tiny_pods(),
    ]);
    let (plan, stderr) = plan("failing-cel.yaml", &text, &["--node-class-cel"]);
    assert!(
        stderr.contains("1 object(s) of the input could not be used"),
        "a class set aside makes the exit non-zero: {stderr}"
    );
    assert!(
        stderr.contains(
            "EC2NodeClass web: field spec.kubelet.kubeReserved.memory: for instance type"
        ) && stderr.to_lowercase().contains("division by zero"),
        "{stderr}"
    );
    let claims = pods_per_claim(&plan);
    assert!(
        !claims.is_empty() && claims.iter().all(|(p, _)| p == "default"),
        "{claims:?}"
    );
}
