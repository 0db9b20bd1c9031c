//! Reading one object of a dump: typed, with the keys its kind does not read noted, and named
//! when it does not read.

use super::*;

/// An object's name and namespace, however the rest of its metadata reads.
pub(super) fn meta_of(value: &Value) -> ObjectMeta {
    let text = |key: &str| value["metadata"][key].as_str().map(str::to_string);
    ObjectMeta {
        name: text("name"),
        namespace: text("namespace"),
        ..Default::default()
    }
}

/// The kind a dump's reader takes that `kind` differs from only in case.
pub(super) fn misspelt_kind(kind: &str) -> Option<&'static str> {
    const READ: [&str; 16] = [
        "Pod",
        "Node",
        "DaemonSet",
        "PodDisruptionBudget",
        "PersistentVolumeClaim",
        "PersistentVolume",
        "StorageClass",
        "CSINode",
        "NodePool",
        "EC2NodeClass",
        "NodeClaim",
        "NodeOverlay",
        "Deployment",
        "ReplicaSet",
        "StatefulSet",
        "Job",
    ];
    READ.into_iter()
        .find(|known| *known != kind && known.eq_ignore_ascii_case(kind))
}

/// Deserialises one object as [`typed`] does, and adds a warning for each key its kind does not
/// read.
pub(super) fn noted<T: DeserializeOwned>(
    value: Value,
    kind: &str,
    warnings: &mut Vec<InputWarning>,
) -> Result<T, KubeError> {
    let object = object_name(kind, &value);
    let (typed, unknown) = crate::strict::typed_noting(value, kind)?;
    warnings.extend(unknown.into_iter().map(|path| InputWarning {
        object: object.clone(),
        path,
        problem: Problem::Unknown,
    }));
    Ok(typed)
}

/// A warning for each key a Karpenter object's spec keeps without reading it. The CRD types
/// keep such keys so that a write never drops a field of a newer Karpenter, but nothing plans on
/// them: in a file, such a key is a typo (`limit:`, `requirments:`, `disruptions:`).
pub(super) fn kept_unread<K: kube::Resource<DynamicType = ()>>(
    object: &K,
    at: &str,
    extra: &std::collections::BTreeMap<String, Value>,
    warnings: &mut Vec<InputWarning>,
) {
    let name = match object.meta().namespace.as_deref() {
        Some(ns) => format!(
            "{} {ns}/{}",
            K::kind(&()),
            object.meta().name.as_deref().unwrap_or("<unnamed>")
        ),
        None => format!(
            "{} {}",
            K::kind(&()),
            object.meta().name.as_deref().unwrap_or("<unnamed>")
        ),
    };
    warnings.extend(extra.keys().map(|key| InputWarning {
        object: name.clone(),
        path: format!("{at}.{key}"),
        problem: Problem::Unknown,
    }));
}

pub(super) fn truncate(s: &str) -> String {
    s.chars().take(120).collect()
}
