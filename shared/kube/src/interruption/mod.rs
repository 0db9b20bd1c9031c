//! Interruption decisions, as data: EC2 and AWS Health events parsed into a [`Message`], and
//! [`decide`], a pure function from a cluster dump and a message to the [`Action`]s that handle
//! each instance. The interruption function executes them; `fleetwright replay-event` prints them.
//! Nothing here talks to an API.

use fleetwright_core::labels::{CAPACITY_TYPE, INSTANCE_TYPE, TAINT_DISRUPTED, ZONE};
use k8s_openapi::api::core::v1::{Node, Pod, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;
use serde_json::Value;

use crate::crds::NodeClaim;
use crate::dump::ClusterDump;

/// What a rebalance recommendation does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum RebalanceAction {
    /// Record a Kubernetes Event only (Karpenter's behaviour).
    #[default]
    Event,
    /// Cordon and drain (aws-node-termination-handler's behaviour).
    Drain,
}

/// The instance id at the end of an AWS provider ID (`aws:///us-east-1a/i-0abc`).
pub fn instance_id(provider_id: &str) -> Option<&str> {
    provider_id
        .rsplit('/')
        .next()
        .filter(|id| id.starts_with("i-"))
}

/// The envelope fields of an EventBridge event that decide what it is.
#[derive(Clone, Copy, Debug)]
pub struct Envelope<'a> {
    pub id: &'a str,
    pub source: &'a str,
    pub detail_type: &'a str,
    pub detail: &'a Value,
}

/// What an event asks for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Kind {
    SpotInterruption,
    RebalanceRecommendation,
    StateChange(String),
    ScheduledChange,
    CapacityReservationInterruption,
}

impl Kind {
    /// A short camelCase name (`spotInterruption`, `stateChange`, …).
    pub fn name(&self) -> &'static str {
        match self {
            Kind::SpotInterruption => "spotInterruption",
            Kind::RebalanceRecommendation => "rebalanceRecommendation",
            Kind::StateChange(_) => "stateChange",
            Kind::ScheduledChange => "scheduledChange",
            Kind::CapacityReservationInterruption => "capacityReservationInterruption",
        }
    }
}

/// A parsed interruption message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Message {
    pub id: String,
    pub kind: Kind,
    pub instance_ids: Vec<String>,
}

/// The EC2 states that mean the instance is going away.
const STOPPING_STATES: [&str; 4] = ["stopping", "stopped", "shutting-down", "terminated"];

fn detail_instance(detail: &Value) -> Option<String> {
    detail
        .get("instance-id")
        .or_else(|| detail.get("instanceId"))
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// Parses an EventBridge event into a message. Unknown kinds and malformed details are errors
/// that name what is missing.
pub fn parse(event: Envelope<'_>) -> Result<Option<Message>, String> {
    let detail = event.detail;
    let one = || {
        detail_instance(detail)
            .map(|i| vec![i])
            .ok_or_else(|| format!("{}: detail.instance-id is missing", event.detail_type))
    };
    let kind_and_instances = match (event.source, event.detail_type) {
        ("aws.ec2", "EC2 Spot Instance Interruption Warning") => (Kind::SpotInterruption, one()?),
        ("aws.ec2", "EC2 Instance Rebalance Recommendation") => {
            (Kind::RebalanceRecommendation, one()?)
        }
        ("aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning") => {
            (Kind::CapacityReservationInterruption, one()?)
        }
        ("aws.ec2", "EC2 Instance State-change Notification") => {
            let state = detail
                .get("state")
                .and_then(Value::as_str)
                .ok_or("EC2 Instance State-change Notification: detail.state is missing")?;
            if !STOPPING_STATES.contains(&state) {
                return Ok(None);
            }
            (Kind::StateChange(state.to_string()), one()?)
        }
        ("aws.health", "AWS Health Event") => {
            let service = detail.get("service").and_then(Value::as_str);
            let category = detail.get("eventTypeCategory").and_then(Value::as_str);
            if service != Some("EC2") || category != Some("scheduledChange") {
                return Ok(None);
            }
            let ids: Vec<String> = detail
                .get("affectedEntities")
                .and_then(Value::as_array)
                .ok_or("AWS Health Event: detail.affectedEntities is missing")?
                .iter()
                .filter_map(|e| e.get("entityValue").and_then(Value::as_str))
                .filter(|v| v.starts_with("i-"))
                .map(str::to_string)
                .collect();
            (Kind::ScheduledChange, ids)
        }
        (source, detail_type) => {
            return Err(format!(
                "unsupported event: source {source:?}, detail-type {detail_type:?}"
            ))
        }
    };
    Ok(Some(Message {
        id: event.id.to_string(),
        kind: kind_and_instances.0,
        instance_ids: kind_and_instances.1,
    }))
}

/// One step of handling an interrupted instance, as data: decided by [`decide`] (pure), then
/// executed in order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(
    tag = "action",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Action {
    /// Nothing to do for this instance, and why.
    Ignore { reason: String },
    /// A Kubernetes Event on the NodeClaim.
    RecordEvent {
        nodeclaim: String,
        reason: String,
        message: String,
    },
    /// Taint the node `karpenter.sh/disrupted:NoSchedule`.
    Cordon { node: String },
    /// Evict these pods (`namespace/name`) through the Eviction API. `held` are the node's
    /// pods that `karpenter.sh/do-not-disrupt` keeps: never evicted, they stay until the
    /// NodeClaim's `terminationGracePeriod` is over.
    Drain {
        node: String,
        pods: Vec<String>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        held: Vec<String>,
    },
    /// Avoid this offering for a while.
    MarkUnavailable {
        capacity_type: String,
        instance_type: String,
        zone: String,
    },
    /// Delete the NodeClaim: its finalizer holds it while the tick drains the node and then
    /// terminates the instance.
    DeleteNodeClaim { nodeclaim: String },
}

/// What handling one instance decided.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceOutcome {
    pub instance_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodeclaim: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    pub actions: Vec<Action>,
}

