//! Applying the core's decisions to the cluster: NodeClaims built from the plan and created,
//! nodes registered (labels and taints synced from their NodeClaim, `karpenter.sh/unregistered`
//! removed, finalizer added), cordoned with `karpenter.sh/disrupted:NoSchedule`, and drained
//! through the Eviction API. Updates are optimistic: a 409 Conflict re-reads the object and
//! tries again, never overwrites; a PodDisruptionBudget's 429 is never forced.

use std::collections::BTreeMap;

use fleetwright_core::disruption::{
    HASH_VERSION, NODECLASS_HASH, NODECLASS_HASH_VERSION, NODEPOOL_HASH_VERSION,
};
use fleetwright_core::labels::{NODEPOOL, TAINT_DISRUPTED, TAINT_UNREGISTERED};
use fleetwright_core::plan::NewNodeClaim;
use k8s_openapi::api::core::v1::{Event, EventSource, Node, ObjectReference, Pod, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, EvictParams, PostParams};
use kube::Client;
use serde_json::Value;

use crate::crds::{
    self, Condition, EC2NodeClass, NodeClaim, NodeClaimResources, NodeClaimStatus, NodeClassRef,
    NodePool, NodeSelectorRequirementWithMinValues,
};
use crate::error::KubeError;

/// The finalizer Karpenter and Fleetwright put on NodeClaims and nodes.
pub const TERMINATION_FINALIZER: &str = "karpenter.sh/termination";
/// Conflicting updates are retried this many times before giving up.
pub const CONFLICT_RETRIES: usize = 5;

pub(crate) fn api_error(kind: &str, e: kube::Error) -> KubeError {
    KubeError::Api {
        kind: kind.to_string(),
        reason: e.to_string(),
    }
}

/// The NodeClaim to create for a planned node, from its NodePool and EC2NodeClass in `dump`;
/// None when the pool is gone.
pub fn nodeclaim_in(dump: &crate::dump::ClusterDump, planned: &NewNodeClaim) -> Option<NodeClaim> {
    let pool = dump
        .nodepools
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some(planned.nodepool.as_str()))?;
    let class_name = pool
        .spec
        .template
        .spec
        .node_class_ref
        .as_ref()
        .map(|r| r.name.as_str());
    let class = dump
        .nodeclasses
        .iter()
        .find(|c| c.metadata.name.as_deref() == class_name);
    Some(nodeclaim_for(pool, class, planned))
}

/// The NodeClaim to create for one planned node of `pool`.
pub fn nodeclaim_for(
    pool: &NodePool,
    class: Option<&EC2NodeClass>,
    planned: &NewNodeClaim,
) -> NodeClaim {
    let pool_name = pool.metadata.name.clone().unwrap_or_default();
    let template = &pool.spec.template;
    let mut labels: BTreeMap<String, String> = template
        .metadata
        .as_ref()
        .map(|m| m.labels.clone())
        .unwrap_or_default();
    labels.insert(NODEPOOL.to_string(), pool_name.clone());
    for r in planned
        .requirements
        .iter()
        .filter(|r| r.operator == "In" && r.values.len() == 1)
    {
        labels
            .entry(r.key.clone())
            .or_insert_with(|| r.values[0].clone());
    }
    let mut annotations = template
        .metadata
        .as_ref()
        .map(|m| m.annotations.clone())
        .unwrap_or_default();
    annotations.insert(
        fleetwright_core::disruption::NODEPOOL_HASH.to_string(),
        crate::convert::template_hash(pool),
    );
    annotations.insert(NODEPOOL_HASH_VERSION.to_string(), HASH_VERSION.to_string());
    if let Some(class) = class {
        annotations.insert(
            NODECLASS_HASH.to_string(),
            crate::convert::node_class_hash(class),
        );
        annotations.insert(NODECLASS_HASH_VERSION.to_string(), HASH_VERSION.to_string());
    }
    let annotations = Some(annotations);
    let owner = OwnerReference {
        api_version: "karpenter.sh/v1".into(),
        kind: "NodePool".into(),
        name: pool_name.clone(),
        uid: pool.metadata.uid.clone().unwrap_or_default(),
        block_owner_deletion: Some(true),
        controller: None,
    };
    let spec = crds::NodeClaimSpec {
        node_class_ref: template.spec.node_class_ref.clone().or_else(|| {
            Some(NodeClassRef {
                group: "karpenter.k8s.aws".into(),
                kind: "EC2NodeClass".into(),
                name: planned.node_class.clone(),
            })
        }),
        requirements: planned
            .requirements
            .iter()
            .map(|r| NodeSelectorRequirementWithMinValues {
                key: r.key.clone(),
                operator: r.operator.clone(),
                values: r.values.clone(),
                min_values: r.min_values,
            })
            .collect(),
        taints: template.spec.taints.clone(),
        startup_taints: template.spec.startup_taints.clone(),
        expire_after: template.spec.expire_after.clone(),
        termination_grace_period: template.spec.termination_grace_period.clone(),
        resources: Some(NodeClaimResources {
            requests: planned
                .requests
                .to_map()
                .into_iter()
                .map(|(k, v)| (k, Value::String(v)))
                .collect(),
        }),
        extra: BTreeMap::new(),
    };
    NodeClaim {
        metadata: ObjectMeta {
            generate_name: Some(format!("{pool_name}-")),
            labels: Some(labels),
            annotations,
            owner_references: Some(vec![owner]),
            finalizers: Some(vec![TERMINATION_FINALIZER.to_string()]),
            ..Default::default()
        },
        spec,
        status: None,
    }
}

