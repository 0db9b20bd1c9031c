//! The tick's one executor: it applies [`Action`]s in order through the Kubernetes API and the
//! cloud, records what happened in the [`TickSummary`], and writes the log lines. A dry run is
//! decided here and nowhere else: the actions are described ([`super::dry_run`]) and not
//! applied.

mod commands;
mod launch;
mod reboot;
mod writes;

use chrono::{DateTime, Utc};
use fleetwright_cloud::Cloud;
use fleetwright_core::labels::PLACEMENT_GROUP_PARTITION;
use fleetwright_crds::NodeClaim;
use fleetwright_kube::dump::ClusterDump;
use fleetwright_kube::{executor, state};

use tracing::{debug, info, warn};

use super::action::{action_name, objects_of, Action, OnFailure};
use super::dry_run::describe;
use super::machine::Outcome;
use super::say::When;
pub(crate) use super::say::TICK;

use super::claims::name_of;
use super::disrupted::{self, snake_case};
use super::disruption::{self};
use super::{jiff, Tick, TickSummary};
use crate::error::RuntimeError;
use crate::metrics;
use fleetwright_crds::conditions;

/// How many times one tick asks CreateFleet for a NodeClaim that launched nothing for want of
/// capacity.
pub(super) const LAUNCH_ATTEMPTS: u32 = 3;

/// What the executor works on: the tick's read of the cluster, and what it has done.
pub(crate) struct Applied<'a> {
    pub dump: &'a ClusterDump,
    pub now: DateTime<Utc>,
    pub summary: &'a mut TickSummary,
    /// What the actions applied did that later phases decide on, in order.
    pub outcomes: Vec<Outcome>,
    /// What each EC2NodeClass resolved to this tick, or why it did not.
    pub resolved: &'a super::status::Resolutions,
    /// The objects (`NodeClaim <name>`, `Node <name>`) an action failed on this tick: later
    /// steps on them wait for the next tick.
    pub failed: std::collections::BTreeSet<String>,
    /// How many NodeClaims a dry run has made up names for.
    pub dry_names: usize,
}

impl<C: Cloud> Tick<C> {
    /// Applies `actions` in order. An action that fails is reported and stops only the later
    /// actions on the same objects (its NodeClaims and nodes) in this tick: every other object,
    /// command and phase goes on, and the next tick decides the failed one again from what the
    /// cluster then holds.
    pub(crate) async fn apply(&self, actions: Vec<Action>, ctx: &mut Applied<'_>) {
        for action in actions {
            if self.settings.dry_run {
                describe(&action, ctx.summary);
                if ctx.summary.actions.len() < super::ACTIONS_REPORTED {
                    let value = serde_json::to_value(&action).unwrap_or_default();
                    ctx.summary.actions.push(value);
                } else {
                    ctx.summary.actions_left_out += 1;
                }
                let outcomes = super::assumed::assumed(&action, &mut ctx.dry_names, ctx.now);
                ctx.outcomes.extend(outcomes);
                continue;
            }
            if let Action::DisruptionWaits { .. } = action {
                // Only a report: it spends none of the invocation's time.
                action.say();
                continue;
            }
            if self.deadline.near() {
                // Every action is decided again from the cluster by the next tick.
                if ctx.summary.stopped_early.is_none() {
                    warn!(target: TICK, "the invocation's deadline is near; leaving the rest to the next tick");
                    ctx.summary.stopped_early = Some("the invocation's deadline was near".into());
                }
                return;
            }
            let objects = objects_of(&action);
            let after_failure = objects.iter().find(|o| ctx.failed.contains(*o));
            if let Some(failed) =
                after_failure.filter(|_| action.on_failure() == OnFailure::Ordered)
            {
                debug!(target: TICK, object = %failed, "an earlier step on this object failed this tick; leaving this one to the next tick");
                continue;
            }
            let terminating = action.terminates();
            let what = terminating
                .clone()
                .or_else(|| objects.first().cloned())
                .unwrap_or_else(|| action_name(&action));
            let when = action.when();
            if when == When::Before {
                action.say();
            }
            let Err(e) = self.apply_one(&action, ctx).await else {
                if when == When::After {
                    action.say();
                }
                continue;
            };
            ctx.failed.extend(objects);
            if terminating.is_some() {
                // Its NodeClaim keeps its finalizer, so a later tick tries again.
                warn!(target: TICK, %what, error = %e, "terminating failed; a later tick retries");
                ctx.summary.metrics.add(metrics::TERMINATION_FAILURES, 1.0);
                ctx.summary
                    .termination_failures
                    .push(format!("{what}: {e}"));
                continue;
            }
            warn!(target: TICK, %what, error = %e, "an action failed; a later tick retries");
            ctx.summary.failures.push(format!("{what}: {e}"));
        }
    }

