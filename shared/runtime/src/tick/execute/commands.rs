//! The executor's part of a disruption command: starting it (replacements, then the candidates
//! annotated and tainted), rolling back one that could not start, abandoning one, and draining
//! its candidates.

use chrono::{DateTime, Utc};
use fleetwright_cloud::Cloud;
use fleetwright_kube::executor;
use k8s_openapi::api::core::v1::Pod;
use tracing::{info, warn};

use super::Applied;
use crate::error::RuntimeError;
use crate::metrics;
use crate::tick::action::Action;
use crate::tick::claims::name_of;
use crate::tick::disruption::{DRAIN_PROGRESS_ANNOTATION, DRAIN_STARTED_ANNOTATION};
use crate::tick::machine::Outcome;
use crate::tick::say::DISRUPT;
use crate::tick::{jiff, Tick};

impl<C: Cloud> Tick<C> {
    /// Creates the replacement (if any), then taints and annotates the candidates with the
    /// command, and the replacement's name once it has one.
    pub(super) async fn start(
        &self,
        mut command: String,
        replacements: &[Action],
        candidates: &[(String, String)],
        ctx: &mut Applied<'_>,
    ) -> Result<(), RuntimeError> {
        let mut names = Vec::new();
        for replacement in replacements {
            let Action::CreateNodeClaim { claim, .. } = replacement else {
                continue;
            };
            let created = match executor::create_nodeclaim(self.kube.clone(), claim).await {
                Ok(created) => created,
                Err(e) => {
                    self.roll_back(&names, ctx).await;
                    return Err(e.into());
                }
            };
            let name = name_of(&created);
            info!(target: DISRUPT, nodeclaim = %name, "created nodeclaim (replacement)");
            ctx.summary.metrics.add_by(
                metrics::NODECLAIMS_CREATED,
                metrics::REASON,
                "disruption",
                1.0,
            );
            ctx.summary.nodeclaims_created.push(name.clone());
            names.push(name);
            ctx.outcomes.push(Outcome::Created(Box::new(created)));
        }
        if !names.is_empty() {
            command = format!("{command}/{}", names.join(","));
        }
        if let Err(e) = self.mark_candidates(&command, candidates).await {
            // A command no candidate carries would leave its replacements to be made again by
            // the next decision: they go now, before they launch.
            self.roll_back(&names, ctx).await;
            return Err(e);
        }
        Ok(())
    }

    /// Records the command on every candidate's NodeClaim, then taints their nodes. The command
    /// is recorded on every NodeClaim before any node is tainted: a tick cut off in between
    /// leaves a command the next tick continues (tainting what is left), never a tainted node
    /// that no command accounts for.
    pub(super) async fn mark_candidates(
        &self,
        command: &str,
        candidates: &[(String, String)],
    ) -> Result<(), RuntimeError> {
        for (_, claim) in candidates {
            executor::update_nodeclaim(
                self.kube.clone(),
                claim,
                crate::tick::in_progress::with_annotation(Some(command.to_string())),
            )
            .await?;
        }
        for (node, _) in candidates {
            executor::update_node(self.kube.clone(), node, executor::cordoned).await?;
        }
        Ok(())
    }

    /// Deletes the replacements a command that could not start created (not launched yet).
    pub(super) async fn roll_back(&self, names: &[String], ctx: &mut Applied<'_>) {
        for name in names {
            ctx.outcomes.retain(|o| {
                !matches!(o, Outcome::Created(c) if c.metadata.name.as_deref() == Some(name.as_str()))
            });
            match executor::delete_nodeclaim(self.kube.clone(), name, true).await {
                Ok(_) => {
                    info!(target: DISRUPT, nodeclaim = %name, "deleted the replacement of a disruption that could not start")
                }
                Err(e) => {
                    warn!(target: DISRUPT, nodeclaim = %name, error = %e, "could not delete the replacement of a disruption that could not start; consolidation removes it once it is empty")
                }
            }
        }
    }

    /// Untaints the candidates, drops the command's annotations, and says why on each NodeClaim.
    pub(super) async fn abandon(
        &self,
        why: &str,
        candidates: &[(String, Option<String>, Option<String>)],
        now: DateTime<Utc>,
    ) -> Result<(), RuntimeError> {
        for (claim, uid, node) in candidates {
            if let Some(node) = node {
                executor::update_node(
                    self.kube.clone(),
                    node,
                    crate::tick::in_progress::uncordoned,
                )
                .await?;
            }
            executor::update_nodeclaim(
                self.kube.clone(),
                claim,
                crate::tick::in_progress::with_annotation(None),
            )
            .await?;
            let reference = executor::reference("karpenter.sh/v1", "NodeClaim", claim, uid.clone());
            let message = format!("Abandoned disruption: {why}");
            executor::record_event_or_warn(
                self.kube.clone(),
                &reference,
                true,
                "DisruptionBlocked",
                &message,
                jiff(now),
            )
            .await;
        }
        Ok(())
    }

    /// Records when a candidate's drain started (its `terminationGracePeriod` counts from here;
    /// kept once written) and, when given, its progress mark.
    pub(super) async fn mark_drain(
        &self,
        name: &str,
        started: Option<DateTime<Utc>>,
        progress: Option<String>,
    ) -> Result<(), RuntimeError> {
        if started.is_none() && progress.is_none() {
            return Ok(());
        }
        let stamp = started.map(|at| at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
        executor::update_nodeclaim(self.kube.clone(), name, |current| {
            let mut next = current.clone();
            let annotations = next
                .metadata
                .annotations
                .get_or_insert_with(Default::default);
            if let Some(stamp) = &stamp {
                annotations
                    .entry(DRAIN_STARTED_ANNOTATION.into())
                    .or_insert_with(|| stamp.clone());
            }
            if let Some(mark) = &progress {
                annotations.insert(DRAIN_PROGRESS_ANNOTATION.into(), mark.clone());
            }
            (next.metadata != current.metadata).then_some(next)
        })
        .await?;
        Ok(())
    }

    /// Drains a candidate's node. Returns whether the drain finished: nothing evictable is left,
    /// or the grace period is over and the pods left were deleted (its NodeClaim goes next).
    pub(super) async fn drain_disrupted(
        &self,
        node: &str,
        (pods, held): (&[Pod], &[Pod]),
        grace_over: bool,
        now: DateTime<Utc>,
    ) -> Result<bool, RuntimeError> {
        // A pod do-not-disrupt holds is never evicted: it counts as blocked, so the drain is
        // not over while it stays.
        let drained = executor::drain(self.kube.clone(), pods, held, now.timestamp()).await;
        info!(target: DISRUPT, node = %node, evicted = drained.evicted.len(), blocked = drained.blocked.len(), failed = drained.failed.len(), "draining node");
        let mut done = drained.done();
        if !done && grace_over {
            let left: Vec<Pod> = pods
                .iter()
                .filter(|p| {
                    !drained
                        .evicted
                        .contains(&fleetwright_kube::interruption::pod_key(p))
                })
                .cloned()
                .collect();
            warn!(target: DISRUPT, node = %node, pods = left.len(), "terminationGracePeriod is over; deleting the pods still on the node");
            executor::delete_pods(self.kube.clone(), &left, None).await?;
            done = true;
        }
        Ok(done)
    }
}
