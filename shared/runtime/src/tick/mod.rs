//! The tick: one reconcile of the whole cluster. It takes the Lease, reads the cluster, then
//! provisions pending pods (plan → NodeClaims → CreateFleet), launches NodeClaims that have no
//! instance yet, registers joined nodes, deletes NodeClaims that never registered (liveness),
//! carries disruption forward, finishes deleting NodeClaims (terminating their instances), and
//! collects orphaned instances.
//!
//! Each phase reads, decides and acts: what it reads goes to a pure decision ([`decide`],
//! [`disruption`]) that returns [`Action`]s, and one executor ([`execute`]) applies them. Later
//! phases see what earlier ones did (the NodeClaims created and launched). A dry run applies
//! nothing; [`Tick::decide_all`] returns the whole tick's actions for a cluster dump.

pub mod action;
mod class_settings;
pub use class_settings::status_settings;
mod assumed;
pub(crate) mod claims;
pub mod decide;
pub mod disrupted;
pub mod disruption;
mod drive;
mod dry_run;
mod execute;
pub mod expiration;
pub mod finish;
pub mod follow_up;
pub mod in_progress;
pub mod isolation;
pub mod machine;
pub mod pod_records;
pub mod prespin;
pub mod provision;
pub mod reboot;
pub mod repair;
pub mod repair_backoff;
mod repair_policies;
pub mod reservations;
mod say;
mod shutdown;
pub mod status;
mod timing;
mod triggers;

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use fleetwright_cloud::unavailable::UnavailableOfferings;
use fleetwright_cloud::Cloud;
use fleetwright_core::{Catalog, Snapshot};
use fleetwright_kube::dump::ClusterDump;
pub use fleetwright_kube::interruption::instance_id;
use fleetwright_kube::snapshot::SnapshotReader;
use fleetwright_kube::{convert, lease, state};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use serde::Serialize;
use tracing::{info, warn};

pub use self::action::Action;
pub use self::decide::REGISTRATION_TTL;
use self::disruption::PendingDisruption;
pub use self::disruption::DISRUPTION_ANNOTATION;
use self::machine::{Start, TickState};
pub use self::timing::PhaseTimes;
use crate::deadline::Deadline;
use crate::error::RuntimeError;
use crate::metrics::{self, Metrics};
use crate::settings::Settings;
/// The most actions a dry run lists in its summary (the Lambda's answer and the `tick done` log
/// line, which CloudWatch cuts at 256 KB); every one is logged on its own line.
pub const ACTIONS_REPORTED: usize = 500;

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The state ConfigMap key of the unavailable offerings.
pub const UNAVAILABLE_KEY: &str = "unavailableOfferings";

/// One launched NodeClaim.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LaunchSummary {
    pub nodeclaim: String,
    pub instance_id: String,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
}

