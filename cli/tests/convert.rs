//! `fleetwright convert` through the built binary, on the legacy resources of the source
//! documents: each mapped field checked, the output accepted by `plan`, unmappable fields
//! reported, and legacy objects in a dump planned through the same conversion.

mod common;

use common::{fixture, fleetwright, success, write_temp};
use serde::Deserialize;
use serde_json::{json, Value};

/// The documents of a YAML stream, by kind.
fn documents(text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|d| Value::deserialize(d).unwrap())
        .filter(|v| !v.is_null())
        .collect()
}

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in {docs:?}"))
}

fn requirement<'a>(pool: &'a Value, key: &str) -> &'a Value {
    pool["spec"]["template"]["spec"]["requirements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == key)
        .unwrap_or_else(|| panic!("no requirement on {key}"))
}

/// A pending 1-CPU pod that tolerates the dev taint, as the hands-on's inflate pods do.
const PENDING_POD: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: inflate-0, namespace: default}
spec:
  tolerations: [{key: dedicated, operator: Equal, value: dev, effect: NoSchedule}]
  containers: [{name: inflate, image: pause, resources: {requests: {cpu: "1"}}}]
status:
  phase: Pending
  conditions: [{type: PodScheduled, status: "False", reason: Unschedulable}]
"#;

#[test]
fn the_karpenter_default_provisioner_and_node_template_map_field_by_field() {
    let out = fleetwright(&["convert", &fixture("legacy/karpenter-default.yaml")]);
    let text = success(&out);
    let docs = documents(&text);
    assert_eq!(docs.len(), 2);

    let class = find(&docs, "EC2NodeClass", "karpenter-default");
    assert_eq!(class["apiVersion"], "karpenter.k8s.aws/v1");
    let spec = &class["spec"];
    let discovery = json!([{"tags": {"karpenter.sh/discovery": "bys-dev-eks-main"}}]);
    assert_eq!(spec["subnetSelectorTerms"], discovery);
    assert_eq!(spec["securityGroupSelectorTerms"], discovery);
    assert_eq!(spec["instanceProfile"], "KarpenterInstanceProfile");
    assert_eq!(spec["amiSelectorTerms"], json!([{"alias": "al2@latest"}]));
    assert_eq!(spec["detailedMonitoring"], true);
    assert_eq!(
        spec["tags"]["auto-delete"], "no",
        "a string, not a YAML 1.1 boolean"
    );
    let ebs = &spec["blockDeviceMappings"][0]["ebs"];
    assert_eq!(spec["blockDeviceMappings"][0]["deviceName"], "/dev/xvda");
    assert_eq!(ebs["volumeSize"], "30Gi");
    assert_eq!(ebs["iops"], 3000);
    assert_eq!(ebs["throughput"], 125);
    assert!(ebs["kmsKeyID"]
        .as_str()
        .unwrap()
        .starts_with("arn:aws:kms:"));
    // v1 keeps kubelet settings on the EC2NodeClass.
    assert_eq!(spec["kubelet"], json!({"evictionMaxPodGracePeriod": 60}));

    let pool = find(&docs, "NodePool", "karpenter-default");
    assert_eq!(pool["apiVersion"], "karpenter.sh/v1");
    let template = &pool["spec"]["template"]["spec"];
    assert_eq!(
        template["nodeClassRef"],
        json!({"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "karpenter-default"})
    );
    assert_eq!(template["requirements"].as_array().unwrap().len(), 7);
    assert_eq!(
        requirement(pool, "karpenter.k8s.aws/instance-category")["values"],
        json!(["c", "m", "r", "t"])
    );
    let generation = requirement(pool, "karpenter.k8s.aws/instance-generation");
    assert_eq!(generation["operator"], "Gt");
    assert_eq!(generation["values"], json!(["3"]));
    assert_eq!(
        requirement(pool, "topology.kubernetes.io/zone")["values"],
        json!(["ap-northeast-2a", "ap-northeast-2c"])
    );
    assert_eq!(
        pool["spec"]["limits"],
        json!({"cpu": "1000", "memory": "1000Gi"})
    );
    // ttlSecondsUntilExpired: 2592000 and ttlSecondsAfterEmpty: 60.
    assert_eq!(template["expireAfter"], "720h");
    assert_eq!(
        pool["spec"]["disruption"],
        json!({"consolidationPolicy": "WhenEmpty", "consolidateAfter": "1m"})
    );

    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("spec.kubeletConfiguration.containerRuntime: not mapped"),
        "{stderr}"
    );

    let converted = write_temp("karpenter-default-v1.yaml", &text);
    success(&fleetwright(&["plan", "--cluster", &converted]));
}

#[test]
fn the_dev_provisioner_with_an_inline_provider_becomes_a_pool_and_a_class_that_plan() {
    let out = fleetwright(&["convert", &fixture("legacy/dev-provisioner.yaml")]);
    let text = success(&out);
    let docs = documents(&text);

    let class = find(&docs, "EC2NodeClass", "dev");
    assert_eq!(
        class["spec"]["amiSelectorTerms"],
        json!([{"alias": "bottlerocket@latest"}])
    );
    assert_eq!(class["spec"]["instanceProfile"], "eks-node-role-dev");
    assert_eq!(
        class["spec"]["subnetSelectorTerms"],
        json!([{"tags": {"Name": "EksCluster/EKSVpc/PrivateSubnet*"}}])
    );
    assert_eq!(
        class["spec"]["securityGroupSelectorTerms"],
        json!([{"tags": {"aws:eks:cluster-name": "eks-dev"}}])
    );

    let pool = find(&docs, "NodePool", "dev");
    let template = &pool["spec"]["template"];
    assert_eq!(template["metadata"]["labels"], json!({"role": "dev"}));
    assert_eq!(
        template["spec"]["taints"],
        json!([{"key": "dedicated", "value": "dev", "effect": "NoSchedule"}])
    );
    assert_eq!(template["spec"]["nodeClassRef"]["name"], "dev");
    assert_eq!(
        requirement(pool, "karpenter.sh/capacity-type")["values"],
        json!(["spot"])
    );
    // The legacy amd64 default is written out, and said so.
    assert_eq!(
        requirement(pool, "kubernetes.io/arch")["values"],
        json!(["amd64"])
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("defaulted: kubernetes.io/arch"));
    assert_eq!(template["spec"]["expireAfter"], "Never");
    assert_eq!(
        pool["spec"]["disruption"],
        json!({"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s"})
    );

    // Plan the converted pool against a pending pod that tolerates its taint.
    let cluster = write_temp("dev-v1.yaml", &format!("{text}---{PENDING_POD}"));
    let plan: Value =
        serde_json::from_str(&success(&fleetwright(&["plan", "--cluster", &cluster]))).unwrap();
    let claims = plan["nodeclaims"].as_array().unwrap();
    assert_eq!(claims.len(), 1, "{plan}");
    assert_eq!(claims[0]["nodepool"], "dev");
    assert_eq!(claims[0]["capacityTypes"], json!(["spot"]));
    for t in claims[0]["instanceTypes"].as_array().unwrap() {
        assert!(t.as_str().unwrap().starts_with("t3."), "{t}");
    }
}

#[test]
fn a_dump_holding_a_legacy_provisioner_plans_through_the_same_conversion() {
    let legacy = std::fs::read_to_string(fixture("legacy/dev-provisioner.yaml")).unwrap();
    let cluster = write_temp("legacy-dump.yaml", &format!("{legacy}---{PENDING_POD}"));
    let plan: Value =
        serde_json::from_str(&success(&fleetwright(&["plan", "--cluster", &cluster]))).unwrap();
    assert_eq!(plan["nodeclaims"][0]["nodepool"], "dev");
    assert_eq!(plan["nodeclaims"][0]["pods"], json!(["default/inflate-0"]));
}

#[test]
fn input_without_legacy_objects_or_with_broken_yaml_fails_naming_it() {
    let none = fleetwright(&["convert", &fixture("v1-general-purpose.yaml")]);
    assert!(!none.status.success());
    assert!(String::from_utf8_lossy(&none.stderr).contains("no Provisioner"));
    let broken = write_temp("broken.yaml", "kind: Provisioner\nspec: [unclosed\n");
    let out = fleetwright(&["convert", &broken]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("broken.yaml"));
}