/// Creates a NodeClaim; the API server picks its name from `generateName`.
pub async fn create_nodeclaim(client: Client, claim: &NodeClaim) -> Result<NodeClaim, KubeError> {
    let api: Api<NodeClaim> = Api::all(client);
    let created = api
        .create(&PostParams::default(), claim)
        .await
        .map_err(|e| api_error("creating NodeClaim", e))?;
    tracing::info!(
        nodeclaim = created.metadata.name.as_deref().unwrap_or_default(),
        "created nodeclaim"
    );
    Ok(created)
}

fn taint_key(t: &Taint) -> (&str, &str) {
    (t.key.as_str(), t.effect.as_str())
}

/// The node after registration against its NodeClaim, or None when nothing changes.
pub fn registered(node: &Node, claim: &NodeClaim) -> Option<Node> {
    let mut out = node.clone();
    let labels = out.metadata.labels.get_or_insert_with(Default::default);
    for (k, v) in claim.metadata.labels.iter().flatten() {
        labels.insert(k.clone(), v.clone());
    }
    labels.insert("karpenter.sh/registered".into(), "true".into());
    let spec = out.spec.get_or_insert_with(Default::default);
    let mut taints: Vec<Taint> = spec.taints.clone().unwrap_or_default();
    taints.retain(|t| t.key != TAINT_UNREGISTERED);
    for t in &claim.spec.taints {
        let wanted = Taint {
            key: t.key.clone(),
            value: t.value.clone(),
            effect: t.effect.clone(),
            time_added: None,
        };
        if !taints.iter().any(|x| taint_key(x) == taint_key(&wanted)) {
            taints.push(wanted);
        }
    }
    spec.taints = (!taints.is_empty()).then_some(taints);
    let finalizers = out.metadata.finalizers.get_or_insert_with(Vec::new);
    if !finalizers.iter().any(|f| f == TERMINATION_FINALIZER) {
        finalizers.push(TERMINATION_FINALIZER.to_string());
    }
    (out != *node).then_some(out)
}

/// The node with `karpenter.sh/disrupted:NoSchedule`, or None when it already has it.
pub fn cordoned(node: &Node) -> Option<Node> {
    let taints = node.spec.as_ref().and_then(|s| s.taints.as_ref());
    if taints
        .into_iter()
        .flatten()
        .any(|t| t.key == TAINT_DISRUPTED && t.effect == "NoSchedule")
    {
        return None;
    }
    let mut out = node.clone();
    let spec = out.spec.get_or_insert_with(Default::default);
    spec.taints.get_or_insert_with(Vec::new).push(Taint {
        key: TAINT_DISRUPTED.into(),
        value: None,
        effect: "NoSchedule".into(),
        time_added: None,
    });
    Some(out)
}