    /// Applies one action; its line is said by [`Tick::apply`] (or, for [`When::Own`], here).
    async fn apply_one(&self, action: &Action, ctx: &mut Applied<'_>) -> Result<(), RuntimeError> {
        let now = ctx.now;
        let ns = &self.settings.namespace;
        match action {
            Action::CreateNodeClaim {
                nodepool,
                requests,
                instance_types,
                claim,
            } => {
                self.create(nodepool, requests, instance_types.len(), claim, ctx)
                    .await?
            }
            Action::Launch {
                nodeclaim, claim, ..
            } => self.launch_claim(nodeclaim, claim, ctx).await,
            Action::Register {
                nodeclaim,
                node,
                claim,
                ..
            } => self.register(nodeclaim, node, claim, ctx).await?,
            Action::Initialize { nodeclaim, .. } => {
                self.set_condition(nodeclaim, conditions::INITIALIZED, now, |_| {})
                    .await?;
                ctx.summary.initialized.push(nodeclaim.clone());
                ctx.outcomes.push(Outcome::Initialized(nodeclaim.clone()));
            }
            Action::ScaleDown { nodeclaim, .. } => {
                executor::delete_nodeclaim(self.kube.clone(), nodeclaim, false).await?;
                ctx.summary.scaled_down.push(nodeclaim.clone());
            }
            Action::Restamp {
                nodeclaim,
                annotations,
            } => {
                self.restamp(nodeclaim, annotations).await?;
                ctx.summary.restamped.push(nodeclaim.clone());
            }
            Action::LabelPartition {
                nodeclaim,
                partition,
            } => {
                self.label_nodeclaim(nodeclaim, PLACEMENT_GROUP_PARTITION, partition)
                    .await?
            }
            Action::MarkDrifted { nodeclaim, reason } => {
                self.mark_drifted(nodeclaim, reason.as_deref(), now).await?
            }
            Action::Repair {
                nodeclaim,
                condition,
                terminate_at,
                disrupted,
                ..
            } => {
                self.delete_for(nodeclaim, "unhealthy", *terminate_at)
                    .await?;
                let kind = snake_case(condition.split('=').next().unwrap_or_default());
                let labels = [
                    (metrics::CONDITION, kind.as_str()),
                    (metrics::NODEPOOL, disrupted.nodepool.as_str()),
                    (metrics::CAPACITY_TYPE, disrupted.capacity_type.as_str()),
                    (metrics::IMAGE_ID, disrupted.image_id.as_str()),
                    (metrics::TERMINATION_MODE, disrupted.termination_mode),
                ];
                let m = &mut ctx.summary.metrics;
                m.add_labeled(metrics::NODECLAIMS_UNHEALTHY_DISRUPTED, &labels, 1.0);
                disrupted::record(m, "unhealthy", disrupted);
                ctx.summary.repaired.push(nodeclaim.clone());
            }
            Action::Reboot {
                nodeclaim,
                node,
                step,
            } => self.reboot_step(nodeclaim, node, step, ctx).await?,
            Action::Expire {
                nodeclaim,
                disrupted,
                ..
            } => {
                self.delete_for(nodeclaim, "expired", None).await?;
                ctx.summary.expired.push(nodeclaim.clone());
                disrupted::record(&mut ctx.summary.metrics, "expired", disrupted);
            }
            Action::ReservationExpiring { nodeclaim, .. } => {
                self.delete_for(nodeclaim, "reservation-expiring", None)
                    .await?;
                ctx.summary.reservation_expired.push(nodeclaim.clone());
            }
            Action::NodeClassStatus { nodeclass, status } => {
                let written =
                    executor::update_nodeclass_status(self.kube.clone(), nodeclass, |c| {
                        (Some(status.as_ref()) != c.status.as_ref()).then(|| (**status).clone())
                    })
                    .await;
                if let Err(e) = written {
                    warn!(target: TICK, %nodeclass, error = %e, "could not write the ec2nodeclass's status");
                }
            }
            Action::GiveUp {
                nodeclaim,
                instance_id,
            } => {
                ctx.summary.liveness_deleted.push(nodeclaim.clone());
                self.terminate_claim(nodeclaim, instance_id.as_deref(), "liveness", ctx.summary)
                    .await?;
            }
            Action::EvictForDeletion {
                node,
                nodeclaim,
                pods,
                held,
                given_up,
                ..
            } => {
                let drained = executor::drain(self.kube.clone(), pods, held, now.timestamp()).await;
                let failed: Vec<String> =
                    drained.failed.iter().map(|(pod, _)| pod.clone()).collect();
                self.give_up_on(node, pods, given_up, &failed).await;
                let recorded: Vec<String> = pods
                    .iter()
                    .filter(|p| failed.contains(&fleetwright_kube::objects::pod_key(p)))
                    .map(crate::tick::finish::failing_key)
                    .collect();
                self.mark_eviction_failing(nodeclaim, &recorded, now)
                    .await?;
                info!(target: TICK, %node, left = pods.len() + held.len(), held = held.len(), evicted = drained.evicted.len(), failed = drained.failed.len(), "waiting for pods to leave before terminating");
            }
            Action::DeletePods {
                pods,
                grace_seconds,
                ..
            } => {
                executor::delete_pods(self.kube.clone(), pods, *grace_seconds).await?;
            }
            Action::FinishDeletion {
                nodeclaim,
                instance_id,
                node,
                reason,
            } => {
                // The node goes before the NodeClaim lets go of its finalizer: if deleting the
                // node fails, the NodeClaim is still there for the next tick to finish it.
                self.terminate_instance(instance_id.as_deref(), reason, ctx.summary)
                    .await?;
                if let Some(node) = node {
                    executor::delete_node(self.kube.clone(), node, true).await?;
                }
                executor::delete_nodeclaim(self.kube.clone(), nodeclaim, true).await?;
                info!(target: TICK, nodeclaim = %nodeclaim, "deleted nodeclaim");
            }
            Action::CollectGarbage { instance_id, .. } => {
                ctx.summary.garbage_collected.push(instance_id.clone());
                self.cloud.terminate(instance_id).await?;
                ctx.summary
                    .metrics
                    .add(metrics::INSTANCES_GARBAGE_COLLECTED, 1.0);
            }
            Action::ForgetNodeClaim {
                nodeclaim, node, ..
            } => {
                if let Some(node) = node {
                    executor::delete_node(self.kube.clone(), node, true).await?;
                }
                executor::delete_nodeclaim(self.kube.clone(), nodeclaim, true).await?;
                ctx.summary.metrics.add(metrics::NODECLAIMS_STRANDED, 1.0);
                ctx.summary.stranded_deleted.push(nodeclaim.clone());
            }
            Action::SaveUnavailable { offerings } => self.save_unavailable(offerings, now).await,
            Action::Scored {
                score, approved, ..
            } => super::dry_run::scored(ctx.summary, *score, *approved),
            Action::PoolStatus {
                nodepool,
                nodes,
                resources,
                conditions,
            } => {
                self.write_pool_status(nodepool, *nodes, resources, conditions)
                    .await
            }
            Action::PodRecords { records } => self.record_pods(records, ctx.summary).await,
            Action::NodeEvent {
                node,
                uid,
                reason,
                message,
            } => {
                self.node_event(node, uid.clone(), reason, message, now)
                    .await
            }
            Action::Rejected {
                object,
                event: true,
            } => self.rejected_event(object, now).await,
            Action::SaveRejected { said } => {
                state::store(self.kube.clone(), ns, super::isolation::REJECTED_KEY, said).await?
            }
            Action::ReleaseNode { node } => {
                executor::delete_node(self.kube.clone(), node, true).await?;
            }
            Action::NodeDeleted { nodeclaim, .. } => {
                executor::delete_nodeclaim(self.kube.clone(), nodeclaim, false).await?;
            }
            Action::SaveBlocked { blocked } => {
                state::store(self.kube.clone(), ns, disruption::BLOCKED_KEY, blocked).await?
            }
            Action::SavePending { pending } => {
                state::store(self.kube.clone(), ns, disruption::PENDING_KEY, pending).await?
            }
            Action::StartDisruption {
                command,
                replacements,
                candidates,
                disrupted,
            } => {
                self.start(command.clone(), replacements, candidates, ctx)
                    .await?;
                // A repair is counted when its node goes (`Action::Repair`), not when its
                // replacements launch first.
                let reason = command.split('/').next().unwrap_or_default();
                for d in disrupted.iter().filter(|_| reason != "unhealthy") {
                    disrupted::record(&mut ctx.summary.metrics, reason, d);
                }
            }
            Action::Cordon { node } => {
                executor::update_node(self.kube.clone(), node, executor::cordoned).await?;
            }
            Action::Abandon {
                why, candidates, ..
            } => self.abandon(why, candidates, now).await?,
            Action::RecordRepairFailure { nodeclaim, mark } => {
                let mark = mark.clone();
                executor::update_nodeclaim(self.kube.clone(), nodeclaim, move |c| {
                    let mut next = c.clone();
                    let annotations = next
                        .metadata
                        .annotations
                        .get_or_insert_with(Default::default);
                    let key = crate::tick::repair_backoff::REPAIR_FAILED;
                    (annotations.insert(key.into(), mark.clone()).as_ref() != Some(&mark))
                        .then_some(next)
                })
                .await?;
            }
            Action::DeleteNodeClaim { nodeclaim } | Action::DropReplacement { nodeclaim, .. } => {
                executor::delete_nodeclaim(self.kube.clone(), nodeclaim, false).await?;
            }
            Action::DeleteDrained { nodeclaim } => {
                executor::delete_nodeclaim(self.kube.clone(), nodeclaim, false).await?;
                ctx.summary.disrupted.push(nodeclaim.clone());
            }
            Action::DrainDisrupted {
                nodeclaim,
                node,
                pods,
                held,
                mark_started,
                grace_over,
                progress,
                due,
                due_grace,
                ..
            } => {
                self.mark_drain(nodeclaim, *mark_started, progress.clone())
                    .await?;
                // A pod the API refuses to delete does not hold the evictions of the others up.
                let early = match due.is_empty() {
                    true => Ok(Vec::new()),
                    false => executor::delete_pods(self.kube.clone(), due, *due_grace).await,
                };
                if self
                    .drain_disrupted(node, (pods, held), *grace_over, now)
                    .await?
                {
                    ctx.outcomes.push(Outcome::Drained(nodeclaim.clone()));
                }
                early?;
            }
            // What these say is all they do.
            Action::ShortOfReplicas { .. }
            | Action::RepairBlocked { .. }
            | Action::Blocked { .. }
            | Action::ConfirmLater { .. }
            | Action::Invalidated { .. }
            | Action::DisruptionWaits { .. }
            | Action::Disrupting { .. }
            | Action::AwaitReplacement { .. }
            | Action::Rejected { event: false, .. } => {}
        }
        Ok(())
    }

