//! The tick started by something other than its schedule: a nudge (a pod created, capacity
//! needed) or a follow-up the tick asked for itself. Each is skipped when a tick that started
//! later has already done its work, so bursts cost one read and follow-up chains do not pile up.

use chrono::{DateTime, Utc};
use fleetwright_cloud::Cloud;
use tracing::info;

use super::{Tick, TickSummary};
use crate::error::RuntimeError;

/// How long after a nudge was sent a tick must have started for its read to hold the nudge's
/// pod.
const NUDGE_MARGIN_SECONDS: i64 = 2;

impl<C: Cloud> Tick<C> {
    /// Runs one reconcile for a nudge sent at `sent`, unless a tick that started after it
    /// already read the cluster: that read holds whatever the nudge was about (the Lease is
    /// taken before the read), so a burst of nudges costs one read, and no pod is missed.
    pub async fn run_nudged(
        &self,
        now: DateTime<Utc>,
        holder: &str,
        sent: DateTime<Utc>,
    ) -> Result<TickSummary, RuntimeError> {
        // EventBridge's time is in whole seconds, and a nudge is sent at admission, before the
        // pod is stored: only a tick that started well after it has surely read the pod.
        let answered_after = sent + chrono::Duration::seconds(NUDGE_MARGIN_SECONDS);
        if let Some(started) = self.last_started().await {
            if started >= answered_after {
                info!(started = %started, sent = %sent, "a tick started after this nudge has read the cluster; skipping");
                return Ok(TickSummary {
                    skipped: Some(
                        "a tick that started after this nudge already read the cluster".into(),
                    ),
                    ..Default::default()
                });
            }
        }
        self.run(now, holder).await
    }

    /// Runs the follow-up a tick that started at `requested_by` asked for, unless a later tick
    /// has started since: that one asked for its own follow-up if it needed one, so at most one
    /// chain of follow-ups is alive, the latest tick's.
    pub async fn run_follow_up(
        &self,
        now: DateTime<Utc>,
        holder: &str,
        requested_by: DateTime<Utc>,
    ) -> Result<TickSummary, RuntimeError> {
        if let Some(started) = self.last_started().await {
            if started.timestamp() > requested_by.timestamp() {
                info!(started = %started, requested_by = %requested_by, "a later tick has started; its follow-up replaces this one");
                return Ok(TickSummary {
                    skipped: Some(
                        "a later tick has started since this follow-up was asked for".into(),
                    ),
                    ..Default::default()
                });
            }
        }
        self.run(now, holder).await
    }

    /// When the last tick took the Lease (None when unknown).
    async fn last_started(&self) -> Option<DateTime<Utc>> {
        let s = &self.settings;
        let api: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
            kube::Api::namespaced(self.kube.clone(), &s.namespace);
        let lease = api.get_opt(&s.lease_name).await.ok()??;
        let acquired = lease.spec?.acquire_time?;
        DateTime::from_timestamp(
            acquired.0.as_second(),
            acquired.0.subsec_nanosecond().max(0) as u32,
        )
    }
}
