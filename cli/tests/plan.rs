//! End-to-end tests of `fleetwright plan` and `fleetwright bench` through the built binary.

mod common;

use std::process::Output;

use common::{fixture, fleetwright, write_temp};
use serde_json::Value;

/// How many pods a plan's new NodeClaims take.
fn planned(plan: &Value) -> usize {
    plan["nodeclaims"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["pods"].as_array().unwrap().len())
        .sum()
}

fn json(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is JSON")
}

#[test]
fn plan_on_the_embedded_example_places_all_inflate_pods_on_small_spot_nodes() {
    let out = fleetwright(&["plan"]);
    let plan = json(&out);
    for key in ["nodeclaims", "existing", "unschedulable", "cost"] {
        assert!(plan.get(key).is_some(), "missing {key}");
    }
    let claims = plan["nodeclaims"].as_array().unwrap();
    let pods: usize = claims
        .iter()
        .map(|c| c["pods"].as_array().unwrap().len())
        .sum();
    assert_eq!(pods, 10);
    for c in claims {
        assert_eq!(c["nodepool"], "dev");
        assert_eq!(c["capacityTypes"], serde_json::json!(["spot"]));
        let types = c["instanceTypes"].as_array().unwrap();
        assert!(!types.is_empty() && types.len() <= 60);
        for t in types {
            let size = t.as_str().unwrap().split('.').nth(1).unwrap();
            assert!(
                ["medium", "large", "xlarge", "2xlarge"].contains(&size),
                "{t}"
            );
        }
        assert!(c["price"].as_f64().unwrap() > 0.0);
        assert!(c["pods"][0]
            .as_str()
            .unwrap()
            .starts_with("default/inflate-"));
    }
    let cost = &plan["cost"];
    assert!(cost["lowerBound"].as_f64().unwrap() <= cost["hourly"].as_f64().unwrap());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("found provisionable pod(s)"), "{stderr}");
    assert!(stderr.contains("computed packing of"), "{stderr}");
}

#[test]
fn karpenter_v1_manifests_are_accepted_unchanged() {
    let plan = json(&fleetwright(&[
        "plan",
        "--cluster",
        &fixture("v1-general-purpose.yaml"),
    ]));
    let claims = plan["nodeclaims"].as_array().unwrap();
    assert_eq!(claims.len(), 1, "{plan:#}");
    let c = &claims[0];
    assert_eq!(c["nodepool"], "general-purpose");
    assert_eq!(c["capacityTypes"], serde_json::json!(["on-demand"]));
    // Limits default to requests, so both pods count 750m.
    assert_eq!(c["requests"]["cpu"], "1500m");
    assert_eq!(c["pods"], serde_json::json!(["shop/api-0", "shop/api-1"]));
    for t in c["instanceTypes"].as_array().unwrap() {
        let family = t.as_str().unwrap();
        assert!(
            family.starts_with('c') || family.starts_with('m') || family.starts_with('r'),
            "{family}"
        );
    }
}

#[test]
fn table_output_lists_claims_and_cost() {
    let out = fleetwright(&["plan", "--output", "table"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("NODEPOOL"), "{text}");
    assert!(text.contains("cost: $"), "{text}");
}

#[test]
fn a_bad_operator_names_the_object_and_field_and_exits_non_zero() {
    let bad = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: broken}\nspec:\n  template:\n    spec:\n      requirements:\n      - {key: kubernetes.io/arch, operator: Within, values: [amd64]}\n";
    let out = fleetwright(&["plan", "--cluster", &write_temp("bad-op.yaml", bad)]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("NodePool broken"), "{stderr}");
    assert!(
        stderr.contains("spec.template.spec.requirements[0]"),
        "{stderr}"
    );
    assert!(stderr.contains("Within"), "{stderr}");
}

#[test]
fn one_bad_nodepool_never_stops_the_others_from_being_planned() {
    let example = std::fs::read_to_string(common::repo("examples/inflate.yaml")).unwrap();
    let bad = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: broken}\nspec:\n  template:\n    spec:\n      requirements:\n      - {key: kubernetes.io/arch, operator: Within, values: [amd64]}\n";
    let dump = write_temp("one-bad-pool.yaml", &format!("{example}\n---\n{bad}"));
    let out = fleetwright(&["plan", "--cluster", &dump]);
    assert!(!out.status.success(), "a bad object exits non-zero");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("NodePool broken"), "{stderr}");
    assert!(stderr.contains("could not be used"), "{stderr}");
    let plan: Value = serde_json::from_slice(&out.stdout).expect("the plan is still printed");
    assert_eq!(planned(&plan), 10, "the good pool plans every pod: {plan}");
}

#[test]
fn a_bad_quantity_names_the_pod_and_field() {
    let bad = "apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: shop}\nspec:\n  containers:\n  - name: c\n    resources:\n      requests: {cpu: lots}\n";
    let out = fleetwright(&["plan", "--cluster", &write_temp("bad-qty.yaml", bad)]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("Pod shop/web"), "{stderr}");
    assert!(
        stderr.contains("spec.containers[0].resources.requests.cpu"),
        "{stderr}"
    );

    // A negative request is refused as the API server refuses it, naming the field.
    let negative = bad.replace("cpu: lots", "cpu: 500m, memory: -1Gi");
    let out = fleetwright(&["plan", "--cluster", &write_temp("neg.yaml", &negative)]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("Pod shop/web")
            && stderr.contains("spec.containers[0].resources.requests.memory")
            && stderr.contains("must be greater than or equal to 0"),
        "{stderr}"
    );
}

#[test]
fn malformed_yaml_and_missing_files_fail_cleanly() {
    let out = fleetwright(&[
        "plan",
        "--cluster",
        &write_temp("bad.yaml", "kind: [unclosed"),
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad.yaml"));
    let out = fleetwright(&["plan", "--cluster", "/nonexistent/dump.yaml"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/dump.yaml"));
    let out = fleetwright(&["plan", "--instance-types", "x.json"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("go together"));
}

#[test]
fn catalog_documents_replace_the_embedded_catalog() {
    let types = r#"{"InstanceTypes": [
      {"InstanceType": "m5.large", "Hypervisor": "nitro", "SupportedUsageClasses": ["on-demand", "spot"],
       "VCpuInfo": {"DefaultVCpus": 2}, "MemoryInfo": {"SizeInMiB": 8192},
       "ProcessorInfo": {"SupportedArchitectures": ["x86_64"], "Manufacturer": "Intel"},
       "NetworkInfo": {"MaximumNetworkInterfaces": 3, "Ipv4AddressesPerInterface": 10,
         "DefaultNetworkCardIndex": 0, "NetworkCards": [{"MaximumNetworkInterfaces": 3, "BaselineBandwidthInGbps": 0.75}]}}]}"#;
    let offerings = r#"{"InstanceTypeOfferings": [
      {"InstanceType": "m5.large", "LocationType": "availability-zone", "Location": "eu-west-1a"}]}"#;
    let prices = "instance_type,usd_per_hour\nm5.large,0.107\n";
    let dump = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\nspec:\n  containers:\n  - name: c\n    resources: {requests: {cpu: 500m}}\n---\napiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: default}\nspec:\n  template:\n    spec:\n      requirements:\n      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}\n";
    let out = fleetwright(&[
        "plan",
        "--cluster",
        &write_temp("one-pod.yaml", dump),
        "--instance-types",
        &write_temp("types.json", types),
        "--offerings",
        &write_temp("offerings.json", offerings),
        "--prices",
        &write_temp("prices.csv", prices),
        "--region",
        "eu-west-1",
    ]);
    let plan = json(&out);
    let c = &plan["nodeclaims"][0];
    assert_eq!(c["instanceTypes"], serde_json::json!(["m5.large"]));
    assert_eq!(c["zones"], serde_json::json!(["eu-west-1a"]));
    assert_eq!(c["price"], 0.107);
}