/// What one tick did.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TickSummary {
    /// Set when the tick did nothing, with the reason (another tick holds the Lease).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    pub dry_run: bool,
    pub pending_pods: usize,
    pub nodeclaims_created: Vec<String>,
    pub launched: Vec<LaunchSummary>,
    pub launch_failures: Vec<String>,
    pub registered: Vec<String>,
    pub initialized: Vec<String>,
    /// NodeClaims whose hashes another version wrote, re-stamped with this version's.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub restamped: Vec<String>,
    /// NodeClaims of static NodePools deleted for being above their replicas.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub scaled_down: Vec<String>,
    pub liveness_deleted: Vec<String>,
    /// NodeClaims deleted by node repair (their node unhealthy past its toleration).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub repaired: Vec<String>,
    /// NodeClaims whose unhealthy node node repair began to reboot.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rebooted: Vec<String>,
    /// NodeClaims deleted because they outlived their `expireAfter`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub expired: Vec<String>,
    /// NodeClaims deleted because their capacity block is expiring.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reservation_expired: Vec<String>,
    pub terminated: Vec<String>,
    /// NodeClaims deleted because their instance is gone.
    pub stranded_deleted: Vec<String>,
    /// Actions on one object that failed (`<object>: <error>`); the rest of the tick went on,
    /// and a later tick decides them again.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<String>,
    /// NodeClaims' pod records that failed to be written (each logged; written by a later tick).
    #[serde(skip_serializing_if = "is_zero")]
    pub record_failures: usize,
    /// Set when the invocation's deadline came near and the remaining actions were left for
    /// the next tick.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped_early: Option<String>,
    /// Terminations that failed (`<NodeClaim or instance>: <error>`); a later tick retries them.
    pub termination_failures: Vec<String>,
    pub garbage_collected: Vec<String>,
    pub unschedulable: Vec<String>,
    /// Disruption commands decided this tick (`<reason>/<command>:<nodes>`).
    pub disruptions: Vec<String>,
    /// Of those, the ones carried out (confirmed and started) this tick.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub disruptions_started: Vec<String>,
    /// Seconds after which this tick wants the next one, sooner than the schedule: a
    /// disruption to confirm, or one in flight ([`follow_up`]). The tick function sends itself
    /// a delayed message for it. Never set in a dry run, whose decisions are not stored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub follow_up_seconds: Option<i64>,
    /// NodeClaims deleted by disruption this tick, once their nodes were drained.
    pub disrupted: Vec<String>,
    /// In a dry run, every action the tick would have applied, in order, as
    /// `fleetwright plan --actions` prints them (the first [`ACTIONS_REPORTED`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<serde_json::Value>,
    /// The dry run's actions past [`ACTIONS_REPORTED`], counted (the log has each).
    #[serde(skip_serializing_if = "is_zero")]
    pub actions_left_out: usize,
    #[serde(skip)]
    pub metrics: Metrics,
    /// Where the tick's time went (logged with the summary, and a metric by phase).
    #[serde(skip)]
    pub phases: PhaseTimes,
}

/// The tick use case, generic over the cloud.
pub struct Tick<C> {
    pub cloud: C,
    pub kube: Client,
    pub settings: Settings,
    /// When the invocation ends; the executor starts no action once it is near.
    pub deadline: Deadline,
}

pub(crate) fn jiff(now: DateTime<Utc>) -> Timestamp {
    Timestamp::from_second(now.timestamp()).unwrap_or(Timestamp::UNIX_EPOCH)
}

impl<C> std::fmt::Debug for Tick<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tick")
            .field("settings", &self.settings)
            .finish()
    }
}

impl<C: Cloud> Tick<C> {
    pub fn new(cloud: C, kube: Client, settings: Settings) -> Self {
        Tick {
            cloud,
            kube,
            settings,
            deadline: Deadline::none(),
        }
    }

    /// The same tick, stopping before the invocation's deadline.
    pub fn with_deadline(mut self, deadline: Deadline) -> Self {
        self.deadline = deadline;
        self
    }

    /// Runs one reconcile at `now`; `holder` names this invocation in the Lease.
    pub async fn run(&self, now: DateTime<Utc>, holder: &str) -> Result<TickSummary, RuntimeError> {
        let s = &self.settings;
        if !s.dry_run {
            let other = fleetwright_kube::peers::active_autoscaler(
                self.kube.clone(),
                &s.namespace,
                now.timestamp(),
            );
            if let Some(other) = other.await {
                warn!(%other, "another node autoscaler is running in this cluster; doing nothing (set FLEETWRIGHT_DRY_RUN=true to watch beside it)");
                return Ok(TickSummary {
                    skipped: Some(format!("{other} is running in this cluster")),
                    ..Default::default()
                });
            }
        }
        let guard = lease::try_acquire(
            self.kube.clone(),
            &s.namespace,
            &s.lease_name,
            holder,
            s.lease_duration,
            jiff(now),
        )
        .await?;
        let Some(guard) = guard else {
            info!("another tick holds the lease; skipping");
            return Ok(TickSummary {
                skipped: Some("another tick holds the lease".into()),
                ..Default::default()
            });
        };
        let result = self.reconcile(now).await;
        if let Err(e) = guard.release().await {
            warn!(error = %e, "releasing the lease failed; it expires on its own");
        }
        result
    }

