//! Cluster dumps: what `kubectl get pods,nodes,daemonsets,poddisruptionbudgets,nodepools,
//! ec2nodeclasses,nodeclaims -A -o yaml` prints (a `kind: List`), or a multi-document YAML/JSON
//! stream of the same objects, parsed into typed objects.

use fleetwright_core::requirements::{Requirement, Requirements};
use fleetwright_crds::conditions::POD_SCHEDULED;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{
    Node, PersistentVolume, PersistentVolumeClaim, Pod, PodSpec, Service,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::crds::{EC2NodeClass, NodeClaim, NodeOverlay, NodePool};
use crate::error::KubeError;
use crate::strict::{object_name, InputWarning, Problem};

pub use crate::strict::typed;

/// Every object of a dump, by kind.
#[derive(Clone, Debug, Default)]
pub struct ClusterDump {
    /// The pods of a file, complete (empty after a live read, which keeps `slim_pods`).
    pub pods: Vec<Pod>,
    /// The pods of a live read, slim: what drains and interruption decisions read.
    pub slim_pods: Vec<SlimPod>,
    pub nodes: Vec<Node>,
    pub daemonsets: Vec<DaemonSet>,
    pub pdbs: Vec<PodDisruptionBudget>,
    pub pvcs: Vec<PersistentVolumeClaim>,
    pub pvs: Vec<PersistentVolume>,
    /// What an unbound claim's CSI driver is read from.
    pub storage_classes: Vec<StorageClass>,
    /// Each node's volume attach limit per CSI driver.
    pub csinodes: Vec<CSINode>,
    pub nodepools: Vec<NodePool>,
    pub nodeclasses: Vec<EC2NodeClass>,
    pub nodeclaims: Vec<NodeClaim>,
    pub nodeoverlays: Vec<NodeOverlay>,
    /// Kinds that were present but are not read, with their counts.
    pub skipped: Vec<(String, usize)>,
    /// The pods converted page by page by a live read, in the order of `slim_pods` (None for a
    /// file, whose `pods` are complete).
    pub converted_pods: Option<Vec<fleetwright_core::model::Pod>>,
    /// Whether the pods were read slim (set by the reader).
    pub slim: bool,
    /// What converting legacy objects (v1alpha5, v1alpha1, v1beta1) could not map, or defaulted.
    pub notes: Vec<crate::legacy::Note>,
    /// The cluster's CA bundle as Karpenter holds it, for its EC2NodeClass hash: the base64 of
    /// the CA every pod trusts (`kube-root-ca.crt`'s `ca.crt`, which is what Karpenter reads
    /// in-cluster), or a setting that names it (Karpenter's `CLUSTER_CA_BUNDLE`). None when
    /// neither is known: the EC2NodeClass hashes are then unknown (never drift, never stamped).
    pub ca_bundle: Option<String>,
    /// Objects the read could not take (a NodePool that does not deserialize, a pod that does
    /// not convert), each with its error: left out, so that every other object goes on.
    pub rejected: Vec<crate::rejected::Rejected>,
    /// Keys the read ignored: unknown to the object's kind, or given twice in one mapping.
    pub warnings: Vec<InputWarning>,
    /// Workloads (Deployments, ReplicaSets, StatefulSets, Jobs) of a file none of whose pods
    /// is in it, each expanded into its replicas as pending pods (added to `pods`).
    pub expanded: Vec<crate::workloads::Expanded>,
    /// Karpenter's `NodeClassCEL` gate: off (its default), a class whose kubelet settings hold
    /// a CEL expression is rejected; on, they are evaluated per instance type.
    pub node_class_cel: bool,
    /// kube-scheduler's default topology spread (Karpenter's scheduler config), given to each
    /// pod without spread constraints of its own when the dump is converted.
    pub default_spread: Vec<fleetwright_core::default_spread::DefaultSpread>,
    /// The Services' and controllers' selectors those defaults' selectors are deduced from.
    pub selectors: fleetwright_core::default_spread::Selectors,
    /// How long a live read took (zero for a file).
    pub read_time: ReadTime,
    /// When the read was made (seconds), set by whoever knows the time: a pod set that shrank
    /// since its NodeClaim's record is a pod event then (None: none is deduced).
    pub observed_at: Option<i64>,
    /// Another provider's objects, left out of the read ([`drop_foreign_claims`]).
    pub foreign: Foreign,
}

/// When a pod last came to or left its node, in seconds, as the pod tells (Karpenter's pod
/// events): the start of its deletion when it is terminating, the last change of its
/// conditions or containers when it has finished, and otherwise when it was bound (its
/// `PodScheduled` condition; its creation when it has none).
pub fn pod_event_at(pod: &Pod) -> i64 {
    let meta = &pod.metadata;
    if let Some(deleted) = &meta.deletion_timestamp {
        return deleted.0.as_second() - meta.deletion_grace_period_seconds.unwrap_or(0);
    }
    let created = meta
        .creation_timestamp
        .as_ref()
        .map_or(0, |t| t.0.as_second());
    let Some(status) = &pod.status else {
        return created;
    };
    let conditions = status.conditions.as_deref().unwrap_or_default();
    let at = |c: &k8s_openapi::api::core::v1::PodCondition| {
        c.last_transition_time.as_ref().map(|t| t.0.as_second())
    };
    let finished = matches!(status.phase.as_deref(), Some("Succeeded" | "Failed"));
    if finished {
        let containers = status.container_statuses.iter().flatten().filter_map(|c| {
            let terminated = c.state.as_ref()?.terminated.as_ref()?;
            terminated.finished_at.as_ref().map(|t| t.0.as_second())
        });
        return conditions
            .iter()
            .filter_map(at)
            .chain(containers)
            .max()
            .unwrap_or(created);
    }
    conditions
        .iter()
        .filter(|c| c.type_ == POD_SCHEDULED && c.status == "True")
        .find_map(at)
        .unwrap_or(created)
}

/// How long a live read took: listing (the requests and decoding their JSON) and converting
/// the pods into the core model as their pages arrived. The two run on one thread, so they add
/// up to the read's wall time.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReadTime {
    pub list: std::time::Duration,
    pub convert: std::time::Duration,
}

