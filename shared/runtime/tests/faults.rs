//! The tick under cloud faults, on the in-memory Kubernetes API and the simulated cloud: a
//! refused or failing termination is reported and retried by a later tick, and never stops the
//! rest of the tick (the other deletions, garbage collection, the state write).

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use fleetwright_cloud::{
    Cloud, CloudError, Instance, LaunchRequest, Launched, ResolvedNodeClass, Termination,
    UnavailableOfferings,
};
use fleetwright_core::Catalog;
use fleetwright_kube::crds::EC2NodeClass;
use fleetwright_kube::memory::MemoryApi;
use fleetwright_runtime::settings::Settings;
use fleetwright_runtime::tick::Tick;
use fleetwright_sim::SimCloud;
use serde_json::{json, Value};

const NODECLAIMS: &str = "/apis/karpenter.sh/v1/nodeclaims";

/// The simulated cloud, except that terminating `refused` fails as EC2 would on an outage.
struct FailingTermination {
    inner: SimCloud,
    refused: String,
}

impl Cloud for FailingTermination {
    async fn catalog(&self, now: DateTime<Utc>) -> Result<Arc<Catalog>, CloudError> {
        self.inner.catalog(now).await
    }
    async fn nodeclass(
        &self,
        nodeclass: &EC2NodeClass,
        now: DateTime<Utc>,
    ) -> Result<ResolvedNodeClass, CloudError> {
        self.inner.nodeclass(nodeclass, now).await
    }
    async fn launch(
        &self,
        req: &LaunchRequest,
        nodeclass: &EC2NodeClass,
        now: DateTime<Utc>,
    ) -> Result<Launched, CloudError> {
        self.inner.launch(req, nodeclass, now).await
    }
    async fn terminate(&self, instance_id: &str) -> Result<Termination, CloudError> {
        if instance_id == self.refused {
            return Err(CloudError::Api {
                operation: "TerminateInstances",
                code: "InternalError".into(),
                message: "An internal error has occurred".into(),
            });
        }
        self.inner.terminate(instance_id).await
    }
    async fn instances(&self) -> Result<Vec<Instance>, CloudError> {
        self.inner.instances().await
    }
    fn mark_unavailable(&self, c: &str, t: &str, z: &str, now: DateTime<Utc>) {
        self.inner.mark_unavailable(c, t, z, now)
    }
    fn unavailable(&self) -> UnavailableOfferings {
        self.inner.unavailable()
    }
    fn restore_unavailable(&self, saved: &UnavailableOfferings) {
        self.inner.restore_unavailable(saved)
    }
}

fn deleting_claim(name: &str, instance: &str) -> Value {
    json!({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": "1",
            "creationTimestamp": "2026-11-23T18:00:00Z", "deletionTimestamp": "2026-11-23T19:00:00Z",
            "finalizers": ["karpenter.sh/termination"], "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": []},
        "status": {"providerID": format!("aws:///us-east-1a/{instance}")}})
}

fn settings() -> Settings {
    Settings::from_lookup(|name| (name == "FLEETWRIGHT_CLUSTER_NAME").then(|| "faults".into()))
        .expect("valid settings")
}

fn claim_names(api: &MemoryApi) -> Vec<String> {
    api.lock()
        .objects
        .get(NODECLAIMS)
        .map(|claims| {
            claims
                .iter()
                .filter_map(|c| c["metadata"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn a_failed_termination_is_reported_and_the_rest_of_the_tick_runs() {
    let objects: BTreeMap<String, Vec<Value>> = [(
        NODECLAIMS.to_string(),
        vec![
            deleting_claim("default-stuck", "i-0000000000000000a"),
            deleting_claim("default-going", "i-0000000000000000b"),
        ],
    )]
    .into();
    let api = MemoryApi::new(objects);
    let cloud = FailingTermination {
        inner: SimCloud::new("faults", Arc::new(Catalog::embedded().clone())),
        refused: "i-0000000000000000a".into(),
    };
    let tick = Tick::new(cloud, api.client(), settings());
    let now = DateTime::parse_from_rfc3339("2026-11-23T19:30:00Z")
        .unwrap()
        .with_timezone(&Utc);

    let summary = tick
        .run(now, "faults")
        .await
        .expect("a refused termination does not fail the tick");

    assert_eq!(summary.terminated, vec!["i-0000000000000000b"]);
    assert_eq!(summary.termination_failures.len(), 1, "{summary:?}");
    assert!(
        summary.termination_failures[0].contains("default-stuck")
            && summary.termination_failures[0].contains("InternalError"),
        "{summary:?}"
    );
    assert_eq!(
        claim_names(&api),
        vec!["default-stuck"],
        "the stuck NodeClaim keeps its finalizer, so a later tick retries it"
    );
    assert!(
        api.lock()
            .singles
            .contains_key("/api/v1/namespaces/karpenter/configmaps/fleetwright-state"),
        "the end-of-tick state write ran"
    );
}

fn launched_claim(name: &str, instance: &str, launched: &str) -> Value {
    json!({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": "1",
            "creationTimestamp": launched, "finalizers": ["karpenter.sh/termination"],
            "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": []},
        "status": {"providerID": format!("aws:///us-east-1a/{instance}"), "nodeName": format!("node-{name}"),
            "conditions": [{"type": "Launched", "status": "True", "reason": "Launched", "lastTransitionTime": launched}]}})
}

fn node(name: &str, instance: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": "1",
            "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {"providerID": format!("aws:///us-east-1a/{instance}")},
        "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}})
}

/// An instance that died without a warning (or was terminated outside Fleetwright) leaves a
/// NodeClaim whose capacity does not exist: the tick deletes it and its node, so the pods are
/// planned again. A NodeClaim launched a moment ago is left alone while the listing catches up.
#[tokio::test]
async fn a_nodeclaim_whose_instance_is_gone_is_deleted_with_its_node() {
    let objects: BTreeMap<String, Vec<Value>> = [
        (
            NODECLAIMS.to_string(),
            vec![
                launched_claim(
                    "default-dead",
                    "i-00000000000000dead",
                    "2026-11-23T19:00:00Z",
                ),
                launched_claim(
                    "default-fresh",
                    "i-0000000000000fresh",
                    "2026-11-23T19:29:50Z",
                ),
            ],
        ),
        (
            "/api/v1/nodes".to_string(),
            vec![node("node-default-dead", "i-00000000000000dead")],
        ),
    ]
    .into();
    let api = MemoryApi::new(objects);
    let cloud = SimCloud::new("faults", Arc::new(Catalog::embedded().clone()));
    let tick = Tick::new(cloud, api.client(), settings());
    let now = DateTime::parse_from_rfc3339("2026-11-23T19:30:00Z")
        .unwrap()
        .with_timezone(&Utc);

    let summary = tick.run(now, "faults").await.expect("the tick");

    assert_eq!(
        summary.stranded_deleted,
        vec!["default-dead"],
        "{summary:?}"
    );
    assert_eq!(claim_names(&api), vec!["default-fresh"]);
    let nodes = api
        .lock()
        .objects
        .get("/api/v1/nodes")
        .cloned()
        .unwrap_or_default();
    assert!(
        nodes.is_empty(),
        "the dead instance's node goes too: {nodes:?}"
    );
}
