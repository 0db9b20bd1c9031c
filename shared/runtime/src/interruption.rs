//! The interruption use case: EC2 and AWS Health events (directly from EventBridge or through the
//! SQS queue) become cordons, drains and NodeClaim deletions; the tick's termination flow then
//! terminates the instance once its pods are gone. Each message is handled on its own, so one bad
//! message fails alone (an SQS batch item failure) and the rest go on. An SQS batch reads the
//! cluster once, however many messages it holds. What to do is decided by
//! [`fleetwright_kube::interruption::decide`] (pure, also behind `fleetwright replay-event`);
//! this module reads the cluster and executes the actions. Handling is idempotent: a NodeClaim
//! that is already deleting is left to the tick.

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent};
use chrono::{DateTime, Utc};
use fleetwright_cloud::Cloud;
use fleetwright_kube::dump::ClusterDump;
use fleetwright_kube::executor;
pub use fleetwright_kube::interruption::{
    assume, decide, pod_key, Action, Envelope, InstanceOutcome, Kind, Message, RebalanceAction,
};
use fleetwright_kube::snapshot::SnapshotReader;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use serde_json::{json, Value};
use tracing::{info, warn};

use crate::deadline::Deadline;
use crate::error::RuntimeError;
use crate::metrics::{self, Metrics};
use crate::nudge::{Nudge, CAPACITY_NEEDED};
use crate::settings::Settings;
use crate::tick::persist_unavailable;

/// Parses an EventBridge event into a message (see [`fleetwright_kube::interruption::parse`]).
pub fn parse(event: &EventBridgeEvent<Value>) -> Result<Option<Message>, String> {
    fleetwright_kube::interruption::parse(Envelope {
        id: event.id.as_deref().unwrap_or_default(),
        source: &event.source,
        detail_type: &event.detail_type,
        detail: &event.detail,
    })
}