#[test]
fn bench_prints_throughput_cost_ratio_and_memory() {
    let out = fleetwright(&[
        "bench",
        "--pods",
        "200",
        "--repeat",
        "1",
        "--cluster-seeds",
        "1",
        "--json",
    ]);
    let report = json(&out);
    let t = &report["throughput"][0];
    assert_eq!(t["pods"], 200);
    assert!(t["pods_per_second"].as_f64().unwrap() > 0.0);
    // The four cost mixes, then the four real-cluster mixes at seed 1 (each checker-clean, or
    // the run fails).
    let mixes: Vec<&str> = report["cost"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["mix"].as_str().unwrap())
        .collect();
    assert_eq!(
        mixes,
        [
            "web",
            "batch",
            "mixed",
            "constrained",
            "pools/s1",
            "selectors/s1",
            "spread/s1",
            "shapes/s1"
        ]
    );
    for c in report["cost"].as_array().unwrap() {
        assert!(c["ratio"].as_f64().unwrap() >= 1.0 - 1e-9, "{c}");
    }
    assert!(report["peak_rss_mib"].as_f64().unwrap() > 0.0);
}

#[test]
fn crds_verb_matches_the_shipped_manifest() {
    let out = fleetwright(&["crds"]);
    assert!(out.status.success());
    let printed = String::from_utf8(out.stdout).unwrap();
    let shipped_path = std::path::PathBuf::from(common::repo("infra/crds/karpenter-v1.yaml"));
    let shipped = std::fs::read_to_string(&shipped_path).unwrap();
    assert_eq!(
        printed, shipped,
        "regenerate with: fleetwright crds > infra/crds/karpenter-v1.yaml"
    );
    assert_eq!(printed.matches("kind: CustomResourceDefinition").count(), 4);
    for name in [
        "nodepools.karpenter.sh",
        "nodeclaims.karpenter.sh",
        "ec2nodeclasses.karpenter.k8s.aws",
        "nodeoverlays.karpenter.sh",
    ] {
        assert!(printed.contains(&format!("name: {name}")), "{name}");
    }
}

/// A NodePool that consolidates at once, one empty node and one busy node of its own.
const DISRUPTION_DUMP: &str = r#"
apiVersion: v1
kind: List
items:
- apiVersion: karpenter.sh/v1
  kind: NodePool
  metadata: {name: default}
  spec:
    disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 0s, budgets: [{nodes: "100%"}]}
    template:
      spec:
        nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
        requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
- apiVersion: karpenter.k8s.aws/v1
  kind: EC2NodeClass
  metadata: {name: default}
  spec: {amiSelectorTerms: [{alias: al2023@latest}], role: KarpenterNodeRole, subnetSelectorTerms: [{tags: {a: b}}], securityGroupSelectorTerms: [{tags: {a: b}}]}
"#;

fn managed_node(name: &str) -> String {
    format!(
        r#"
- apiVersion: karpenter.sh/v1
  kind: NodeClaim
  metadata:
    name: claim-{name}
    creationTimestamp: "2026-11-22T08:00:00Z"
    labels: {{karpenter.sh/nodepool: default}}
  spec:
    nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
    requirements: []
  status:
    nodeName: {name}
    providerID: aws:///us-east-1a/i-{name}
    conditions:
    - {{type: Launched, status: "True", reason: Launched, message: "", lastTransitionTime: "2026-11-22T08:00:00Z"}}
    - {{type: Registered, status: "True", reason: Registered, message: "", lastTransitionTime: "2026-11-22T08:01:00Z"}}
    - {{type: Initialized, status: "True", reason: Initialized, message: "", lastTransitionTime: "2026-11-22T08:02:00Z"}}
- apiVersion: v1
  kind: Node
  metadata:
    name: {name}
    creationTimestamp: "2026-11-22T08:01:00Z"
    labels: {{karpenter.sh/nodepool: default, node.kubernetes.io/instance-type: m5.large, topology.kubernetes.io/zone: us-east-1a, karpenter.sh/capacity-type: on-demand, kubernetes.io/arch: amd64, kubernetes.io/os: linux}}
  spec: {{providerID: "aws:///us-east-1a/i-{name}"}}
  status:
    allocatable: {{cpu: 1930m, memory: 7220Mi, pods: "29"}}
    conditions: [{{type: Ready, status: "True"}}]
"#
    )
}

/// A one-CPU pod of `shop` on node `ip-busy`, annotated `karpenter.sh/do-not-disrupt: VALUE`.
fn busy_pod(name: &str, created: &str, value: &str, status: &str) -> String {
    format!(
        r#"
- apiVersion: v1
  kind: Pod
  metadata:
    name: {name}
    namespace: shop
    creationTimestamp: "{created}"
    annotations: {{karpenter.sh/do-not-disrupt: "{value}"}}
  spec:
    nodeName: ip-busy
    containers: [{{name: c, image: nginx, resources: {{requests: {{cpu: "1"}}}}}}]
  status: {status}
"#
    )
}

#[test]
fn plan_lists_disruptions_and_blocked_nodes_at_the_given_instant() {
    let mut dump = DISRUPTION_DUMP.to_string();
    dump.push_str(&managed_node("ip-empty"));
    dump.push_str(&managed_node("ip-busy"));
    dump.push_str(&busy_pod(
        "keeper",
        "2026-11-22T08:05:00Z",
        "true",
        "{phase: Running}",
    ));
    let path = write_temp("disruption.yaml", &dump);
    let plan = json(&fleetwright(&[
        "plan",
        "--cluster",
        &path,
        "--now",
        "2026-11-22T10:00:00Z",
    ]));
    let disruptions = plan["disruptions"].as_array().unwrap();
    assert_eq!(disruptions.len(), 1, "{plan}");
    assert_eq!(disruptions[0]["command"], "delete");
    assert_eq!(disruptions[0]["reason"], "empty");
    assert_eq!(disruptions[0]["nodes"], serde_json::json!(["ip-empty"]));
    assert!(disruptions[0]["savings"].as_f64().unwrap() > 0.0);
    let blocked = plan["blocked"].as_array().unwrap();
    assert_eq!(blocked[0]["node"], "ip-busy");
    assert!(blocked[0]["reason"]
        .as_str()
        .unwrap()
        .contains("do-not-disrupt"));
}

/// `consolidationPolicy: Balanced` (Karpenter v1.14) in `plan`: two m5.large, each with three
/// pods, could each be replaced by a cheaper m6a.large. WhenEmptyOrUnderutilized does it;
/// Balanced refuses, since 5 % of the pool's cost is not worth restarting half its pods, and
/// says so with the score, which the JSON lists under `scores`.
#[test]
fn plan_scores_balanced_moves_and_refuses_a_marginal_one() {
    let policy = |p: &str| {
        let mut dump = DISRUPTION_DUMP
            .replace("consolidationPolicy: WhenEmptyOrUnderutilized", p)
            .replace("values: [m5.large]}", "values: [m5.large, m6a.large]}");
        for node in ["ip-a", "ip-b"] {
            dump.push_str(&managed_node(node));
            for i in 0..3 {
                dump.push_str(&format!(
                    r#"
- apiVersion: v1
  kind: Pod
  metadata: {{name: {node}-{i}, namespace: shop, creationTimestamp: "2026-11-22T08:05:00Z", ownerReferences: [{{apiVersion: apps/v1, kind: ReplicaSet, name: web, uid: r-1, controller: true}}]}}
  spec:
    nodeName: {node}
    containers: [{{name: c, image: nginx, resources: {{requests: {{cpu: 500m}}}}}}]
  status: {{phase: Running}}
"#
                ));
            }
        }
        let path = write_temp(&format!("balanced-{}.yaml", p.len()), &dump);
        json(&fleetwright(&[
            "plan",
            "--cluster",
            &path,
            "--now",
            "2026-11-22T10:00:00Z",
        ]))
    };
    let eager = policy("consolidationPolicy: WhenEmptyOrUnderutilized");
    let moves = eager["disruptions"].as_array().unwrap();
    assert_eq!(moves.len(), 1, "{eager}");
    assert_eq!(moves[0]["reason"], "underutilized");
    assert_eq!(moves[0]["command"], "replace");
    let balanced = policy("consolidationPolicy: Balanced");
    assert!(
        balanced["disruptions"].as_array().unwrap().is_empty(),
        "{balanced}"
    );
    let reasons: Vec<&str> = balanced["blocked"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["reason"].as_str())
        .collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("Balanced: nodepool default scores")),
        "{reasons:?}"
    );
    let scores = balanced["scores"].as_array().unwrap();
    assert!(!scores.is_empty(), "{balanced}");
    assert!(
        scores.iter().all(|s| s["score"].as_f64().unwrap() < 0.5),
        "{scores:?}"
    );
}

