//! Writing to the cluster: NodeClaims created, nodes and NodeClaims updated (registered,
//! cordoned, conditions), deletions guarded by finalizers, drains through the Eviction API, and
//! Events. The objects written are built purely in [`crate::objects`]. Updates are optimistic: a 409 Conflict re-reads the object and
//! tries again, never overwrites; a PodDisruptionBudget's 429 is never forced.

use k8s_openapi::api::core::v1::{Event, EventSource, Node, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, EvictParams, PostParams};
use kube::core::object::HasStatus;
use kube::Client;

use crate::crds::{
    EC2NodeClass, EC2NodeClassStatus, NodeClaim, NodeClaimStatus, NodePool, NodePoolStatus,
};
use crate::error::KubeError;
pub use crate::objects::TERMINATION_FINALIZER;
pub use crate::objects::{
    condition, cordoned, left_by_drain, nodeclaim_for, nodeclaim_in, reference, registered,
    skipped_by_drain, with_condition, DrainOutcome,
};
use crate::objects::{is_critical, pod_key};

/// Conflicting updates are retried this many times before giving up, each after a short random
/// pause ([`crate::retry::conflict_pause`]): against a real API server, eight writers re-reading
/// in lockstep lost more than five rounds in a row.
pub const CONFLICT_RETRIES: usize = 10;

pub(crate) fn api_error(kind: &str, e: kube::Error) -> KubeError {
    KubeError::Api {
        kind: kind.to_string(),
        reason: e.to_string(),
    }
}

/// Creates a NodeClaim; the API server picks its name from `generateName`.
pub async fn create_nodeclaim(client: Client, claim: &NodeClaim) -> Result<NodeClaim, KubeError> {
    let api: Api<NodeClaim> = Api::all(client);
    let created = api
        .create(&PostParams::default(), claim)
        .await
        .map_err(|e| api_error("creating NodeClaim", e))?;
    // The tick logs the creation at info with what it was for; this is the API's side of it.
    tracing::debug!(
        nodeclaim = created.metadata.name.as_deref().unwrap_or_default(),
        "created nodeclaim"
    );
    Ok(created)
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
/// back (or its status), and on 409 Conflict re-read and try again instead of overwriting. A
/// transient answer (429, 5xx, the transport) is retried the same way after a pause: the write
/// carries the resourceVersion it read, so a retry after a write that did land meets a 409 and
/// re-reads, and `change` then finds nothing left to do.
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
    let mut transient_left = crate::retry::ATTEMPTS - 1;
    let mut pause = crate::retry::first_pause();
    for attempt in 0..=CONFLICT_RETRIES {
        let what = format!("reading {kind} {name}");
        let Some(current) = crate::retry::with_retries(&what, || api.get_opt(name))
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
                tokio::time::sleep(crate::retry::conflict_pause(attempt)).await;
            }
            Err(e) if crate::retry::transient(&e) && transient_left > 0 => {
                tracing::warn!(kind, name, error = %e, pause_ms = pause.as_millis() as u64, "transient API error writing; re-reading and retrying");
                transient_left -= 1;
                tokio::time::sleep(pause).await;
                pause *= 2;
            }
            Err(e) => return Err(api_error(&format!("updating {kind}"), e)),
        }
    }
    Err(KubeError::Api {
        kind: format!("updating {kind}"),
        reason: format!("{name}: still conflicting after {CONFLICT_RETRIES} retries"),
    })
}

