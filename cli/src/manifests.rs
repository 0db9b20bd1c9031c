//! `fleetwright manifests`: the Kubernetes side of a deployment, as one YAML stream for
//! `kubectl apply -f -`. It holds the CRDs, the RBAC for the functions' group (only the verbs
//! the executor uses), the pod-CREATE `MutatingWebhookConfiguration` pointing at the Function
//! URL, and on request a default `EC2NodeClass` and `NodePool`.

use anyhow::{bail, Context};
use clap::Args;
use fleetwright_core::labels::{
    ARCH, CAPACITY_TYPE, INSTANCE_CATEGORY, INSTANCE_GENERATION, NAMESPACE_NAME, NODEPOOL, OS,
    TAG_DISCOVERY,
};
use serde_json::{json, Value};

#[derive(Debug, Args)]
pub struct ManifestsArgs {
    /// The webhook's Function URL (the stack output `WebhookFunctionUrl`), https only.
    #[arg(long)]
    function_url: String,
    /// The webhook's path token (the SecureString the stack's `WebhookTokenParameter` names);
    /// the URL becomes `<function-url>/admit/<token>`. The webhook answers no other path, so
    /// without it the API server's calls would fail (unseen: the webhook's failure policy is
    /// Ignore) and no pod would nudge the tick.
    #[arg(long)]
    token: String,
    /// The Kubernetes group the functions' IAM role is mapped to (stack parameter
    /// `KubernetesGroup`).
    #[arg(long, default_value = "fleetwright")]
    group: String,
    /// Namespace of the Lease, the state ConfigMap and the Events (stack parameter `Namespace`).
    #[arg(long, default_value = "karpenter")]
    namespace: String,
    /// Also print a default EC2NodeClass and NodePool whose nodes use this IAM role (stack
    /// output `NodeRoleName`). Needs `--cluster-name`.
    #[arg(long, requires = "cluster_name")]
    node_role: Option<String>,
    /// The cluster name; the default EC2NodeClass selects subnets and security groups tagged
    /// `karpenter.sh/discovery: <cluster-name>`.
    #[arg(long)]
    cluster_name: Option<String>,
    /// Leave the CRDs out: a cluster that runs (or ran) Karpenter has them already, and a
    /// migration keeps the ones installed.
    #[arg(long)]
    skip_crds: bool,
}

/// Prints the stream.
pub fn run(args: &ManifestsArgs) -> anyhow::Result<()> {
    use std::io::Write;
    let text = render(args)?;
    write!(std::io::stdout(), "{text}")?;
    Ok(())
}

/// The whole YAML stream.
pub fn render(args: &ManifestsArgs) -> anyhow::Result<String> {
    let url = webhook_url(&args.function_url, Some(&args.token))?;
    let mut out = if args.skip_crds {
        String::new()
    } else {
        fleetwright_crds::definitions_yaml().context("rendering the CRDs")?
    };
    let mut objects = vec![namespace(&args.namespace)];
    objects.extend(rbac(&args.group, &args.namespace));
    objects.push(webhook(&url));
    if let (Some(role), Some(cluster)) = (&args.node_role, &args.cluster_name) {
        objects.push(default_node_class(role, cluster));
        objects.push(default_node_pool());
    }
    for object in objects {
        out.push_str("---\n");
        out.push_str(&fleetwright_kube::yaml::to_string(&object));
    }
    Ok(out)
}

/// `<function-url>/admit/<token>`, checked: the API server calls webhooks over https only.
fn webhook_url(function_url: &str, token: Option<&str>) -> anyhow::Result<String> {
    if !function_url.starts_with("https://") {
        bail!("--function-url {function_url:?}: the API server calls webhooks over https only");
    }
    if function_url.contains("/admit") {
        bail!(
            "--function-url {function_url:?}: give the Function URL itself (the stack output \
             WebhookFunctionUrl, https://<id>.lambda-url.<region>.on.aws/); the path \
             /admit/<token> is added from --token"
        );
    }
    let base = function_url.trim_end_matches('/');
    match token {
        None => Ok(format!("{base}/admit")),
        Some(t)
            if t.len() >= 16
                && t.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') =>
        {
            Ok(format!("{base}/admit/{t}"))
        }
        Some(_) => bail!("--token: must be at least 16 characters of [A-Za-z0-9_-]"),
    }
}

fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> Value {
    json!({"apiGroups": groups, "resources": resources, "verbs": verbs})
}

/// The verbs the executor and the snapshot reader use, and no more: cluster-wide reads of the
/// scheduling inputs, node and NodeClaim writes, evictions and Events; the Lease and the state
/// ConfigMap only in the namespace.
fn rbac(group: &str, namespace: &str) -> Vec<Value> {
    rbac_for("Group", group, namespace)
}