    async fn reconcile(&self, now: DateTime<Utc>) -> Result<TickSummary, RuntimeError> {
        let mut summary = TickSummary {
            dry_run: self.settings.dry_run,
            ..Default::default()
        };
        self.restore_unavailable().await;
        let started = std::time::Instant::now();
        let mut dump = SnapshotReader::new(self.kube.clone())
            .with_ca_bundle(
                self.settings.cluster_ca_bundle.clone(),
                &self.settings.namespace,
            )
            .with_node_class_cel(self.settings.node_class_cel)
            .with_default_spread(self.settings.default_spread()?)
            .read_dump()
            .await?;
        let converting = std::time::Instant::now();
        // The read is dated at the tick's instant, the one every decision counts from: a pod
        // found gone is dated no earlier than the tick's start (one that went while the tick
        // read, seconds, counts from then), and `consolidateAfter: 0s` still lets its node go
        // in this tick. A pod bound while the tick read is never taken for new in a later one
        // (a record's instant is no earlier than its pods' bindings).
        dump.observed_at = Some(now.timestamp());
        let (mut snapshot, mut rejected) = convert::take_snapshot_isolating(&mut dump);
        // A NodePool left out is reported once, for what left it out.
        let kept = fleetwright_kube::api_rules::unreadable_schedules(&dump.nodepools);
        let left_out = isolation::errors_of(&rejected, "NodePool");
        rejected.extend(kept.into_iter().filter(|k| !left_out.contains_key(&k.name)));
        apply_settings(&mut snapshot, &self.settings);
        summary.phases.list = dump.read_time.list;
        summary.phases.convert = dump.read_time.convert + converting.elapsed();
        let resolving = std::time::Instant::now();
        let mut resolved = self.resolve_all(&dump, now).await;
        summary.phases.cloud = resolving.elapsed();
        for (name, error) in isolation::errors_of(&rejected, "EC2NodeClass") {
            resolved.insert(name, Err(error));
        }
        let reservations = reservations_of(&dump, &resolved);
        reservations::apply(&mut snapshot, &reservations, now);
        placement_groups(&mut snapshot, &resolved);
        class_settings::subnet_zones(&mut snapshot, &resolved);
        class_settings::ami_architectures(&mut snapshot, &resolved);
        let mut state = TickState::new(Start {
            dump: &dump,
            snapshot,
            now,
            node_repair: self.settings.node_repair,
            launchable: Some(status::classes_ready(&dump, &resolved)),
            resolved: &resolved,
            rejected,
            reservations,
            shadow: self.settings.dry_run,
        });
        let mut outlet = drive::Live::new(self, &dump, &resolved, &mut summary, now);
        // Each group of phases runs even when an earlier one failed (a cloud call): one failure
        // must not keep garbage collection and stranded NodeClaims waiting for a tick in which
        // nothing fails. The first error is the tick's.
        drive::drive(&mut state, &mut outlet).await;
        let (reading, writing) = outlet.times();
        summary.phases.cloud += reading;
        summary.phases.write = writing;
        let (error, found) = state.finish();
        if let Some(e) = error {
            return Err(e);
        }
        summary.pending_pods = found.pending_pods;
        summary.unschedulable = found.unschedulable;
        summary.disruptions = found.disruptions;
        summary.disruptions_started = found.disruptions_started;
        // A tick whose writes failed waits for the schedule: following up at once would retry
        // them every few seconds.
        let failed = !summary.failures.is_empty() || !summary.termination_failures.is_empty();
        if self.settings.follow_up && !self.settings.dry_run && !failed {
            summary.follow_up_seconds = found.follow_up.map(|d| d.num_seconds().max(1));
        }
        summary.metrics.merge(found.metrics);
        if self.settings.dry_run {
            let writing = std::time::Instant::now();
            self.shadow(&dump, &mut summary, found.fleet, now).await;
            summary.phases.write += writing.elapsed();
        }
        summary.phases.decide = timing::rest(started.elapsed(), &summary.phases);
        for (phase, seconds) in summary.phases.seconds() {
            summary
                .metrics
                .time_by(metrics::TICK_PHASE, metrics::PHASE, phase, seconds);
        }
        let phases = summary
            .phases
            .seconds()
            .map(|(p, s)| format!("{p}={s:.3}s"));
        info!(summary = %serde_json::to_string(&summary).unwrap_or_default(), phases = %phases.join(" "), "tick done");
        Ok(summary)
    }

