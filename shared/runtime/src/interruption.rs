//! The interruption use case: EC2 and AWS Health events (directly from EventBridge or through the
//! SQS queue) become cordons, drains, NodeClaim deletions and terminations. Each message is handled
//! on its own, so one bad message fails alone (an SQS batch item failure) and the rest go on.
//! Handling is idempotent: a node that is already cordoned for disruption is not drained again,
//! and a NodeClaim that is already deleting is not terminated again.

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent};
use chrono::{DateTime, Utc};
use fleetwright_aws::cloud::Cloud;
use fleetwright_core::labels::{CAPACITY_TYPE, INSTANCE_TYPE, TAINT_DISRUPTED, ZONE};
use fleetwright_kube::crds::NodeClaim;
use fleetwright_kube::dump::ClusterDump;
use fleetwright_kube::executor;
use fleetwright_kube::snapshot::SnapshotReader;
use fleetwright_kube::state;
use k8s_openapi::api::core::v1::{Node, ObjectReference};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use serde::Serialize;
use serde_json::{json, Value};
use tracing::{info, warn};

use crate::error::RuntimeError;
use crate::metrics::{self, Metrics};
use crate::nudge::{Nudge, CAPACITY_NEEDED};
use crate::settings::{RebalanceAction, Settings};
use crate::tick::{instance_id, UNAVAILABLE_KEY};

/// What an event asks for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Kind {
    SpotInterruption,
    RebalanceRecommendation,
    StateChange(String),
    ScheduledChange,
    CapacityReservationInterruption,
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
pub fn parse(event: &EventBridgeEvent<Value>) -> Result<Option<Message>, String> {
    let detail = &event.detail;
    let one = || {
        detail_instance(detail)
            .map(|i| vec![i])
            .ok_or_else(|| format!("{}: detail.instance-id is missing", event.detail_type))
    };
    let kind_and_instances = match (event.source.as_str(), event.detail_type.as_str()) {
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
        id: event.id.clone().unwrap_or_default(),
        kind: kind_and_instances.0,
        instance_ids: kind_and_instances.1,
    }))
}

/// What handling one instance did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceOutcome {
    pub instance_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodeclaim: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    pub actions: Vec<String>,
}

/// The interruption use case.
pub struct Interruption<C, N> {
    pub cloud: C,
    pub kube: Client,
    pub nudge: N,
    pub settings: Settings,
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

impl<C, N> std::fmt::Debug for Interruption<C, N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interruption")
            .field("settings", &self.settings)
            .finish()
    }
}

impl<C: Cloud, N: Nudge> Interruption<C, N> {
    pub fn new(cloud: C, kube: Client, nudge: N, settings: Settings) -> Self {
        Interruption {
            cloud,
            kube,
            nudge,
            settings,
        }
    }

    /// An SQS batch: every record is handled on its own; the ids of the ones that failed are
    /// returned so SQS redelivers (and eventually dead-letters) only those.
    pub async fn handle_sqs(
        &self,
        event: SqsEvent,
        now: DateTime<Utc>,
        metrics: &mut Metrics,
    ) -> SqsBatchResponse {
        let mut response = SqsBatchResponse::default();
        for record in event.records {
            let id = record.message_id.clone().unwrap_or_default();
            let body = record.body.as_deref().unwrap_or_default();
            let result = match serde_json::from_str::<EventBridgeEvent<Value>>(body) {
                Ok(e) => self.handle_event(&e, now, metrics).await.map(|_| ()),
                Err(e) => Err(format!("body is not an EventBridge event: {e}")),
            };
            if let Err(reason) = result {
                warn!(message_id = %id, %reason, "interruption message failed; leaving it for redelivery and the DLQ");
                let mut failure = BatchItemFailure::default();
                failure.item_identifier = id;
                response.batch_item_failures.push(failure);
            }
        }
        response
    }

    /// One EventBridge event.
    pub async fn handle_event(
        &self,
        event: &EventBridgeEvent<Value>,
        now: DateTime<Utc>,
        metrics: &mut Metrics,
    ) -> Result<Vec<InstanceOutcome>, String> {
        let Some(message) = parse(event)? else {
            info!(detail_type = %event.detail_type, "event needs no action");
            return Ok(Vec::new());
        };
        metrics.add(metrics::INTERRUPTION_RECEIVED, 1.0);
        self.handle(&message, now, metrics)
            .await
            .map_err(|e| e.to_string())
    }

