//! Keys the readers would drop without a word, through the built binary: misspelt and
//! duplicated keys in the seed documents' YAML as posted are warnings naming the object and the
//! path, `--strict` makes them errors, and no field of Karpenter's own CRDs, nor any fixture or
//! example, is taken for a typo.

mod common;

use common::{fixture, fleetwright, repo, write_temp};
use serde_json::Value;

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).to_string()
}

fn warnings(out: &std::process::Output) -> Vec<String> {
    stderr(out)
        .lines()
        .filter(|l| l.starts_with("warning:"))
        .map(str::to_string)
        .collect()
}

#[test]
fn a_misspelt_limits_key_is_named_and_strict_refuses_it() {
    let file = fixture("as-posted/t4g-limit.yaml");
    let out = fleetwright(&["plan", "--cluster", &file, "--output", "table"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let found = warnings(&out);
    assert!(
        found[0].contains("NodePool default: field spec.limit: unknown key"),
        "{found:?}"
    );
    assert!(found.last().unwrap().contains("--strict"), "{found:?}");

    let strict = fleetwright(&["--strict", "plan", "--cluster", &file]);
    assert_eq!(strict.status.code(), Some(1), "{}", stderr(&strict));
    let err = stderr(&strict);
    assert!(
        err.contains("--strict") && err.contains("NodePool default: field spec.limit"),
        "{err}"
    );
    assert!(
        strict.stdout.is_empty(),
        "no plan is printed under --strict"
    );

    let explain = fleetwright(&[
        "--strict",
        "explain",
        "--cluster",
        &file,
        "--pod",
        "default/api-7d9f8c6b5-00000",
    ]);
    assert_eq!(explain.status.code(), Some(1), "{}", stderr(&explain));
}

#[test]
fn a_duplicated_requirements_key_is_named_by_convert_and_plan() {
    let file = fixture("as-posted/karpenter-default-duplicate.yaml");
    for verb in [vec!["convert", &file], vec!["plan", "--cluster", &file]] {
        let out = fleetwright(&verb);
        let found = warnings(&out);
        assert!(
            found.iter().any(|w| w
                .contains("Provisioner karpenter-default: field spec.requirements: duplicate key")),
            "{verb:?}: {found:?}"
        );
        let mut strict = vec!["--strict"];
        strict.extend(&verb);
        let refused = fleetwright(&strict);
        assert_eq!(refused.status.code(), Some(1), "{verb:?}");
        assert!(stderr(&refused).contains("spec.requirements: duplicate key"));
    }
}

#[test]
fn misspelt_keys_anywhere_in_a_nodepool_are_each_named() {
    let pool = [
        r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: typos}
spec:
  disruptions: {consolidationPolicy: WhenEmpty}
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirments:
      - {key: kubernetes.io/arch, operator: In, values: [amd64]}
      taints:
      - {key: a, effect: NoSchedule, vaule: b}
---
"#,
        NODE_CLASS,
        r#"  blockDeviceMapings: []
---
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default}
spec:
  containers:
  - name: c
    resorces: {requests: {cpu: "1"}}
"#,
    ]
    .concat();
    let file = write_temp("typos.yaml", &pool);
    let out = fleetwright(&["plan", "--cluster", &file]);
    let found = warnings(&out).join("\n");
    for expected in [
        "NodePool typos: field spec.disruptions: unknown key",
        "NodePool typos: field spec.template.spec.requirments: unknown key",
        "NodePool typos: field spec.template.spec.taints[0].vaule: unknown key",
        "EC2NodeClass default: field spec.blockDeviceMapings: unknown key",
        "Pod default/p: field spec.containers[0].resorces: unknown key",
    ] {
        assert!(found.contains(expected), "{expected} not in:\n{found}");
    }
}

