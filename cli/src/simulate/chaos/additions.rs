//! What the chaos run adds to a scenario's cluster: on chaos.yaml, a second NodePool (tainted,
//! for a batch Deployment, with a CPU limit smaller than the batch's peak) and a Deployment
//! spread over zones; on any scenario, the malformed objects applied mid-run beside the healthy
//! ones (a NodePool with a bad duration or quantity, one whose EC2NodeClass is missing, an
//! EC2NodeClass with a malformed AMI alias), each a copy of the scenario's first NodePool with
//! the highest weight, so a planner that does not skip it prefers it.

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
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m"]},
                {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["5"]}]}},
            "limits": {"cpu": "16"},
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "1m",
                "budgets": [{"nodes": "1"}]}}});
    let batch = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": BATCH, "namespace": "jobs"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": BATCH}},
            "template": {"metadata": {"labels": {"app": BATCH}},
                "spec": {"tolerations": [{"key": "chaos/batch", "operator": "Exists"}],
                    "nodeSelector": {"karpenter.sh/nodepool": BATCH},
                    "terminationGracePeriodSeconds": 60,
                    "containers": [{"name": BATCH, "image": "batch",
                        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}}});
    let spread = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "spread", "namespace": "shop"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "spread"}},
            "template": {"metadata": {"labels": {"app": "spread"}},
                "spec": {"nodeSelector": {"karpenter.sh/nodepool": "web"},
                    "topologySpreadConstraints": [{"maxSkew": 1,
                        "topologyKey": "topology.kubernetes.io/zone",
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
mod tests {
    use super::*;

    #[test]
    fn every_malformed_pool_copies_the_first_with_the_highest_weight_and_one_fault() {
        let pool = json!({"kind": "NodePool", "metadata": {"name": "web", "uid": "u"},
            "spec": {"template": {"spec": {"nodeClassRef": {"name": "default"}}},
                "disruption": {"consolidateAfter": "30s"}}, "status": {"x": 1}});
        let class = json!({"kind": "EC2NodeClass", "metadata": {"name": "default"},
            "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}]}});
        let variants = malformed(&pool, Some(&class));
        assert_eq!(variants.len(), 5);
        for (what, objects) in &variants {
            let p = objects.last().unwrap();
            assert!(p["metadata"]["name"]
                .as_str()
                .unwrap()
                .starts_with(BROKEN_PREFIX));
            assert_eq!(p["spec"]["weight"], 100, "{what}");
            assert!(p["status"].is_null(), "{what}");
        }
        assert_eq!(
            variants[0].1[0]["spec"]["disruption"]["consolidateAfter"],
            "30 seconds"
        );
        assert_eq!(
            variants[4].1[0]["spec"]["amiSelectorTerms"][0]["alias"],
            "ubuntu@latest"
        );
    }
}