/// The ConfigMap Kubernetes publishes into every namespace with the CA pods trust.
pub const ROOT_CA_CONFIGMAP: &str = "kube-root-ca.crt";

/// The CA bundle Karpenter hashes, from the `ca.crt` of [`ROOT_CA_CONFIGMAP`]: its bytes in
/// standard base64, as Karpenter encodes what it reads from the service account's `ca.crt`.
pub fn ca_bundle_of(ca_crt: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(ca_crt.as_bytes())
}

impl ClusterDump {
    /// The pods bound to `node` (those of a live read rebuilt from their slim copies).
    pub fn pods_on(&self, node: &str) -> Vec<Pod> {
        let on = |n: Option<&str>| n == Some(node);
        self.pods
            .iter()
            .filter(|p| on(p.spec.as_ref().and_then(|s| s.node_name.as_deref())))
            .cloned()
            .chain(
                self.slim_pods
                    .iter()
                    .filter(|p| on(p.node_name.as_deref()))
                    .map(SlimPod::to_pod),
            )
            .collect()
    }

    /// Every bound pod's node, metadata, last event ([`pod_event_at`]) and whether it has
    /// finished (`Succeeded` or `Failed`), complete or slim.
    pub fn pod_events(&self) -> impl Iterator<Item = (&str, &ObjectMeta, i64, bool)> {
        let done = |phase: Option<&str>| matches!(phase, Some("Succeeded" | "Failed"));
        let full = self.pods.iter().filter_map(move |p| {
            let node = p.spec.as_ref()?.node_name.as_deref()?;
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
            Some((node, &p.metadata, pod_event_at(p), done(phase)))
        });
        let slim = self.slim_pods.iter().filter_map(move |p| {
            let node = p.node_name.as_deref()?;
            Some((node, &p.metadata, p.event_at, done(p.phase.as_deref())))
        });
        full.chain(slim)
    }

    /// The NodePool of this name, and the EC2NodeClass its template refers to (when it exists).
    pub fn pool_and_class(&self, pool: &str) -> Option<(&NodePool, Option<&EC2NodeClass>)> {
        let pool = self
            .nodepools
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(pool))?;
        let class_name = pool
            .spec
            .template
            .spec
            .node_class_ref
            .as_ref()
            .map(|r| r.name.as_str());
        let class = self
            .nodeclasses
            .iter()
            .find(|c| c.metadata.name.as_deref() == class_name);
        Some((pool, class))
    }

    /// The node a NodeClaim's status names, when it exists.
    pub fn node_of(&self, claim: &NodeClaim) -> Option<&Node> {
        let name = claim.status.as_ref()?.node_name.as_deref()?;
        self.nodes
            .iter()
            .find(|n| n.metadata.name.as_deref() == Some(name))
    }
}

