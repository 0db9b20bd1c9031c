//! Reading one object of a dump: typed, with the keys its kind does not read noted, and named
//! when it does not read.

use super::*;

/// An object's name and namespace, however the rest of its metadata reads.
pub(super) fn meta_of(value: &Value) -> ObjectMeta {
    // A name written at the top level (metadata flattened) still names the object in errors.
    let text = |key: &str| {
        (value["metadata"][key].as_str())
            .or_else(|| value[key].as_str())
            .map(str::to_string)
    };
    ObjectMeta {
        name: text("name"),
        namespace: text("namespace"),
        ..Default::default()
    }
}

/// The keys of `metadata` that a flattened object writes at its top level.
const METADATA_KEYS: [&str; 4] = ["name", "namespace", "labels", "annotations"];

/// The error of an object whose metadata is written at its top level (`name: default` beside
/// `kind:` instead of under `metadata:`), a mistake of indentation the API server refuses too.
pub(super) fn misplaced_metadata(value: &Value, kind: &str) -> Option<KubeError> {
    // Another tool's kinds (a kustomization) may well have such keys at the top level.
    if !reads(kind) || !value["metadata"]["name"].is_null() {
        return None;
    }
    let flat: Vec<&str> = METADATA_KEYS
        .into_iter()
        .filter(|k| !value[*k].is_null())
        .collect();
    if flat.is_empty() {
        return None;
    }
    let name = value["name"].as_str().unwrap_or("<unnamed>");
    Some(KubeError::field(
        format!("{kind} {name}"),
        "metadata.name",
        format!(
            "missing: `{}` {} written at the top level of the object, and {} under `metadata:`",
            flat.join("`, `"),
            if flat.len() == 1 { "is" } else { "are" },
            if flat.len() == 1 { "belongs" } else { "belong" },
        ),
    ))
}

/// The kinds a dump's reader takes, each with its API group.
const READ: [(&str, &str); 16] = [
    ("Pod", ""),
    ("Node", ""),
    ("DaemonSet", "apps"),
    ("PodDisruptionBudget", "policy"),
    ("PersistentVolumeClaim", ""),
    ("PersistentVolume", ""),
    ("StorageClass", "storage.k8s.io"),
    ("CSINode", "storage.k8s.io"),
    ("NodePool", "karpenter.sh"),
    ("EC2NodeClass", "karpenter.k8s.aws"),
    ("NodeClaim", "karpenter.sh"),
    ("NodeOverlay", "karpenter.sh"),
    ("Deployment", "apps"),
    ("ReplicaSet", "apps"),
    ("StatefulSet", "apps"),
    ("Job", "batch"),
];

/// Whether a dump's reader takes objects of this kind.
pub(super) fn reads(kind: &str) -> bool {
    READ.iter().any(|(known, _)| *known == kind)
}

/// The kind of the same API group (of `api_version`, when given) a dump's reader takes that
/// `kind` is a slip of: a case slip, or a letter or two off (`Deploymnet`, `EC2NodeClas`), one
/// for a short kind and two for a long one, so that another real kind (`Role`, or EKS Auto
/// Mode's `NodeClass` in its own group) is not taken for one.
pub(super) fn misspelt_kind(kind: &str, api_version: Option<&str>) -> Option<&'static str> {
    let group = api_version.map(|v| v.rsplit_once('/').map_or("", |(g, _)| g));
    let near = |known: &str| {
        let most = if known.len() >= 8 { 2 } else { 1 };
        crate::strict::distance(&known.to_ascii_lowercase(), &kind.to_ascii_lowercase()) <= most
    };
    READ.into_iter()
        .filter(|(_, g)| group.is_none_or(|group| group == *g))
        .map(|(known, _)| known)
        .find(|known| *known != kind && near(known))
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

/// Keeps the last of the objects of one kind, namespace and name, as `kubectl apply` leaves
/// the last one applied; each one dropped is a warning.
/// Leaves out another provider's NodePools (EKS Auto Mode's), each with a warning: they are not
/// Fleetwright's to plan with.
pub(super) fn drop_foreign(dump: &mut ClusterDump) {
    let (warnings, pools) = (&mut dump.warnings, &mut dump.foreign.pools);
    dump.nodepools.retain(|p| {
        if !crate::convert::foreign(p) {
            return true;
        }
        let name = p.metadata.name.clone().unwrap_or_default();
        warnings.push(InputWarning {
            object: format!("NodePool {name}"),
            path: "spec.template.spec.nodeClassRef".into(),
            problem: Problem::Foreign,
        });
        pools.insert(name);
        false
    });
    super::drop_foreign_claims(dump);
}

