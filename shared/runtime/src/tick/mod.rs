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
pub mod decide;
pub mod disruption;
mod dry_run;
mod execute;
pub mod isolation;
pub mod repair;
pub mod reservations;
pub mod status;

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Timelike, Utc};
use fleetwright_cloud::unavailable::UnavailableOfferings;
use fleetwright_cloud::Cloud;
use fleetwright_core::{schedule, Catalog, Plan, ScheduleOptions, Snapshot};
use fleetwright_kube::crds::NodeClaim;
use fleetwright_kube::dump::ClusterDump;
pub use fleetwright_kube::interruption::instance_id;
use fleetwright_kube::snapshot::SnapshotReader;
use fleetwright_kube::{convert, lease, state};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use serde::Serialize;
use tracing::{debug, info, warn};

pub use self::action::Action;
pub use self::decide::REGISTRATION_TTL;
use self::disruption::PendingDisruption;
pub use self::disruption::DISRUPTION_ANNOTATION;
use self::execute::Applied;
use crate::deadline::Deadline;
use crate::error::RuntimeError;
use crate::metrics::{self, Metrics};
use crate::settings::Settings;
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
    /// NodeClaims deleted by disruption this tick, once their nodes were drained.
    pub disrupted: Vec<String>,
    #[serde(skip)]
    pub metrics: Metrics,
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
        let mut failed = Phases::default();
        self.restore_unavailable().await;
        let mut dump = SnapshotReader::new(self.kube.clone())
            .with_ca_bundle(
                self.settings.cluster_ca_bundle.clone(),
                &self.settings.namespace,
            )
            .read_dump()
            .await?;
        let (mut snapshot, rejected) = convert::take_snapshot_isolating(&mut dump);
        apply_settings(&mut snapshot, &self.settings);
        let mut resolved = self.resolve_all(&dump, now).await;
        for (name, error) in isolation::errors_of(&rejected, "EC2NodeClass") {
            resolved.insert(name, Err(error));
        }
        let reservations = reservations_of(&dump, &resolved);
        reservations::apply(&mut snapshot, &reservations, now);
        placement_groups(&mut snapshot, &resolved);
        subnet_zones(&mut snapshot, &resolved);
        let mut claims: Vec<NodeClaim> = dump.nodeclaims.clone();
        let mut ctx = Applied {
            dump: &dump,
            now,
            summary: &mut summary,
            claims: &mut claims,
            created: Vec::new(),
            reservations,
            resolved,
            failed: Default::default(),
            rejected,
        };
        // Each phase runs even when an earlier one failed (a cloud call): one failure must not
        // keep garbage collection and stranded NodeClaims waiting for a tick in which nothing
        // fails. The first error is the tick's.
        let classes = status::classes_ready(ctx.dump, &ctx.resolved);
        failed.note(
            "provisioning",
            self.provision(&mut snapshot, &classes, &mut ctx).await,
        );
        failed.note("lifecycle", self.lifecycle(&mut ctx).await);
        failed.note(
            "disruption",
            self.disrupt(&mut snapshot, &classes, &mut ctx).await,
        );
        failed.note("finishing", self.finish(&mut ctx).await);
        self.report_rejected(&mut ctx).await;
        if let Some(e) = failed.first {
            return Err(e);
        }
        info!(summary = %serde_json::to_string(&summary).unwrap_or_default(), "tick done");
        Ok(summary)
    }

    /// Reports the objects the read could not take, each once per error.
    async fn report_rejected(&self, ctx: &mut Applied<'_>) {
        let said: BTreeMap<String, String> = if ctx.rejected.is_empty() {
            BTreeMap::new()
        } else {
            let ns = &self.settings.namespace;
            state::load(self.kube.clone(), ns, isolation::REJECTED_KEY)
                .await
                .ok()
                .flatten()
                .unwrap_or_default()
        };
        let rejected = std::mem::take(&mut ctx.rejected);
        if rejected.is_empty() && said.is_empty() {
            return;
        }
        self.apply(isolation::report(&rejected, &said), ctx).await;
        ctx.rejected = rejected;
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

    /// Plans the pending pods, creates a NodeClaim for each planned node and each replica a
    /// static NodePool lacks (deleting those above), and launches every NodeClaim without an
    /// instance.
    async fn provision(
        &self,
        snapshot: &mut Snapshot,
        classes: &BTreeMap<String, bool>,
        ctx: &mut Applied<'_>,
    ) -> Result<(), RuntimeError> {
        let parked = isolation::park_unready(snapshot, classes);
        let provisioned = self.provision_ready(snapshot, ctx).await;
        isolation::restore(snapshot, parked);
        provisioned
    }

    /// [`Tick::provision`] over the pools that can launch.
    async fn provision_ready(
        &self,
        snapshot: &Snapshot,
        ctx: &mut Applied<'_>,
    ) -> Result<(), RuntimeError> {
        let pending = decide::pending_pods(snapshot);
        ctx.summary.pending_pods = pending;
        ctx.summary
            .metrics
            .add(metrics::PODS_PENDING, pending as f64);
        if pending > 0 {
            info!(pods = pending, "found provisionable pod(s)");
            let catalog = self.cloud.catalog(ctx.now).await?;
            let catalog = catalog.with_overlays(&snapshot.overlays);
            let plan = plan_pods(snapshot, &catalog, ctx.now);
            report_plan(&plan, ctx.summary);
            self.apply(decide::provision(ctx.dump, &plan), ctx).await;
            let created = std::mem::take(&mut ctx.created);
            ctx.claims.extend(created);
        }
        if snapshot.nodepools.iter().any(|p| p.replicas.is_some()) {
            let catalog = self.cloud.catalog(ctx.now).await?;
            let catalog = catalog.with_overlays(&snapshot.overlays);
            let plan = fleetwright_core::replicas::plan(snapshot, &catalog, ctx.now.timestamp());
            self.apply(decide::replicas(ctx.dump, &plan), ctx).await;
            let created = std::mem::take(&mut ctx.created);
            ctx.claims.extend(created);
        }
        let launches = decide::unlaunched(ctx.claims);
        self.apply(launches, ctx).await;
        Ok(())
    }

    /// Registration, then initialization (which sees this tick's registrations), hashes written
    /// by another version re-stamped, then liveness.
    async fn lifecycle(&self, ctx: &mut Applied<'_>) -> Result<(), RuntimeError> {
        let registrations = decide::registrations(ctx.dump, ctx.claims);
        self.apply(registrations, ctx).await;
        let initializations =
            decide::initializations(ctx.dump, ctx.claims, &ctx.summary.registered);
        self.apply(initializations, ctx).await;
        let restamps = decide::restamps(ctx.dump, ctx.claims);
        self.apply(restamps, ctx).await;
        let stale = decide::liveness(ctx.claims, ctx.now);
        self.apply(stale, ctx).await;
        let deleted = decide::deleted_nodes(ctx.dump, ctx.claims);
        self.apply(deleted, ctx).await;
        // A NodeClaim the read could not take may be the one a deleting node belongs to.
        if isolation::errors_of(&ctx.rejected, "NodeClaim").is_empty() {
            let orphaned = decide::orphaned_nodes(ctx.dump, ctx.claims);
            self.apply(orphaned, ctx).await;
        }
        let expiring = reservations::expiring(ctx.claims, &ctx.reservations, ctx.now);
        self.apply(expiring, ctx).await;
        if self.settings.node_repair {
            let repairs = repair::repairs(ctx.dump, ctx.claims, ctx.now);
            self.apply(repairs, ctx).await;
        }
        Ok(())
    }

    /// Carries every disruption command forward, then (with no pods pending and nothing
    /// provisioned this tick) decides and confirms the next; a confirmed replacement launches now,
    /// not a tick later.
    async fn disrupt(
        &self,
        snapshot: &mut Snapshot,
        classes: &BTreeMap<String, bool>,
        ctx: &mut Applied<'_>,
    ) -> Result<(), RuntimeError> {
        let going =
            disruption::continue_commands(ctx.dump, ctx.claims, &ctx.summary.initialized, ctx.now);
        self.apply(going, ctx).await;
        drift_state(snapshot, &ctx.resolved);
        let catalog = self.cloud.catalog(ctx.now).await?;
        let catalog = catalog.with_overlays(&snapshot.overlays);
        let marks = decide::drift_marks(ctx.claims, snapshot, &catalog, ctx.now);
        self.apply(marks, ctx).await;
        // Capacity being provisioned for pods this tick planned waits for them; pods no pool can
        // take (a typo in a nodeSelector) hold nothing up.
        let waiting = ctx.summary.pending_pods > ctx.summary.unschedulable.len();
        if waiting || !ctx.summary.nodeclaims_created.is_empty() {
            return Ok(());
        }
        if ctx.now.minute().is_multiple_of(FLEET_COST_MINUTES) {
            record_fleet_cost(snapshot, &catalog, ctx);
        }
        let started = std::time::Instant::now();
        let (said, pending) = self.disruption_state().await;
        // A pool that cannot launch takes no replacement, and its nodes are left alone.
        let parked = isolation::park_unready(snapshot, classes);
        let decided = disruption::decide(ctx.dump, snapshot, &catalog, &said, &pending, ctx.now);
        isolation::restore(snapshot, parked);
        debug!(
            elapsed_ms = started.elapsed().as_millis() as u64,
            "disruption decided"
        );
        ctx.summary.disruptions.extend(decided.keys);
        self.apply(decided.actions, ctx).await;
        let replacements = std::mem::take(&mut ctx.created);
        let launches = decide::unlaunched(&replacements);
        ctx.claims.extend(replacements);
        self.apply(launches, ctx).await;
        Ok(())
    }

    /// Finishes deletions, collects garbage, and persists the unavailable offerings; each step
    /// runs even when the one before failed.
    async fn finish(&self, ctx: &mut Applied<'_>) -> Result<(), RuntimeError> {
        let launched: Vec<String> = ctx
            .summary
            .launched
            .iter()
            .map(|l| l.instance_id.clone())
            .collect();
        let owned = self.owned_and_gone(ctx, &launched).await;
        let gone = owned.as_ref().map(|(_, g)| g.clone()).unwrap_or_default();
        let deletions = decide::deletions(ctx.dump, ctx.claims, &gone, ctx.now);
        self.apply(deletions, ctx).await;
        let classes = status::classes_ready(ctx.dump, &ctx.resolved);
        let invalid = isolation::errors_of(&ctx.rejected, "NodePool");
        let mut statuses = decide::pool_statuses(ctx.dump, ctx.claims, &classes, &invalid, ctx.now);
        statuses.extend(status::nodeclass_statuses(ctx.dump, &ctx.resolved, ctx.now));
        self.apply(statuses, ctx).await;
        let collected = match owned {
            Ok((owned, gone)) => {
                self.collect(ctx, &launched, &owned, &gone).await;
                Ok(())
            }
            Err(e) => Err(e),
        };
        let mut offerings = self.cloud.unavailable();
        offerings.prune(ctx.now);
        self.apply(vec![Action::SaveUnavailable { offerings }], ctx)
            .await;
        collected
    }

    /// The instances this cluster owns, and those of NodeClaims the listing missed that a lookup
    /// by id confirms gone.
    async fn owned_and_gone(
        &self,
        ctx: &Applied<'_>,
        launched: &[String],
    ) -> Result<(Vec<fleetwright_cloud::Instance>, BTreeSet<String>), RuntimeError> {
        let owned = self.cloud.instances().await?;
        let missing = decide::missing_instances(ctx.claims, launched, &owned, ctx.now);
        if missing.is_empty() {
            return Ok((owned, BTreeSet::new()));
        }
        let described = self.cloud.describe(&missing).await?;
        Ok((owned, decide::gone(&missing, &described)))
    }

    /// Terminates owned instances that no NodeClaim accounts for, and forgets NodeClaims whose
    /// instance is gone.
    async fn collect(
        &self,
        ctx: &mut Applied<'_>,
        launched: &[String],
        owned: &[fleetwright_cloud::Instance],
        gone: &BTreeSet<String>,
    ) {
        let mut garbage = decide::garbage(ctx.claims, launched, owned, ctx.now);
        // An instance of a NodeClaim the read could not take is that NodeClaim's, not garbage.
        let unreadable = isolation::errors_of(&ctx.rejected, "NodeClaim");
        garbage.retain(|a| {
            !matches!(a, Action::CollectGarbage { nodeclaim: Some(n), .. } if unreadable.contains_key(n))
        });
        self.apply(garbage, ctx).await;
        let partitions = decide::partition_labels(ctx.claims, owned);
        self.apply(partitions, ctx).await;
        let stranded = decide::stranded(ctx.dump, ctx.claims, gone);
        self.apply(stranded, ctx).await;
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

/// How long after a nudge was sent a tick must have started for its read to hold the nudge's
/// pod.
const NUDGE_MARGIN_SECONDS: i64 = 2;

/// The fleet's cost against the LP bound is measured on ticks in minutes divisible by this (a
/// plan of the whole workload from scratch: cheap, but not free at 50,000 pods).
const FLEET_COST_MINUTES: u32 = 5;

/// Sets the fleet-cost gauges: the owned fleet's hourly cost and the LP bound on its workload.
fn record_fleet_cost(snapshot: &Snapshot, catalog: &Catalog, ctx: &mut Applied<'_>) {
    let cost = fleetwright_core::disruption::fleet_cost(snapshot, catalog, ctx.now.timestamp());
    debug!(
        nodes = cost.nodes,
        hourly = cost.hourly,
        lower_bound = cost.lower_bound,
        "fleet cost"
    );
    let metrics = &mut ctx.summary.metrics;
    metrics.set(metrics::FLEET_HOURLY_COST, cost.hourly, metrics::Unit::None);
    metrics.set(
        metrics::FLEET_LOWER_BOUND,
        cost.lower_bound,
        metrics::Unit::None,
    );
}

/// The phases of a tick: how long each took (at debug level), and the first error.
struct Phases {
    first: Option<RuntimeError>,
    since: std::time::Instant,
}

impl Default for Phases {
    fn default() -> Self {
        Phases {
            first: None,
            since: std::time::Instant::now(),
        }
    }
}

impl Phases {
    fn note(&mut self, phase: &str, result: Result<(), RuntimeError>) {
        let elapsed_ms = self.since.elapsed().as_millis() as u64;
        self.since = std::time::Instant::now();
        debug!(phase, elapsed_ms, "tick phase done");
        if let Err(e) = result {
            warn!(phase, error = %e, "a tick phase failed; the later phases still run");
            self.first.get_or_insert(e);
        }
    }
}

/// Merges `ours` into the unavailable offerings stored in the state ConfigMap (keeping each
/// offering's later deadline, dropping expired ones). The tick and the interruption function both
/// write them, so neither may replace what the other has just added.
pub async fn persist_unavailable(
    kube: Client,
    namespace: &str,
    ours: &UnavailableOfferings,
    now: DateTime<Utc>,
) -> Result<(), fleetwright_kube::KubeError> {
    state::modify(
        kube,
        namespace,
        UNAVAILABLE_KEY,
        |stored: Option<UnavailableOfferings>| {
            let mut merged = stored.unwrap_or_default();
            merged.merge(ours);
            merged.prune(now);
            merged
        },
    )
    .await
}

/// The scheduler's plan for the pending pods.
fn plan_pods(snapshot: &Snapshot, catalog: &Catalog, now: DateTime<Utc>) -> Plan {
    schedule(
        snapshot,
        catalog,
        &ScheduleOptions {
            now: now.timestamp(),
            ..Default::default()
        },
    )
}

/// Logs the plan (Karpenter's lines) and records the pods it could not place.
fn report_plan(plan: &Plan, summary: &mut TickSummary) {
    for e in &plan.existing {
        debug!(pod = %e.pod, node = %e.node, "planned onto a node or NodeClaim that exists");
    }
    for u in &plan.unschedulable {
        warn!(pod = %u.pod, reason = %u.reason, "could not schedule pod");
        summary
            .unschedulable
            .push(format!("{}: {}", u.pod, u.reason));
    }
    if plan.nodeclaims.is_empty() {
        return;
    }
    let pods: usize = plan.nodeclaims.iter().map(|n| n.pods.len()).sum();
    info!(
        nodeclaims = plan.nodeclaims.len(),
        pods, "computed new nodeclaim(s) to fit pod(s)"
    );
    info!("{}", plan.packing_line());
}

/// Applies the cluster-wide settings the core reads from the snapshot: the `minValues` policy,
/// on every NodePool.
pub fn apply_settings(snapshot: &mut Snapshot, settings: &Settings) {
    for pool in &mut snapshot.nodepools {
        pool.min_values_policy = settings.min_values_policy;
    }
}

/// The whole tick's actions for a cluster dump, as a live tick would decide them, with nothing
/// applied (`fleetwright plan --actions`). A dump holds no cloud state, so nothing is planned for
/// instances (garbage collection) and no disruption counts as confirmed: a decided command shows
/// as waiting for confirmation. `node_repair` is the tick's `FLEETWRIGHT_NODE_REPAIR`. NodeClaims the plan creates have no names yet; their launch is
/// implied.
pub fn decide_all(
    dump: &ClusterDump,
    snapshot: &mut Snapshot,
    catalog: &Catalog,
    now: DateTime<Utc>,
    node_repair: bool,
) -> Vec<Action> {
    let mut actions = Vec::new();
    let reserved = reservations::from_status(dump);
    reservations::apply(snapshot, &reserved, now);
    let classes = isolation::classes_of_dump(dump);
    let pending = decide::pending_pods(snapshot);
    let mut unschedulable = 0;
    if pending > 0 {
        let parked = isolation::park_known(snapshot, classes.as_ref());
        let plan = plan_pods(snapshot, catalog, now);
        isolation::restore(snapshot, parked);
        unschedulable = plan.unschedulable.len();
        actions.extend(decide::provision(dump, &plan));
    }
    if snapshot.nodepools.iter().any(|p| p.replicas.is_some()) {
        let plan = fleetwright_core::replicas::plan(snapshot, catalog, now.timestamp());
        actions.extend(decide::replicas(dump, &plan));
    }
    let creating = actions
        .iter()
        .any(|a| matches!(a, Action::CreateNodeClaim { .. }));
    let claims = &dump.nodeclaims;
    actions.extend(decide::unlaunched(claims));
    let registrations = decide::registrations(dump, claims);
    let registered = names(&registrations);
    actions.extend(registrations);
    let initializations = decide::initializations(dump, claims, &registered);
    let initialized = names(&initializations);
    actions.extend(initializations);
    actions.extend(decide::restamps(dump, claims));
    actions.extend(decide::liveness(claims, now));
    actions.extend(decide::deleted_nodes(dump, claims));
    actions.extend(decide::orphaned_nodes(dump, claims));
    actions.extend(reservations::expiring(claims, &reserved, now));
    if node_repair {
        actions.extend(repair::repairs(dump, claims, now));
    }
    actions.extend(disruption::continue_commands(
        dump,
        claims,
        &initialized,
        now,
    ));
    actions.extend(decide::drift_marks(claims, snapshot, catalog, now));
    if pending <= unschedulable && !creating {
        let parked = isolation::park_known(snapshot, classes.as_ref());
        let decided = disruption::decide(dump, snapshot, catalog, &BTreeMap::new(), &[], now);
        isolation::restore(snapshot, parked);
        actions.extend(decided.actions);
    }
    actions.extend(decide::deletions(dump, claims, &BTreeSet::new(), now));
    let classes = status::classes_ready(dump, &status::Resolutions::new());
    actions.extend(decide::pool_statuses(
        dump,
        claims,
        &classes,
        &BTreeMap::new(),
        now,
    ));
    actions
}

/// The NodeClaims that registration or initialization actions name.
fn names(actions: &[Action]) -> Vec<String> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Register { nodeclaim, .. } | Action::Initialize { nodeclaim, .. } => {
                Some(nodeclaim.clone())
            }
            _ => None,
        })
        .collect()
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