/// Parses a dump whose every object must read (an input the caller cannot report a left-out
/// object from): the first that does not is the error.
pub fn parse_strict(text: &str, source: &str) -> Result<ClusterDump, KubeError> {
    let dump = parse(text, source)?;
    match dump.rejected.first() {
        Some(r) => Err(KubeError::Document {
            source_name: source.to_string(),
            reason: r.error.clone(),
        }),
        None => Ok(dump),
    }
}

/// Parses a dump. `source` names the input in errors. An object that does not read is left
/// out and recorded in `rejected`, named with its field, and the others still read.
pub fn parse(text: &str, source: &str) -> Result<ClusterDump, KubeError> {
    let mut dump = ClusterDump::default();
    let mut legacy = Vec::new();
    let mut workloads = Vec::new();
    for (doc_index, document) in documents(text).into_iter().enumerate() {
        let (value, duplicates) = match document {
            Ok(read) => read,
            Err(e) => {
                dump.rejected.push(unreadable_document(doc_index + 1, e));
                continue;
            }
        };
        if value.is_null() {
            continue;
        }
        let document_name = format!("{source} (document {})", doc_index + 1);
        for steps in duplicates {
            let (object, path) = crate::strict::locate(&value, &steps, &document_name);
            dump.warnings.push(InputWarning {
                object,
                path,
                problem: Problem::Duplicate,
            });
        }
        add_object(&mut dump, &mut legacy, &mut workloads, value, source)?;
    }
    drop_duplicates(&mut dump);
    drop_foreign(&mut dump);
    let workloads = drop_duplicate_workloads(workloads, &mut dump.warnings);
    add_legacy(&mut dump, &legacy)?;
    add_workload_selectors(&mut dump, &workloads);
    let (pods, expanded) = crate::workloads::expand(
        &workloads,
        &dump.pods,
        (&mut dump.warnings, &mut dump.rejected),
    );
    dump.pods.extend(pods);
    for pvc in crate::workloads::stand_in_claims(&workloads, &expanded) {
        let same = |p: &PersistentVolumeClaim| {
            p.metadata.name == pvc.metadata.name && p.metadata.namespace == pvc.metadata.namespace
        };
        if !dump.pvcs.iter().any(same) {
            dump.pvcs.push(pvc);
        }
    }
    dump.expanded = expanded;
    // After the expansion: a workload whose pods are all gated (or nominated, or another
    // scheduler's) has its pods, and none are made up for it.
    dump.pods.retain(|pod| match crate::provisionable::waits_for_another(pod) {
        Some(why) => {
            let (ns, name) = (pod.metadata.namespace.as_deref(), pod.metadata.name.as_deref());
            tracing::info!(pod = %format!("{}/{}", ns.unwrap_or("default"), name.unwrap_or_default()),
                "left out of the plan: {why}, so no capacity is asked for it");
            false
        }
        None => true,
    });
    Ok(dump)
}

/// The selectors of a file's ReplicaSets and StatefulSets, and of its Deployments: under the
/// name their expanded pods' ReplicaSet takes ([`crate::workloads`]), and under the ReplicaSet
/// each of their pods names when the file lacks it (the Deployment's selector and the pod's
/// `pod-template-hash`, as the Deployment controller makes a ReplicaSet's).
fn add_workload_selectors(dump: &mut ClusterDump, workloads: &[Value]) {
    for w in workloads {
        let kind = w["kind"].as_str().unwrap_or_default();
        let namespace = w["metadata"]["namespace"].as_str().unwrap_or("default");
        let name = w["metadata"]["name"].as_str().unwrap_or_default();
        let (owner_kind, owner) = match kind {
            "Deployment" => ("ReplicaSet", crate::workloads::replica_set_name(name)),
            "ReplicaSet" | "StatefulSet" => (kind, name.to_string()),
            _ => continue,
        };
        let Ok(selector) = serde_json::from_value::<LabelSelector>(w["spec"]["selector"].clone())
        else {
            continue;
        };
        let object = format!("{kind} {namespace}/{name}");
        let Ok(reqs) = crate::selectors::label_selector(&selector, &object, "spec.selector") else {
            continue;
        };
        if kind == "Deployment" {
            add_replica_sets_of(dump, namespace, name, &reqs);
        }
        dump.selectors
            .sets
            .entry((namespace.into(), owner_kind.into(), owner))
            .or_insert(reqs);
    }
}