/// One drain pass over the pods of a cordoned node, through the Eviction API. Non-critical pods
/// go first; critical ones only once no other pod is left to evict. A PodDisruptionBudget's 429
/// leaves the pod for a later pass (never forced), and `karpenter.sh/do-not-disrupt` pods are
/// never evicted while the annotation holds at `now` (seconds since the epoch). `held` are the
/// node's pods the caller already knows `do-not-disrupt` holds: never sent to the API, they
/// count as blocked, so the critical pods wait for them as Karpenter's drain order has it.
///
/// An eviction that fails otherwise (a 500 for a pod two PDBs cover, a webhook's 403, an API
/// error) is recorded in [`DrainOutcome::failed`] and the other pods are still evicted: one pod
/// never stops a drain, and a drain never stops the caller.
pub async fn drain(client: Client, pods: &[Pod], held: &[Pod], now: i64) -> DrainOutcome {
    let mut outcome = DrainOutcome::default();
    outcome.blocked.extend(held.iter().map(|p| {
        (
            pod_key(p),
            "annotated karpenter.sh/do-not-disrupt".to_string(),
        )
    }));
    let candidates: Vec<&Pod> = pods.iter().filter(|p| !skipped_by_drain(p)).collect();
    let (critical, normal): (Vec<&Pod>, Vec<&Pod>) =
        candidates.into_iter().partition(|p| is_critical(p));
    // The critical pods (DNS, say) go only once the others are gone, evicted ones included:
    // those still shut down, and may need them meanwhile.
    let others_left = !normal.is_empty();
    evict_all(&client, normal, now, &mut outcome).await;
    if others_left || !outcome.blocked.is_empty() || !outcome.failed.is_empty() {
        outcome.deferred.extend(critical.into_iter().map(pod_key));
    } else {
        evict_all(&client, critical, now, &mut outcome).await;
    }
    outcome
}

/// Evictions of one drain pass in flight at once: a node's pods are independent, and the
/// Eviction API checks each against its PodDisruptionBudget however many arrive together, so
/// a node of many pods drains in a few round trips instead of one per pod.
pub const EVICTIONS_IN_FLIGHT: usize = 8;

/// Evicts `pods`, [`EVICTIONS_IN_FLIGHT`] at a time, recording each in `outcome` in the
/// pods' order.
async fn evict_all(client: &Client, pods: Vec<&Pod>, now: i64, outcome: &mut DrainOutcome) {
    use futures::StreamExt;
    // The futures are made up front (nothing runs until polled): a closure that returns one
    // would need to be general over the pods' lifetime, which the tick's future cannot prove.
    let evictions: Vec<_> = pods
        .into_iter()
        .map(|pod| evict(client.clone(), pod, now))
        .collect();
    let results: Vec<(String, Evicted)> = futures::stream::iter(evictions)
        .buffered(EVICTIONS_IN_FLIGHT)
        .collect()
        .await;
    for (key, result) in results {
        match result {
            Evicted::Yes => outcome.evicted.push(key),
            Evicted::Blocked(why) => outcome.blocked.push((key, why)),
            Evicted::Failed(error) => outcome.failed.push((key, error)),
        }
    }
}

/// What one eviction did.
enum Evicted {
    /// Evicted, or already gone.
    Yes,
    /// Held back (`do-not-disrupt`, a PodDisruptionBudget): tried again on a later pass.
    Blocked(String),
    /// Failed otherwise: tried again on a later pass.
    Failed(String),
}

async fn evict(client: Client, pod: &Pod, now: i64) -> (String, Evicted) {
    let key = pod_key(pod);
    let evicted = evict_one(client, pod, &key, now).await;
    (key, evicted)
}

async fn evict_one(client: Client, pod: &Pod, key: &str, now: i64) -> Evicted {
    // Read at the caller's instant (a simulation's is virtual), so a duration ends when the
    // plan that chose this drain says it does.
    if crate::objects::do_not_disrupt_holds(pod, now) {
        return Evicted::Blocked("annotated karpenter.sh/do-not-disrupt".into());
    }
    let api: Api<Pod> = Api::namespaced(
        client,
        pod.metadata.namespace.as_deref().unwrap_or("default"),
    );
    // Only the pod that was read: a pod of the same name created since (a StatefulSet's
    // replica, elsewhere) is another pod, and the API answers 409.
    let params = EvictParams {
        delete_options: pod.metadata.uid.clone().map(|uid| DeleteParams {
            preconditions: Some(kube::api::Preconditions {
                uid: Some(uid),
                resource_version: None,
            }),
            ..DeleteParams::default()
        }),
        ..EvictParams::default()
    };
    match api
        .evict(pod.metadata.name.as_deref().unwrap_or_default(), &params)
        .await
    {
        Ok(_) => Evicted::Yes,
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Evicted::Yes,
        Err(kube::Error::Api(e)) if e.code == 429 => {
            tracing::info!(pod = %key, "eviction refused by a PodDisruptionBudget; retrying on a later pass");
            Evicted::Blocked(format!("PodDisruptionBudget: {}", e.message))
        }
        Err(e) => {
            let error = api_error("evicting Pod", e);
            tracing::warn!(pod = %key, error = %error, "eviction failed; retrying on a later pass");
            Evicted::Failed(error.to_string())
        }
    }
}

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