/// `karpenter.sh/do-not-disrupt: "2h"` (Karpenter v1.12) protects the pod's node for two hours
/// from the pod's start: blocked by it at 09:00, an hour after the pod started, and no longer at
/// 10:05.
#[test]
fn plan_honours_a_do_not_disrupt_duration_until_it_has_passed() {
    let mut dump = DISRUPTION_DUMP.to_string();
    dump.push_str(&managed_node("ip-busy"));
    dump.push_str(&busy_pod(
        "job",
        "2026-11-22T08:00:00Z",
        "2h",
        r#"{phase: Running, startTime: "2026-11-22T08:05:00Z"}"#,
    ));
    let path = write_temp("disruption-duration.yaml", &dump);
    let at = |now: &str| json(&fleetwright(&["plan", "--cluster", &path, "--now", now]));
    let early = at("2026-11-22T09:00:00Z");
    assert!(
        early["disruptions"].as_array().unwrap().is_empty(),
        "{early}"
    );
    assert_eq!(early["blocked"][0]["node"], "ip-busy", "{early}");
    assert!(early["blocked"][0]["reason"]
        .as_str()
        .unwrap()
        .contains("shop/job has karpenter.sh/do-not-disrupt"));
    // Later the node is judged on its own: here no cheaper type fits its pods.
    let late = at("2026-11-22T10:05:00Z");
    let reason = late["blocked"][0]["reason"].as_str().unwrap_or("");
    assert!(!reason.contains("do-not-disrupt"), "{late}");
    assert!(reason.contains("not consolidating"), "{late}");
}

#[test]
fn plan_actions_lists_what_the_next_tick_would_do_and_changes_nothing() {
    let cluster = fixture("lifecycle-cluster.yaml");
    let before = std::fs::read_to_string(&cluster).unwrap();
    let out = fleetwright(&[
        "plan",
        "--actions",
        "--cluster",
        &cluster,
        "--now",
        "2026-11-23T19:30:00Z",
    ]);
    let actions = json(&out)["actions"].as_array().unwrap().clone();
    let of =
        |kind: &str| -> Vec<&Value> { actions.iter().filter(|a| a["action"] == kind).collect() };
    let give_up = of("giveUp");
    assert_eq!(give_up.len(), 1, "{actions:?}");
    assert_eq!(give_up[0]["nodeclaim"], "default-stale");
    assert_eq!(give_up[0]["instanceId"], "i-0000000000000aaaa");
    let evict = of("evictForDeletion");
    assert_eq!(evict.len(), 1, "{actions:?}");
    assert_eq!(evict[0]["pods"], serde_json::json!(["shop/web-1"]));
    assert!(
        of("finishDeletion").is_empty(),
        "the instance waits for its pods: {actions:?}"
    );
    assert!(of("register")
        .iter()
        .any(|a| a["nodeclaim"] == "default-joined"));
    assert_eq!(std::fs::read_to_string(&cluster).unwrap(), before);
}

/// Node repair in the next tick's actions: only with `--node-repair` (the tick's
/// `FLEETWRIGHT_NODE_REPAIR`), only past each condition's toleration, never in a pool more than
/// 20 % unhealthy; a repaired NodeClaim's pods are deleted once its termination timestamp has
/// passed, and its termination is counted as `unhealthy`.
#[test]
fn plan_actions_repair_unhealthy_nodes_only_when_enabled() {
    let cluster = fixture("node-repair.yaml");
    let actions = |extra: &[&str]| -> Vec<Value> {
        let mut args = vec![
            "plan",
            "--actions",
            "--cluster",
            &cluster,
            "--now",
            "2026-11-25T12:00:00Z",
        ];
        args.extend_from_slice(extra);
        json(&fleetwright(&args))["actions"]
            .as_array()
            .unwrap()
            .clone()
    };
    let on = actions(&["--node-repair"]);
    let of = |all: &[Value], kind: &str| -> Vec<Value> {
        all.iter()
            .filter(|a| a["action"] == kind)
            .cloned()
            .collect()
    };
    // web-1 holds a pod with no other initialized room: Karpenter v1.15's repair places it
    // first (its bounded drain comes once that place is ready: `repair_prespin.rs`). Here the
    // room is the node this tick provisions for gone-1's pods, not yet initialized: it waits.
    assert!(of(&on, "repair").is_empty(), "{on:#?}");
    let waits = |all: &[Value]| {
        of(all, "blocked").iter().any(|a| {
            a["node"] == "web-node-1"
                && a["reason"]
                    .as_str()
                    .unwrap()
                    .starts_with("repair waits: pod shop/api-1 would move onto")
        })
    };
    assert!(waits(&on), "{on:#?}");
    // The legacy repair of before v1.15 deletes at once, and the pods of a node that is not
    // Ready with it.
    let legacy = actions(&["--node-repair", "--legacy-node-repair"]);
    let legacy = of(&legacy, "repair");
    assert_eq!(legacy[0]["nodeclaim"], "web-1");
    assert_eq!(legacy[0]["condition"], "Ready=Unknown");
    assert_eq!(
        legacy[0]["terminateAt"], "2026-11-25T12:00:00Z",
        "{legacy:#?}"
    );
    let blocked: Vec<&str> = of(&on, "repairBlocked")
        .iter()
        .map(|a| a["node"].as_str().unwrap().to_string())
        .map(|n| {
            if n.starts_with("batch") {
                "batch"
            } else {
                "other"
            }
        })
        .collect();
    assert_eq!(blocked, ["batch", "batch"], "{on:#?}");
    let deleted = of(&on, "deletePods");
    assert_eq!(deleted.len(), 1, "{on:#?}");
    assert_eq!(deleted[0]["pods"], serde_json::json!(["shop/api-1"]));
    assert!(of(&on, "finishDeletion")
        .iter()
        .any(|a| a["nodeclaim"] == "gone-1" && a["reason"] == "unhealthy"));

    // A GPU fault a reboot clears: with `--reboot-for-repair` the node is rebooted, its drain
    // bounded at 5 minutes; without it, replaced.
    let text = std::fs::read_to_string(&cluster).unwrap();
    let xid = text.replacen(
        r#"conditions: [{type: Ready, status: "Unknown", lastTransitionTime: "2026-11-25T11:20:00Z"}]"#,
        r#"conditions: [{type: Ready, status: "True"}, {type: AcceleratedHardwareReady, status: "False", reason: NvidiaXID48Error, lastTransitionTime: "2026-11-25T11:45:00Z"}]"#,
        1,
    );
    assert_ne!(xid, text);
    let xid = write_temp("node-repair-xid.yaml", &xid);
    let gpu = |extra: &[&str]| -> Vec<Value> {
        let mut args = vec![
            "plan",
            "--actions",
            "--cluster",
            &xid,
            "--now",
            "2026-11-25T12:00:00Z",
            "--node-repair",
        ];
        args.extend_from_slice(extra);
        json(&fleetwright(&args))["actions"]
            .as_array()
            .unwrap()
            .clone()
    };
    let rebooted = gpu(&["--reboot-for-repair"]);
    let reboot = of(&rebooted, "reboot");
    assert_eq!(reboot.len(), 1, "{rebooted:#?}");
    assert_eq!(
        (
            &reboot[0]["nodeclaim"],
            &reboot[0]["step"],
            &reboot[0]["graceSeconds"]
        ),
        (&"web-1".into(), &"commit".into(), &300.into())
    );
    assert!(of(&rebooted, "repair").is_empty(), "{rebooted:#?}");
    let replaced = gpu(&[]);
    assert!(waits(&replaced), "{replaced:#?}");
    assert!(of(&replaced, "reboot").is_empty());

    let off = actions(&[]);
    assert!(of(&off, "repair").is_empty() && of(&off, "repairBlocked").is_empty());
    assert_eq!(
        of(&off, "deletePods").len(),
        1,
        "a repair under way goes on: {off:#?}"
    );
}

