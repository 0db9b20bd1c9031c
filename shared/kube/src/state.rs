//! Small pieces of state Fleetwright keeps in the cluster between invocations (unavailable
//! offerings, pending consolidation decisions): JSON values under keys of one ConfigMap, so a cold
//! Lambda start picks up where the last invocation left off.

use fleetwright_core::labels::MANAGED_BY;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tracing::debug;

use crate::executor::{api_error, update, Update, Write};
use crate::KubeError;

/// The ConfigMap Fleetwright keeps its state in.
pub const STATE_CONFIGMAP: &str = "fleetwright-state";

/// Reads the value under `key`, or None when the ConfigMap or the key does not exist.
pub async fn load<T: DeserializeOwned>(
    client: Client,
    namespace: &str,
    key: &str,
) -> Result<Option<T>, KubeError> {
    let api: Api<ConfigMap> = Api::namespaced(client, namespace);
    let Some(map) = api
        .get_opt(STATE_CONFIGMAP)
        .await
        .map_err(|e| api_error("reading ConfigMap", e))?
    else {
        return Ok(None);
    };
    let Some(text) = map.data.as_ref().and_then(|d| d.get(key)) else {
        return Ok(None);
    };
    decode(namespace, key, text).map(Some)
}

/// Writes the value under `key`, creating the ConfigMap when needed; conflicting writers are
/// retried by re-reading. The value replaces whatever the key held: for state that several
/// writers add to, use [`modify`].
pub async fn store<T: Serialize>(
    client: Client,
    namespace: &str,
    key: &str,
    value: &T,
) -> Result<(), KubeError> {
    let text = encode(namespace, key, value)?;
    write(client, namespace, key, None, |_| Ok(text.clone())).await
}

/// Writes `change(current)` under `key`, where `current` is what the key holds at the moment of
/// the write: on a conflict the ConfigMap is re-read and `change` applied again, so a concurrent
/// writer's update is built on, never lost.
pub async fn modify<T, F>(
    client: Client,
    namespace: &str,
    key: &str,
    change: F,
) -> Result<(), KubeError>
where
    T: Serialize + DeserializeOwned,
    F: Fn(Option<T>) -> T,
{
    modify_dropping(client, namespace, key, None, change).await
}

/// [`modify`], dropping the key `drop` in the same write when the ConfigMap holds it (state
/// another mode kept, which this one retires).
pub async fn modify_dropping<T, F>(
    client: Client,
    namespace: &str,
    key: &str,
    drop: Option<&str>,
    change: F,
) -> Result<(), KubeError>
where
    T: Serialize + DeserializeOwned,
    F: Fn(Option<T>) -> T,
{
    let next = |current: Option<&String>| {
        let current = current
            .map(|text| decode(namespace, key, text))
            .transpose()?;
        encode(namespace, key, &change(current))
    };
    write(client, namespace, key, drop, next).await
}

fn encode<T: Serialize>(namespace: &str, key: &str, value: &T) -> Result<String, KubeError> {
    serde_json::to_string(value).map_err(|e| field_error(namespace, key, e))
}

fn decode<T: DeserializeOwned>(namespace: &str, key: &str, text: &str) -> Result<T, KubeError> {
    serde_json::from_str(text).map_err(|e| field_error(namespace, key, e))
}

fn field_error(namespace: &str, key: &str, e: serde_json::Error) -> KubeError {
    KubeError::field(
        format!("ConfigMap {namespace}/{STATE_CONFIGMAP}"),
        format!("data.{key}"),
        e,
    )
}

/// Writes `next(current text)` under `key` with optimistic concurrency, creating the ConfigMap
/// when needed.
async fn write<F>(
    client: Client,
    namespace: &str,
    key: &str,
    drop: Option<&str>,
    next: F,
) -> Result<(), KubeError>
where
    F: Fn(Option<&String>) -> Result<String, KubeError>,
{
    let api: Api<ConfigMap> = Api::namespaced(client, namespace);
    let failed = std::sync::Mutex::new(None);
    for _ in 0..2 {
        let changed = update(
            &api,
            "ConfigMap",
            STATE_CONFIGMAP,
            Write::Object,
            |current| {
                let data = current.data.clone().unwrap_or_default();
                let text = match next(data.get(key)) {
                    Ok(text) => text,
                    Err(e) => {
                        *failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                        return None;
                    }
                };
                let retired = drop.filter(|d| data.contains_key(*d));
                if data.get(key) == Some(&text) && retired.is_none() {
                    return None;
                }
                let mut next = current.clone();
                let map = next.data.get_or_insert_with(Default::default);
                map.insert(key.to_string(), text);
                if let Some(d) = retired {
                    map.remove(d);
                }
                Some(next)
            },
        )
        .await?;
        if let Some(e) = failed.lock().unwrap_or_else(|p| p.into_inner()).take() {
            return Err(e);
        }
        if changed != Update::Gone {
            return Ok(());
        }
        let map = ConfigMap {
            metadata: ObjectMeta {
                name: Some(STATE_CONFIGMAP.to_string()),
                namespace: Some(namespace.to_string()),
                labels: Some([(MANAGED_BY.to_string(), "fleetwright".to_string())].into()),
                ..Default::default()
            },
            data: Some([(key.to_string(), next(None)?)].into()),
            ..Default::default()
        };
        match api.create(&PostParams::default(), &map).await {
            Ok(_) => {
                debug!(namespace, key, "created state ConfigMap");
                return Ok(());
            }
            Err(kube::Error::Api(e)) if e.code == 409 => continue,
            Err(e) => return Err(api_error("creating ConfigMap", e)),
        }
    }
    Err(KubeError::Api {
        kind: "writing ConfigMap".into(),
        reason: format!("{namespace}/{STATE_CONFIGMAP}: created and deleted concurrently"),
    })
}
