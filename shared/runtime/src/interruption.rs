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
    Ignore {
        reason: String,
    },
    /// A Kubernetes Event on the NodeClaim.
    RecordEvent {
        nodeclaim: String,
        reason: String,
        message: String,
    },
    /// Taint the node `karpenter.sh/disrupted:NoSchedule`.
    Cordon {
        node: String,
    },
    /// Evict these pods (`namespace/name`) through the Eviction API.
    Drain {
        node: String,
        pods: Vec<String>,
    },
    /// Avoid this offering for a while.
    MarkUnavailable {
        capacity_type: String,
        instance_type: String,
        zone: String,
    },
    Terminate {
        instance_id: String,
    },
    DeleteNodeClaim {
        nodeclaim: String,
    },
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

fn pod_key(p: &k8s_openapi::api::core::v1::Pod) -> String {
    format!(
        "{}/{}",
        p.metadata.namespace.as_deref().unwrap_or("default"),
        p.metadata.name.as_deref().unwrap_or_default()
    )
}

/// Decides what to do for every instance of a message, from the cluster as read. Pure: the same
/// dump and message always give the same actions. A node already cordoned for disruption is not
/// drained again and a NodeClaim already deleting is not terminated again, so duplicates are no-ops.
pub fn decide(
    dump: &ClusterDump,
    message: &Message,
    rebalance: RebalanceAction,
) -> Vec<InstanceOutcome> {
    message
        .instance_ids
        .iter()
        .map(|id| match claim_for(dump, id) {
            None => InstanceOutcome {
                instance_id: id.clone(),
                actions: vec![Action::Ignore {
                    reason: "no NodeClaim of this cluster has this instance".into(),
                }],
                ..Default::default()
            },
            Some(claim) => decide_for(dump, claim, id, &message.kind, rebalance),
        })
        .collect()
}