/// Reserved capacity in `plan`: the reservation the EC2NodeClass's status lists (with its
/// count) takes its two nodes first, at the reserved price, the rest on demand; and the next
/// tick deletes the NodeClaim running in the expiring capacity block.
#[test]
fn plan_uses_the_reservations_first_and_drains_an_expiring_capacity_block() {
    let cluster = fixture("reserved-capacity.yaml");
    let now = "2026-11-25T12:00:00Z";
    let plan = json(&fleetwright(&["plan", "--cluster", &cluster, "--now", now]));
    let claims = plan["nodeclaims"].as_array().unwrap();
    let reserved: Vec<&Value> = claims
        .iter()
        .filter(|c| !c["reservation"].is_null())
        .collect();
    assert_eq!(reserved.len(), 2, "{claims:#?}");
    for c in &reserved {
        assert_eq!(c["reservation"], "cr-0000000000000000a");
        assert_eq!(c["instanceTypes"], serde_json::json!(["m6i.xlarge"]));
        assert_eq!(c["capacityTypes"], serde_json::json!(["reserved"]));
        assert!(c["price"].as_f64().unwrap() < 1e-5);
    }
    assert!(claims
        .iter()
        .filter(|c| c["reservation"].is_null())
        .all(|c| c["capacityTypes"] == serde_json::json!(["on-demand"])));
    assert!(plan["unschedulable"].as_array().unwrap().is_empty());
    let cost = &plan["cost"];
    assert!(cost["lowerBound"].as_f64().unwrap() <= cost["hourly"].as_f64().unwrap());

    let out = fleetwright(&["plan", "--actions", "--cluster", &cluster, "--now", now]);
    let actions = json(&out)["actions"].as_array().unwrap().clone();
    let expiring: Vec<&Value> = actions
        .iter()
        .filter(|a| a["action"] == "reservationExpiring")
        .collect();
    assert_eq!(expiring.len(), 1, "{actions:#?}");
    assert_eq!(expiring[0]["nodeclaim"], "default-block");
    assert_eq!(expiring[0]["reservation"], "cr-0000000000000000b");
    let early = fleetwright(&[
        "plan",
        "--actions",
        "--cluster",
        &cluster,
        "--now",
        "2026-11-25T11:45:00Z",
    ]);
    assert!(
        !String::from_utf8_lossy(&early.stdout).contains("reservationExpiring"),
        "45 minutes before the end"
    );
}

