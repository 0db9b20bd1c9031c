//! The tick: one reconcile of the whole cluster. It takes the Lease, reads the cluster, then
//! provisions pending pods (plan → NodeClaims → CreateFleet), launches NodeClaims that have no
//! instance yet, registers joined nodes, deletes NodeClaims that never registered (liveness),
//! finishes deleting NodeClaims (terminating their instances), and collects orphaned instances.

use std::collections::BTreeSet;

use chrono::{DateTime, Duration, Utc};
use fleetwright_cloud::instances;
use fleetwright_cloud::unavailable::UnavailableOfferings;
use fleetwright_cloud::Cloud;
use fleetwright_cloud::{LaunchRequest, Launched};
use fleetwright_core::disruption;
use fleetwright_core::{schedule, ScheduleOptions};
use fleetwright_kube::crds::{NodeClaim, NodeClaimStatus};
use fleetwright_kube::dump::ClusterDump;
use fleetwright_kube::executor;
pub use fleetwright_kube::interruption::instance_id;
use fleetwright_kube::snapshot::SnapshotReader;
use fleetwright_kube::{convert, lease, state};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use serde::Serialize;
use tracing::{info, warn};

use crate::error::RuntimeError;
use crate::metrics::{self, Metrics};
use crate::settings::Settings;

/// A NodeClaim that is launched but not registered this long after creation is given up.
pub const REGISTRATION_TTL: Duration = Duration::minutes(15);
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
    pub liveness_deleted: Vec<String>,
    pub terminated: Vec<String>,
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
}