/// The functions' RBAC, bound to one subject (`Group` or `User`): what a deploy grants them.
pub(crate) fn rbac_for(kind: &str, subject: &str, namespace: &str) -> Vec<Value> {
    let name = "fleetwright";
    let subject = json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": subject}]);
    let cluster_rules = vec![
        rule(&[""], &["pods"], &["get", "list", "delete"]),
        rule(&[""], &["pods/eviction"], &["create"]),
        rule(&[""], &["nodes"], &["get", "list", "update", "delete"]),
        rule(
            &[""],
            &["persistentvolumes", "persistentvolumeclaims"],
            &["list"],
        ),
        rule(&[""], &["events"], &["create"]),
        // What volume attach limits are counted from, as kube-scheduler and Karpenter count them.
        rule(
            &["storage.k8s.io"],
            &["storageclasses", "csinodes"],
            &["list"],
        ),
        rule(&["apps"], &["daemonsets"], &["list"]),
        // What default topology spread deduces each pod's selector from, as kube-scheduler.
        rule(&[""], &["services", "replicationcontrollers"], &["list"]),
        rule(&["apps"], &["replicasets", "statefulsets"], &["list"]),
        rule(&["policy"], &["poddisruptionbudgets"], &["list"]),
        rule(&["karpenter.sh"], &["nodeoverlays"], &["list"]),
        // `get` for the status writes, which read the object they update.
        rule(&["karpenter.sh"], &["nodepools"], &["get", "list"]),
        rule(
            &["karpenter.sh"],
            &["nodeclaims"],
            &["get", "list", "create", "update", "patch", "delete"],
        ),
        rule(
            &["karpenter.sh"],
            &["nodeclaims/status"],
            &["update", "patch"],
        ),
        rule(&["karpenter.sh"], &["nodepools/status"], &["update"]),
        rule(
            &["karpenter.k8s.aws"],
            &["ec2nodeclasses"],
            &["get", "list"],
        ),
        rule(
            &["karpenter.k8s.aws"],
            &["ec2nodeclasses/status"],
            &["update"],
        ),
        // Another node autoscaler's leader Lease, wherever it runs: while one is held the
        // tick does nothing. Only these two names, and only read.
        json!({"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get"],
               "resourceNames": ["karpenter-leader-election", "cluster-autoscaler"]}),
    ];
    let namespaced_rules = vec![
        rule(
            &["coordination.k8s.io"],
            &["leases"],
            &["get", "create", "update"],
        ),
        rule(&[""], &["configmaps"], &["get", "create", "update"]),
    ];
    let role_ref =
        |kind: &str| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name});
    vec![
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": name}, "rules": cluster_rules}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": name}, "roleRef": role_ref("ClusterRole"), "subjects": subject}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
               "metadata": {"name": name, "namespace": namespace}, "rules": namespaced_rules}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": name, "namespace": namespace},
               "roleRef": role_ref("Role"), "subjects": subject}),
    ]
}

/// Pod CREATE (kube-system left out) and the CREATE of a Node of a NodePool (a node Fleetwright
/// launched, joining), never blocking either: `failurePolicy: Ignore`, a 2 s timeout, no side
/// effects on dry runs.
fn webhook(url: &str) -> Value {
    let hook = |name: &str, resource: &str, scope: &str| {
        json!({
            "name": name,
            "admissionReviewVersions": ["v1"],
            "clientConfig": {"url": url},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                       "resources": [resource], "scope": scope}],
            "failurePolicy": "Ignore",
            "matchPolicy": "Equivalent",
            "reinvocationPolicy": "Never",
            "sideEffects": "NoneOnDryRun",
            "timeoutSeconds": 2,
        })
    };
    let mut pods = hook("pending-pods.fleetwright.io", "pods", "Namespaced");
    pods["namespaceSelector"] = json!({"matchExpressions": [{
        "key": NAMESPACE_NAME, "operator": "NotIn", "values": ["kube-system"]}]});
    let mut nodes = hook("joining-nodes.fleetwright.io", "nodes", "Cluster");
    nodes["objectSelector"] = json!({"matchExpressions": [{
        "key": NODEPOOL, "operator": "Exists"}]});
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "fleetwright"},
        "webhooks": [pods, nodes]
    })
}

/// Karpenter's getting-started EC2NodeClass: AL2023, the given role, and subnets and security
/// groups found by the `karpenter.sh/discovery` tag.
fn default_node_class(role: &str, cluster: &str) -> Value {
    let discovery = json!([{"tags": {TAG_DISCOVERY: cluster}}]);
    json!({
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "default"},
        "spec": {
            "role": role,
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": discovery,
            "securityGroupSelectorTerms": discovery,
        }
    })
}

/// Karpenter's getting-started NodePool: c/m/r, generation > 2, spot and on-demand, amd64,
/// consolidation when empty or underutilized, a 1,000-CPU limit.
fn default_node_pool() -> Value {
    let req = |key: &str, operator: &str, values: &[&str]| json!({"key": key, "operator": operator, "values": values});
    json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {
            "template": {"spec": {
                "requirements": [
                    req(ARCH, "In", &["amd64"]),
                    req(OS, "In", &["linux"]),
                    req(CAPACITY_TYPE, "In", &["spot", "on-demand"]),
                    req(INSTANCE_CATEGORY, "In", &["c", "m", "r"]),
                    req(INSTANCE_GENERATION, "Gt", &["2"]),
                ],
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "expireAfter": "720h",
            }},
            "limits": {"cpu": "1000"},
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "1m"},
        }
    })
}

#[cfg(test)]
#[path = "../tests/unit/manifests.rs"]
mod tests;