#[test]
fn a_misspelt_key_in_a_scenario_is_named_and_strict_refuses_the_run() {
    let text = std::fs::read_to_string(repo("examples/simulate/inflate.yaml")).unwrap();
    let typo = text.replacen("consolidateAfter:", "consolidateAftr:", 1);
    assert_ne!(typo, text, "the example has a consolidateAfter to misspell");
    let file = write_temp("inflate-typo.yaml", &typo);
    let out = fleetwright(&["--strict", "simulate", "--scenario", &file, "--speed", "0"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("field spec.disruption.consolidateAftr: unknown key"),
        "{err}"
    );
}

/// The EC2NodeClass every NodePool of these tests refers to.
const NODE_CLASS: &str = r#"apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  amiSelectorTerms: [{alias: al2023@latest}]
  role: R
  subnetSelectorTerms: [{tags: {k: v}}]
  securityGroupSelectorTerms: [{tags: {k: v}}]
"#;

/// One object per Karpenter v1.15.0 CRD with every property its schema declares
/// (scripts/karpenter-all-fields.py): none is a typo. The same file with one key misspelt
/// warns, so the check reads what it should.
#[test]
fn no_field_of_karpenters_crds_is_taken_for_a_typo() {
    let file = fixture("karpenter-v1.15-all-fields.json");
    let out = fleetwright(&["plan", "--cluster", &file]);
    assert_eq!(warnings(&out), Vec::<String>::new());
    let kinds: Vec<Value> = serde_json::from_str::<Value>(&std::fs::read_to_string(&file).unwrap())
        .unwrap()["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["kind"].clone())
        .collect();
    assert_eq!(
        kinds,
        ["EC2NodeClass", "NodeClaim", "NodeOverlay", "NodePool"]
    );

    let text = std::fs::read_to_string(&file).unwrap();
    let typo = write_temp(
        "all-fields-typo.json",
        &text.replacen("\"expireAfter\"", "\"expireAftr\"", 1),
    );
    let out = fleetwright(&["plan", "--cluster", &typo]);
    assert!(
        warnings(&out).iter().any(|w| w.contains("expireAftr")),
        "{}",
        stderr(&out)
    );
}

#[test]
fn no_fixture_or_example_warns() {
    let mut files: Vec<String> = Vec::new();
    for dir in [
        "cli/tests/fixtures",
        "shared/kube/tests/fixtures/karpenter-v1",
    ] {
        for entry in std::fs::read_dir(repo(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "yaml") {
                files.push(path.display().to_string());
            }
        }
    }
    files.push(repo("examples/inflate.yaml"));
    assert!(files.len() > 10, "{files:?}");
    for file in files {
        let out = fleetwright(&["plan", "--cluster", &file]);
        assert_eq!(warnings(&out), Vec::<String>::new(), "{file}");
    }
    for entry in std::fs::read_dir(repo("examples/simulate")).unwrap() {
        let file = entry.unwrap().path().display().to_string();
        let text = std::fs::read_to_string(&file).unwrap();
        // Parse only: a scenario's warnings come before its first simulated second.
        let short = write_temp("short.yaml", &set_duration(&text, "1s"));
        let out = fleetwright(&["--strict", "simulate", "--scenario", &short, "--speed", "0"]);
        assert!(
            !stderr(&out).contains("--strict"),
            "{file}: {}",
            stderr(&out)
        );
    }
}

/// The scenario with its duration replaced.
fn set_duration(text: &str, duration: &str) -> String {
    text.lines()
        .map(|l| {
            if l.starts_with("duration:") {
                format!("duration: {duration}")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Metadata written at the top level of an object (`name:` beside `kind:`) names the object by
/// that name and says where the key belongs; the pending pod's reason does not claim that no
/// NodePool exists.
#[test]
fn metadata_flattened_to_the_top_level_is_named_with_where_it_belongs() {
    let text = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
name: default
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
name: default
labels: {team: web}
spec: {role: R, amiSelectorTerms: [{alias: al2023@latest}]}
---
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers: [{name: c, resources: {requests: {cpu: "1"}}}]
"#;
    let out = fleetwright(&["plan", "--cluster", &write_temp("flat.yaml", text)]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    for expected in [
        "NodePool default: field metadata.name: missing: `name` is written at the top level of the object, and belongs under `metadata:`",
        "EC2NodeClass default: field metadata.name: missing: `name`, `labels` are written at the top level of the object, and belong under",
    ] {
        assert!(err.contains(expected), "{expected} not in:\n{err}");
    }
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let reason = plan["unschedulable"][0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("nodepool \"default\" is not planned: it does not read")
            && reason.contains("metadata.name"),
        "{reason}"
    );
}

#[test]
fn a_kind_misspelt_in_case_and_v1beta1_leftovers_are_named_with_what_was_meant() {
    let text = r#"
apiVersion: karpenter.sh/v1
kind: Nodepool
metadata: {name: lower}
spec: {template: {spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}}}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: migrated}
spec:
  disruption: {expireAfter: 720h}
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      kubelet: {maxPods: 110}
"#;
    let file = write_temp("kinds.yaml", text);
    let found = warnings(&fleetwright(&["plan", "--cluster", &file])).join("\n");
    for expected in [
        "Nodepool lower: field kind: not a kind Fleetwright reads, so the object is ignored (did you mean NodePool?)",
        "NodePool migrated: field spec.template.spec.kubelet: not read by Karpenter v1, so it is ignored: in v1 the kubelet settings are the EC2NodeClass's spec.kubelet",
        "NodePool migrated: field spec.disruption.expireAfter: not read by Karpenter v1, so it is ignored: in v1 it is spec.template.spec.expireAfter",
    ] {
        assert!(found.contains(expected), "{expected} not in:\n{found}");
    }
}

#[test]
fn yaml_merge_keys_are_applied_as_kubectl_applies_them() {
    let text = [
        r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: merged}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - &arch {key: kubernetes.io/arch, operator: In, values: [arm64]}
      - <<: *arch
        key: karpenter.sh/capacity-type
        values: [on-demand]
---
"#,
        NODE_CLASS,
        r#"---
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default}
spec:
  containers: [{name: c, resources: {requests: {cpu: 500m}}}]
"#,
    ]
    .concat();
    let file = write_temp("merge.yaml", &text);
    let out = fleetwright(&["--strict", "plan", "--cluster", &file]);
    assert!(out.status.success(), "{}", stderr(&out));
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let claim = &plan["nodeclaims"][0];
    assert_eq!(
        claim["capacityTypes"],
        serde_json::json!(["on-demand"]),
        "{claim}"
    );
}

/// A misspelt key in a legacy Provisioner is an unknown key like any other: `convert` names it,
/// and `--strict` refuses it (the spot requirement it held is not silently lost).
#[test]
fn a_misspelt_key_in_a_legacy_provisioner_is_named_and_strict_refuses_it() {
    let legacy = r#"
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata: {name: default}
spec:
  providerRef: {name: default}
  requirments:
  - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}
"#;
    let file = write_temp("legacy-typo.yaml", legacy);
    let out = fleetwright(&["convert", &file]);
    assert!(out.status.success(), "{}", stderr(&out));
    let found = warnings(&out).join("\n");
    assert!(
        found.contains("Provisioner default: field spec.requirments: unknown key"),
        "{found}"
    );
    let strict = fleetwright(&["--strict", "convert", &file]);
    assert_eq!(strict.status.code(), Some(1), "{}", stderr(&strict));
    assert!(stderr(&strict).contains("spec.requirments"));
}

/// A kind a letter or two off a kind Fleetwright reads is named with the kind meant, and a
/// NodePool whose class reference names another kind or group is set aside with its field.
#[test]
fn a_misspelt_kind_and_a_class_reference_to_another_kind_are_named() {
    let text = r#"
apiVersion: apps/v1
kind: Deploymnet
metadata: {name: web}
spec: {replicas: 4, selector: {matchLabels: {app: web}}, template: {metadata: {labels: {app: web}}, spec: {containers: [{name: c}]}}}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: odd}
spec: {template: {spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClas, name: default}}}}
"#;
    let out = fleetwright(&["plan", "--cluster", &write_temp("kind-typo.yaml", text)]);
    let err = stderr(&out);
    assert!(err.contains("(did you mean Deployment?)"), "{err}");
    assert!(
        err.contains("NodePool odd: field spec.template.spec.nodeClassRef.kind: \"EC2NodeClas\" is not EC2NodeClass"),
        "{err}"
    );
    assert_eq!(out.status.code(), Some(1));

    // A group with a version after it is read as ours, with a warning: Karpenter's CRD refuses
    // it, so `kubectl apply` would fail.
    let versioned = text.replace(
        "group: karpenter.k8s.aws, kind: EC2NodeClas,",
        "group: karpenter.k8s.aws/v1, kind: EC2NodeClass,",
    );
    let out = fleetwright(&[
        "plan",
        "--cluster",
        &write_temp("versioned.yaml", &versioned),
    ]);
    let found = warnings(&out).join("\n");
    assert!(
        found.contains(
            "NodePool odd: field spec.template.spec.nodeClassRef.group: a group takes no version"
        ),
        "{found}"
    );
    assert!(
        !stderr(&out).contains("is not EC2NodeClass"),
        "{}",
        stderr(&out)
    );
}