pub(crate) fn jiff(now: DateTime<Utc>) -> Timestamp {
    Timestamp::from_second(now.timestamp()).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn name_of(claim: &NodeClaim) -> String {
    claim.metadata.name.clone().unwrap_or_default()
}

fn provider_id(claim: &NodeClaim) -> Option<&str> {
    claim.status.as_ref().and_then(|s| s.provider_id.as_deref())
}

pub(crate) fn has_condition(claim: &NodeClaim, type_: &str) -> bool {
    claim.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == type_ && c.status == "True")
    })
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
        }
    }

    /// Runs one reconcile at `now`; `holder` names this invocation in the Lease.
    pub async fn run(&self, now: DateTime<Utc>, holder: &str) -> Result<TickSummary, RuntimeError> {
        let s = &self.settings;
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
        let mut dump = SnapshotReader::new(self.kube.clone()).read_dump().await?;
        let mut snapshot = convert::take_snapshot(&mut dump)?;
        let created = self.provision(&dump, &snapshot, now, &mut summary).await?;
        let mut claims: Vec<NodeClaim> = dump.nodeclaims.clone();
        claims.extend(created);
        self.launch_unlaunched(&dump, &mut claims, now, &mut summary)
            .await;
        self.register(&dump, &claims, now, &mut summary).await?;
        self.initialize(&dump, &claims, now, &mut summary).await?;
        self.liveness(&claims, now, &mut summary).await?;
        let replacement = self
            .disrupt(&dump, &mut snapshot, &claims, now, &mut summary)
            .await?;
        // A confirmed replacement launches now, not a tick later.
        let mut replacements: Vec<NodeClaim> = replacement.into_iter().collect();
        self.launch_unlaunched(&dump, &mut replacements, now, &mut summary)
            .await;
        claims.extend(replacements);
        self.finish_deletions(&dump, &claims, now, &mut summary)
            .await?;
        let launched = summary.launched.clone();
        self.collect_garbage(&claims, &launched, now, &mut summary)
            .await?;
        self.persist_unavailable(now).await;
        info!(summary = %serde_json::to_string(&summary).unwrap_or_default(), "tick done");
        Ok(summary)
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

    async fn persist_unavailable(&self, now: DateTime<Utc>) {
        if self.settings.dry_run {
            return;
        }
        let mut current = self.cloud.unavailable();
        current.prune(now);
        if let Err(e) = state::store(
            self.kube.clone(),
            &self.settings.namespace,
            UNAVAILABLE_KEY,
            &current,
        )
        .await
        {
            warn!(error = %e, "could not persist the unavailable offerings");
        }
    }

    /// Plans the pending pods and creates a NodeClaim for each planned node.
    async fn provision(
        &self,
        dump: &ClusterDump,
        snapshot: &fleetwright_core::Snapshot,
        now: DateTime<Utc>,
        summary: &mut TickSummary,
    ) -> Result<Vec<NodeClaim>, RuntimeError> {
        let pending = snapshot
            .pods
            .iter()
            .filter(|p| p.node_name.is_none())
            .count();
        summary.pending_pods = pending;
        summary.metrics.add(metrics::PODS_PENDING, pending as f64);
        if pending == 0 {
            return Ok(Vec::new());
        }
        info!(pods = pending, "found provisionable pod(s)");
        let catalog = self.cloud.catalog(now).await?;
        let plan = schedule(
            snapshot,
            &catalog,
            &ScheduleOptions {
                now: now.timestamp(),
                ..Default::default()
            },
        );
        for u in &plan.unschedulable {
            warn!(pod = %u.pod, reason = %u.reason, "could not schedule pod");
            summary
                .unschedulable
                .push(format!("{}: {}", u.pod, u.reason));
        }
        if plan.nodeclaims.is_empty() {
            return Ok(Vec::new());
        }
        let pods: usize = plan.nodeclaims.iter().map(|n| n.pods.len()).sum();
        info!(
            nodeclaims = plan.nodeclaims.len(),
            pods, "computed new nodeclaim(s) to fit pod(s)"
        );
        info!("{}", plan.packing_line());
        let mut created = Vec::new();
        for planned in &plan.nodeclaims {
            let Some(claim) = executor::nodeclaim_in(dump, planned) else {
                continue;
            };
            if self.settings.dry_run {
                summary
                    .nodeclaims_created
                    .push(format!("{}<dry-run>", planned.nodepool));
                continue;
            }
            let claim = executor::create_nodeclaim(self.kube.clone(), &claim).await?;
            let name = name_of(&claim);
            info!(nodeclaim = %name, nodepool = %planned.nodepool, requests = %serde_json::to_string(&planned.requests.to_map()).unwrap_or_default(), instance_types = planned.instance_types.len(), "created nodeclaim");
            summary.metrics.add(metrics::NODECLAIMS_CREATED, 1.0);
            summary.nodeclaims_created.push(name);
            created.push(claim);
        }
        Ok(created)
    }

    /// Launches every NodeClaim that has no instance yet (new ones, and ones whose earlier launch
    /// was interrupted). A failed launch deletes the NodeClaim, so the next plan tries elsewhere.
    async fn launch_unlaunched(
        &self,
        dump: &ClusterDump,
        claims: &mut [NodeClaim],
        now: DateTime<Utc>,
        summary: &mut TickSummary,
    ) {
        if self.settings.dry_run {
            return;
        }
        for claim in claims.iter_mut() {
            if provider_id(claim).is_some() || claim.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let name = name_of(claim);
            match self.launch(dump, claim, now).await {
                Ok(launched) => {
                    info!(nodeclaim = %name, provider_id = %launched.provider_id(), instance_type = %launched.instance_type, zone = %launched.zone, capacity_type = %launched.capacity_type, "launched nodeclaim");
                    summary.metrics.add(metrics::NODECLAIMS_LAUNCHED, 1.0);
                    claim
                        .status
                        .get_or_insert_with(Default::default)
                        .provider_id = Some(launched.provider_id());
                    summary.launched.push(LaunchSummary {
                        nodeclaim: name,
                        instance_id: launched.instance_id,
                        instance_type: launched.instance_type,
                        zone: launched.zone,
                        capacity_type: launched.capacity_type,
                    });
                }
                Err(e) => {
                    warn!(nodeclaim = %name, error = %e, "failed launching nodeclaim");
                    summary.metrics.add(metrics::LAUNCH_FAILURES, 1.0);
                    summary.launch_failures.push(format!("{name}: {e}"));
                    if let Err(e) = executor::delete_nodeclaim(self.kube.clone(), &name, true).await
                    {
                        warn!(nodeclaim = %name, error = %e, "could not delete the unlaunched nodeclaim");
                    }
                }
            }
        }
    }

    async fn launch(
        &self,
        dump: &ClusterDump,
        claim: &NodeClaim,
        now: DateTime<Utc>,
    ) -> Result<Launched, RuntimeError> {
        let request = LaunchRequest::from_nodeclaim(claim)?;
        let nodeclass = dump
            .nodeclasses
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(request.nodeclass.as_str()))
            .ok_or_else(|| fleetwright_cloud::CloudError::Launch {
                nodeclaim: request.nodeclaim.clone(),
                reason: format!("EC2NodeClass {:?} not found", request.nodeclass),
            })?;
        let launched = self.cloud.launch(&request, nodeclass, now).await?;
        self.record_launch(claim, &launched, now).await?;
        Ok(launched)
    }

    /// Writes the instance's labels (and its subnet and security groups, for drift) onto the
    /// NodeClaim and its provider id and Launched condition
    /// into its status.
    async fn record_launch(
        &self,
        claim: &NodeClaim,
        launched: &Launched,
        now: DateTime<Utc>,
    ) -> Result<(), RuntimeError> {
        let name = name_of(claim);
        let labels = [
            (
                "node.kubernetes.io/instance-type",
                launched.instance_type.as_str(),
            ),
            ("topology.kubernetes.io/zone", launched.zone.as_str()),
            (
                "karpenter.sh/capacity-type",
                launched.capacity_type.as_str(),
            ),
        ];
        let groups = launched.security_groups.join(",");
        let annotations = [
            (disruption::SUBNET_ID, launched.subnet_id.as_str()),
            (disruption::SECURITY_GROUP_IDS, groups.as_str()),
        ];
        executor::update_nodeclaim(self.kube.clone(), &name, |current| {
            let mut next = current.clone();
            let map = next.metadata.labels.get_or_insert_with(Default::default);
            for (k, v) in labels {
                map.insert(k.to_string(), v.to_string());
            }
            let map = next
                .metadata
                .annotations
                .get_or_insert_with(Default::default);
            for (k, v) in annotations.iter().filter(|(_, v)| !v.is_empty()) {
                map.insert(k.to_string(), v.to_string());
            }
            (next.metadata != current.metadata).then_some(next)
        })
        .await?;
        let stamp = now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let provider = launched.provider_id();
        self.set_condition(&name, "Launched", &stamp, |status| {
            status.provider_id = Some(provider.clone());
            status.image_id = Some(launched.image_id.clone());
        })
        .await
    }

    /// Sets condition `type_` True in a NodeClaim's status, with `edit` applied to the status.
    async fn set_condition(
        &self,
        name: &str,
        type_: &str,
        stamp: &str,
        edit: impl Fn(&mut NodeClaimStatus),
    ) -> Result<(), RuntimeError> {
        executor::update_nodeclaim_status(self.kube.clone(), name, |current| {
            let mut status = current.status.clone().unwrap_or_default();
            edit(&mut status);
            let status =
                executor::with_condition(&status, executor::condition(type_, true, type_, stamp))
                    .unwrap_or(status);
            (Some(&status) != current.status.as_ref()).then_some(status)
        })
        .await?;
        Ok(())
    }

    /// Syncs joined nodes with their NodeClaims: labels, taints, finalizer; `nodeName` and the
    /// Registered condition in the NodeClaim's status.
    async fn register(
        &self,
        dump: &ClusterDump,
        claims: &[NodeClaim],
        now: DateTime<Utc>,
        summary: &mut TickSummary,
    ) -> Result<(), RuntimeError> {
        let stamp = now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        for claim in claims {
            let (Some(provider), false) = (provider_id(claim), has_condition(claim, "Registered"))
            else {
                continue;
            };
            let Some(node) = dump
                .nodes
                .iter()
                .find(|n| node_provider_id(n) == Some(provider))
            else {
                continue;
            };
            let name = name_of(claim);
            let node_name = node.metadata.name.clone().unwrap_or_default();
            if self.settings.dry_run {
                summary.registered.push(name);
                continue;
            }
            executor::update_node(self.kube.clone(), &node_name, |n| {
                executor::registered(n, claim)
            })
            .await?;
            self.set_condition(&name, "Registered", &stamp, |status| {
                status.node_name = Some(node_name.clone());
            })
            .await?;
            info!(nodeclaim = %name, node = %node_name, provider_id = %provider, "registered nodeclaim");
            summary.metrics.add(metrics::NODECLAIMS_REGISTERED, 1.0);
            summary.registered.push(name);
        }
        Ok(())
    }

    /// Marks registered NodeClaims Initialized once their node is Ready and carries neither the
    /// unregistered taint nor any of the NodeClaim's startup taints.
    async fn initialize(
        &self,
        dump: &ClusterDump,
        claims: &[NodeClaim],
        now: DateTime<Utc>,
        summary: &mut TickSummary,
    ) -> Result<(), RuntimeError> {
        let stamp = now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        // Registered earlier, or by this tick's registration step (which has just removed the
        // unregistered taint the dump still shows).
        let just_registered = |c: &NodeClaim| summary.registered.contains(&name_of(c));
        let ready: Vec<&NodeClaim> = claims
            .iter()
            .filter(|c| {
                (has_condition(c, "Registered") || just_registered(c))
                    && !has_condition(c, "Initialized")
            })
            .filter(|c| {
                node_for(dump, c).is_some_and(|node| node_initialized(node, c, just_registered(c)))
            })
            .collect();
        for claim in ready {
            let node_name = node_for(dump, claim).and_then(|n| n.metadata.name.as_deref());
            let name = name_of(claim);
            if !self.settings.dry_run {
                self.set_condition(&name, "Initialized", &stamp, |_| {})
                    .await?;
            }
            info!(nodeclaim = %name, node = node_name.unwrap_or_default(), "initialized nodeclaim");
            summary.initialized.push(name);
        }
        Ok(())
    }

    /// Deletes NodeClaims whose instance launched but never joined within [`REGISTRATION_TTL`].
    async fn liveness(
        &self,
        claims: &[NodeClaim],
        now: DateTime<Utc>,
        summary: &mut TickSummary,
    ) -> Result<(), RuntimeError> {
        for claim in claims {
            let created = claim
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|t| t.0.as_second());
            let stale =
                created.is_some_and(|c| now.timestamp() - c >= REGISTRATION_TTL.num_seconds());
            if !stale
                || has_condition(claim, "Registered")
                || claim.metadata.deletion_timestamp.is_some()
                || provider_id(claim).is_none()
            {
                continue;
            }
            let name = name_of(claim);
            warn!(nodeclaim = %name, "nodeclaim did not register within 15m; deleting it");
            summary.liveness_deleted.push(name.clone());
            if !self.settings.dry_run {
                self.terminate_claim(claim, summary).await?;
            }
        }
        Ok(())
    }

    /// NodeClaims being deleted: terminate the instance, then let the NodeClaim (and its node) go.
    async fn finish_deletions(
        &self,
        dump: &ClusterDump,
        claims: &[NodeClaim],
        now: DateTime<Utc>,
        summary: &mut TickSummary,
    ) -> Result<(), RuntimeError> {
        if self.settings.dry_run {
            return Ok(());
        }
        for claim in claims
            .iter()
            .filter(|c| c.metadata.deletion_timestamp.is_some())
        {
            if !self.drained(dump, claim, now).await? {
                continue;
            }
            self.terminate_claim(claim, summary).await?;
            if let Some(node) = dump.node_of(claim).and_then(|n| n.metadata.name.as_deref()) {
                executor::delete_node(self.kube.clone(), node, true).await?;
            }
        }
        Ok(())
    }

    /// Whether a deleting NodeClaim's node is free of the pods a drain moves, so its instance
    /// may go. Pods still there are evicted again (evictions are idempotent, and a NodeClaim
    /// deleted by hand is drained here first); once its `terminationGracePeriod` has passed
    /// since the deletion, they are deleted and the instance goes anyway.
    async fn drained(
        &self,
        dump: &ClusterDump,
        claim: &NodeClaim,
        now: DateTime<Utc>,
    ) -> Result<bool, RuntimeError> {
        let Some(node) = dump.node_of(claim).and_then(|n| n.metadata.name.as_deref()) else {
            return Ok(true);
        };
        let pods: Vec<Pod> = dump
            .pods
            .iter()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
            .filter(|p| !executor::skipped_by_drain(p) && !finished(p) && !stuck(p, now))
            .cloned()
            .collect();
        if pods.is_empty() {
            return Ok(true);
        }
        let deleted_at = claim
            .metadata
            .deletion_timestamp
            .as_ref()
            .map(|t| t.0.as_second())
            .unwrap_or(now.timestamp());
        let grace = claim
            .spec
            .termination_grace_period
            .as_deref()
            .and_then(|g| convert::duration_seconds(g).ok().flatten());
        if grace.is_some_and(|g| now.timestamp() >= deleted_at + g) {
            warn!(%node, pods = pods.len(), "terminationGracePeriod is over; deleting the pods still on the node");
            executor::delete_pods(self.kube.clone(), &pods).await?;
            return Ok(true);
        }
        let drained = executor::drain(self.kube.clone(), &pods).await?;
        info!(%node, left = pods.len(), evicted = drained.evicted.len(), "waiting for pods to leave before terminating");
        Ok(false)
    }

    async fn terminate_claim(
        &self,
        claim: &NodeClaim,
        summary: &mut TickSummary,
    ) -> Result<(), RuntimeError> {
        let name = name_of(claim);
        if let Some(id) = provider_id(claim).and_then(instance_id) {
            self.cloud.terminate(id).await?;
            summary.terminated.push(id.to_string());
            summary.metrics.add(metrics::NODECLAIMS_TERMINATED, 1.0);
        }
        executor::delete_nodeclaim(self.kube.clone(), &name, true).await?;
        info!(nodeclaim = %name, "deleted nodeclaim");
        Ok(())
    }

    /// Terminates owned instances that no NodeClaim accounts for, 30 s after their launch.
    async fn collect_garbage(
        &self,
        claims: &[NodeClaim],
        launched: &[LaunchSummary],
        now: DateTime<Utc>,
        summary: &mut TickSummary,
    ) -> Result<(), RuntimeError> {
        let mut claimed: BTreeSet<String> = claims
            .iter()
            .filter_map(provider_id)
            .filter_map(instance_id)
            .map(str::to_string)
            .collect();
        claimed.extend(launched.iter().map(|l| l.instance_id.clone()));
        let owned = self.cloud.instances().await?;
        for orphan in instances::orphans(&owned, &claimed, now) {
            warn!(instance_id = %orphan.id, nodeclaim = ?orphan.nodeclaim(), "garbage collecting an instance with no nodeclaim");
            summary.garbage_collected.push(orphan.id.clone());
            if !self.settings.dry_run {
                self.cloud.terminate(&orphan.id).await?;
                summary
                    .metrics
                    .add(metrics::INSTANCES_GARBAGE_COLLECTED, 1.0);
            }
        }
        Ok(())
    }
}