    async fn create(
        &self,
        nodepool: &str,
        requests: &serde_json::Value,
        instance_types: usize,
        claim: &NodeClaim,
        ctx: &mut Applied<'_>,
    ) -> Result<(), RuntimeError> {
        let claim = executor::create_nodeclaim(self.kube.clone(), claim).await?;
        let name = name_of(&claim);
        info!(target: TICK, nodeclaim = %name, nodepool = %nodepool, requests = %requests, instance_types = instance_types, "created nodeclaim");
        ctx.summary.metrics.add_by(
            metrics::NODECLAIMS_CREATED,
            metrics::REASON,
            "provisioning",
            1.0,
        );
        ctx.summary.nodeclaims_created.push(name);
        ctx.outcomes.push(Outcome::Created(Box::new(claim)));
        Ok(())
    }

    async fn register(
        &self,
        nodeclaim: &str,
        node: &str,
        claim: &NodeClaim,
        ctx: &mut Applied<'_>,
    ) -> Result<(), RuntimeError> {
        executor::update_node(self.kube.clone(), node, |n| executor::registered(n, claim)).await?;
        self.set_condition(nodeclaim, conditions::REGISTERED, ctx.now, |status| {
            status.node_name = Some(node.to_string());
        })
        .await?;
        ctx.summary.metrics.add(metrics::NODECLAIMS_REGISTERED, 1.0);
        ctx.summary.registered.push(nodeclaim.to_string());
        ctx.outcomes
            .push(Outcome::Registered(nodeclaim.to_string()));
        Ok(())
    }

    /// A Warning Event on an object the tick left out, saying why.
    async fn rejected_event(
        &self,
        object: &fleetwright_kube::convert::Rejected,
        now: DateTime<Utc>,
    ) {
        let mut reference = executor::reference(
            super::isolation::api_version(&object.kind),
            &object.kind,
            &object.name,
            object.uid.clone(),
        );
        reference.namespace = object.namespace.clone();
        let message = match object.kept {
            true => object.error.clone(),
            false => format!("Ignored until fixed: {}", object.error),
        };
        executor::record_event_or_warn(
            self.kube.clone(),
            &reference,
            true,
            "ValidationFailed",
            &message,
            jiff(now),
        )
        .await;
    }

    /// A Normal Event on a node.
    async fn node_event(
        &self,
        node: &str,
        uid: Option<String>,
        reason: &str,
        message: &str,
        now: DateTime<Utc>,
    ) {
        let reference = executor::reference("v1", "Node", node, uid);
        executor::record_event_or_warn(
            self.kube.clone(),
            &reference,
            false,
            reason,
            message,
            jiff(now),
        )
        .await;
    }
}