pub(super) fn drop_duplicates(dump: &mut ClusterDump) {
    let w = &mut dump.warnings;
    dedupe(&mut dump.pods, w);
    dedupe(&mut dump.nodes, w);
    dedupe(&mut dump.daemonsets, w);
    dedupe(&mut dump.pdbs, w);
    dedupe(&mut dump.pvcs, w);
    dedupe(&mut dump.pvs, w);
    dedupe(&mut dump.storage_classes, w);
    dedupe(&mut dump.csinodes, w);
    dedupe(&mut dump.nodepools, w);
    dedupe(&mut dump.nodeclasses, w);
    dedupe(&mut dump.nodeclaims, w);
    dedupe(&mut dump.nodeoverlays, w);
}

fn dedupe<K: kube::Resource<DynamicType = ()>>(
    list: &mut Vec<K>,
    warnings: &mut Vec<InputWarning>,
) {
    // A pod written without a namespace is in `default`, as the API server puts it.
    let key = |o: &K| {
        let m = o.meta();
        (
            m.namespace.clone().unwrap_or_else(|| "default".into()),
            m.name.clone(),
        )
    };
    let mut seen = std::collections::BTreeSet::new();
    let mut keep = vec![false; list.len()];
    for (i, o) in list.iter().enumerate().rev() {
        // Objects named only by `generateName` are each their own.
        keep[i] = o.meta().name.is_none() || seen.insert(key(o));
        if !keep[i] {
            warnings.push(InputWarning {
                object: object_name(&K::kind(&()), &serde_json::json!({"metadata": o.meta()})),
                path: "metadata.name".into(),
                problem: Problem::DuplicateObject,
            });
        }
    }
    let mut flags = keep.into_iter();
    list.retain(|_| flags.next().unwrap_or(true));
}

/// An object's `apiVersion`, if it has one.
pub(super) fn api_version(value: &Value) -> Option<&str> {
    value.get("apiVersion").and_then(Value::as_str)
}

/// The workloads with only the last of each kind, namespace and name kept, as `kubectl apply`
/// leaves it; each one dropped is a warning, so its replicas are not counted twice.
pub(super) fn drop_duplicate_workloads(
    workloads: Vec<Value>,
    warnings: &mut Vec<InputWarning>,
) -> Vec<Value> {
    let key = |w: &Value| {
        let text = |v: &Value| v.as_str().map(str::to_string);
        (
            text(&w["kind"]),
            text(&w["metadata"]["namespace"]).unwrap_or_else(|| "default".into()),
            text(&w["metadata"]["name"]),
        )
    };
    let mut seen = std::collections::BTreeSet::new();
    let mut kept: Vec<Value> = Vec::new();
    for w in workloads.into_iter().rev() {
        let k = key(&w);
        if k.2.is_none() || seen.insert(k.clone()) {
            kept.push(w);
            continue;
        }
        warnings.push(InputWarning {
            object: object_name(k.0.as_deref().unwrap_or_default(), &w),
            path: "metadata.name".into(),
            problem: Problem::DuplicateObject,
        });
    }
    kept.reverse();
    kept
}

/// A bound pod of a file that does not read (a timestamp that is no time, say), as a stand-in
/// that holds its node: named and bound where it runs, requesting nothing, and annotated
/// `karpenter.sh/do-not-disrupt`, so no drain evicts it, no disruption takes its node for
/// empty, and a deleting NodeClaim's instance waits for it until its deadline. None for a pod
/// bound nowhere (it is left out).
pub(super) fn held_stand_in(
    value: &Value,
    meta: &ObjectMeta,
) -> Option<k8s_openapi::api::core::v1::Pod> {
    let node = value
        .pointer("/spec/nodeName")?
        .as_str()
        .filter(|n| !n.is_empty())?;
    let stand_in = serde_json::json!({
        "metadata": {"name": meta.name, "namespace": meta.namespace,
            "annotations": {fleetwright_core::labels::DO_NOT_DISRUPT: "true",
                fleetwright_core::labels::UNREAD_POD: "true"}},
        "spec": {"nodeName": node, "containers": [{"name": "unread"}]},
    });
    serde_json::from_value(stand_in).ok()
}