/// Writes a NodeClaim's status through the status subresource; on 409 re-reads and retries.
pub async fn update_nodeclaim_status(
    client: Client,
    name: &str,
    change: impl Fn(&NodeClaim) -> Option<NodeClaimStatus>,
) -> Result<bool, KubeError> {
    update_status(client, "NodeClaim status", name, change).await
}

/// Pod records written at once: each is one or two small patches of its own NodeClaim.
pub const RECORDS_IN_FLIGHT: usize = 16;

/// One NodeClaim's pod record: its name, the annotation's value, and the
/// `status.lastPodEventTime` to copy it to (None: leave it).
pub type PodRecordWrite = (String, String, Option<String>);

/// What writing pod records did: those that failed, with their errors; and whether the API
/// server forbade them (RBAC without `patch` on NodeClaims), in which case the rest were not
/// tried.
#[derive(Debug, Default)]
pub struct RecordsWritten {
    pub failed: Vec<(String, KubeError)>,
    pub forbidden: bool,
}

/// Writes pod records ([`record_pod_events`]), [`RECORDS_IN_FLIGHT`] at a time: one failure
/// stops none of the others, but a 403 stops those not yet begun (each would be refused alike),
/// and so does `stop` saying so (the invocation's deadline near): a record not written is
/// decided again by the next tick.
pub async fn record_all_pod_events(
    client: Client,
    records: Vec<PodRecordWrite>,
    stop: impl Fn() -> bool + Clone,
) -> RecordsWritten {
    use futures::StreamExt;
    use std::sync::atomic::{AtomicBool, Ordering};
    let forbidden = std::sync::Arc::new(AtomicBool::new(false));
    let writes: Vec<_> = records
        .into_iter()
        .map(|(name, record, at)| {
            let client = client.clone();
            let forbidden = forbidden.clone();
            let stop = stop.clone();
            async move {
                if forbidden.load(Ordering::Relaxed) || stop() {
                    return None;
                }
                match record_pod_events(client, &name, &record, at.as_deref()).await {
                    Ok(()) => None,
                    Err(Written::Forbidden) => {
                        forbidden.store(true, Ordering::Relaxed);
                        None
                    }
                    Err(Written::Failed(e)) => Some((name, e)),
                }
            }
        })
        .collect();
    let failed = futures::stream::iter(writes)
        .buffer_unordered(RECORDS_IN_FLIGHT)
        .filter_map(|failed| async move { failed })
        .collect()
        .await;
    RecordsWritten {
        failed,
        forbidden: forbidden.load(Ordering::Relaxed),
    }
}

/// Why a pod record was not written.
#[derive(Debug)]
pub enum Written {
    Forbidden,
    Failed(KubeError),
}

