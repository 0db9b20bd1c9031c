//! The state ConfigMap: values survive across clients (cold starts), keys are independent, and
//! a malformed value is an error naming the ConfigMap and key.

mod fake_api;

use std::collections::BTreeMap;

use fake_api::FakeApi;
use fleetwright_kube::state::{load, store, STATE_CONFIGMAP};

#[tokio::test]
async fn values_survive_a_cold_start_and_keys_are_independent() {
    let api = FakeApi::start(BTreeMap::new()).await;
    let missing: Option<BTreeMap<String, String>> = load(api.client(), "karpenter", "unavailable")
        .await
        .unwrap();
    assert!(missing.is_none());

    let offerings: BTreeMap<String, String> = [(
        "spot/m5.large/us-east-1a".to_string(),
        "2026-11-22T10:03:00Z".to_string(),
    )]
    .into();
    store(api.client(), "karpenter", "unavailable", &offerings)
        .await
        .unwrap();
    store(api.client(), "karpenter", "consolidation", &vec!["node-a"])
        .await
        .unwrap();

    let cold = api.client();
    let back: BTreeMap<String, String> = load(cold.clone(), "karpenter", "unavailable")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(back, offerings);
    let other: Vec<String> = load(cold, "karpenter", "consolidation")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(other, vec!["node-a"]);
    let path = format!("/api/v1/namespaces/karpenter/configmaps/{STATE_CONFIGMAP}");
    let puts = api
        .requests_to(&path)
        .iter()
        .filter(|r| r.starts_with("PUT"))
        .count();
    assert_eq!(
        puts, 1,
        "the second key is added by a replace, not a second create"
    );

    // Storing the same value again writes nothing.
    store(api.client(), "karpenter", "unavailable", &offerings)
        .await
        .unwrap();
    let puts_after = api
        .requests_to(&path)
        .iter()
        .filter(|r| r.starts_with("PUT"))
        .count();
    assert_eq!(puts_after, 1);
}

#[tokio::test]
async fn a_malformed_value_names_the_configmap_and_key() {
    let api = FakeApi::start(BTreeMap::new()).await;
    store(api.client(), "karpenter", "unavailable", &"not a map")
        .await
        .unwrap();
    let err = load::<BTreeMap<String, String>>(api.client(), "karpenter", "unavailable")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("ConfigMap karpenter/fleetwright-state") && err.contains("data.unavailable"),
        "{err}"
    );
}