/// Reads node `name`, applies `change` and writes it back; on 409 re-reads and tries again.
/// Returns false when `change` had nothing to do.
pub async fn update_node(
    client: Client,
    name: &str,
    change: impl Fn(&Node) -> Option<Node>,
) -> Result<bool, KubeError> {
    let api: Api<Node> = Api::all(client);
    update(&api, "Node", name, Write::Object, change)
        .await?
        .changed("Node", name)
}

/// Where [`update`] writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Write {
    Object,
    Status,
}

/// What [`update`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Update {
    Changed,
    Unchanged,
    Gone,
}

impl Update {
    /// Changed or not; an object that vanished is an error naming it.
    fn changed(self, kind: &str, name: &str) -> Result<bool, KubeError> {
        match self {
            Update::Changed => Ok(true),
            Update::Unchanged => Ok(false),
            Update::Gone => Err(KubeError::Api {
                kind: format!("updating {kind}"),
                reason: format!("{name}: not found"),
            }),
        }
    }
}

/// The optimistic update loop every write shares: read the object, apply `change`, write it
/// back (or its status), and on 409 Conflict re-read and try again instead of overwriting.
pub(crate) async fn update<K>(
    api: &Api<K>,
    kind: &str,
    name: &str,
    write: Write,
    change: impl Fn(&K) -> Option<K>,
) -> Result<Update, KubeError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let params = PostParams::default();
    for attempt in 0..=CONFLICT_RETRIES {
        let Some(current) = api
            .get_opt(name)
            .await
            .map_err(|e| api_error(&format!("reading {kind}"), e))?
        else {
            return Ok(Update::Gone);
        };
        let Some(updated) = change(&current) else {
            return Ok(Update::Unchanged);
        };
        let result = match write {
            Write::Object => api.replace(name, &params, &updated).await,
            Write::Status => api.replace_status(name, &params, &updated).await,
        };
        match result {
            Ok(_) => return Ok(Update::Changed),
            Err(kube::Error::Api(e)) if e.code == 404 => return Ok(Update::Gone),
            Err(kube::Error::Api(e)) if e.code == 409 => {
                tracing::debug!(kind, name, attempt, "conflict writing; re-reading");
            }
            Err(e) => return Err(api_error(&format!("updating {kind}"), e)),
        }
    }
    Err(KubeError::Api {
        kind: format!("updating {kind}"),
        reason: format!("{name}: still conflicting after {CONFLICT_RETRIES} retries"),
    })
}

/// What one drain pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DrainOutcome {
    /// `namespace/name` of pods whose eviction was accepted (or that were already gone).
    pub evicted: Vec<String>,
    /// Pods left in place this pass, with the reason (a PDB refusal is retried on a later pass).
    pub blocked: Vec<(String, String)>,
    /// Critical pods held back until the other pods are gone (Karpenter's drain order).
    pub deferred: Vec<String>,
}

fn pod_key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

fn is_critical(pod: &Pod) -> bool {
    matches!(
        pod.spec
            .as_ref()
            .and_then(|s| s.priority_class_name.as_deref()),
        Some("system-cluster-critical") | Some("system-node-critical")
    )
}

/// Pods a drain leaves alone: DaemonSet pods, mirror (static) pods and finished pods.
/// Pods a drain never sends to the Eviction API: DaemonSet and mirror pods, and pods annotated
/// `karpenter.sh/do-not-disrupt`.
pub fn skipped_by_drain(pod: &Pod) -> bool {
    let owned_by_daemonset = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "DaemonSet");
    let mirror = pod
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key("kubernetes.io/config.mirror"));
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    owned_by_daemonset || mirror || matches!(phase, Some("Succeeded") | Some("Failed"))
}

/// One drain pass over the pods of a cordoned node, through the Eviction API. Non-critical pods
/// go first; critical ones only once no other pod is left to evict. A PodDisruptionBudget's 429
/// leaves the pod for a later pass (never forced), and `karpenter.sh/do-not-disrupt` pods are
/// never evicted.
pub async fn drain(client: Client, pods: &[Pod]) -> Result<DrainOutcome, KubeError> {
    let mut outcome = DrainOutcome::default();
    let candidates: Vec<&Pod> = pods.iter().filter(|p| !skipped_by_drain(p)).collect();
    let (critical, normal): (Vec<&Pod>, Vec<&Pod>) =
        candidates.into_iter().partition(|p| is_critical(p));
    for pod in normal {
        evict(client.clone(), pod, &mut outcome).await?;
    }
    let others_left = !outcome.blocked.is_empty();
    for pod in critical {
        if others_left {
            outcome.deferred.push(pod_key(pod));
        } else {
            evict(client.clone(), pod, &mut outcome).await?;
        }
    }
    Ok(outcome)
}