/// The zones each resolved EC2NodeClass has subnets in: the only zones its NodeClaims can
/// launch into, so the only ones the core plans (and spreads) over.
fn subnet_zones(snapshot: &mut Snapshot, resolved: &status::Resolutions) {
    for r in resolved.values().flatten() {
        let zones: std::collections::BTreeSet<String> =
            r.subnets.iter().map(|s| s.zone.clone()).collect();
        if zones.is_empty() {
            continue;
        }
        let settings = snapshot.node_classes.entry(r.name.clone()).or_default();
        settings.zones = Some(zones);
    }
}

/// What the EC2NodeClasses resolve to now (AMIs, subnets, security groups), for drift.
fn drift_state(snapshot: &mut Snapshot, resolved: &status::Resolutions) {
    for r in resolved.values().flatten() {
        let state = snapshot.node_class_state.entry(r.name.clone()).or_default();
        state.images = r.amis.iter().map(|a| a.id.clone()).collect();
        state.subnets = r.subnets.iter().map(|s| s.id.clone()).collect();
        state.security_groups = r.security_groups.iter().cloned().collect();
        state.reservations = Some(r.reservations.iter().map(|c| c.id.clone()).collect());
        state.placement_group = Some(r.placement_group.as_ref().map(|p| p.id.clone()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fleetwright_kube::memory::MemoryApi;

    /// The interruption function marked `spot/m5.large/us-east-1b` while a tick ran; the tick's
    /// end-of-tick write (which knows only `us-east-1a`) must not erase it.
    #[tokio::test]
    async fn the_ticks_write_keeps_offerings_another_writer_just_marked() {
        let api = MemoryApi::new(Default::default());
        let now = Utc::now();
        let mut theirs = UnavailableOfferings::default();
        theirs.mark("spot", "m5.large", "us-east-1b", now);
        persist_unavailable(api.client(), "karpenter", &theirs, now)
            .await
            .unwrap();
        let mut ours = UnavailableOfferings::default();
        ours.mark("spot", "m5.large", "us-east-1a", now);
        persist_unavailable(api.client(), "karpenter", &ours, now)
            .await
            .unwrap();
        let stored: UnavailableOfferings = state::load(api.client(), "karpenter", UNAVAILABLE_KEY)
            .await
            .unwrap()
            .unwrap();
        let zones: Vec<String> = stored.active(now).into_iter().map(|(_, _, z)| z).collect();
        assert!(zones.contains(&"us-east-1a".to_string()), "{zones:?}");
        assert!(zones.contains(&"us-east-1b".to_string()), "{zones:?}");
    }
}