    /// Acts on a parsed message.
    pub async fn handle(
        &self,
        message: &Message,
        now: DateTime<Utc>,
        metrics: &mut Metrics,
    ) -> Result<Vec<InstanceOutcome>, RuntimeError> {
        let dump = SnapshotReader::new(self.kube.clone()).read_dump().await?;
        let mut outcomes = Vec::new();
        let mut drained = false;
        for id in &message.instance_ids {
            let Some(claim) = claim_for(&dump, id) else {
                info!(instance_id = %id, kind = ?message.kind, "ignoring an instance this cluster does not own");
                outcomes.push(InstanceOutcome {
                    instance_id: id.clone(),
                    actions: vec!["ignored: not owned by this cluster".into()],
                    ..Default::default()
                });
                continue;
            };
            let outcome = self.act(&dump, claim, message, now).await?;
            drained |= outcome.actions.iter().any(|a| a.starts_with("drain"));
            metrics.add(metrics::INTERRUPTION_ACTIONS, outcome.actions.len() as f64);
            outcomes.push(outcome);
        }
        if drained && !self.settings.dry_run {
            let detail =
                json!({"reason": format!("{:?}", message.kind), "instances": message.instance_ids});
            if let Err(e) = self.nudge.nudge(CAPACITY_NEEDED, detail).await {
                warn!(error = %e, "could not nudge tick; the next scheduled tick replaces the capacity");
            }
        }
        Ok(outcomes)
    }

    async fn act(
        &self,
        dump: &ClusterDump,
        claim: &NodeClaim,
        message: &Message,
        now: DateTime<Utc>,
    ) -> Result<InstanceOutcome, RuntimeError> {
        let name = claim.metadata.name.clone().unwrap_or_default();
        let node_name = claim.status.as_ref().and_then(|s| s.node_name.clone());
        let node = node_name.as_deref().and_then(|n| {
            dump.nodes
                .iter()
                .find(|x| x.metadata.name.as_deref() == Some(n))
        });
        let mut outcome = InstanceOutcome {
            instance_id: message
                .instance_ids
                .iter()
                .find(|i| {
                    claim_for(dump, i).is_some_and(|c| c.metadata.name == claim.metadata.name)
                })
                .cloned()
                .unwrap_or_default(),
            nodeclaim: Some(name.clone()),
            node: node_name.clone(),
            actions: Vec::new(),
        };
        let drain = match message.kind {
            Kind::RebalanceRecommendation => self.settings.rebalance == RebalanceAction::Drain,
            _ => true,
        };
        self.record(claim, &message.kind, now).await;
        outcome.actions.push("event".into());
        if !drain {
            return Ok(outcome);
        }
        if let Some(node) = node {
            self.cordon_and_drain(dump, node, &mut outcome).await?;
        }
        if message.kind == Kind::SpotInterruption {
            self.retire_spot(claim, &mut outcome, now).await?;
        }
        Ok(outcome)
    }

    async fn record(&self, claim: &NodeClaim, kind: &Kind, now: DateTime<Utc>) {
        let reference = ObjectReference {
            api_version: Some("karpenter.sh/v1".into()),
            kind: Some("NodeClaim".into()),
            name: claim.metadata.name.clone(),
            uid: claim.metadata.uid.clone(),
            ..Default::default()
        };
        let (reason, text) = match kind {
            Kind::SpotInterruption => (
                "SpotInterrupted",
                "Spot interruption warning was triggered".to_string(),
            ),
            Kind::RebalanceRecommendation => (
                "SpotRebalanceRecommendation",
                "Spot rebalance recommendation was triggered".to_string(),
            ),
            Kind::StateChange(state) => ("InstanceStateChange", format!("Instance is {state}")),
            Kind::ScheduledChange => (
                "InstanceScheduledChange",
                "An AWS Health scheduled change was triggered".to_string(),
            ),
            Kind::CapacityReservationInterruption => (
                "CapacityReservationInterrupted",
                "Capacity reservation interruption warning was triggered".to_string(),
            ),
        };
        if self.settings.dry_run {
            return;
        }
        let stamp = Timestamp::from_second(now.timestamp()).unwrap_or(Timestamp::UNIX_EPOCH);
        if let Err(e) =
            executor::record_event(self.kube.clone(), &reference, true, reason, &text, stamp).await
        {
            warn!(error = %e, "could not record the event");
        }
    }