/// The Event Karpenter records for each kind.
fn event_for(kind: &Kind) -> (&'static str, String) {
    match kind {
        Kind::SpotInterruption => (
            "SpotInterrupted",
            "Spot interruption warning was triggered".into(),
        ),
        Kind::RebalanceRecommendation => (
            "SpotRebalanceRecommendation",
            "Spot rebalance recommendation was triggered".into(),
        ),
        Kind::StateChange(state) => ("InstanceStateChange", format!("Instance is {state}")),
        Kind::ScheduledChange => (
            "InstanceScheduledChange",
            "An AWS Health scheduled change was triggered".into(),
        ),
        Kind::CapacityReservationInterruption => (
            "CapacityReservationInterrupted",
            "Capacity reservation interruption warning was triggered".into(),
        ),
    }
}

pub use crate::objects::pod_key;

/// Decides what to do for every instance of a message, from the cluster as read. Pure: the same
/// dump and message always give the same actions. Every kind but a rebalance recommendation (unless
/// the settings say drain) cordons and drains the node and deletes its NodeClaim; the tick then
/// terminates the instance once the pods are gone. A NodeClaim already deleting is left to that
/// flow, so duplicates are no-ops.
pub fn decide(
    dump: &ClusterDump,
    message: &Message,
    rebalance: RebalanceAction,
    now: Timestamp,
) -> Vec<InstanceOutcome> {
    message
        .instance_ids
        .iter()
        .map(|id| match claim_for(dump, id) {
            None => InstanceOutcome {
                instance_id: id.clone(),
                actions: vec![Action::Ignore {
                    reason: format!("no NodeClaim of this cluster has instance {id}"),
                }],
                ..Default::default()
            },
            Some(claim) => decide_for(dump, claim, id, &message.kind, rebalance, now),
        })
        .collect()
}

