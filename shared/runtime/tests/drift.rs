//! Drift through a whole tick, on the in-memory Kubernetes API and the simulated cloud: a
//! NodeClaim launched into an EC2NodeClass's placement group carries the group's id, as
//! Karpenter labels it, and its EC2NodeClass hash is Karpenter's, over the CA the cluster
//! publishes in `kube-root-ca.crt`; a NodeClaim whose group is not the class's any more is
//! marked `Drifted` (PlacementGroupDrift), and the mark goes once it matches again. And a
//! NodeClaim whose EC2NodeClass hash another version wrote (Karpenter v1.14's `v5`, or a newer one
//! than Fleetwright writes) is re-stamped with Karpenter v1.15's `v6` and never drifted for it.

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
const CLASS_HASH: &str = "karpenter.k8s.aws/ec2nodeclass-hash";
const CLASS_HASH_VERSION: &str = "karpenter.k8s.aws/ec2nodeclass-hash-version";
/// Karpenter's own hashes of [`kubelet_class`] with the in-memory API's CA bundle, as
/// `tests/karpenter-hash` printed them: v1.14.3's (`v5`, which left the upstream kubelet field
/// out) and v1.15.0's (`v6`, over the kubelet settings' JSON).
const KARPENTER_V5_HASH: &str = "17125004356734050878";
const KARPENTER_V6_HASH: &str = "10162368945619331539";

fn class() -> Value {
    json!({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
        "metadata": {"name": "default", "uid": "uid-class", "resourceVersion": "1"},
        "spec": {"role": "KarpenterNodeRole-drift", "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "drift"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "drift"}}],
            "placementGroupSelector": {"name": "training"}}})
}

/// An EC2NodeClass whose kubelet settings hold a field beyond those Karpenter reads.
fn kubelet_class() -> Value {
    json!({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
        "metadata": {"name": "default", "uid": "uid-class", "resourceVersion": "1"},
        "spec": {"role": "KarpenterNodeRole-drift", "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "drift"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "drift"}}],
            "kubelet": {"maxPods": 58, "featureGates": {"KubeletTracing": true}}}})
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

/// Karpenter's hash controllers re-stamp a NodeClaim whose hash version is not theirs, either
/// way: Karpenter v1.15 re-stamps the `v5` of v1.14, and a Karpenter (or Fleetwright) that wrote
/// `v5` re-stamped the `v6` it met. Fleetwright writes `v6` now, so a `v5` NodeClaim and one of a
/// version newer than `v6` are both re-stamped with its hash, once, and neither is drifted for
/// it; one already drifted keeps its old hash under `v6`, and so stays drifted.
#[tokio::test]
async fn a_nodeclaim_of_another_class_hash_version_is_restamped_and_not_drifted() {
    let objects: BTreeMap<String, Vec<Value>> = [
        ("/apis/karpenter.sh/v1/nodepools".to_string(), vec![pool()]),
        (
            "/apis/karpenter.k8s.aws/v1/ec2nodeclasses".to_string(),
            vec![kubelet_class()],
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

    let first = tick.run(t0, "restamp-1").await.expect("the first tick");
    assert_eq!(first.launched.len(), 1, "{first:?}");
    let launched = claim(&api);
    let name = launched["metadata"]["name"].as_str().unwrap().to_string();
    let annotations = &launched["metadata"]["annotations"];
    assert_eq!(annotations[CLASS_HASH_VERSION], "v6");
    assert_eq!(
        annotations[CLASS_HASH], KARPENTER_V6_HASH,
        "the number Karpenter v1.15 writes for this EC2NodeClass"
    );

    let stamp = |version: &str, hash: &str, drifted_condition: bool| {
        let mut state = api.lock();
        let claims = state.objects.get_mut(NODECLAIMS).unwrap();
        claims[0]["metadata"]["annotations"][CLASS_HASH_VERSION] = json!(version);
        claims[0]["metadata"]["annotations"][CLASS_HASH] = json!(hash);
        if drifted_condition {
            let conditions = claims[0]["status"]["conditions"].as_array_mut().unwrap();
            conditions.push(
                json!({"type": "Drifted", "status": "True", "reason": "NodeClassDrift",
                "message": "", "lastTransitionTime": "2026-11-25T10:00:30Z"}),
            );
        }
    };
    let mut minute = 0;
    let mut next_tick = || {
        minute += 1;
        tick.run(t0 + Duration::minutes(minute), "restamp")
    };
    for (version, hash) in [("v5", KARPENTER_V5_HASH), ("v7", "42")] {
        stamp(version, hash, false);
        let summary = next_tick().await.expect("a tick");
        assert_eq!(
            summary.restamped,
            vec![name.clone()],
            "{version}: {summary:?}"
        );
        assert!(summary.disruptions.is_empty(), "{version}: {summary:?}");
        let restamped = claim(&api);
        let annotations = &restamped["metadata"]["annotations"];
        assert_eq!(annotations[CLASS_HASH_VERSION], "v6", "{version}");
        assert_eq!(annotations[CLASS_HASH], KARPENTER_V6_HASH, "{version}");
        assert_eq!(drifted(&restamped), None, "{version}: {restamped}");
        let again = next_tick().await.expect("the tick after");
        assert!(again.restamped.is_empty(), "{version}: {again:?}");
        assert_eq!(drifted(&claim(&api)), None, "{version}");
    }

    // Drifted under the `v5` hash it carries: the version moves on, the hash stays.
    stamp("v5", "1", true);
    let summary = next_tick().await.expect("a tick");
    assert_eq!(summary.restamped, vec![name.clone()], "{summary:?}");
    let kept = claim(&api);
    let annotations = &kept["metadata"]["annotations"];
    assert_eq!(annotations[CLASS_HASH_VERSION], "v6");
    assert_eq!(annotations[CLASS_HASH], "1");
    next_tick().await.expect("the tick after");
    assert_eq!(
        drifted(&claim(&api)).as_deref(),
        Some("NodeClassDrift"),
        "{}",
        claim(&api)
    );
}