#[test]
fn plan_actions_on_the_example_creates_a_nodeclaim_for_each_planned_node() {
    let plan = json(&fleetwright(&["plan"]));
    let actions = json(&fleetwright(&["plan", "--actions"]));
    let created = actions["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["action"] == "createNodeClaim")
        .count();
    assert_eq!(created, plan["nodeclaims"].as_array().unwrap().len());
}

/// Taking over a cluster Karpenter ran (`fixtures/karpenter-migration.yaml`: three NodeClaims
/// with Karpenter's labels and its own hashes; the NodePool since narrowed to on-demand, one
/// NodeClaim launched from a template since changed, one with an older Karpenter's EC2NodeClass
/// hash version). Fleetwright computes Karpenter's hashes exactly, so it replaces the two nodes
/// Karpenter would replace (the spot node the requirements no longer allow, the node of the old
/// template) and no other, marks them `Drifted` as Karpenter does, and re-stamps only the hash of
/// the older version. From then on a change of the template is drift on every node.
#[test]
fn a_karpenter_cluster_is_taken_over_replacing_only_what_karpenter_would() {
    let cluster = fixture("karpenter-migration.yaml");
    let now = "2026-11-24T12:00:00Z";
    let node_of = |claim: &str| -> String {
        let node = match claim {
            "default-4kx2p" => "ip-10-0-1-10",
            "default-9wq7z" => "ip-10-0-2-20",
            "default-t8m3r" => "ip-10-0-3-30",
            other => panic!("no NodeClaim {other} in the fixture"),
        };
        format!("{node}.ec2.internal")
    };
    // The nodes the tick marks drifted; the plan's one command (a tick starts one drift at a
    // time) takes one of them.
    let drifted = |path: &str| -> Vec<String> {
        let plan = json(&fleetwright(&["plan", "--cluster", path, "--now", now]));
        let all = plan["disruptions"].as_array().unwrap().clone();
        assert!(all.len() == 1 && all[0]["reason"] == "drifted", "{plan}");
        let out = fleetwright(&["plan", "--actions", "--cluster", path, "--now", now]);
        let actions = json(&out)["actions"].as_array().unwrap().clone();
        let mut nodes: Vec<String> = (actions.iter())
            .filter(|a| a["action"] == "markDrifted")
            .map(|a| node_of(a["nodeclaim"].as_str().unwrap()))
            .collect();
        nodes.sort();
        let first = all[0]["nodes"][0].as_str().unwrap().to_string();
        assert!(nodes.contains(&first), "{first} is not among {nodes:?}");
        nodes
    };
    assert_eq!(
        drifted(&cluster),
        ["ip-10-0-2-20.ec2.internal", "ip-10-0-3-30.ec2.internal"]
    );
    let plan = json(&fleetwright(&["plan", "--cluster", &cluster, "--now", now]));
    for d in plan["disruptions"].as_array().unwrap() {
        assert_eq!(
            d["replacements"][0]["capacityTypes"],
            serde_json::json!(["on-demand"]),
            "{plan}"
        );
    }

    let out = fleetwright(&["plan", "--actions", "--cluster", &cluster, "--now", now]);
    let actions = json(&out)["actions"].as_array().unwrap().clone();
    let of =
        |kind: &str| -> Vec<&Value> { actions.iter().filter(|a| a["action"] == kind).collect() };
    let restamps = of("restamp");
    assert_eq!(restamps.len(), 1, "{actions:?}");
    assert_eq!(restamps[0]["nodeclaim"], "default-4kx2p");
    assert_eq!(
        restamps[0]["annotations"],
        serde_json::json!({
            "karpenter.k8s.aws/ec2nodeclass-hash": "2167004027976865700",
            "karpenter.k8s.aws/ec2nodeclass-hash-version": "v6",
        }),
        "Karpenter's own hash of the EC2NodeClass, with the cluster's CA bundle"
    );
    let marks: Vec<(String, String)> = of("markDrifted")
        .iter()
        .map(|a| {
            (
                a["nodeclaim"].as_str().unwrap().to_string(),
                a["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        marks,
        [
            ("default-9wq7z".into(), "RequirementsDrifted".into()),
            ("default-t8m3r".into(), "NodePoolDrifted".into()),
        ]
    );

    // The cluster after that tick: the re-stamp is no drift, and nothing is re-stamped again.
    let text = std::fs::read_to_string(&cluster).unwrap();
    let restamped = text.replacen(
        "karpenter.k8s.aws/ec2nodeclass-hash: \"11571898981241745890\"\n      karpenter.k8s.aws/ec2nodeclass-hash-version: v5",
        "karpenter.k8s.aws/ec2nodeclass-hash: \"2167004027976865700\"\n      karpenter.k8s.aws/ec2nodeclass-hash-version: v6",
        1,
    );
    assert_ne!(restamped, text);
    let path = write_temp("migration-restamped.yaml", &restamped);
    assert_eq!(
        drifted(&path),
        ["ip-10-0-2-20.ec2.internal", "ip-10-0-3-30.ec2.internal"],
        "the re-stamp itself is no drift"
    );
    let after = json(&fleetwright(&[
        "plan",
        "--actions",
        "--cluster",
        &path,
        "--now",
        now,
    ]));
    assert!(
        !after.to_string().contains("\"restamp\""),
        "re-stamped once: {after}"
    );

    // Karpenter's static fields: a label added to the template, or another expireAfter, and
    // every node has drifted from the NodePool; a CA bundle Karpenter was given explicitly
    // (another than the cluster's) drifts every node from the EC2NodeClass, as in Karpenter.
    let labelled = |team: &str| {
        restamped.replacen(
            "    template:\n      spec:",
            &format!("    template:\n      metadata: {{labels: {{team: {team}}}}}\n      spec:"),
            1,
        )
    };
    let path = write_temp("migration-relabelled.yaml", &labelled("api"));
    assert_eq!(drifted(&path).len(), 3);
    // The template default-t8m3r was launched from, back again: it matches Karpenter's hash once
    // more, and only the other two have drifted.
    let path = write_temp("migration-back.yaml", &labelled("web"));
    assert_eq!(
        drifted(&path),
        ["ip-10-0-1-10.ec2.internal", "ip-10-0-2-20.ec2.internal"]
    );
    let expiring = restamped.replacen(
        "        expireAfter: 720h\n",
        "        expireAfter: 336h\n",
        1,
    );
    assert_ne!(expiring, restamped);
    let path = write_temp("migration-expiring.yaml", &expiring);
    assert_eq!(drifted(&path).len(), 3);
    let other_ca = restamped.replacen("      MIIBdDCC", "      MIIBdDCD", 1);
    assert_ne!(other_ca, restamped);
    let path = write_temp("migration-other-ca.yaml", &other_ca);
    assert_eq!(drifted(&path).len(), 3);
}

/// Karpenter's inclusive operators on a NodePool: `Gte 4` and `Lte 8` on the CPU count let the
/// plan use 4- and 8-CPU types and nothing outside, `Gt 4` leaves the 4-CPU ones out, and
/// `Gte 8` with `Lte 8` leaves exactly the 8-CPU types.
#[test]
fn gte_and_lte_bound_the_planned_types_inclusively() {
    let planned_cpus = |requirements: &str| -> Vec<u64> {
        let dump = format!(
            "apiVersion: v1
kind: List
items:
- apiVersion: karpenter.sh/v1
  kind: NodePool
  metadata: {{name: bounded}}
  spec:
    template:
      spec:
        nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
        requirements:
        - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
{requirements}
- apiVersion: karpenter.k8s.aws/v1
  kind: EC2NodeClass
  metadata: {{name: default}}
  spec: {{amiSelectorTerms: [{{alias: al2023@latest}}], role: R, subnetSelectorTerms: [{{tags: {{a: b}}}}], securityGroupSelectorTerms: [{{tags: {{a: b}}}}]}}
- apiVersion: v1
  kind: Pod
  metadata: {{name: web-0, namespace: shop}}
  spec:
    containers: [{{name: c, image: nginx, resources: {{requests: {{cpu: 1500m}}}}}}]
  status: {{phase: Pending}}
"
        );
        let path = write_temp("bounded.yaml", &dump);
        let plan = json(&fleetwright(&["plan", "--cluster", &path]));
        let types = plan["nodeclaims"][0]["instanceTypes"]
            .as_array()
            .unwrap_or_else(|| panic!("a node planned: {plan}"))
            .clone();
        let catalog = fleetwright_core::Catalog::embedded();
        let mut cpus: Vec<u64> = types
            .iter()
            .map(|t| {
                catalog.type_labels(t.as_str().unwrap())["karpenter.k8s.aws/instance-cpu"]
                    .parse()
                    .unwrap()
            })
            .collect();
        cpus.sort();
        cpus.dedup();
        cpus
    };
    let cpu = |op: &str, n: u32| {
        format!("        - {{key: karpenter.k8s.aws/instance-cpu, operator: {op}, values: [\"{n}\"]}}\n")
    };
    let between = planned_cpus(&(cpu("Gte", 4) + &cpu("Lte", 8)));
    assert!(between.iter().all(|c| (4..=8).contains(c)), "{between:?}");
    assert_eq!(
        between.first(),
        Some(&4),
        "Gte includes its bound: {between:?}"
    );
    let above = planned_cpus(&(cpu("Gt", 4) + &cpu("Lte", 8)));
    assert!(above.iter().all(|c| (5..=8).contains(c)), "{above:?}");
    assert_eq!(planned_cpus(&(cpu("Gte", 8) + &cpu("Lte", 8))), [8]);
}

/// `minValues` that too few instance types can meet: under `Strict` (the default, Karpenter's)
/// the pod stays pending; under `BestEffort` it launches on what is left, with the `minValues`
/// lowered to what the NodeClaim keeps and the NodeClaim marked relaxed.
#[test]
fn min_values_hold_under_strict_and_relax_under_best_effort() {
    let cluster = fixture("min-values.yaml");
    let strict = json(&fleetwright(&["plan", "--cluster", &cluster]));
    assert!(
        strict["nodeclaims"].as_array().unwrap().is_empty(),
        "{strict}"
    );
    assert_eq!(strict["unschedulable"][0]["pod"], "shop/web-0");
    let relaxed = json(&fleetwright(&[
        "plan",
        "--cluster",
        &cluster,
        "--min-values-policy",
        "BestEffort",
    ]));
    let claim = &relaxed["nodeclaims"][0];
    assert_eq!(
        claim["instanceTypes"],
        serde_json::json!(["c5.large"]),
        "{relaxed}"
    );
    assert_eq!(claim["minValuesRelaxed"], true);
    let types = claim["requirements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == "node.kubernetes.io/instance-type")
        .unwrap();
    assert_eq!(types["minValues"], 1, "{types}");
    let out = fleetwright(&[
        "plan",
        "--cluster",
        &cluster,
        "--min-values-policy",
        "Loose",
    ]);
    assert!(!out.status.success());
}

/// A zone spread's `nodeTaintsPolicy: Honor` is read from the pod: the zone only a tainted
/// NodePool offers is no domain, so all four pods run two and two; without the policy (the
/// default Ignore) that zone is an empty domain, and two pods stay pending as they would under
/// Karpenter and kube-scheduler. A policy other than Honor or Ignore is named with its field.
#[test]
fn a_spread_policy_is_read_from_the_pod_and_a_bad_one_is_named() {
    let honoured = fixture("spread-taints.yaml");
    let plan = json(&fleetwright(&["plan", "--cluster", &honoured]));
    assert!(
        plan["unschedulable"].as_array().unwrap().is_empty(),
        "{plan}"
    );
    let placed: usize = plan["nodeclaims"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["pods"].as_array().unwrap().len())
        .sum();
    assert_eq!(placed, 4, "{plan}");
    let text = std::fs::read_to_string(&honoured).unwrap();
    let ignored = write_temp(
        "spread-ignored.yaml",
        &text.replace(" nodeTaintsPolicy: Honor,", ""),
    );
    let plan = json(&fleetwright(&["plan", "--cluster", &ignored]));
    assert_eq!(plan["unschedulable"].as_array().unwrap().len(), 2, "{plan}");
    let bad = write_temp(
        "spread-bad.yaml",
        &text.replace("nodeTaintsPolicy: Honor", "nodeTaintsPolicy: Always"),
    );
    let out = fleetwright(&["plan", "--cluster", &bad]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("Pod shop/web-0"), "{stderr}");
    assert!(
        stderr.contains("spec.topologySpreadConstraints[0].nodeTaintsPolicy"),
        "{stderr}"
    );
    assert!(stderr.contains("Always"), "{stderr}");
}

/// A static NodePool (`spec.replicas`) keeps exactly its replicas: nodes are created up to them
/// (within `limits.nodes`) and deleted above them, the busy node last; its empty nodes are never
/// consolidated; and Karpenter's validation holds (no weight, only `limits.nodes`).
#[test]
fn a_static_nodepool_keeps_its_replicas_and_is_never_consolidated() {
    let with = |spec: &str| {
        let mut dump = DISRUPTION_DUMP.replacen(
            "  spec:\n    disruption:",
            &format!("  spec:\n{spec}    disruption:"),
            1,
        );
        for node in ["ip-empty", "ip-busy", "ip-spare"] {
            dump.push_str(&managed_node(node));
        }
        dump.push_str(&busy_pod(
            "web",
            "2026-11-22T08:05:00Z",
            "false",
            "{phase: Running}",
        ));
        write_temp(&format!("static-{}.yaml", spec.len()), &dump)
    };
    let now = "2026-11-22T10:00:00Z";
    let actions = |path: &str| -> Vec<Value> {
        let out = json(&fleetwright(&[
            "plan",
            "--actions",
            "--cluster",
            path,
            "--now",
            now,
        ]));
        out["actions"].as_array().unwrap().clone()
    };
    let of = |all: &[Value], kind: &str| -> Vec<Value> {
        all.iter()
            .filter(|a| a["action"] == kind)
            .cloned()
            .collect()
    };

    let three = with("    replicas: 3\n");
    let plan = json(&fleetwright(&["plan", "--cluster", &three, "--now", now]));
    assert!(plan["disruptions"].as_array().unwrap().is_empty(), "{plan}");
    assert!(actions(&three)
        .iter()
        .all(|a| a["action"] != "scaleDown" && a["action"] != "createNodeClaim"));

    let two = actions(&with("    replicas: 2\n"));
    let down = of(&two, "scaleDown");
    assert_eq!(down.len(), 1, "{two:?}");
    assert_ne!(down[0]["nodeclaim"], "claim-ip-busy");

    let five = actions(&with("    replicas: 5\n"));
    let up = of(&five, "createNodeClaim");
    assert_eq!(up.len(), 2, "{five:?}");
    assert!(up.iter().all(
        |a| a["nodepool"] == "default" && a["instanceTypes"] == serde_json::json!(["m5.large"])
    ));

    let limited = actions(&with("    replicas: 5\n    limits: {nodes: 4}\n"));
    assert_eq!(of(&limited, "createNodeClaim").len(), 1, "{limited:?}");
    assert_eq!(of(&limited, "shortOfReplicas").len(), 1, "{limited:?}");

    for (spec, field) in [
        ("    replicas: 2\n    weight: 10\n", "spec.weight"),
        (
            "    replicas: 2\n    limits: {cpu: 100}\n",
            "spec.limits.cpu",
        ),
    ] {
        let out = fleetwright(&["plan", "--cluster", &with(spec), "--now", now]);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(field) && err.contains("NodePool"), "{err}");
    }
}

/// A NodeOverlay (Karpenter's `v1alpha1`) changes what the plan believes: a price set for a type
/// makes it the cheapest option; a bad overlay is refused naming its field.
#[test]
fn a_node_overlay_price_changes_the_plan_and_a_bad_one_is_named() {
    let cluster = |overlay: &str| {
        let text = format!(
            r#"
apiVersion: v1
kind: List
items:
- apiVersion: karpenter.sh/v1
  kind: NodePool
  metadata: {{name: default}}
  spec:
    template:
      spec:
        nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
        requirements:
        - {{key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m]}}
        - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
- apiVersion: karpenter.k8s.aws/v1
  kind: EC2NodeClass
  metadata: {{name: default}}
  spec: {{amiSelectorTerms: [{{alias: al2023@latest}}], role: KarpenterNodeRole, subnetSelectorTerms: [{{tags: {{a: b}}}}], securityGroupSelectorTerms: [{{tags: {{a: b}}}}]}}
- apiVersion: v1
  kind: Pod
  metadata: {{name: web-0, namespace: shop}}
  spec:
    containers: [{{name: c, image: nginx, resources: {{requests: {{cpu: 500m}}}}}}]
  status: {{phase: Pending}}
{overlay}"#
        );
        write_temp(&format!("overlay-{}.yaml", overlay.len()), &text)
    };
    let first_type = |path: &str| {
        let plan = json(&fleetwright(&["plan", "--cluster", path]));
        (
            plan["nodeclaims"][0]["instanceTypes"][0].clone(),
            plan["nodeclaims"][0]["price"].as_f64().unwrap(),
        )
    };
    let (plain, plain_price) = first_type(&cluster(""));
    assert_ne!(plain, "m6i.xlarge");
    let overlay = r#"- apiVersion: karpenter.sh/v1alpha1
  kind: NodeOverlay
  metadata: {name: savings-plan}
  spec:
    requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [m6i.xlarge]}]
    price: "0.001"
"#;
    let (chosen, price) = first_type(&cluster(overlay));
    assert_eq!(chosen, "m6i.xlarge");
    assert!(
        price < plain_price && (price - 0.001).abs() < 1e-9,
        "{price}"
    );

    let both = overlay.replace(
        "price: \"0.001\"",
        "price: \"0.001\"\n    priceAdjustment: \"-10%\"",
    );
    let out = fleetwright(&["plan", "--cluster", &cluster(&both)]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("NodeOverlay") && err.contains("spec.priceAdjustment"),
        "{err}"
    );
}

/// As the tick: a NodePool whose EC2NodeClass the dump lacks is not planned, however heavy,
/// and the pool that can launch takes the pods; every object that does not read is named at
/// once, each with its field.
#[test]
fn a_pool_without_its_class_is_not_planned_and_every_bad_object_is_named() {
    let pool = |name: &str, class: &str, weight: u32| {
        format!("apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {{name: {name}}}\nspec:\n  weight: {weight}\n  template:\n    spec:\n      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: {class}}}\n      requirements:\n      - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}\n")
    };
    let class = "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: default}\nspec: {role: R, amiSelectorTerms: [{alias: al2023@latest}]}\n";
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\nspec:\n  containers:\n  - name: c\n    resources: {requests: {cpu: 500m}}\n";
    let dump = [
        pool("ghost", "defualt", 90),
        pool("good", "default", 1),
        class.into(),
        pod.into(),
    ]
    .join("---\n");
    let out = fleetwright(&["plan", "--cluster", &write_temp("ghost.yaml", &dump)]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a missing EC2NodeClass is bad input"
    );
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(plan["nodeclaims"][0]["nodepool"], "good", "{plan}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("NodePool \"ghost\": spec.template.spec.nodeClassRef.name: EC2NodeClass \"defualt\" is missing"),
        "{err}"
    );

    // With no pool left to plan, the pending pod says which class is missing, not that no pool
    // exists.
    let dump = [pool("ghost", "defualt", 90), class.into(), pod.into()].join("---\n");
    let out = fleetwright(&["plan", "--cluster", &write_temp("ghost-only.yaml", &dump)]);
    assert_eq!(out.status.code(), Some(1));
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let reason = plan["unschedulable"][0]["reason"].as_str().unwrap();
    assert_eq!(
        reason,
        "nodepool \"ghost\" is not planned: its EC2NodeClass \"defualt\" is missing"
    );

    let broken = pool("broken", "default", 1).replace(
        "  weight: 1\n",
        "  limits: {cpu: lots}\n  disruption: {consolidateAfter: 30 seconds}\n",
    );
    let mut ubuntu = class.replace("al2023@latest", "ubuntu@latest");
    ubuntu = ubuntu.replace("name: default", "name: ubuntu");
    let dump = [broken, class.into(), ubuntu, pod.into()].join("---\n");
    let out = fleetwright(&["plan", "--cluster", &write_temp("broken.yaml", &dump)]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("NodePool broken") && err.contains("spec.limits.cpu"),
        "{err}"
    );
    assert!(
        err.contains("EC2NodeClass ubuntu") && err.contains("alias"),
        "{err}"
    );
    // The pod the broken pool was for is told that pool does not read, with its field.
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let reason = plan["unschedulable"][0]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("nodepool \"broken\" is not planned: it does not read")
            && reason.contains("spec.limits.cpu"),
        "{reason}"
    );
    let out = fleetwright(&[
        "explain",
        "--cluster",
        &write_temp("broken.yaml", &dump),
        "--pod",
        "default/p",
        "-o",
        "json",
    ]);
    let explained: Value = serde_json::from_slice(&out.stdout).unwrap();
    let broken = explained["nodepools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["nodepool"] == "broken");
    assert!(
        broken.is_some_and(|p| p["reason"]
            .as_str()
            .is_some_and(|r| r.contains("spec.limits.cpu"))),
        "{explained}"
    );
}

