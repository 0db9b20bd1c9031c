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

/// Two writers adding to one key (the tick's end-of-tick write and the interruption function's
/// mark): `modify` builds on what the other wrote, where `store` would have erased it.
#[tokio::test]
async fn modify_builds_on_a_concurrent_writer_instead_of_erasing_it() {
    use fleetwright_kube::state::modify;
    let api = FakeApi::start(BTreeMap::new()).await;
    let set = |items: &[&str]| -> Vec<String> { items.iter().map(|s| s.to_string()).collect() };
    store(api.client(), "karpenter", "offerings", &set(&["a"]))
        .await
        .unwrap();
    // The tick read ["a"] at its start; meanwhile another writer added "b".
    let tick_read: Vec<String> = load(api.client(), "karpenter", "offerings")
        .await
        .unwrap()
        .unwrap();
    let add = |item: &'static str| {
        move |current: Option<Vec<String>>| {
            let mut next = current.unwrap_or_default();
            if !next.iter().any(|x| x == item) {
                next.push(item.to_string());
            }
            next
        }
    };
    modify(api.client(), "karpenter", "offerings", add("b"))
        .await
        .unwrap();
    // The tick ends: it merges what it knows into what is stored now.
    modify(
        api.client(),
        "karpenter",
        "offerings",
        |current: Option<Vec<String>>| {
            let mut next = current.unwrap_or_default();
            for item in &tick_read {
                if !next.contains(item) {
                    next.push(item.clone());
                }
            }
            next
        },
    )
    .await
    .unwrap();
    let stored: Vec<String> = load(api.client(), "karpenter", "offerings")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        stored,
        set(&["a", "b"]),
        "the other writer's \"b\" survives"
    );
    // A value that cannot be read is an error naming the key, not silently replaced.
    store(api.client(), "karpenter", "broken", &"not a list")
        .await
        .unwrap();
    let err = modify(
        api.client(),
        "karpenter",
        "broken",
        |_: Option<Vec<String>>| Vec::new(),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("data.broken"), "{err}");
}
