//! Applying the steps of a reboot for repair ([`RebootStep`], decided in
//! [`crate::tick::reboot`]): the NodeClaim's annotations and `Rebooting` condition, the node's
//! fence, the drain through the Eviction API, and the cloud's reboot of an instance this cluster
//! launched. Each write is one the next tick can redo, so a tick cut off between two of them
//! leaves a reboot the next one carries on.

use chrono::{DateTime, Utc};
use fleetwright_cloud::{Cloud, CloudError};
use fleetwright_core::labels::TAINT_REBOOTING;
use fleetwright_crds::{Condition, NodeClaimStatus};
use fleetwright_kube::executor;
use k8s_openapi::api::core::v1::Node;
use tracing::{info, warn};

use super::Applied;
use crate::error::RuntimeError;
use crate::tick::reboot::{self, RebootStep};
use crate::tick::say::TICK;
use crate::tick::Tick;
use fleetwright_crds::conditions;

fn stamp(now: DateTime<Utc>) -> String {
    now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The node with the reboot's fence, or None when it has it.
fn fenced(node: &Node) -> Option<Node> {
    fleetwright_kube::objects::with_no_schedule(node, TAINT_REBOOTING)
}

/// The node without the reboot's fence, or None when it has none.
fn unfenced(node: &Node) -> Option<Node> {
    let mut out = node.clone();
    let taints = out.spec.as_mut()?.taints.as_mut()?;
    let before = taints.len();
    taints.retain(|t| t.key != TAINT_REBOOTING);
    (taints.len() != before).then_some(out)
}

/// `status` with the `Rebooting` condition set (its transition time kept while its status is).
fn with_rebooting(
    status: &NodeClaimStatus,
    on: bool,
    reason: &str,
    message: &str,
    now: DateTime<Utc>,
) -> Option<NodeClaimStatus> {
    let mut c = executor::condition(reboot::REBOOTING, on, reason, &stamp(now));
    c.message = Some(message.to_string());
    executor::with_condition(status, c)
}

/// `status` with the reboot issued: `RebootIssued` (its message kept), and `Initialized`
/// Unknown from now (a fresh time, so the observation window counts from this reboot).
fn issued(status: &NodeClaimStatus, now: DateTime<Utc>) -> Option<NodeClaimStatus> {
    let rebooting = status
        .conditions
        .iter()
        .find(|c| c.type_ == reboot::REBOOTING);
    let message = rebooting
        .and_then(|c| c.message.clone())
        .unwrap_or_default();
    // Issued already (this step applied twice): its times stay.
    let already = rebooting
        .is_some_and(|c| c.status == "True" && c.reason.as_deref() == Some(reboot::ISSUED));
    let mut next = with_rebooting(status, true, reboot::ISSUED, &message, now)
        .unwrap_or_else(|| status.clone());
    if !already {
        next.conditions
            .retain(|c| c.type_ != conditions::INITIALIZED);
        next.conditions.push(Condition {
            type_: conditions::INITIALIZED.into(),
            status: "Unknown".into(),
            reason: Some(reboot::INITIALIZED_REBOOTING.into()),
            message: Some("node is rebooting".into()),
            last_transition_time: Some(stamp(now)),
            observed_generation: None,
        });
    }
    Some(next)
}

/// Whether IAM denied the call: asking again cannot succeed.
fn denied(e: &CloudError) -> bool {
    matches!(e, CloudError::Api { code, .. }
        if code.contains("Unauthorized") || code.contains("AccessDenied"))
}

/// Whether the call was turned away before it was carried out (throttled).
fn throttled(e: &CloudError) -> bool {
    matches!(e, CloudError::Api { code, .. }
        if code.contains("RequestLimitExceeded") || code.contains("Throttl"))
}

impl<C: Cloud> Tick<C> {
    /// Applies one step of the reboot of `nodeclaim` (its node `node`).
    pub(super) async fn reboot_step(
        &self,
        nodeclaim: &str,
        node: &str,
        step: &RebootStep,
        ctx: &mut Applied<'_>,
    ) -> Result<(), RuntimeError> {
        let now = ctx.now;
        match step {
            RebootStep::Commit {
                condition,
                grace_seconds,
                history,
                ..
            } => {
                self.commit_reboot(nodeclaim, condition, *grace_seconds, history, now)
                    .await?;
                self.fence(node).await?;
                ctx.summary.rebooted.push(nodeclaim.to_string());
            }
            RebootStep::Drain { pods, held, .. } => {
                self.fence(node).await?;
                let drained = executor::drain(self.kube.clone(), pods, held, now.timestamp()).await;
                info!(target: TICK, %node, evicted = drained.evicted.len(), blocked = drained.blocked.len(), failed = drained.failed.len(), "draining node for its reboot");
            }
            RebootStep::Issue {
                instance_id,
                boot_id,
                grace_seconds,
            } => {
                let bound = grace_seconds.map(|g| now + chrono::Duration::seconds(g));
                let ask = instance_id.as_deref().map(|id| (id, bound));
                self.issue_reboot(nodeclaim, node, ask, boot_id, now)
                    .await?
            }
            RebootStep::Observed { ready } => {
                executor::update_node(self.kube.clone(), node, unfenced).await?;
                if *ready {
                    self.end_reboot(
                        nodeclaim,
                        true,
                        "node rebooted and rejoined the cluster",
                        now,
                    )
                    .await?;
                    info!(target: TICK, %nodeclaim, %node, "node rebooted and rejoined the cluster");
                }
            }
            RebootStep::Fail {
                message,
                replace,
                terminate_at,
            } => {
                self.fail_reboot(nodeclaim, node, message, *replace, *terminate_at, now)
                    .await?
            }
        }
        Ok(())
    }

    async fn fence(&self, node: &str) -> Result<(), RuntimeError> {
        executor::update_node(self.kube.clone(), node, fenced).await?;
        Ok(())
    }

    /// The reboot's request: its drain's bound and the history on the NodeClaim, then
    /// `Rebooting=True` (`RebootRequested`), whose transition time starts the reboot's clocks.
    async fn commit_reboot(
        &self,
        nodeclaim: &str,
        condition: &str,
        grace_seconds: i64,
        history: &str,
        now: DateTime<Utc>,
    ) -> Result<(), RuntimeError> {
        // The history first: a commit that did not go through spends one of the node's
        // reboots (it is replaced sooner), where one written last could be lost and the node
        // rebooted more often than twice a day.
        self.update_metadata(nodeclaim, |m| {
            let map = m.annotations.get_or_insert_with(Default::default);
            map.insert(reboot::GRACE.into(), format!("{grace_seconds}s"));
            map.insert(reboot::HISTORY.into(), history.to_string());
            for key in [reboot::PRE_BOOT_ID, reboot::ISSUANCE_STARTED, reboot::ASKED] {
                map.remove(key);
            }
        })
        .await?;
        let message = format!("rebooting for {condition}");
        executor::update_nodeclaim_status(self.kube.clone(), nodeclaim, |current| {
            let status = current.status.clone().unwrap_or_default();
            with_rebooting(&status, true, reboot::REQUESTED, &message, now)
        })
        .await?;
        warn!(target: TICK, %nodeclaim, %condition, grace_seconds, "rebooting an unhealthy node");
        Ok(())
    }

    /// Records the boot ID and that the cloud is being asked, asks it (`ask`: the instance, and
    /// the drain's deadline should it refuse), and marks the reboot issued. A cloud that refuses,
    /// or an instance gone, fails the reboot; any other error is retried by the next ticks
    /// until the issuance timeout.
    async fn issue_reboot(
        &self,
        nodeclaim: &str,
        node: &str,
        ask: Option<(&str, Option<DateTime<Utc>>)>,
        boot_id: &str,
        now: DateTime<Utc>,
    ) -> Result<(), RuntimeError> {
        if let Some((id, bound)) = ask {
            self.update_metadata(nodeclaim, |m| {
                let map = m.annotations.get_or_insert_with(Default::default);
                map.insert(reboot::PRE_BOOT_ID.into(), boot_id.to_string());
                map.insert(reboot::ASKED.into(), stamp(now));
                map.entry(reboot::ISSUANCE_STARTED.into())
                    .or_insert_with(|| stamp(now));
            })
            .await?;
            let refused = match self.cloud.reboot(id, nodeclaim).await {
                Ok(true) => None,
                Ok(false) => Some((format!("instance {id} is gone"), true)),
                // Fleetwright's own refusal (not this cluster's instance, or not this
                // NodeClaim's): nothing of that instance is touched, not even to replace it.
                Err(e @ CloudError::Refused { .. }) => Some((e.to_string(), false)),
                Err(e) if denied(&e) => Some((e.to_string(), true)),
                Err(e) => {
                    // Throttled: known not to have gone through, so the next tick asks again.
                    // Any other error may have rebooted it: it is not asked again, and a node
                    // that did not reboot is replaced when the observation window ends.
                    if throttled(&e) {
                        self.forget_asked(nodeclaim).await?;
                    }
                    return Err(e.into());
                }
            };
            if let Some((why, replace)) = refused {
                // Not asked, so that a tick cut off in the failure asks again (the same answer)
                // rather than take the reboot for issued.
                self.forget_asked(nodeclaim).await?;
                let message = format!("reboot rejected by the cloud provider: {why}");
                return self
                    .fail_reboot(nodeclaim, node, &message, replace, bound, now)
                    .await;
            }
            info!(target: TICK, %nodeclaim, %node, instance_id = %id, "rebooted the instance");
        }
        executor::update_nodeclaim_status(self.kube.clone(), nodeclaim, |current| {
            let status = current.status.clone().unwrap_or_default();
            issued(&status, now).filter(|next| *next != status)
        })
        .await?;
        Ok(())
    }

    async fn forget_asked(&self, nodeclaim: &str) -> Result<(), RuntimeError> {
        self.update_metadata(nodeclaim, |m| {
            if let Some(map) = m.annotations.as_mut() {
                map.remove(reboot::ASKED);
            }
        })
        .await
    }

    /// `Rebooting=False`, succeeded or failed, and the boot ID and issuance time cleared.
    async fn end_reboot(
        &self,
        nodeclaim: &str,
        succeeded: bool,
        message: &str,
        now: DateTime<Utc>,
    ) -> Result<(), RuntimeError> {
        self.update_metadata(nodeclaim, |m| {
            if let Some(map) = m.annotations.as_mut() {
                for key in [reboot::PRE_BOOT_ID, reboot::ISSUANCE_STARTED, reboot::ASKED] {
                    map.remove(key);
                }
            }
        })
        .await?;
        let reason = if succeeded {
            reboot::SUCCEEDED
        } else {
            reboot::FAILED
        };
        executor::update_nodeclaim_status(self.kube.clone(), nodeclaim, |current| {
            let status = current.status.clone().unwrap_or_default();
            with_rebooting(&status, false, reason, message, now)
        })
        .await?;
        Ok(())
    }

    /// A failed reboot: the fence gone, the node replaced unless the request itself was
    /// unreadable (its drain bounded as the reboot's was), then `RebootFailed`: deleted first,
    /// so a tick cut off between the two leaves a deletion, not a node to reboot again.
    async fn fail_reboot(
        &self,
        nodeclaim: &str,
        node: &str,
        message: &str,
        replace: bool,
        terminate_at: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Result<(), RuntimeError> {
        if !node.is_empty() {
            executor::update_node(self.kube.clone(), node, unfenced).await?;
        }
        warn!(target: TICK, %nodeclaim, %node, %message, replace, "reboot failed");
        if replace {
            self.delete_for(nodeclaim, "unhealthy", terminate_at)
                .await?;
        }
        self.end_reboot(nodeclaim, false, message, now).await?;
        Ok(())
    }
}