    /// A dry run's record of what it would have done beside what the cluster's autoscaler did
    /// ([`crate::shadow`]), kept in the state ConfigMap (the one object besides its Lease a dry
    /// run writes) and in the metrics. A failed write loses one record, never the tick.
    async fn shadow(
        &self,
        dump: &ClusterDump,
        summary: &mut TickSummary,
        fleet: Option<fleetwright_core::disruption::FleetCost>,
        now: DateTime<Utc>,
    ) {
        // The change may be tried again on a conflict: the record kept is the last try's.
        let record = std::sync::Mutex::new(None);
        let written = state::modify(
            self.kube.clone(),
            &self.settings.namespace,
            crate::shadow::SHADOW_KEY,
            |stored: Option<crate::shadow::Shadow>| {
                let mut shadow = stored.unwrap_or_default();
                let observed = shadow.observe(dump, &summary.actions, fleet, now);
                if let Ok(mut slot) = record.lock() {
                    *slot = Some(observed);
                }
                shadow
            },
        )
        .await;
        let record = record.into_inner().ok().flatten();
        match (written, record) {
            (Ok(()), Some(record)) => {
                crate::shadow::metrics(&record, &mut summary.metrics);
                info!(target: say::TICK, would_create = record.would_create.len(), would_disrupt = record.would_disrupt.len(), would_terminate = record.would_terminate.len(), other_created = record.other_created.len(), other_deleted = record.other_deleted.len(), "shadow: recorded what this tick would have done beside what the cluster's autoscaler did");
            }
            (Err(e), _) => {
                warn!(error = %e, "shadow: could not keep this tick's record; the next tick records its own");
                if e.to_string().contains(crate::shadow::SHADOW_KEY) {
                    // Records this version cannot read: start again rather than never record.
                    let fresh = crate::shadow::Shadow::default();
                    let ns = &self.settings.namespace;
                    let key = crate::shadow::SHADOW_KEY;
                    let _ = state::store(self.kube.clone(), ns, key, &fresh).await;
                }
            }
            (Ok(()), None) => {}
        }
    }

    async fn restore_unavailable(&self) {
        match state::load::<UnavailableOfferings>(
            self.kube.clone(),
            &self.settings.namespace,
            UNAVAILABLE_KEY,
        )
        .await
        {
            Ok(Some(saved)) => self.cloud.restore_unavailable(&saved),
            Ok(None) => {}
            Err(e) => {
                warn!(error = %e, "could not read the unavailable offerings; continuing without them")
            }
        }
    }

    /// What every EC2NodeClass resolves to now (subnets, security groups, AMIs, instance
    /// profile, capacity reservations), or why it does not: for the plan's reservations, drift,
    /// and the classes' and pools' status.
    async fn resolve_all(&self, dump: &ClusterDump, now: DateTime<Utc>) -> status::Resolutions {
        let mut out = status::Resolutions::new();
        for class in &dump.nodeclasses {
            let name = class.metadata.name.clone().unwrap_or_default();
            let resolved = self.cloud.nodeclass(class, now).await;
            if let Err(e) = &resolved {
                warn!(nodeclass = %name, error = %e, "could not resolve the ec2nodeclass");
            }
            out.insert(name, resolved.map_err(|e| e.to_string()));
        }
        out
    }

    /// The blocked reasons already evented, and the decision waiting for confirmation.
    async fn disruption_state(&self) -> (BTreeMap<String, String>, Vec<PendingDisruption>) {
        let ns = &self.settings.namespace;
        let said = state::load(self.kube.clone(), ns, disruption::BLOCKED_KEY)
            .await
            .ok()
            .flatten()
            .unwrap_or_default();
        let pending = state::load::<disruption::StoredPending>(
            self.kube.clone(),
            ns,
            disruption::PENDING_KEY,
        )
        .await
        .ok()
        .flatten()
        .map(disruption::StoredPending::into_vec)
        .unwrap_or_default();
        (said, pending)
    }
}