/// A budget schedule Karpenter's CRD admits but no cron parser reads (a time zone prefix) is
/// a warning naming the field: the NodePool still provisions, as Karpenter's does, and only
/// its budget fails closed; `--strict` makes it an error.
#[test]
fn a_budget_schedule_that_does_not_parse_stops_no_provisioning() {
    let example = std::fs::read_to_string(common::repo("examples/inflate.yaml")).unwrap();
    let zoned = example.replacen(
        "      consolidateAfter: 30s\n",
        "      consolidateAfter: 30s\n      budgets:\n      - {nodes: \"0\", schedule: \"CRON_TZ=Asia/Seoul 0 9 * * *\", duration: 8h}\n",
        1,
    );
    assert_ne!(zoned, example, "the example's NodePool spec moved");
    let dump = write_temp("zoned-budget.yaml", &zoned);
    let out = fleetwright(&["plan", "--cluster", &dump]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("spec.disruption.budgets[0].schedule") && stderr.contains("no disruption"),
        "{stderr}"
    );
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(planned(&plan), 10, "the pool still plans every pod: {plan}");
    let strict = fleetwright(&["plan", "--cluster", &dump, "--strict"]);
    assert!(!strict.status.success());
}

/// A bad value in a workload's template is named once, on the workload and under
/// `spec.template`, not on each replica; the other workloads still plan.
#[test]
fn a_bad_template_value_is_named_once_on_its_workload_and_the_rest_plans() {
    let text = std::fs::read_to_string(fixture("deployments-only.yaml")).unwrap();
    let bad = text.replacen(
        "resources: {requests: {cpu: \"1\"}}",
        "resources: {requests: {cpu: \"-1\"}}",
        1,
    );
    assert_ne!(bad, text);
    let out = fleetwright(&["plan", "--cluster", &write_temp("bad-template.yaml", &bad)]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    let line =
        "Deployment default/inflate: field spec.template.spec.containers[0].resources.requests.cpu";
    assert_eq!(err.matches(line).count(), 1, "{err}");
    assert!(!err.contains("Pod default/inflate"), "{err}");
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        planned(&plan),
        5,
        "the StatefulSet's 3 and the Job's 2: {plan}"
    );
}