    async fn cordon_and_drain(
        &self,
        dump: &ClusterDump,
        node: &Node,
        outcome: &mut InstanceOutcome,
    ) -> Result<(), RuntimeError> {
        let node_name = node.metadata.name.clone().unwrap_or_default();
        if is_cordoned(node) {
            info!(node = %node_name, "node is already cordoned for disruption; not draining again");
            outcome.actions.push("already cordoned".into());
            return Ok(());
        }
        outcome.actions.push("cordon".into());
        let pods: Vec<_> = dump
            .pods
            .iter()
            .filter(|p| {
                p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node_name.as_str())
            })
            .cloned()
            .collect();
        if self.settings.dry_run {
            outcome.actions.push(format!("drain {} pod(s)", pods.len()));
            return Ok(());
        }
        executor::update_node(self.kube.clone(), &node_name, executor::cordoned).await?;
        let drained = executor::drain(self.kube.clone(), &pods).await?;
        info!(node = %node_name, evicted = drained.evicted.len(), blocked = drained.blocked.len(), "cordoned and draining node");
        outcome.actions.push(format!(
            "drain: {} evicted, {} blocked by PodDisruptionBudgets",
            drained.evicted.len(),
            drained.blocked.len()
        ));
        Ok(())
    }

    /// A spot warning: the offering is unavailable for a while, the instance is terminated and its
    /// NodeClaim deleted (once; a NodeClaim already deleting is left to the tick).
    async fn retire_spot(
        &self,
        claim: &NodeClaim,
        outcome: &mut InstanceOutcome,
        now: DateTime<Utc>,
    ) -> Result<(), RuntimeError> {
        let labels = claim.metadata.labels.clone().unwrap_or_default();
        if let (Some(t), Some(z)) = (labels.get(INSTANCE_TYPE), labels.get(ZONE)) {
            let capacity = labels
                .get(CAPACITY_TYPE)
                .map(String::as_str)
                .unwrap_or("spot");
            self.cloud.mark_unavailable(capacity, t, z, now);
            outcome
                .actions
                .push(format!("mark {capacity}/{t}/{z} unavailable"));
            if !self.settings.dry_run {
                if let Err(e) = state::store(
                    self.kube.clone(),
                    &self.settings.namespace,
                    UNAVAILABLE_KEY,
                    &self.cloud.unavailable(),
                )
                .await
                {
                    warn!(error = %e, "could not persist the unavailable offering");
                }
            }
        }
        if claim.metadata.deletion_timestamp.is_some() {
            outcome.actions.push("already deleting".into());
            return Ok(());
        }
        outcome.actions.push("terminate".into());
        outcome.actions.push("delete nodeclaim".into());
        if self.settings.dry_run {
            return Ok(());
        }
        self.cloud.terminate(&outcome.instance_id).await?;
        let name = claim.metadata.name.clone().unwrap_or_default();
        executor::delete_nodeclaim(self.kube.clone(), &name, true).await?;
        info!(nodeclaim = %name, instance_id = %outcome.instance_id, "terminated interrupted spot instance");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(source: &str, detail_type: &str, detail: Value) -> EventBridgeEvent<Value> {
        serde_json::from_value(json!({"version": "0", "id": "e-1", "detail-type": detail_type, "source": source,
            "account": "123456789012", "time": "2026-11-22T10:00:00Z", "region": "us-east-1", "resources": [], "detail": detail}))
        .unwrap()
    }

    #[test]
    fn every_kind_is_recognised() {
        let spot = parse(&event(
            "aws.ec2",
            "EC2 Spot Instance Interruption Warning",
            json!({"instance-id": "i-1", "instance-action": "terminate"}),
        ))
        .unwrap()
        .unwrap();
        assert_eq!(
            (spot.kind, spot.instance_ids),
            (Kind::SpotInterruption, vec!["i-1".to_string()])
        );
        let stopping = parse(&event(
            "aws.ec2",
            "EC2 Instance State-change Notification",
            json!({"instance-id": "i-2", "state": "stopping"}),
        ))
        .unwrap()
        .unwrap();
        assert_eq!(stopping.kind, Kind::StateChange("stopping".into()));
        assert!(parse(&event(
            "aws.ec2",
            "EC2 Instance State-change Notification",
            json!({"instance-id": "i-2", "state": "running"})
        ))
        .unwrap()
        .is_none());
        let health = parse(&event("aws.health", "AWS Health Event", json!({"service": "EC2", "eventTypeCategory": "scheduledChange", "affectedEntities": [{"entityValue": "i-3"}, {"entityValue": "i-4"}]}))).unwrap().unwrap();
        assert_eq!(health.instance_ids, vec!["i-3", "i-4"]);
        assert!(parse(&event("aws.health", "AWS Health Event", json!({"service": "RDS", "eventTypeCategory": "scheduledChange", "affectedEntities": []}))).unwrap().is_none());
        let cr = parse(&event(
            "aws.ec2",
            "EC2 Capacity Reservation Instance Interruption Warning",
            json!({"instance-id": "i-5"}),
        ))
        .unwrap()
        .unwrap();
        assert_eq!(cr.kind, Kind::CapacityReservationInterruption);
    }

    #[test]
    fn malformed_events_say_what_is_missing() {
        let err = parse(&event(
            "aws.ec2",
            "EC2 Spot Instance Interruption Warning",
            json!({}),
        ))
        .unwrap_err();
        assert!(err.contains("detail.instance-id"), "{err}");
        let err = parse(&event("aws.s3", "Object Created", json!({}))).unwrap_err();
        assert!(err.contains("unsupported event"), "{err}");
    }
}