/// Merges `ours` into the unavailable offerings stored in the state ConfigMap (keeping each
/// offering's later deadline, dropping expired ones). The tick and the interruption function both
/// write them, so neither may replace what the other has just added. Only a live invocation
/// writes them, so the same write drops the shadow records a dry run kept: switched from shadow
/// mode to live, Fleetwright frees their room in the ConfigMap.
pub async fn persist_unavailable(
    kube: Client,
    namespace: &str,
    ours: &UnavailableOfferings,
    now: DateTime<Utc>,
) -> Result<(), fleetwright_kube::KubeError> {
    state::modify_dropping(
        kube,
        namespace,
        UNAVAILABLE_KEY,
        Some(crate::shadow::SHADOW_KEY),
        |stored: Option<UnavailableOfferings>| {
            let mut merged = stored.unwrap_or_default();
            merged.merge(ours);
            merged.prune(now);
            merged
        },
    )
    .await
}

/// Applies the cluster-wide settings the core reads from the snapshot (the `minValues` policy
/// and the disruption gates) on every NodePool.
pub fn apply_settings(snapshot: &mut Snapshot, settings: &Settings) {
    for pool in &mut snapshot.nodepools {
        pool.min_values_policy = settings.min_values_policy;
        pool.terminate_first = settings.terminate_first;
        pool.spot_to_spot = settings.spot_to_spot;
    }
}

/// The whole tick's actions for a cluster dump, as a live tick would decide them, with nothing
/// applied (`fleetwright plan --actions`): the same state machine as the tick, with the dry run's
/// outcomes. A dump holds no cloud state, so nothing is planned for instances (garbage
/// collection) and no disruption counts as confirmed: a decided command shows as waiting for
/// confirmation. `node_repair` is the tick's `FLEETWRIGHT_NODE_REPAIR`. NodeClaims the plan
/// creates are named `<generateName><dry-run-N>`.
pub fn decide_all(
    dump: &ClusterDump,
    snapshot: &Snapshot,
    catalog: &Catalog,
    now: DateTime<Utc>,
    node_repair: repair::NodeRepair,
) -> Vec<Action> {
    let mut snapshot = snapshot.clone();
    class_settings::status_settings(dump, &mut snapshot);
    let reserved = reservations::from_status(dump);
    reservations::apply(&mut snapshot, &reserved, now);
    let resolved = status::Resolutions::new();
    let mut state = TickState::new(Start {
        dump,
        snapshot,
        now,
        node_repair,
        launchable: isolation::classes_of_dump(dump),
        resolved: &resolved,
        rejected: Vec::new(),
        reservations: reserved,
        shadow: false,
    });
    let mut outlet = drive::FromDump::new(catalog, now);
    drive::ready(drive::drive(&mut state, &mut outlet));
    outlet.actions
}

/// The reservations to plan with: each class's as resolved this tick, else as its status lists
/// them.
fn reservations_of(
    dump: &ClusterDump,
    resolved: &status::Resolutions,
) -> reservations::Reservations {
    let mut out = reservations::from_status(dump);
    for (name, r) in resolved {
        if let Ok(r) = r {
            out.insert(name.clone(), r.reservations.clone());
        }
    }
    out
}

/// The placement group each EC2NodeClass launches into, for the catalog the core plans on:
/// its id, and a partition group's partitions, become requirements of every instance type.
fn placement_groups(snapshot: &mut Snapshot, resolved: &status::Resolutions) {
    for r in resolved.values().flatten() {
        let Some(group) = &r.placement_group else {
            continue;
        };
        let partitions = match group.strategy.as_str() {
            "partition" => group.partitions.unwrap_or(0).max(0) as u32,
            _ => 0,
        };
        let settings = snapshot.node_classes.entry(r.name.clone()).or_default();
        settings.placement_group = Some(fleetwright_core::catalog::PlacementGroup {
            id: group.id.clone(),
            partitions,
        });
    }
}

#[cfg(test)]
#[path = "../../tests/unit/tick.rs"]
mod tests;
