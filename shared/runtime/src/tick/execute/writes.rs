//! The executor's writes to one NodeClaim or NodePool (annotations, labels, conditions, status),
//! and terminations: each writes only when it changes something.

use chrono::{DateTime, Utc};
use fleetwright_cloud::unavailable::UnavailableOfferings;
use fleetwright_cloud::Cloud;
use fleetwright_crds::{NodeClaim, NodeClaimStatus};
use fleetwright_kube::executor;
use tracing::{debug, info, warn};

use crate::error::RuntimeError;
use crate::metrics;
use crate::tick::action::PodRecord;
use crate::tick::disruption::DISRUPTION_ANNOTATION;
use crate::tick::in_progress::TERMINATION_TIMESTAMP;
use crate::tick::say::TICK;
use crate::tick::{Tick, TickSummary};
use fleetwright_crds::conditions;

impl<C: Cloud> Tick<C> {
    /// Writes a NodePool's `status.nodes` and `status.resources`. A failure is logged, not the
    /// tick's: the status only reports, and the next tick writes it again.
    pub(super) async fn write_pool_status(
        &self,
        name: &str,
        nodes: i64,
        resources: &std::collections::BTreeMap<String, String>,
        conditions: &[fleetwright_crds::Condition],
    ) {
        let written = executor::update_nodepool_status(self.kube.clone(), name, |current| {
            let mut status = current.status.clone().unwrap_or_default();
            status.nodes = Some(nodes);
            status.conditions = conditions.to_vec();
            status.resources = Some(
                resources
                    .iter()
                    .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                    .collect(),
            );
            (Some(&status) != current.status.as_ref()).then_some(status)
        })
        .await;
        if let Err(e) = written {
            warn!(target: TICK, nodepool = %name, error = %e, "could not write the nodepool's status");
        }
    }

    /// Marks a NodeClaim deleted for `reason` (`unhealthy`, `reservation-expiring`), then
    /// deletes it. `terminate_at` is when its drain's grace is over; a timestamp already on it
    /// is not this deletion's (repair leaves NodeClaims that carry a command to it), so it is
    /// replaced, or removed when there is none. Cut off between the two, the next tick carries
    /// the marked NodeClaim on as a command.
    pub(super) async fn delete_for(
        &self,
        name: &str,
        reason: &str,
        terminate_at: Option<DateTime<Utc>>,
    ) -> Result<(), RuntimeError> {
        let command = format!("{reason}/delete");
        self.update_metadata(name, |m| {
            let map = m.annotations.get_or_insert_with(Default::default);
            map.insert(DISRUPTION_ANNOTATION.to_string(), command.clone());
            match terminate_at {
                None => {
                    map.remove(TERMINATION_TIMESTAMP);
                }
                Some(at) => {
                    let stamp = at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
                    map.insert(TERMINATION_TIMESTAMP.to_string(), stamp);
                }
            }
        })
        .await?;
        executor::delete_nodeclaim(self.kube.clone(), name, false).await?;
        Ok(())
    }

    /// Writes `annotations` onto a NodeClaim (over what it has).
    pub(super) async fn restamp(
        &self,
        name: &str,
        annotations: &std::collections::BTreeMap<String, String>,
    ) -> Result<(), RuntimeError> {
        self.update_metadata(name, |m| {
            let map = m.annotations.get_or_insert_with(Default::default);
            map.extend(annotations.iter().map(|(k, v)| (k.clone(), v.clone())));
        })
        .await
    }

    /// Sets one label of a NodeClaim.
    pub(super) async fn label_nodeclaim(
        &self,
        name: &str,
        key: &str,
        value: &str,
    ) -> Result<(), RuntimeError> {
        self.update_metadata(name, |m| {
            let map = m.labels.get_or_insert_with(Default::default);
            map.insert(key.to_string(), value.to_string());
        })
        .await
    }

    /// Deletes, with their own grace, the pods given up on whose eviction failed again in this
    /// pass (a 429 or a success in between keeps a pod). A delete that fails is said and tried
    /// again by the next pass; it stops nothing else on the node.
    pub(super) async fn give_up_on(
        &self,
        node: &str,
        pods: &[k8s_openapi::api::core::v1::Pod],
        given_up: &[String],
        failed: &[String],
    ) {
        let doomed: Vec<_> = pods
            .iter()
            .filter(|p| {
                let key = fleetwright_kube::objects::pod_key(p);
                given_up.contains(&key) && failed.contains(&key)
            })
            .cloned()
            .collect();
        if doomed.is_empty() {
            return;
        }
        let names: Vec<String> = doomed
            .iter()
            .map(fleetwright_kube::objects::pod_key)
            .collect();
        match executor::delete_pods(self.kube.clone(), &doomed, None).await {
            Ok(_) => {
                warn!(target: TICK, %node, pods = ?names, "evictions kept failing with errors for 5m; deleting the pods with their own grace")
            }
            Err(e) => {
                warn!(target: TICK, %node, pods = ?names, error = %e, "deleting pods whose evictions kept failing failed; the next pass tries again")
            }
        }
    }

