//! Leases and ConfigMaps in the in-memory API: single objects by path, created, read and
//! replaced with the API server's optimistic concurrency (409 on a create of an existing one and
//! on a replace with a stale `resourceVersion`), and the `kube-root-ca.crt` ConfigMap every
//! namespace has.

use serde_json::{json, Value};

use super::{reply, status, Reply, State};

/// Create, get and replace for leases and ConfigMaps, with 409 on conflicts.
pub(super) fn lease(state: &mut State, method: &str, path: &str, body: &[u8]) -> Option<Reply> {
    let tail = [
        ("/apis/coordination.k8s.io/v1/namespaces/", "/leases"),
        ("/api/v1/namespaces/", "/configmaps"),
    ]
    .iter()
    .find_map(|(prefix, collection)| {
        let rest = path.strip_prefix(prefix)?;
        let (_namespace, tail) = rest.split_once(collection)?;
        (tail.is_empty() || tail.starts_with('/')).then_some(tail)
    })?;
    let mut object: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    match (method, tail.strip_prefix('/')) {
        ("POST", None) => {
            let name = object["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let key = format!("{path}/{name}");
            if state.singles.contains_key(&key) {
                return Some(status(
                    409,
                    "AlreadyExists",
                    format!("leases {name:?} already exists"),
                ));
            }
            object["metadata"]["resourceVersion"] = json!(state.next_version.to_string());
            state.next_version += 1;
            state.singles.insert(key, object.clone());
            Some(reply(201, object))
        }
        ("GET", Some(name)) => Some(match state.singles.get(path) {
            Some(o) => reply(200, o.clone()),
            None if name == fleetwright_kube::dump::ROOT_CA_CONFIGMAP => reply(200, root_ca(path)),
            None => status(404, "NotFound", format!("leases {name:?} not found")),
        }),
        ("PUT", Some(name)) => {
            let Some(current) = state.singles.get(path) else {
                return Some(status(
                    404,
                    "NotFound",
                    format!("leases {name:?} not found"),
                ));
            };
            if object["metadata"]["resourceVersion"] != current["metadata"]["resourceVersion"] {
                return Some(status(409, "Conflict", format!("Operation cannot be fulfilled on leases {name:?}: the object has been modified")));
            }
            object["metadata"]["resourceVersion"] = json!(state.next_version.to_string());
            state.next_version += 1;
            state.singles.insert(path.to_string(), object.clone());
            Some(reply(200, object))
        }
        _ => None,
    }
}

/// The CA this server's pods would trust, as kube-controller-manager publishes it into every
/// namespace (`kube-root-ca.crt`), unless a test stored another.
pub const MEMORY_CA: &str =
    "-----BEGIN CERTIFICATE-----\nZmxlZXR3cmlnaHQgbWVtb3J5IEFQSQ==\n-----END CERTIFICATE-----\n";

fn root_ca(path: &str) -> Value {
    let namespace = path
        .trim_start_matches("/api/v1/namespaces/")
        .split('/')
        .next()
        .unwrap_or_default();
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": fleetwright_kube::dump::ROOT_CA_CONFIGMAP, "namespace": namespace, "resourceVersion": "1"},
        "data": {"ca.crt": MEMORY_CA}
    })
}
