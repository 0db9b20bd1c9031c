//! Drift through a whole tick, on the in-memory Kubernetes API and the simulated cloud: a
//! NodeClaim launched into an EC2NodeClass's placement group carries the group's id, as
//! Karpenter labels it, and its EC2NodeClass hash is Karpenter's, over the CA the cluster
//! publishes in `kube-root-ca.crt`; a NodeClaim whose group is not the class's any more is
//! marked `Drifted` (PlacementGroupDrift), and the mark goes once it matches again.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use fleetwright_core::Catalog;
use fleetwright_crds::{hash, EC2NodeClass};
use fleetwright_runtime::settings::Settings;
use fleetwright_runtime::tick::Tick;
use fleetwright_sim::memory::{MemoryApi, MEMORY_CA};
use fleetwright_sim::SimCloud;
use serde_json::{json, Value};

const NODECLAIMS: &str = "/apis/karpenter.sh/v1/nodeclaims";
const PLACEMENT_GROUP_ID: &str = "karpenter.k8s.aws/placement-group-id";

fn class() -> Value {
    json!({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
        "metadata": {"name": "default", "uid": "uid-class", "resourceVersion": "1"},
        "spec": {"role": "KarpenterNodeRole-drift", "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "drift"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "drift"}}],
            "placementGroupSelector": {"name": "training"}}})
}

/// A static NodePool of one node: the tick launches it with no pod asking.
fn pool() -> Value {
    json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "default", "uid": "uid-pool", "resourceVersion": "1"},
        "spec": {"replicas": 1, "template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]},
                             {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]}}}})
}

fn claim(api: &MemoryApi) -> Value {
    let claims = api
        .lock()
        .objects
        .get(NODECLAIMS)
        .cloned()
        .unwrap_or_default();
    assert_eq!(claims.len(), 1, "{claims:?}");
    claims[0].clone()
}

fn drifted(claim: &Value) -> Option<String> {
    claim["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Drifted" && c["status"] == "True")
        .map(|c| c["reason"].as_str().unwrap_or_default().to_string())
}

#[tokio::test]
async fn a_nodeclaim_carries_its_placement_group_and_drifts_when_the_group_is_another() {
    let objects: BTreeMap<String, Vec<Value>> = [
        ("/apis/karpenter.sh/v1/nodepools".to_string(), vec![pool()]),
        (
            "/apis/karpenter.k8s.aws/v1/ec2nodeclasses".to_string(),
            vec![class()],
        ),
    ]
    .into();
    let api = MemoryApi::new(objects);
    let cloud = SimCloud::new("drift", Arc::new(Catalog::embedded().clone()));
    let settings =
        Settings::from_lookup(|name| (name == "FLEETWRIGHT_CLUSTER_NAME").then(|| "drift".into()))
            .expect("valid settings");
    let tick = Tick::new(cloud, api.client(), settings);
    let t0: DateTime<Utc> = "2026-11-25T10:00:00Z".parse().unwrap();

    let first = tick.run(t0, "drift-1").await.expect("the first tick");
    assert_eq!(first.launched.len(), 1, "{first:?}");
    let launched = claim(&api);
    assert_eq!(
        launched["metadata"]["labels"][PLACEMENT_GROUP_ID],
        "pg-training"
    );
    let spec: EC2NodeClass = serde_json::from_value(class()).unwrap();
    use base64::Engine;
    let ca = base64::engine::general_purpose::STANDARD.encode(MEMORY_CA);
    assert_eq!(
        launched["metadata"]["annotations"]["karpenter.k8s.aws/ec2nodeclass-hash"],
        json!(hash::ec2nodeclass_hash(&spec.spec, &ca).unwrap()),
        "Karpenter's hash, with the CA the cluster publishes"
    );
    assert_eq!(drifted(&launched), None);

    // The group was deleted and created again under the same name: another id.
    let relabel = |id: &str| {
        let mut state = api.lock();
        let claims = state.objects.get_mut(NODECLAIMS).unwrap();
        claims[0]["metadata"]["labels"][PLACEMENT_GROUP_ID] = json!(id);
    };
    relabel("pg-0ld");
    tick.run(t0 + Duration::minutes(1), "drift-2")
        .await
        .expect("the second tick");
    assert_eq!(
        drifted(&claim(&api)).as_deref(),
        Some("PlacementGroupDrift")
    );

    relabel("pg-training");
    tick.run(t0 + Duration::minutes(2), "drift-3")
        .await
        .expect("the third tick");
    let settled = claim(&api);
    assert_eq!(drifted(&settled), None, "{settled}");
    assert!(
        !settled["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Drifted"),
        "the condition is removed, as Karpenter removes it"
    );
}