/// Two objects of one kind and name: the last is read, as `kubectl apply` leaves it, and the
/// one dropped is named, so its pod's demand is not counted twice.
#[test]
fn a_duplicated_object_is_named_and_only_the_last_is_read() {
    let pod = |cpu: &str, namespace: &str| {
        format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: web{namespace}}}\nspec:\n  containers: [{{name: c, resources: {{requests: {{cpu: \"{cpu}\"}}}}}}]\n")
    };
    let text = [pod("1", ""), pod("2", ", namespace: default")].join("---\n");
    let out = fleetwright(&["plan", "--cluster", &write_temp("dup-pods.yaml", &text)]);
    let found = warnings(&out).join("\n");
    assert!(
        found.contains("Pod web: field metadata.name: duplicate object"),
        "{found}"
    );
    // No NodePool in the file: the one pod read is left pending, once.
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let pending = plan["unschedulable"].as_array().unwrap();
    assert_eq!(pending.len(), 1, "{plan}");
}

/// What Karpenter's CRDs refuse in an object written by hand is named with its field, and only
/// that object is set aside: a class with both a role and an instance profile, an AMI family
/// that does not exist, a negative `maxPods`, a NodePool weight past 100.
#[test]
fn what_karpenters_crds_refuse_is_named_with_its_field() {
    let class = |name: &str, extra: &str| {
        format!("apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {{name: {name}}}\nspec:\n  role: R\n  amiSelectorTerms: [{{alias: al2023@latest}}]\n{extra}")
    };
    let pool = |name: &str, class: &str, extra: &str| {
        format!("apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {{name: {name}}}\nspec:\n{extra}  template:\n    spec:\n      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: {class}}}\n")
    };
    let text = [
        class("both", "  instanceProfile: P\n"),
        class("family", "  amiFamily: AL2024\n"),
        class("pods", "  kubelet: {maxPods: -5}\n"),
        class("good", ""),
        pool("heavy", "good", "  weight: 500\n"),
        pool("fine", "good", ""),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, resources: {requests: {cpu: \"1\"}}}]\n".into(),
    ]
    .join("---\n");
    let out = fleetwright(&["plan", "--cluster", &write_temp("crd-rules.yaml", &text)]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    for expected in [
        "EC2NodeClass both: field spec: must specify exactly one of role and instanceProfile",
        "EC2NodeClass family: field spec.amiFamily: \"AL2024\" is not one of",
        "EC2NodeClass pods: field spec.kubelet.maxPods: -5 is below 0",
        "NodePool heavy: field spec.weight: 500 is outside 1–100",
    ] {
        assert!(err.contains(expected), "{expected} not in:\n{err}");
    }
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(plan["nodeclaims"][0]["nodepool"], "fine", "{plan}");
}

/// Another provider's objects are not Fleetwright's: an EKS Auto Mode NodePool (its class an
/// `eks.amazonaws.com` NodeClass) is ignored with a note and plans nothing, its NodeClass is
/// not taken for a misspelt NodeClaim, and another tool's kinds with top-level keys (a
/// kustomization) are no error. A Deployment given twice stands for its replicas once.
#[test]
fn another_providers_objects_are_ignored_and_a_workload_given_twice_counts_once() {
    let text = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general-purpose}
spec:
  template:
    spec:
      nodeClassRef: {group: eks.amazonaws.com, kind: NodeClass, name: default}
---
apiVersion: eks.amazonaws.com/v1
kind: NodeClass
metadata: {name: default}
spec: {role: R}
---
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: web
resources: [deploy.yaml]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec: {replicas: 2, selector: {matchLabels: {app: web}}, template: {metadata: {labels: {app: web}}, spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec: {replicas: 3, selector: {matchLabels: {app: web}}, template: {metadata: {labels: {app: web}}, spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}}
"#;
    let out = fleetwright(&["plan", "--cluster", &write_temp("auto-mode.yaml", text)]);
    assert!(out.status.success(), "{}", stderr(&out));
    let found = warnings(&out).join("\n");
    assert!(
        stderr(&out).contains("note: NodePool general-purpose: field spec.template.spec.nodeClassRef: another provider's class"),
        "{}",
        stderr(&out)
    );
    assert!(
        found.contains("Deployment web: field metadata.name: duplicate object"),
        "{found}"
    );
    assert!(!found.contains("did you mean"), "{found}");
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(plan["nodeclaims"].as_array().unwrap().is_empty(), "{plan}");
    assert_eq!(
        plan["unschedulable"].as_array().unwrap().len(),
        3,
        "the last Deployment's 3 replicas, once: {plan}"
    );
}