    /// Records on a deleting NodeClaim which pods' evictions are failing, and since when (see
    /// [`crate::tick::finish::next_failing_evictions`]).
    pub(super) async fn mark_eviction_failing(
        &self,
        name: &str,
        failed: &[String],
        now: DateTime<Utc>,
    ) -> Result<(), RuntimeError> {
        use crate::tick::finish::{next_failing_evictions, EVICTION_FAILING_ANNOTATION as KEY};
        let change = |c: &NodeClaim| {
            let record = next_failing_evictions(c, failed, now)?;
            let mut c = c.clone();
            let map = c.metadata.annotations.get_or_insert_with(Default::default);
            match record {
                Some(value) => map.insert(KEY.to_string(), value),
                None => map.remove(KEY),
            };
            Some(c)
        };
        executor::update_nodeclaim(self.kube.clone(), name, change).await?;
        Ok(())
    }

    /// Writes NodeClaims' pod records, several at a time: one that fails is reported and
    /// written again by a later tick, and stops none of the others; it is not a failure of the
    /// tick's (a record keeps time, it changes nothing), so follow-ups go on. Records the API
    /// server forbids (a ClusterRole from before them) are said once a tick.
    pub(super) async fn record_pods(&self, records: &[PodRecord], summary: &mut TickSummary) {
        let writes = records
            .iter()
            .map(|r| {
                let at = r
                    .last_pod_event
                    .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
                (r.nodeclaim.clone(), r.record.clone(), at)
            })
            .collect();
        let deadline = self.deadline;
        let stop = move || deadline.near();
        let written = executor::record_all_pod_events(self.kube.clone(), writes, stop).await;
        if written.forbidden {
            warn!(target: TICK, "recording nodeclaims' pods is forbidden: apply `fleetwright manifests` again (its ClusterRole may patch nodeclaims); until then consolidateAfter cannot see pods that went between ticks");
        }
        for (nodeclaim, e) in &written.failed {
            warn!(target: TICK, %nodeclaim, error = %e, "recording the nodeclaim's pods failed; a later tick retries");
            summary.record_failures += 1;
        }
        let nodeclaims = records.len() - written.failed.len();
        debug!(target: TICK, nodeclaims, "recorded the pods of nodeclaims whose pods changed");
    }

    /// Changes a NodeClaim's metadata with `change`, writing only when it changed something.
    pub(super) async fn update_metadata(
        &self,
        name: &str,
        change: impl Fn(&mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta),
    ) -> Result<(), RuntimeError> {
        executor::update_nodeclaim(self.kube.clone(), name, |current| {
            let mut next = current.clone();
            change(&mut next.metadata);
            (next.metadata != current.metadata).then_some(next)
        })
        .await?;
        Ok(())
    }

    /// Sets a NodeClaim's `Drifted` condition True with `reason`, or removes it (None), as
    /// Karpenter's drift controller does.
    pub(super) async fn mark_drifted(
        &self,
        name: &str,
        reason: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<(), RuntimeError> {
        let stamp = now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        executor::update_nodeclaim_status(self.kube.clone(), name, |current| {
            let status = current.status.clone().unwrap_or_default();
            match reason {
                Some(reason) => {
                    let mut drifted =
                        executor::condition(conditions::DRIFTED, true, reason, &stamp);
                    drifted.message = Some(reason.to_string());
                    executor::with_condition(&status, drifted)
                }
                None => {
                    let mut next = status.clone();
                    next.conditions.retain(|c| c.type_ != conditions::DRIFTED);
                    (next != status).then_some(next)
                }
            }
        })
        .await?;
        Ok(())
    }

    /// Sets condition `type_` True in a NodeClaim's status, with `edit` applied to the status.
    pub(super) async fn set_condition(
        &self,
        name: &str,
        type_: &str,
        now: DateTime<Utc>,
        edit: impl Fn(&mut NodeClaimStatus),
    ) -> Result<(), RuntimeError> {
        let stamp = now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        executor::update_nodeclaim_status(self.kube.clone(), name, |current| {
            let mut status = current.status.clone().unwrap_or_default();
            edit(&mut status);
            let status =
                executor::with_condition(&status, executor::condition(type_, true, type_, &stamp))
                    .unwrap_or(status);
            (Some(&status) != current.status.as_ref()).then_some(status)
        })
        .await?;
        Ok(())
    }

    /// Terminates a NodeClaim's instance (when it has one), then deletes the NodeClaim.
    pub(super) async fn terminate_claim(
        &self,
        name: &str,
        instance_id: Option<&str>,
        reason: &str,
        summary: &mut TickSummary,
    ) -> Result<(), RuntimeError> {
        self.terminate_instance(instance_id, reason, summary)
            .await?;
        executor::delete_nodeclaim(self.kube.clone(), name, true).await?;
        info!(target: TICK, nodeclaim = %name, "deleted nodeclaim");
        Ok(())
    }

    /// Terminates an instance, when there is one, and counts it.
    pub(super) async fn terminate_instance(
        &self,
        instance_id: Option<&str>,
        reason: &str,
        summary: &mut TickSummary,
    ) -> Result<(), RuntimeError> {
        let Some(id) = instance_id else {
            return Ok(());
        };
        self.cloud.terminate(id).await?;
        summary.terminated.push(id.to_string());
        summary
            .metrics
            .add_by(metrics::NODECLAIMS_TERMINATED, metrics::REASON, reason, 1.0);
        Ok(())
    }

    pub(super) async fn save_unavailable(
        &self,
        offerings: &UnavailableOfferings,
        now: DateTime<Utc>,
    ) {
        let ns = &self.settings.namespace;
        if let Err(e) =
            crate::tick::persist_unavailable(self.kube.clone(), ns, offerings, now).await
        {
            warn!(target: TICK, error = %e, "could not persist the unavailable offerings");
        }
    }
}