#[test]
fn workloads_without_pods_are_planned_as_their_replicas_and_the_plan_says_so() {
    let out = fleetwright(&["plan", "--cluster", &fixture("deployments-only.yaml")]);
    let plan = json(&out);
    let pods: Vec<&str> = plan["nodeclaims"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["pods"].as_array().unwrap())
        .map(|p| p.as_str().unwrap())
        .collect();
    assert_eq!(pods.len(), 7, "{pods:?}");
    for prefix in ["default/inflate-", "data/db-", "data/report-"] {
        assert!(
            pods.iter().any(|p| p.starts_with(prefix)),
            "{prefix}: {pods:?}"
        );
    }
    assert!(plan["cost"]["hourly"].as_f64().unwrap() > 0.0);
    let stderr = String::from_utf8_lossy(&out.stderr);
    for note in [
        "Deployment default/inflate has none of its pods in the input: planned as 2 pending pod(s)",
        "StatefulSet data/db has none of its pods in the input: planned as 3 pending pod(s)",
        "Job data/report has none of its pods in the input: planned as 2 pending pod(s)",
    ] {
        assert!(stderr.contains(note), "{note}: {stderr}");
    }
}

#[test]
fn a_dump_with_pools_and_no_pods_summarises_what_each_pool_allows() {
    let text = std::fs::read_to_string(fixture("deployments-only.yaml")).unwrap();
    let pools_only = text.split("---\napiVersion: apps/v1").next().unwrap();
    let file = write_temp("pools-only.yaml", pools_only);
    let out = fleetwright(&["plan", "--cluster", &file, "--output", "table"]);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let note = stderr
        .lines()
        .find(|l| l.starts_with("note: no pod to plan; nodepool \"default\" allows "))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(
        note.contains(" instance type(s), from ") && note.contains("/h to "),
        "{note}"
    );
    // A pool whose requirements leave no type says which requirement did it.
    let typo = pools_only.replacen(
        "requirements:",
        "requirements:\n      - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.huge]}",
        1,
    );
    assert!(
        typo.contains("m5.huge"),
        "the fixture's pool has requirements"
    );
    let out = fleetwright(&["plan", "--cluster", &write_temp("no-type.yaml", &typo)]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("allows no instance type: requirement node.kubernetes.io/instance-type In [m5.huge] leaves none"),
        "{stderr}"
    );
}

/// A dump of a Karpenter cluster taken without its NodeClaims: the nodes the pools own are
/// named as left out of the pools' counts and of disruption, instead of silently ignored.
#[test]
fn nodes_of_a_pool_without_their_nodeclaims_are_named() {
    let dump = r#"
apiVersion: v1
kind: List
items:
- apiVersion: karpenter.sh/v1
  kind: NodePool
  metadata: {name: default}
  spec:
    template:
      spec:
        nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
        requirements: []
- apiVersion: karpenter.k8s.aws/v1
  kind: EC2NodeClass
  metadata: {name: default}
  spec:
    role: KarpenterNodeRole
    amiSelectorTerms: [{alias: al2023@latest}]
    subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
    securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
- apiVersion: v1
  kind: Node
  metadata:
    name: ip-10-0-1-1.ec2.internal
    labels: {karpenter.sh/nodepool: default, node.kubernetes.io/instance-type: m5.large}
  spec: {providerID: "aws:///us-east-1a/i-0123456789abcdef0"}
"#;
    let path = common::write_temp("no-nodeclaims.yaml", dump);
    let out = common::fleetwright(&["plan", "--cluster", &path, "--actions"]);
    common::success(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("1 node(s) carry karpenter.sh/nodepool but no NodeClaim")
            && stderr.contains("ip-10-0-1-1.ec2.internal"),
        "{stderr}"
    );
}

/// A node whose CSINode allows one more EBS volume, a pod on it with one claim, and two pending
/// pods with a claim each (of a gp3 class): one fits the node's attach limit, the other gets a
/// new node, as kube-scheduler would refuse to bind it there.
const VOLUME_LIMITS: &str = r#"
apiVersion: v1
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
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
- apiVersion: v1
  kind: Node
  metadata:
    name: n1
    labels: {karpenter.sh/nodepool: default, node.kubernetes.io/instance-type: m5.xlarge, topology.kubernetes.io/zone: us-east-1a, kubernetes.io/arch: amd64, kubernetes.io/os: linux, karpenter.sh/capacity-type: on-demand, kubernetes.io/hostname: n1}
  status:
    allocatable: {cpu: 3920m, memory: 14Gi, pods: "58"}
    capacity: {cpu: "4", memory: 16Gi, pods: "58"}
    conditions: [{type: Ready, status: "True"}]
- apiVersion: storage.k8s.io/v1
  kind: CSINode
  metadata: {name: n1}
  spec:
    drivers: [{name: ebs.csi.aws.com, nodeID: i-1, allocatable: {count: 2}}]
- apiVersion: storage.k8s.io/v1
  kind: StorageClass
  metadata: {name: gp3}
  provisioner: ebs.csi.aws.com
