//! What the chaos run adds to a scenario's cluster: on chaos.yaml, a second NodePool (tainted,
//! for a batch Deployment, with a CPU limit smaller than the batch's peak) and a Deployment
//! spread over zones; on any scenario, the malformed objects applied mid-run beside the healthy
//! ones (a NodePool with a bad duration or quantity, one whose EC2NodeClass is missing, an
//! EC2NodeClass with a malformed AMI alias), each a copy of the scenario's first NodePool with
//! the highest weight, so a planner that does not skip it prefers it.

use fleetwright_core::labels::{
    CAPACITY_TYPE, INSTANCE_CATEGORY, INSTANCE_GENERATION, NODEPOOL, ZONE,
};
use serde_json::{json, Value};

/// The batch Deployment and NodePool added to chaos.yaml.
pub const BATCH: &str = "batch";
/// The batch Deployment's largest replica count in the timeline (exclusive); each asks 1 CPU.
pub const BATCH_MAX: usize = 24;
/// The names malformed objects carry.
pub const BROKEN_PREFIX: &str = "chaos-broken-";

/// The objects chaos.yaml's seeds add: the batch pool and its Deployment, and a Deployment
/// whose pods spread over zones (the planner must use only zones with a subnet).
pub fn base_objects() -> Vec<Value> {
    let batch_pool = json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": BATCH},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "taints": [{"key": "chaos/batch", "effect": "NoSchedule"}],
            "requirements": [
                {"key": CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
                {"key": INSTANCE_CATEGORY, "operator": "In", "values": ["c", "m"]},
                {"key": INSTANCE_GENERATION, "operator": "Gt", "values": ["5"]}]}},
            "limits": {"cpu": "16"},
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "1m",
                "budgets": [{"nodes": "1"}]}}});
    let batch = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": BATCH, "namespace": "jobs"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": BATCH}},
            "template": {"metadata": {"labels": {"app": BATCH}},
                "spec": {"tolerations": [{"key": "chaos/batch", "operator": "Exists"}],
                    "nodeSelector": {NODEPOOL: BATCH},
                    "terminationGracePeriodSeconds": 60,
                    "containers": [{"name": BATCH, "image": "batch",
                        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}}});
    let spread = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "spread", "namespace": "shop"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "spread"}},
            "template": {"metadata": {"labels": {"app": "spread"}},
                "spec": {"nodeSelector": {NODEPOOL: "web"},
                    "topologySpreadConstraints": [{"maxSkew": 1,
                        "topologyKey": ZONE,
                        "whenUnsatisfiable": "DoNotSchedule",
                        "labelSelector": {"matchLabels": {"app": "spread"}}}],
                    "containers": [{"name": "spread", "image": "spread",
                        "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}}}]}}}});
    vec![batch_pool, batch, spread]
}

/// The malformed variants of the scenario's first NodePool and EC2NodeClass, as lists of
/// objects applied together (the objects are named with [`BROKEN_PREFIX`]).
pub fn malformed(pool: &Value, class: Option<&Value>) -> Vec<(&'static str, Vec<Value>)> {
    let copy = |suffix: &str| {
        let mut p = pool.clone();
        p["metadata"] = json!({"name": format!("{BROKEN_PREFIX}{suffix}")});
        p["spec"]["weight"] = json!(100);
        p.as_object_mut().map(|o| o.remove("status"));
        p
    };
    let mut with_duration = copy("consolidate-after");
    with_duration["spec"]["disruption"]["consolidateAfter"] = json!("30 seconds");
    let mut expire = copy("expire-after");
    expire["spec"]["template"]["spec"]["expireAfter"] = json!("30d");
    let mut limits = copy("limits");
    limits["spec"]["limits"] = json!({"cpu": "lots"});
    let mut missing = copy("missing-class");
    missing["spec"]["template"]["spec"]["nodeClassRef"]["name"] =
        json!(format!("{BROKEN_PREFIX}missing"));
    let mut out = vec![
        (
            "a NodePool with consolidateAfter \"30 seconds\"",
            vec![with_duration],
        ),
        ("a NodePool with expireAfter \"30d\"", vec![expire]),
        ("a NodePool with limits.cpu \"lots\"", vec![limits]),
        ("a NodePool whose EC2NodeClass is missing", vec![missing]),
    ];
    if let Some(class) = class {
        let name = format!("{BROKEN_PREFIX}ubuntu");
        let mut c = class.clone();
        c["metadata"] = json!({"name": name});
        c["spec"]["amiSelectorTerms"] = json!([{"alias": "ubuntu@latest"}]);
        c.as_object_mut().map(|o| o.remove("status"));
        let mut p = copy("ubuntu");
        p["spec"]["template"]["spec"]["nodeClassRef"]["name"] = json!(name);
        out.push((
            "an EC2NodeClass with the AMI alias \"ubuntu@latest\"",
            vec![c, p],
        ));
    }
    out
}

#[cfg(test)]
#[path = "../../../tests/unit/simulate/chaos/additions.rs"]
mod tests;