fn decide_for(
    dump: &ClusterDump,
    claim: &NodeClaim,
    instance_id: &str,
    kind: &Kind,
    rebalance: RebalanceAction,
    now: Timestamp,
) -> InstanceOutcome {
    let name = claim.metadata.name.clone().unwrap_or_default();
    let node_name = claim.status.as_ref().and_then(|s| s.node_name.clone());
    let (reason, text) = event_for(kind);
    let mut actions = vec![Action::RecordEvent {
        nodeclaim: name.clone(),
        reason: reason.into(),
        message: text,
    }];
    let disrupt = *kind != Kind::RebalanceRecommendation || rebalance == RebalanceAction::Drain;
    let deleting = claim.metadata.deletion_timestamp.is_some();
    let node = dump.node_of(claim);
    if let Some(node) = node.filter(|_| disrupt) {
        let cordoned = is_cordoned(node);
        let name = node.metadata.name.clone().unwrap_or_default();
        if !cordoned {
            actions.push(Action::Cordon { node: name.clone() });
        }
        // A node a disruption already tainted is drained too (that command may not be
        // draining yet); once the NodeClaim is deleting, the tick's termination drains it.
        if !cordoned || !deleting {
            let (pods, held) = pods_to_drain(dump, &name, now);
            actions.push(Action::Drain {
                pods,
                held,
                node: name,
            });
        }
    }
    if *kind == Kind::SpotInterruption {
        let labels = claim.metadata.labels.clone().unwrap_or_default();
        if let (Some(t), Some(z)) = (labels.get(INSTANCE_TYPE), labels.get(ZONE)) {
            actions.push(Action::MarkUnavailable {
                capacity_type: labels
                    .get(CAPACITY_TYPE)
                    .cloned()
                    .unwrap_or_else(|| "spot".into()),
                instance_type: t.clone(),
                zone: z.clone(),
            });
        }
    }
    // As Karpenter does, the NodeClaim is deleted and the instance left to the termination
    // flow (the tick's deletions): it waits for the evicted pods to leave, within the
    // NodeClaim's terminationGracePeriod, so they get their graceful shutdown.
    if disrupt && !deleting {
        actions.push(Action::DeleteNodeClaim {
            nodeclaim: name.clone(),
        });
    }
    InstanceOutcome {
        instance_id: instance_id.to_string(),
        nodeclaim: Some(name),
        node: node_name,
        actions,
    }
}

/// Updates a dump read before `outcome` was executed as if it had been read after: cordoned
/// nodes carry the disruption taint and deleted NodeClaims a deletion timestamp. An SQS batch
/// reads the cluster once and decides each message over the dump the earlier ones left, so a
/// duplicate in the same batch decides nothing new. Pure.
pub fn assume(dump: &mut ClusterDump, outcome: &InstanceOutcome, now: Timestamp) {
    for action in &outcome.actions {
        match action {
            Action::Cordon { node } => {
                if let Some(n) = dump
                    .nodes
                    .iter_mut()
                    .find(|n| n.metadata.name.as_deref() == Some(node.as_str()))
                {
                    let spec = n.spec.get_or_insert_with(Default::default);
                    spec.taints.get_or_insert_with(Vec::new).push(Taint {
                        key: TAINT_DISRUPTED.into(),
                        effect: "NoSchedule".into(),
                        ..Default::default()
                    });
                }
            }
            Action::DeleteNodeClaim { nodeclaim } => {
                if let Some(c) = dump
                    .nodeclaims
                    .iter_mut()
                    .find(|c| c.metadata.name.as_deref() == Some(nodeclaim.as_str()))
                {
                    c.metadata.deletion_timestamp.get_or_insert(Time(now));
                }
            }
            _ => {}
        }
    }
}

/// The pods a drain of `node` evicts (not DaemonSet pods, mirror pods or finished ones), and
/// those `karpenter.sh/do-not-disrupt` holds at `now`.
fn pods_to_drain(dump: &ClusterDump, node: &str, now: Timestamp) -> (Vec<String>, Vec<String>) {
    let (held, evicted): (Vec<Pod>, Vec<Pod>) = dump
        .pods_on(node)
        .into_iter()
        .filter(|p| !crate::objects::left_by_drain(p, TAINT_DISRUPTED))
        .partition(|p| crate::objects::do_not_disrupt_holds(p, now.as_second()));
    let keys = |pods: Vec<Pod>| pods.iter().map(pod_key).collect();
    (keys(evicted), keys(held))
}

fn claim_for<'a>(dump: &'a ClusterDump, instance: &str) -> Option<&'a NodeClaim> {
    dump.nodeclaims.iter().find(|c| {
        c.status
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .and_then(instance_id)
            == Some(instance)
    })
}

fn is_cordoned(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == TAINT_DISRUPTED))
}

#[cfg(test)]
#[path = "../../tests/unit/interruption.rs"]
mod tests;