/// The interruption use case.
pub struct Interruption<C, N> {
    pub cloud: C,
    pub kube: Client,
    pub nudge: N,
    pub settings: Settings,
    /// When the invocation ends: messages not started by then are left for redelivery.
    pub deadline: Deadline,
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
            deadline: Deadline::none(),
        }
    }

    /// The same use case, leaving messages it has no time for to SQS.
    pub fn with_deadline(mut self, deadline: Deadline) -> Self {
        self.deadline = deadline;
        self
    }

    /// An SQS batch: every record is handled on its own over one read of the cluster; the ids
    /// of the ones that failed are returned so SQS redelivers (and eventually dead-letters) only
    /// those.
    pub async fn handle_sqs(
        &self,
        event: SqsEvent,
        now: DateTime<Utc>,
        metrics: &mut Metrics,
    ) -> SqsBatchResponse {
        let mut response = SqsBatchResponse::default();
        let mut messages = Vec::new();
        for record in event.records {
            let id = record.message_id.clone().unwrap_or_default();
            let body = record.body.as_deref().unwrap_or_default();
            let parsed = serde_json::from_str::<EventBridgeEvent<Value>>(body)
                .map_err(|e| format!("body is not an EventBridge event: {e}"))
                .and_then(|e| parse(&e).map(|m| (m, e.detail_type)));
            match parsed {
                Ok((Some(message), _)) => messages.push((id, message)),
                Ok((None, detail_type)) => info!(%detail_type, "event needs no action"),
                Err(reason) => fail(&mut response, id, &reason),
            }
        }
        if messages.is_empty() {
            return response;
        }
        if let Some(other) = self.another_autoscaler(now).await {
            warn!(%other, messages = messages.len(), "another node autoscaler is running in this cluster; leaving its interruptions to it");
            return response;
        }
        let ids: Vec<String> = messages
            .iter()
            .flat_map(|(_, m)| m.instance_ids.iter().cloned())
            .collect();
        let reader = SnapshotReader::new(self.kube.clone());
        let mut dump = match reader.read_for_instances(&ids).await {
            Ok(dump) => dump,
            Err(e) => {
                for (id, _) in messages {
                    fail(&mut response, id, &format!("reading the cluster: {e}"));
                }
                return response;
            }
        };
        for (id, message) in messages {
            if self.deadline.near() {
                fail(
                    &mut response,
                    id,
                    "the invocation's deadline is near; left for redelivery",
                );
                continue;
            }
            metrics.add_by(
                metrics::INTERRUPTION_RECEIVED,
                metrics::KIND,
                message.kind.name(),
                1.0,
            );
            if let Err(e) = self.act(&mut dump, &message, now, metrics).await {
                fail(&mut response, id, &e.to_string());
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
        metrics.add_by(
            metrics::INTERRUPTION_RECEIVED,
            metrics::KIND,
            message.kind.name(),
            1.0,
        );
        self.handle(&message, now, metrics)
            .await
            .map_err(|e| e.to_string())
    }

    /// Reads the cluster, then decides and executes the actions for a parsed message (in
    /// dry-run, decides only).
    pub async fn handle(
        &self,
        message: &Message,
        now: DateTime<Utc>,
        metrics: &mut Metrics,
    ) -> Result<Vec<InstanceOutcome>, RuntimeError> {
        if let Some(other) = self.another_autoscaler(now).await {
            warn!(%other, "another node autoscaler is running in this cluster; leaving its interruptions to it");
            return Ok(Vec::new());
        }
        let mut dump = SnapshotReader::new(self.kube.clone())
            .read_for_instances(&message.instance_ids)
            .await?;
        self.act(&mut dump, message, now, metrics).await
    }

    /// Decides over `dump` and executes; `dump` is then updated as the actions left the cluster.
    async fn act(
        &self,
        dump: &mut ClusterDump,
        message: &Message,
        now: DateTime<Utc>,
        metrics: &mut Metrics,
    ) -> Result<Vec<InstanceOutcome>, RuntimeError> {
        let stamp = Timestamp::from_second(now.timestamp()).unwrap_or(Timestamp::UNIX_EPOCH);
        let outcomes = decide(dump, message, self.settings.rebalance, stamp);
        if self.settings.dry_run {
            return Ok(outcomes);
        }
        let mut disrupted = false;
        // One instance whose step fails stops that instance's later steps only: the others of
        // the message go on, and the message is failed (redelivered) for the one that did not.
        let mut first_error = None;
        for outcome in &outcomes {
            match self.execute_all(dump, outcome, now).await {
                Ok(moved) => {
                    disrupted |= moved;
                    assume(dump, outcome, stamp);
                }
                Err(e) => {
                    warn!(instance_id = %outcome.instance_id, error = %e, "an interruption step failed; the message is redelivered");
                    first_error.get_or_insert(e);
                }
            }
            metrics.add(metrics::INTERRUPTION_ACTIONS, outcome.actions.len() as f64);
        }
        if disrupted {
            let detail =
                json!({"reason": format!("{:?}", message.kind), "instances": message.instance_ids});
            if let Err(e) = self.nudge.nudge(CAPACITY_NEEDED, detail).await {
                warn!(error = %e, "could not nudge tick; the next scheduled tick replaces the capacity");
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(outcomes),
        }
    }

    /// Karpenter or Cluster Autoscaler holding its leader Lease (not looked for in a dry run):
    /// its NodeClaims are the same kind as Fleetwright's, so acting on an interruption then
    /// would drain and delete the other autoscaler's nodes.
    async fn another_autoscaler(&self, now: DateTime<Utc>) -> Option<String> {
        if self.settings.dry_run {
            return None;
        }
        let ns = &self.settings.namespace;
        fleetwright_kube::peers::active_autoscaler(self.kube.clone(), ns, now.timestamp()).await
    }

    /// One instance's actions in order; the first that fails stops that instance's later ones.
    /// Returns whether any pod was moved or NodeClaim deleted.
    async fn execute_all(
        &self,
        dump: &ClusterDump,
        outcome: &InstanceOutcome,
        now: DateTime<Utc>,
    ) -> Result<bool, RuntimeError> {
        let mut disrupted = false;
        for action in &outcome.actions {
            self.execute(dump, action, now).await?;
            disrupted |= matches!(
                action,
                Action::Drain { .. } | Action::DeleteNodeClaim { .. }
            );
        }
        Ok(disrupted)
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
            Action::Drain { node, pods, held } => {
                let (pods, kept): (Vec<_>, Vec<_>) = dump
                    .pods_on(node)
                    .into_iter()
                    .filter(|p| pods.contains(&pod_key(p)) || held.contains(&pod_key(p)))
                    .partition(|p| pods.contains(&pod_key(p)));
                let drained =
                    executor::drain(self.kube.clone(), &pods, &kept, now.timestamp()).await;
                info!(%node, evicted = drained.evicted.len(), blocked = drained.blocked.len(), failed = drained.failed.len(), "cordoned and draining node");
            }
            Action::MarkUnavailable {
                capacity_type,
                instance_type,
                zone,
            } => {
                self.cloud
                    .mark_unavailable(capacity_type, instance_type, zone, now);
                let saved = self.cloud.unavailable();
                let ns = &self.settings.namespace;
                if let Err(e) = persist_unavailable(self.kube.clone(), ns, &saved, now).await {
                    warn!(error = %e, "could not persist the unavailable offering");
                }
            }
            Action::DeleteNodeClaim { nodeclaim } => {
                executor::delete_nodeclaim(self.kube.clone(), nodeclaim, false).await?;
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
        let reference = executor::reference("karpenter.sh/v1", "NodeClaim", nodeclaim, uid);
        let stamp = Timestamp::from_second(now.timestamp()).unwrap_or(Timestamp::UNIX_EPOCH);
        executor::record_event_or_warn(self.kube.clone(), &reference, true, reason, message, stamp)
            .await;
    }
}

/// Marks an SQS record failed, so SQS redelivers it (and, after `maxReceiveCount`, dead-letters it).
fn fail(response: &mut SqsBatchResponse, id: String, reason: &str) {
    warn!(message_id = %id, %reason, "interruption message failed; leaving it for redelivery and the DLQ");
    let mut failure = BatchItemFailure::default();
    failure.item_identifier = id;
    response.batch_item_failures.push(failure);
}