/// The ReplicaSets a Deployment's pods of the file name but the file lacks.
fn add_replica_sets_of(
    dump: &mut ClusterDump,
    namespace: &str,
    deployment: &str,
    reqs: &Requirements,
) {
    let prefix = format!("{deployment}-");
    for pod in &dump.pods {
        let meta = &pod.metadata;
        let labels = meta.labels.clone().unwrap_or_default();
        let owner = meta
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true) && o.kind == "ReplicaSet");
        let Some(owner) = owner else { continue };
        let key = (
            namespace.to_string(),
            "ReplicaSet".to_string(),
            owner.name.clone(),
        );
        let ours = meta.namespace.as_deref().unwrap_or("default") == namespace
            && owner.name.starts_with(&prefix)
            && reqs.matches_labels(&labels);
        if !ours || dump.selectors.sets.contains_key(&key) {
            continue;
        }
        let mut set = reqs.clone();
        if let Some(hash) = labels.get("pod-template-hash") {
            set.add(Requirement::single("pod-template-hash", hash));
        }
        dump.selectors.sets.insert(key, set);
    }
}

/// Converts the legacy objects to v1 and adds them, unless a v1 object of the same kind and
/// name is already in the dump (an upgraded cluster holds both).
fn add_legacy(dump: &mut ClusterDump, legacy: &[Value]) -> Result<(), KubeError> {
    let converted = crate::legacy::convert(legacy);
    add_missing(&mut dump.nodepools, converted.nodepools, "NodePool")?;
    add_missing(&mut dump.nodeclasses, converted.nodeclasses, "EC2NodeClass")?;
    // A key no legacy field has is a misspelt key like any other.
    dump.warnings.extend(
        (converted.notes.iter())
            .filter(|n| n.kind == crate::legacy::NoteKind::Unknown)
            .map(|n| InputWarning {
                object: n.object.clone(),
                path: n.field.clone(),
                problem: Problem::Unknown,
            }),
    );
    dump.notes = converted.notes;
    Ok(())
}

/// Adds each converted object whose name is not taken yet.
fn add_missing<K>(list: &mut Vec<K>, converted: Vec<Value>, kind: &str) -> Result<(), KubeError>
where
    K: kube::Resource + DeserializeOwned,
{
    for value in converted {
        let object: K = typed(value, kind)?;
        if !list.iter().any(|o| o.meta().name == object.meta().name) {
            list.push(object);
        }
    }
    Ok(())
}

fn add_object(
    dump: &mut ClusterDump,
    legacy: &mut Vec<Value>,
    workloads: &mut Vec<Value>,
    value: Value,
    source: &str,
) -> Result<(), KubeError> {
    let kind = value
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if kind == "List" || kind.ends_with("List") && value.get("items").is_some() {
        let items = value
            .get("items")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for item in items {
            add_object(dump, legacy, workloads, item, source)?;
        }
        return Ok(());
    }
    if crate::legacy::is_legacy(&value) {
        legacy.push(value);
        return Ok(());
    }
    if crate::workloads::KINDS.contains(&kind.as_str()) {
        workloads.push(value);
        return Ok(());
    }
    if kind.is_empty() {
        return Err(KubeError::Document {
            source_name: source.to_string(),
            reason: format!("an object has no kind: {}", truncate(&value.to_string())),
        });
    }
    // One object that does not read is left out and named; the others still read.
    let meta = meta_of(&value);
    let unversioned =
        (value.get("apiVersion")).is_none_or(|v| v.as_str().is_none_or(str::is_empty));
    if unversioned && objects::reads(&kind) {
        dump.warnings.push(InputWarning {
            object: object_name(&kind, &value),
            path: "apiVersion".into(),
            problem: Problem::Required,
        });
    }
    if let Some(e) = misplaced_metadata(&value, &kind) {
        dump.rejected
            .push(crate::rejected::Rejected::new(&kind, &meta, e));
        return Ok(());
    }
    let stand_in = (kind == "Pod")
        .then(|| objects::held_stand_in(&value, &meta))
        .flatten();
    if let Err(e) = add_typed(dump, value, &kind) {
        dump.rejected
            .push(crate::rejected::Rejected::new(&kind, &meta, e));
        dump.pods.extend(stand_in);
    }
    Ok(())
}