async fn evict(client: Client, pod: &Pod, outcome: &mut DrainOutcome) -> Result<(), KubeError> {
    let key = pod_key(pod);
    let do_not_disrupt = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(fleetwright_core::labels::DO_NOT_DISRUPT))
        .is_some_and(|v| v == "true");
    if do_not_disrupt {
        outcome
            .blocked
            .push((key, "annotated karpenter.sh/do-not-disrupt".into()));
        return Ok(());
    }
    let api: Api<Pod> = Api::namespaced(
        client,
        pod.metadata.namespace.as_deref().unwrap_or("default"),
    );
    match api
        .evict(
            pod.metadata.name.as_deref().unwrap_or_default(),
            &EvictParams::default(),
        )
        .await
    {
        Ok(_) => outcome.evicted.push(key),
        Err(kube::Error::Api(e)) if e.code == 404 => outcome.evicted.push(key),
        Err(kube::Error::Api(e)) if e.code == 429 => {
            tracing::info!(pod = %key, "eviction refused by a PodDisruptionBudget; retrying on a later pass");
            outcome
                .blocked
                .push((key, format!("PodDisruptionBudget: {}", e.message)));
        }
        Err(e) => return Err(api_error("evicting Pod", e)),
    }
    Ok(())
}

/// A condition stamped at `now` (RFC 3339).
pub fn condition(type_: &str, status: bool, reason: &str, now: &str) -> Condition {
    Condition {
        type_: type_.into(),
        status: if status { "True" } else { "False" }.into(),
        reason: Some(reason.into()),
        message: None,
        last_transition_time: Some(now.into()),
        observed_generation: None,
    }
}

/// `status` with `c` set: replaces the condition of the same type, keeping its transition time
/// when its status does not change. None when nothing changes.
pub fn with_condition(status: &NodeClaimStatus, c: Condition) -> Option<NodeClaimStatus> {
    let mut out = status.clone();
    match out.conditions.iter_mut().find(|x| x.type_ == c.type_) {
        Some(existing) if existing.status == c.status && existing.reason == c.reason => {
            return None
        }
        Some(existing) => {
            let keep = (existing.status == c.status)
                .then(|| existing.last_transition_time.clone())
                .flatten();
            *existing = Condition {
                last_transition_time: keep.or(c.last_transition_time.clone()),
                ..c
            };
        }
        None => out.conditions.push(c),
    }
    Some(out)
}

/// Writes a NodeClaim's status through the status subresource; on 409 re-reads and retries.
/// Reads NodeClaim `name`, applies `change` (labels, annotations, spec) and writes it back;
/// on 409 re-reads and tries again. Returns false when `change` had nothing to do.
pub async fn update_nodeclaim(
    client: Client,
    name: &str,
    change: impl Fn(&NodeClaim) -> Option<NodeClaim>,
) -> Result<bool, KubeError> {
    let api: Api<NodeClaim> = Api::all(client);
    update(&api, "NodeClaim", name, Write::Object, change)
        .await?
        .changed("NodeClaim", name)
}

pub async fn update_nodeclaim_status(
    client: Client,
    name: &str,
    change: impl Fn(&NodeClaim) -> Option<NodeClaimStatus>,
) -> Result<bool, KubeError> {
    let api: Api<NodeClaim> = Api::all(client);
    let with_status = |c: &NodeClaim| {
        change(c).map(|status| NodeClaim {
            status: Some(status),
            ..c.clone()
        })
    };
    update(&api, "NodeClaim status", name, Write::Status, with_status)
        .await?
        .changed("NodeClaim status", name)
}

/// Deletes a NodeClaim; see [`delete_guarded`].
pub async fn delete_nodeclaim(
    client: Client,
    name: &str,
    instance_terminating: bool,
) -> Result<bool, KubeError> {
    delete_guarded(
        Api::<NodeClaim>::all(client),
        "NodeClaim",
        name,
        instance_terminating,
    )
    .await
}