fn decide_for(
    dump: &ClusterDump,
    claim: &NodeClaim,
    instance_id: &str,
    kind: &Kind,
    rebalance: RebalanceAction,
) -> InstanceOutcome {
    let name = claim.metadata.name.clone().unwrap_or_default();
    let node_name = claim.status.as_ref().and_then(|s| s.node_name.clone());
    let (reason, text) = event_for(kind);
    let mut actions = vec![Action::RecordEvent {
        nodeclaim: name.clone(),
        reason: reason.into(),
        message: text,
    }];
    let drain = *kind != Kind::RebalanceRecommendation || rebalance == RebalanceAction::Drain;
    let node = dump.node_of(claim);
    if let Some(node) = node.filter(|n| drain && !is_cordoned(n)) {
        let node = node.metadata.name.clone().unwrap_or_default();
        let pods = dump
            .pods
            .iter()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node.as_str()))
            .filter(|p| !executor::skipped_by_drain(p))
            .map(pod_key)
            .collect();
        actions.push(Action::Cordon { node: node.clone() });
        actions.push(Action::Drain { node, pods });
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
        if claim.metadata.deletion_timestamp.is_none() {
            actions.push(Action::Terminate {
                instance_id: instance_id.to_string(),
            });
            actions.push(Action::DeleteNodeClaim {
                nodeclaim: name.clone(),
            });
        }
    }
    InstanceOutcome {
        instance_id: instance_id.to_string(),
        nodeclaim: Some(name),
        node: node_name,
        actions,
    }
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

    /// Decides and executes the actions for a parsed message (in dry-run, decides only).
    pub async fn handle(
        &self,
        message: &Message,
        now: DateTime<Utc>,
        metrics: &mut Metrics,
    ) -> Result<Vec<InstanceOutcome>, RuntimeError> {
        let dump = SnapshotReader::new(self.kube.clone()).read_dump().await?;
        let outcomes = decide(&dump, message, self.settings.rebalance);
        if self.settings.dry_run {
            return Ok(outcomes);
        }
        let mut drained = false;
        for outcome in &outcomes {
            for action in &outcome.actions {
                self.execute(&dump, action, now).await?;
                drained |= matches!(action, Action::Drain { .. });
            }
            metrics.add(metrics::INTERRUPTION_ACTIONS, outcome.actions.len() as f64);
        }
        if drained {
            let detail =
                json!({"reason": format!("{:?}", message.kind), "instances": message.instance_ids});
            if let Err(e) = self.nudge.nudge(CAPACITY_NEEDED, detail).await {
                warn!(error = %e, "could not nudge tick; the next scheduled tick replaces the capacity");
            }
        }
        Ok(outcomes)
    }

    async fn execute(
        &self,
        dump: &ClusterDump,
        action: &Action,
        now: DateTime<Utc>,
    ) -> Result<(), RuntimeError> {
        match action {
            Action::Ignore { reason } => {
                info!(%reason, "ignoring an instance this cluster does not own")
            }
            Action::RecordEvent {
                nodeclaim,
                reason,
                message,
            } => self.record(dump, nodeclaim, reason, message, now).await,
            Action::Cordon { node } => {
                executor::update_node(self.kube.clone(), node, executor::cordoned).await?;
            }
            Action::Drain { node, pods } => {
                let pods: Vec<_> = dump
                    .pods
                    .iter()
                    .filter(|p| pods.contains(&pod_key(p)))
                    .cloned()
                    .collect();
                let drained = executor::drain(self.kube.clone(), &pods).await?;
                info!(%node, evicted = drained.evicted.len(), blocked = drained.blocked.len(), "cordoned and draining node");
            }
            Action::MarkUnavailable {
                capacity_type,
                instance_type,
                zone,
            } => {
                self.cloud
                    .mark_unavailable(capacity_type, instance_type, zone, now);
                let saved = self.cloud.unavailable();
                if let Err(e) = state::store(
                    self.kube.clone(),
                    &self.settings.namespace,
                    UNAVAILABLE_KEY,
                    &saved,
                )
                .await
                {
                    warn!(error = %e, "could not persist the unavailable offering");
                }
            }
            Action::Terminate { instance_id } => {
                self.cloud.terminate(instance_id).await?;
                info!(%instance_id, "terminated interrupted instance");
            }
            Action::DeleteNodeClaim { nodeclaim } => {
                executor::delete_nodeclaim(self.kube.clone(), nodeclaim, true).await?;
            }
        }
        Ok(())
    }

    async fn record(
        &self,
        dump: &ClusterDump,
        nodeclaim: &str,
        reason: &str,
        message: &str,
        now: DateTime<Utc>,
    ) {
        let uid = dump
            .nodeclaims
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(nodeclaim))
            .and_then(|c| c.metadata.uid.clone());
        let reference = ObjectReference {
            api_version: Some("karpenter.sh/v1".into()),
            kind: Some("NodeClaim".into()),
            name: Some(nodeclaim.to_string()),
            uid,
            ..Default::default()
        };
        let stamp = Timestamp::from_second(now.timestamp()).unwrap_or(Timestamp::UNIX_EPOCH);
        if let Err(e) =
            executor::record_event(self.kube.clone(), &reference, true, reason, message, stamp)
                .await
        {
            warn!(error = %e, "could not record the event");
        }
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

    fn dump(cordoned: bool, deleting: bool) -> ClusterDump {
        let taints = if cordoned {
            r#"taints: [{key: karpenter.sh/disrupted, effect: NoSchedule}]"#
        } else {
            "{}"
        };
        let deletion = if deleting {
            "deletionTimestamp: \"2026-11-22T10:00:00Z\""
        } else {
            ""
        };
        let yaml = format!(
            r#"
apiVersion: v1
kind: List
items:
- apiVersion: karpenter.sh/v1
  kind: NodeClaim
  metadata:
    name: default-a
    {deletion}
    labels: {{karpenter.sh/nodepool: default, node.kubernetes.io/instance-type: m5.large, topology.kubernetes.io/zone: us-east-1a, karpenter.sh/capacity-type: spot}}
  spec:
    nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
    requirements: []
  status: {{providerID: "aws:///us-east-1a/i-1", nodeName: node-a}}
- apiVersion: v1
  kind: Node
  metadata: {{name: node-a}}
  spec:
    {spec}
- apiVersion: v1
  kind: Pod
  metadata: {{name: web, namespace: shop}}
  spec: {{nodeName: node-a, containers: [{{name: c, image: nginx}}]}}
- apiVersion: v1
  kind: Pod
  metadata:
    name: agent
    namespace: kube-system
    ownerReferences: [{{apiVersion: apps/v1, kind: DaemonSet, name: agent, uid: d-1, controller: true}}]
  spec: {{nodeName: node-a, containers: [{{name: c, image: agent}}]}}
"#,
            spec = if cordoned {
                taints.to_string()
            } else {
                "{}".to_string()
            }
        );
        fleetwright_kube::dump::parse(&yaml, "test.yaml").unwrap()
    }

    fn message(kind: Kind, ids: &[&str]) -> Message {
        Message {
            id: "m".into(),
            kind,
            instance_ids: ids.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn a_spot_warning_decides_cordon_drain_unavailable_terminate_delete() {
        let out = decide(
            &dump(false, false),
            &message(Kind::SpotInterruption, &["i-1", "i-other"]),
            RebalanceAction::Event,
        );
        let kinds: Vec<String> = out[0]
            .actions
            .iter()
            .map(|a| {
                serde_json::to_value(a).unwrap()["action"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "recordEvent",
                "cordon",
                "drain",
                "markUnavailable",
                "terminate",
                "deleteNodeClaim"
            ]
        );
        assert!(
            out[0].actions.contains(&Action::Drain {
                node: "node-a".into(),
                pods: vec!["shop/web".into()]
            }),
            "DaemonSet pods are not drained"
        );
        assert!(
            matches!(&out[1].actions[..], [Action::Ignore { .. }]),
            "instances of other clusters are ignored"
        );
    }

    #[test]
    fn duplicates_and_rebalances_decide_no_disruption() {
        let again = decide(
            &dump(true, true),
            &message(Kind::SpotInterruption, &["i-1"]),
            RebalanceAction::Event,
        );
        assert!(
            again[0].actions.iter().all(|a| matches!(
                a,
                Action::RecordEvent { .. } | Action::MarkUnavailable { .. }
            )),
            "{:?}",
            again[0].actions
        );
        let rebalance = decide(
            &dump(false, false),
            &message(Kind::RebalanceRecommendation, &["i-1"]),
            RebalanceAction::Event,
        );
        assert!(matches!(
            &rebalance[0].actions[..],
            [Action::RecordEvent { .. }]
        ));
        let drain = decide(
            &dump(false, false),
            &message(Kind::RebalanceRecommendation, &["i-1"]),
            RebalanceAction::Drain,
        );
        assert!(drain[0]
            .actions
            .iter()
            .any(|a| matches!(a, Action::Drain { .. })));
        assert!(
            !drain[0]
                .actions
                .iter()
                .any(|a| matches!(a, Action::Terminate { .. })),
            "only spot warnings terminate"
        );
    }
}