- apiVersion: v1
  kind: PersistentVolumeClaim
  metadata: {name: data-0, namespace: default}
  spec: {storageClassName: gp3, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
- apiVersion: v1
  kind: PersistentVolumeClaim
  metadata: {name: data-1, namespace: default}
  spec: {storageClassName: gp3, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
- apiVersion: v1
  kind: PersistentVolumeClaim
  metadata: {name: data-2, namespace: default}
  spec: {storageClassName: gp3, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
- apiVersion: v1
  kind: Pod
  metadata: {name: db-0, namespace: default}
  spec:
    nodeName: n1
    containers: [{name: db, image: db, resources: {requests: {cpu: 100m, memory: 128Mi}}}]
    volumes: [{name: data, persistentVolumeClaim: {claimName: data-0}}]
  status: {phase: Running}
- apiVersion: v1
  kind: Pod
  metadata: {name: db-1, namespace: default}
  spec:
    containers: [{name: db, image: db, resources: {requests: {cpu: 100m, memory: 128Mi}}}]
    volumes: [{name: data, persistentVolumeClaim: {claimName: data-1}}]
- apiVersion: v1
  kind: Pod
  metadata: {name: db-2, namespace: default}
  spec:
    containers: [{name: db, image: db, resources: {requests: {cpu: 100m, memory: 128Mi}}}]
    volumes: [{name: data, persistentVolumeClaim: {claimName: data-2}}]
"#;

#[test]
fn a_nodes_volume_attach_limit_sends_the_pod_past_it_to_a_new_node() {
    let dump = write_temp("volume-limits.yaml", VOLUME_LIMITS);
    let out = fleetwright(&["plan", "--cluster", &dump, "--output", "json"]);
    let plan = json(&out);
    let existing = plan["existing"].as_array().unwrap();
    assert_eq!(existing.len(), 1, "{plan:#}");
    assert_eq!(existing[0]["node"], "n1");
    let claims = plan["nodeclaims"].as_array().unwrap();
    assert_eq!(claims.len(), 1, "{plan:#}");
    assert_eq!(claims[0]["pods"].as_array().unwrap().len(), 1);
}

/// A node repaired in a tick counts as going for the disruption decided after it: it is not
/// picked again as an empty node, and the pool's one-node budget is spent.
#[test]
fn a_repaired_node_takes_its_place_in_the_budget_of_the_same_ticks_disruption() {
    let cluster = fixture("repair-and-disrupt.yaml");
    let out = fleetwright(&[
        "plan",
        "--actions",
        "--node-repair",
        "--cluster",
        &cluster,
        "--now",
        "2026-11-25T12:00:00Z",
        "--output",
        "json",
    ]);
    let actions = json(&out)["actions"].as_array().unwrap().clone();
    let of =
        |kind: &str| -> Vec<&Value> { actions.iter().filter(|a| a["action"] == kind).collect() };
    assert_eq!(of("repair").len(), 1, "{actions:#?}");
    assert_eq!(of("repair")[0]["node"], "web-node-1");
    assert!(of("confirmLater").is_empty(), "{actions:#?}");
    assert!(of("startDisruption").is_empty(), "{actions:#?}");
    assert!(of("blocked").iter().any(|a| a["node"] == "web-node-2"));
}

/// An EC2NodeClass whose AMIs are all amd64 (an `amiSelectorTerms` by id) boots no arm64 type,
/// so none is planned, as Karpenter lists the class's types.
#[test]
fn a_class_whose_amis_are_all_amd64_plans_no_arm64_type() {
    let dump = write_temp(
        "amd64-amis.yaml",
        r#"
apiVersion: v1
kind: List
items:
- apiVersion: karpenter.sh/v1
  kind: NodePool
  metadata: {name: default}
  spec:
    template:
      spec:
        nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
        requirements: []
- apiVersion: karpenter.k8s.aws/v1
  kind: EC2NodeClass
  metadata: {name: default}
  spec:
    role: node-role
    amiSelectorTerms: [{id: ami-0123456789abcdef0}]
    subnetSelectorTerms: [{tags: {karpenter.sh/discovery: dev}}]
    securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: dev}}]
  status:
    amis:
    - id: ami-0123456789abcdef0
      name: my-al2023-amd64
      requirements: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]
- apiVersion: v1
  kind: Pod
  metadata: {name: web, namespace: default}
  spec:
    containers: [{name: web, image: web, resources: {requests: {cpu: 500m, memory: 512Mi}}}]
"#,
    );
    let plan = json(&fleetwright(&[
        "plan",
        "--cluster",
        &dump,
        "--output",
        "json",
    ]));
    let claims = plan["nodeclaims"].as_array().unwrap();
    assert_eq!(claims.len(), 1, "{plan:#}");
    let types: Vec<&str> = claims[0]["instanceTypes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    let arm = [
        "t4g.", "a1.", "c6g.", "c7g.", "m6g.", "m7g.", "r6g.", "c8g.",
    ];
    assert!(
        types.iter().all(|t| !arm.iter().any(|a| t.starts_with(a))),
        "{types:?}"
    );
}

/// A StatefulSet with no pods in the dump stands in for its three replicas, each with the two
/// claims its `volumeClaimTemplates` make; the node's EBS limit of four, two of them taken,
/// holds one replica's claims and no more.
#[test]
fn a_statefulsets_stand_in_pods_count_their_template_claims_against_attach_limits() {
    let base = VOLUME_LIMITS
        .split("- apiVersion: v1\n  kind: Pod\n  metadata: {name: db-1")
        .next()
        .unwrap()
        .to_string();
    let dump = base.replace("allocatable: {count: 2}", "allocatable: {count: 4}")
        + r#"- apiVersion: apps/v1
  kind: StatefulSet
  metadata: {name: kafka, namespace: default}
  spec:
    replicas: 3
    selector: {matchLabels: {app: kafka}}
    template:
      metadata: {labels: {app: kafka}}
      spec:
        containers: [{name: kafka, image: kafka, resources: {requests: {cpu: 100m, memory: 128Mi}}}]
    volumeClaimTemplates:
    - metadata: {name: data}
      spec: {storageClassName: gp3, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
    - metadata: {name: logs}
      spec: {storageClassName: gp3, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
"#;
    let dump = write_temp("statefulset-limits.yaml", &dump);
    let plan = json(&fleetwright(&[
        "plan",
        "--cluster",
        &dump,
        "--output",
        "json",
    ]));
    let existing = plan["existing"].as_array().unwrap();
    assert_eq!(existing.len(), 1, "{plan:#}");
    let on_new: usize = plan["nodeclaims"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["pods"].as_array().unwrap().len())
        .sum();
    assert_eq!(on_new, 2, "{plan:#}");
    assert!(
        plan["unschedulable"].as_array().unwrap().is_empty(),
        "{plan:#}"
    );
}

/// Karpenter writes capacity reservations into an EC2NodeClass's status without a count (it
/// asks EC2), so a dump of its cluster cannot plan with them: the plan says so, names them and
/// says how to give the count, and plans with it once given.
#[test]
fn reservations_a_dump_lists_without_a_count_are_named_with_what_to_add() {
    let dump = r#"apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: reserved}
spec:
  weight: 100
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: ["reserved"]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  amiSelectorTerms: [{alias: al2023@latest}]
  role: KarpenterNodeRole-x
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: x}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: x}}]
  capacityReservationSelectorTerms: [{id: cr-0a1b2c3d4e5f60001}]
status:
  capacityReservations:
  - {id: cr-0a1b2c3d4e5f60001, instanceType: m6i.xlarge, availabilityZone: us-east-1a, ownerID: "123456789012", instanceMatchCriteria: targeted, reservationType: default, state: active}
"#;
    let pending = "---\napiVersion: v1\nkind: Pod\nmetadata: {name: p1, namespace: default}\nspec:\n  containers: [{name: c, image: x, resources: {requests: {cpu: \"3\", memory: 4Gi}}}]\n";
    let out = fleetwright(&[
        "plan",
        "--cluster",
        &write_temp("uncounted.yaml", &format!("{dump}{pending}")),
        "-o",
        "table",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("ec2nodeclass \"default\" lists capacity reservation(s) cr-0a1b2c3d4e5f60001 without status.capacityReservations[].availableInstanceCount"),
        "{stderr}"
    );
    let counted = dump.replace(
        "state: active}",
        "state: active, availableInstanceCount: 1}",
    );
    let out = fleetwright(&[
        "plan",
        "--cluster",
        &write_temp("counted.yaml", &format!("{counted}{pending}")),
        "-o",
        "table",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("availableInstanceCount"));
    let row = stdout
        .lines()
        .find(|l| l.starts_with("reserved"))
        .unwrap_or_default();
    assert!(
        row.contains("0.0000 reserved"),
        "a reserved NodeClaim: {stdout}"
    );
}

/// Another provider's NodeClaims (EKS Auto Mode's) are left alone by every step of the tick,
/// not just planning: no expiry, registration, liveness, drain, finalizer release or
/// termination, whatever their state.
#[test]
fn plan_actions_touch_nothing_of_eks_auto_mode() {
    let cluster = fixture("warns/auto-mode.yaml");
    let out = fleetwright(&[
        "plan",
        "--actions",
        "--cluster",
        &cluster,
        "--now",
        "2026-11-25T12:00:00Z",
    ]);
    assert!(out.status.success(), "{out:?}");
    let actions = json(&out)["actions"].as_array().unwrap().clone();
    let theirs = [
        "general-purpose",
        "ip-10-0-1-1",
        "ip-10-0-2-2",
        "i-0auto",
        "i-0000",
    ];
    for a in &actions {
        let text = a.to_string();
        assert!(
            !theirs.iter().any(|t| text.contains(t)),
            "an action on Auto Mode's objects: {a}"
        );
    }
}

/// Another provider's NodePool is no fault of the input: `--strict` passes it, with a note.
#[test]
fn strict_input_passes_a_cluster_that_runs_eks_auto_mode() {
    let cluster = fixture("warns/auto-mode.yaml");
    let out = fleetwright(&["--strict", "plan", "--cluster", &cluster]);
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("note: NodePool general-purpose"),
        "{stderr}"
    );
}