/// Deletes a Node; see [`delete_guarded`].
pub async fn delete_node(
    client: Client,
    name: &str,
    instance_terminating: bool,
) -> Result<bool, KubeError> {
    delete_guarded(Api::<Node>::all(client), "Node", name, instance_terminating).await
}

/// Deletes an object and removes its termination finalizer only once the instance is confirmed
/// terminating, so the object outlives the capacity it tracks. Returns true when it is gone.
async fn delete_guarded<K>(
    api: Api<K>,
    kind: &str,
    name: &str,
    instance_terminating: bool,
) -> Result<bool, KubeError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 404 => return Ok(true),
        Err(e) => return Err(api_error(&format!("deleting {kind}"), e)),
    }
    if !instance_terminating {
        return Ok(false);
    }
    let without_finalizer = |current: &K| {
        let mut out = current.clone();
        out.meta_mut()
            .finalizers
            .get_or_insert_with(Vec::new)
            .retain(|f| f != TERMINATION_FINALIZER);
        Some(out)
    };
    update(&api, kind, name, Write::Object, without_finalizer).await?;
    Ok(true)
}

/// Deletes pods outright (no Eviction API, so no PodDisruptionBudget): what a drain does to the
/// pods still left when the NodeClaim's `terminationGracePeriod` runs out. Returns the keys of
/// the pods deleted (or already gone).
pub async fn delete_pods(client: Client, pods: &[Pod]) -> Result<Vec<String>, KubeError> {
    let mut deleted = Vec::new();
    for pod in pods {
        let api: Api<Pod> = Api::namespaced(
            client.clone(),
            pod.metadata.namespace.as_deref().unwrap_or("default"),
        );
        let name = pod.metadata.name.clone().unwrap_or_default();
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => deleted.push(pod_key(pod)),
            Err(kube::Error::Api(e)) if e.code == 404 => deleted.push(pod_key(pod)),
            Err(e) => return Err(api_error("deleting Pod", e)),
        }
    }
    Ok(deleted)
}

/// A reference to a cluster-scoped object for an Event: a Node (`v1`) or a NodeClaim.
pub fn reference(
    api_version: &str,
    kind: &str,
    name: &str,
    uid: Option<String>,
) -> ObjectReference {
    ObjectReference {
        api_version: Some(api_version.into()),
        kind: Some(kind.into()),
        name: Some(name.into()),
        uid,
        ..Default::default()
    }
}

/// Records an Event, logging (not failing) when the API refuses it: an Event is a courtesy, and
/// the action it reports has already happened.
pub async fn record_event_or_warn(
    client: Client,
    object: &ObjectReference,
    warning: bool,
    reason: &str,
    message: &str,
    now: Timestamp,
) {
    if let Err(e) = record_event(client, object, warning, reason, message, now).await {
        tracing::warn!(error = %e, %reason, "could not record the event");
    }
}

/// Records a Kubernetes Event about `object` (reasons Karpenter users know: `Nominated`,
/// `FailedScheduling`, `DisruptionBlocked`, `SpotInterrupted`, `Unconsolidatable`, …).
pub async fn record_event(
    client: Client,
    object: &ObjectReference,
    warning: bool,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> Result<(), KubeError> {
    let namespace = object.namespace.clone().unwrap_or_else(|| "default".into());
    let api: Api<Event> = Api::namespaced(client, &namespace);
    let event = Event {
        metadata: ObjectMeta {
            generate_name: Some(format!(
                "{}.",
                object.name.as_deref().unwrap_or("fleetwright")
            )),
            namespace: Some(namespace),
            ..Default::default()
        },
        involved_object: object.clone(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        type_: Some(if warning { "Warning" } else { "Normal" }.into()),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        count: Some(1),
        source: Some(EventSource {
            component: Some("fleetwright".into()),
            host: None,
        }),
        reporting_component: Some("fleetwright".into()),
        ..Default::default()
    };
    api.create(&PostParams::default(), &event)
        .await
        .map_err(|e| api_error("recording Event", e))?;
    Ok(())
}