/// Ready, and free of the unregistered taint and of the NodeClaim's startup taints.
fn node_initialized(node: &Node, claim: &NodeClaim, just_registered: bool) -> bool {
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let blocked = taints.iter().any(|t| {
        (t.key == fleetwright_core::labels::TAINT_UNREGISTERED && !just_registered)
            || claim
                .spec
                .startup_taints
                .iter()
                .any(|s| s.key == t.key && s.effect == t.effect)
    });
    ready && !blocked
}

/// The claim's node: by the name its status records or, for a claim registered by this tick
/// (whose status in the dump predates it), by provider id.
fn node_for<'a>(dump: &'a ClusterDump, claim: &NodeClaim) -> Option<&'a Node> {
    dump.node_of(claim).or_else(|| {
        let provider = provider_id(claim)?;
        dump.nodes
            .iter()
            .find(|n| node_provider_id(n) == Some(provider))
    })
}

/// A pod still terminating a minute after its deletion deadline (the API server sets
/// `deletionTimestamp` to the request time plus the grace period): its kubelet is gone or
/// stuck, so waiting longer gives it nothing. Karpenter ignores such pods too.
fn stuck(pod: &Pod, now: DateTime<Utc>) -> bool {
    pod.metadata
        .deletion_timestamp
        .as_ref()
        .is_some_and(|t| t.0.as_second() + 60 < now.timestamp())
}

/// A pod that has run to completion (or failed) holds nothing up.
fn finished(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

fn node_provider_id(node: &Node) -> Option<&str> {
    node.spec.as_ref().and_then(|s| s.provider_id.as_deref())
}