/// Records on NodeClaim `name` its pod record (`record`, the value of
/// [`crate::convert::pod_events::PODS_ANNOTATION`]) and copies the last pod event to
/// `status.lastPodEventTime`: merge patches, which touch nothing else. The annotation is the
/// record (one write keeps it whole); the status copy is for those who read it, and its failure
/// loses nothing. A NodeClaim gone since the read needs no record.
pub async fn record_pod_events(
    client: Client,
    name: &str,
    record: &str,
    last_pod_event: Option<&str>,
) -> Result<(), Written> {
    use crate::convert::pod_events::PODS_ANNOTATION;
    use kube::api::{Patch, PatchParams};
    let api: Api<NodeClaim> = Api::all(client);
    let params = PatchParams::default();
    let annotation = serde_json::json!({"metadata": {"annotations": {PODS_ANNOTATION: record}}});
    match api.patch(name, &params, &Patch::Merge(&annotation)).await {
        Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
        Err(kube::Error::Api(s)) if s.code == 403 => return Err(Written::Forbidden),
        Err(e) => return Err(Written::Failed(api_error("patching NodeClaim", e))),
        Ok(_) => {}
    }
    let Some(at) = last_pod_event else {
        return Ok(());
    };
    let status = serde_json::json!({"status": {"lastPodEventTime": at}});
    if let Err(e) = api
        .patch_status(name, &params, &Patch::Merge(&status))
        .await
    {
        tracing::debug!(nodeclaim = %name, error = %e, "copying the last pod event to the nodeclaim's status failed; the record holds it");
    }
    Ok(())
}

/// Writes a NodePool's status through its status subresource.
pub async fn update_nodepool_status(
    client: Client,
    name: &str,
    change: impl Fn(&NodePool) -> Option<NodePoolStatus>,
) -> Result<bool, KubeError> {
    update_status(client, "NodePool status", name, change).await
}

/// Writes an EC2NodeClass's status through its status subresource.
pub async fn update_nodeclass_status(
    client: Client,
    name: &str,
    change: impl Fn(&EC2NodeClass) -> Option<EC2NodeClassStatus>,
) -> Result<bool, KubeError> {
    update_status(client, "EC2NodeClass status", name, change).await
}

/// Writes the status `change` makes of a cluster-scoped object through its status subresource.
async fn update_status<K>(
    client: Client,
    kind: &str,
    name: &str,
    change: impl Fn(&K) -> Option<K::Status>,
) -> Result<bool, KubeError>
where
    K: kube::Resource<DynamicType = ()>
        + HasStatus
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    let api: Api<K> = Api::all(client);
    let with_status = |current: &K| {
        change(current).map(|status| {
            let mut next = current.clone();
            *next.status_mut() = Some(status);
            next
        })
    };
    update(&api, kind, name, Write::Status, with_status)
        .await?
        .changed(kind, name)
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
/// pods a NodeClaim's `terminationGracePeriod` leaves no more time. `grace_seconds` caps each
/// pod's own grace (None: its own), so that its shutdown ends by the node's deadline; it is
/// never below 1 s, which would remove the pod from etcd before its containers stop. Only the
/// pod that was read is deleted (a UID precondition): a pod of the same name created since is
/// another pod. Returns the keys of the pods deleted (or already gone).
pub async fn delete_pods(
    client: Client,
    pods: &[Pod],
    grace_seconds: Option<i64>,
) -> Result<Vec<String>, KubeError> {
    let mut deleted = Vec::new();
    let mut failed = None;
    for pod in pods {
        let api: Api<Pod> = Api::namespaced(
            client.clone(),
            pod.metadata.namespace.as_deref().unwrap_or("default"),
        );
        let name = pod.metadata.name.clone().unwrap_or_default();
        let params = DeleteParams {
            grace_period_seconds: grace_seconds.map(|s| s.clamp(1, i64::from(u32::MAX)) as u32),
            preconditions: pod
                .metadata
                .uid
                .clone()
                .map(|uid| kube::api::Preconditions {
                    uid: Some(uid),
                    resource_version: None,
                }),
            ..DeleteParams::default()
        };
        match api.delete(&name, &params).await {
            Ok(_) => deleted.push(pod_key(pod)),
            // Gone, or replaced by a pod of the same name (the UID precondition failed).
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {
                deleted.push(pod_key(pod))
            }
            // One pod the API refuses does not keep the others on the node.
            Err(e) => failed = failed.or(Some(api_error("deleting Pod", e))),
        }
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(deleted),
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