/// Adds one object of a kind the dump reads, typed.
fn add_typed(dump: &mut ClusterDump, value: Value, kind: &str) -> Result<(), KubeError> {
    let kind = kind.to_string();
    let warnings = &mut dump.warnings;
    match kind.as_str() {
        "Pod" => {
            let pod: Pod = noted(value, &kind, warnings)?;
            let meta = &pod.metadata;
            let object = format!(
                "Pod {}/{}",
                meta.namespace.as_deref().unwrap_or("default"),
                meta.name.as_deref().unwrap_or("<unnamed>")
            );
            // A pod bound to a node was admitted (it runs): only a pending one written by hand
            // is checked, so a node's pods are never lost to the check.
            let pending = |s: &&PodSpec| s.node_name.as_deref().is_none_or(str::is_empty);
            if let Some(spec) = pod.spec.as_ref().filter(pending) {
                crate::api_rules::pod_spec(spec, &object, "spec")?;
            }
            dump.pods.push(pod)
        }
        "Node" => dump.nodes.push(noted(value, &kind, warnings)?),
        "DaemonSet" => dump.daemonsets.push(noted(value, &kind, warnings)?),
        "PodDisruptionBudget" => dump.pdbs.push(noted(value, &kind, warnings)?),
        "PersistentVolumeClaim" => dump.pvcs.push(noted(value, &kind, warnings)?),
        "PersistentVolume" => dump.pvs.push(noted(value, &kind, warnings)?),
        "StorageClass" => dump.storage_classes.push(noted(value, &kind, warnings)?),
        "CSINode" => dump.csinodes.push(noted(value, &kind, warnings)?),
        "Service" => {
            let service: Service = noted(value, &kind, warnings)?;
            let selector = service.spec.and_then(|spec| spec.selector);
            if let Some(selector) = selector {
                let namespace = service
                    .metadata
                    .namespace
                    .unwrap_or_else(|| "default".into());
                let selector = selector.into_iter().collect();
                dump.selectors.add_service(&namespace, selector);
            }
        }
        "NodePool" => {
            let name = object_name(&kind, &value);
            let mut required = crate::api_rules::nodepool_required(&value, &name);
            required.extend(crate::api_rules::nodepool_schedules(&value, &name));
            let pool: NodePool = noted(value, &kind, warnings)?;
            warnings.extend(required);
            let spec = &pool.spec;
            kept_unread(&pool, "spec", &spec.extra, warnings);
            kept_unread(
                &pool,
                "spec.template.spec",
                &spec.template.spec.extra,
                warnings,
            );
            dump.nodepools.push(pool);
        }
        "EC2NodeClass" => {
            let required =
                crate::api_rules::nodeclass_required(&value, &object_name(&kind, &value));
            let class: EC2NodeClass = noted(value, &kind, warnings)?;
            warnings.extend(required);
            kept_unread(&class, "spec", &class.spec.extra, warnings);
            dump.nodeclasses.push(class);
        }
        "NodeClaim" => {
            let claim: NodeClaim = noted(value, &kind, warnings)?;
            kept_unread(&claim, "spec", &claim.spec.extra, warnings);
            dump.nodeclaims.push(claim);
        }
        "NodeOverlay" => {
            let overlay: NodeOverlay = noted(value, &kind, warnings)?;
            kept_unread(&overlay, "spec", &overlay.spec.extra, warnings);
            dump.nodeoverlays.push(overlay);
        }
        "ConfigMap" if value["metadata"]["name"] == ROOT_CA_CONFIGMAP => {
            let ca = value["data"]["ca.crt"].as_str().ok_or_else(|| {
                KubeError::field(
                    format!("ConfigMap {ROOT_CA_CONFIGMAP}"),
                    "data.ca.crt",
                    "missing: it holds the cluster's CA",
                )
            })?;
            dump.ca_bundle = Some(ca_bundle_of(ca));
        }
        other if misspelt_kind(other, api_version(&value)).is_some() => {
            dump.warnings.push(InputWarning {
                object: object_name(other, &value),
                path: (misspelt_kind(other, api_version(&value)))
                    .unwrap_or_default()
                    .to_string(),
                problem: Problem::MisspeltKind,
            })
        }
        other => match dump.skipped.iter_mut().find(|(k, _)| k == other) {
            Some((_, n)) => *n += 1,
            None => dump.skipped.push((other.to_string(), 1)),
        },
    }
    Ok(())
}

mod documents;
mod foreign;
mod objects;
mod slim;
use documents::{documents, unreadable_document};
pub use foreign::{drop_foreign_claims, Foreign};
use objects::{
    api_version, drop_duplicate_workloads, drop_duplicates, drop_foreign, kept_unread, meta_of,
    misplaced_metadata, misspelt_kind, noted, truncate,
};
pub use slim::SlimPod;

#[cfg(test)]
#[path = "../tests/unit/dump.rs"]
mod tests;
