//! The tick's one executor: it applies [`Action`]s in order through the Kubernetes API and the
//! cloud, records what happened in the [`TickSummary`], and writes the log lines. A dry run is
//! decided here and nowhere else: the actions are described ([`super::dry_run`]) and not
//! applied.

use chrono::{DateTime, Timelike, Utc};
use fleetwright_cloud::unavailable::UnavailableOfferings;
use fleetwright_cloud::{Cloud, LaunchRequest, Launched};
use fleetwright_core::disruption::{SECURITY_GROUP_IDS, SUBNET_ID};
use fleetwright_core::labels::{PLACEMENT_GROUP_ID, PLACEMENT_GROUP_PARTITION};
use fleetwright_kube::crds::{NodeClaim, NodeClaimStatus};
use fleetwright_kube::dump::ClusterDump;
use fleetwright_kube::{executor, state};

use super::decide;
use k8s_openapi::api::core::v1::Pod;
use tracing::{debug, info, warn};

use super::action::{action_name, objects_of, Action};
use super::dry_run::describe;

use super::decide::name_of;
use super::disruption::{
    self, DISRUPTION_ANNOTATION, DRAIN_PROGRESS_ANNOTATION, DRAIN_STARTED_ANNOTATION,
};
use super::{jiff, LaunchSummary, Tick, TickSummary};
use crate::error::RuntimeError;
use crate::metrics;

/// The log target of the tick's lifecycle lines (what the simulator's log calls the component).
pub(crate) const TICK: &str = "fleetwright_runtime::tick";
/// How many times one tick asks CreateFleet for a NodeClaim that launched nothing for want of
/// capacity.
const LAUNCH_ATTEMPTS: u32 = 3;
/// The log target of the disruption lines.
pub(crate) const DISRUPT: &str = "fleetwright_runtime::disrupt";

/// What the executor works on: the tick's read of the cluster, the NodeClaims known so far
/// (launches record their instance here), and what it has done.
pub(crate) struct Applied<'a> {
    pub dump: &'a ClusterDump,
    pub now: DateTime<Utc>,
    pub summary: &'a mut TickSummary,
    pub claims: &'a mut Vec<NodeClaim>,
    /// NodeClaims created by the actions applied, in order.
    pub created: Vec<NodeClaim>,
    /// The capacity reservations of the EC2NodeClasses that select some, resolved this tick.
    pub reservations: super::reservations::Reservations,
    /// What each EC2NodeClass resolved to this tick, or why it did not.
    pub resolved: super::status::Resolutions,
    /// The objects (`NodeClaim <name>`, `Node <name>`) an action failed on this tick: later
    /// steps on them wait for the next tick.
    pub failed: std::collections::BTreeSet<String>,
    /// The objects the read could not take, left out of this tick.
    pub rejected: Vec<fleetwright_kube::convert::Rejected>,
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
            if let Some(failed) = after_failure.filter(|_| follows_earlier_steps(&action)) {
                debug!(target: TICK, object = %failed, "an earlier step on this object failed this tick; leaving this one to the next tick");
                continue;
            }
            let terminating = terminates(&action);
            let what = terminating
                .clone()
                .or_else(|| objects.first().cloned())
                .unwrap_or_else(|| action_name(&action));
            let Err(e) = self.apply_one(action, ctx).await else {
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

    async fn apply_one(&self, action: Action, ctx: &mut Applied<'_>) -> Result<(), RuntimeError> {
        let now = ctx.now;
        let ns = &self.settings.namespace;
        match action {
            Action::CreateNodeClaim {
                nodepool,
                requests,
                instance_types,
                claim,
            } => {
                self.create(&nodepool, &requests, instance_types.len(), &claim, ctx)
                    .await?
            }
            Action::Launch { nodeclaim } => self.launch_claim(&nodeclaim, ctx).await,
            Action::Register {
                nodeclaim,
                node,
                provider_id,
                claim,
            } => {
                self.register(&nodeclaim, &node, &provider_id, &claim, ctx)
                    .await?
            }
            Action::Initialize { nodeclaim, node } => {
                self.set_condition(&nodeclaim, "Initialized", now, |_| {})
                    .await?;
                info!(target: TICK, nodeclaim = %nodeclaim, node = %node, "initialized nodeclaim");
                ctx.summary.initialized.push(nodeclaim);
            }
            Action::ScaleDown {
                nodepool,
                nodeclaim,
            } => {
                executor::delete_nodeclaim(self.kube.clone(), &nodeclaim, false).await?;
                info!(target: TICK, %nodepool, nodeclaim = %nodeclaim, "static nodepool above its replicas; deleting the nodeclaim");
                ctx.summary.scaled_down.push(nodeclaim);
            }
            Action::ShortOfReplicas { nodepool, reason } => {
                warn!(target: TICK, %nodepool, %reason, "static nodepool cannot reach its replicas");
            }
            Action::Restamp {
                nodeclaim,
                annotations,
            } => {
                self.restamp(&nodeclaim, &annotations).await?;
                info!(target: TICK, nodeclaim = %nodeclaim, "re-stamped the nodeclaim's hashes with this version");
                ctx.summary.restamped.push(nodeclaim);
            }
            Action::LabelPartition {
                nodeclaim,
                partition,
            } => {
                self.label_nodeclaim(&nodeclaim, PLACEMENT_GROUP_PARTITION, &partition)
                    .await?;
                info!(target: TICK, nodeclaim = %nodeclaim, %partition, "labelled the nodeclaim with its instance's placement group partition");
            }
            Action::MarkDrifted { nodeclaim, reason } => {
                self.mark_drifted(&nodeclaim, reason.as_deref(), now)
                    .await?;
                match reason {
                    Some(reason) => {
                        info!(target: TICK, nodeclaim = %nodeclaim, %reason, "marking drifted")
                    }
                    None => {
                        info!(target: TICK, nodeclaim = %nodeclaim, "removing the drifted status condition, not drifted")
                    }
                }
            }
            Action::Repair {
                nodeclaim,
                node,
                condition,
                forceful,
                ..
            } => {
                self.delete_for(&nodeclaim, "unhealthy", forceful, ctx.now)
                    .await?;
                warn!(target: TICK, nodeclaim = %nodeclaim, %node, %condition, forceful, "deleted the nodeclaim of an unhealthy node");
                let kind = snake_case(condition.split('=').next().unwrap_or_default());
                ctx.summary.metrics.add_by(
                    metrics::NODECLAIMS_UNHEALTHY_DISRUPTED,
                    metrics::CONDITION,
                    &kind,
                    1.0,
                );
                ctx.summary.repaired.push(nodeclaim);
            }
            Action::ReservationExpiring {
                nodeclaim,
                reservation,
                ends,
            } => {
                self.delete_for(&nodeclaim, "reservation-expiring", false, ctx.now)
                    .await?;
                info!(target: TICK, nodeclaim = %nodeclaim, capacity_reservation_id = %reservation, ends = ?ends, "initiating delete for capacity block expiration");
                ctx.summary.reservation_expired.push(nodeclaim);
            }
            Action::NodeClassStatus { nodeclass, status } => {
                let written =
                    executor::update_nodeclass_status(self.kube.clone(), &nodeclass, |c| {
                        (Some(status.as_ref()) != c.status.as_ref()).then(|| (*status).clone())
                    })
                    .await;
                if let Err(e) = written {
                    warn!(target: TICK, %nodeclass, error = %e, "could not write the ec2nodeclass's status");
                }
            }
            Action::RepairBlocked {
                node,
                nodepool,
                unhealthy,
                nodes,
            } => {
                // Said every five minutes, as Karpenter requeues a blocked repair, not each tick.
                if ctx.now.minute().is_multiple_of(5) {
                    repair_blocked(&node, &nodepool, unhealthy, nodes);
                }
            }
            Action::GiveUp {
                nodeclaim,
                instance_id,
            } => {
                warn!(target: TICK, nodeclaim = %nodeclaim, "nodeclaim did not register within 15m; deleting it");
                ctx.summary.liveness_deleted.push(nodeclaim.clone());
                self.terminate_claim(&nodeclaim, instance_id.as_deref(), "liveness", ctx.summary)
                    .await?;
            }
            Action::EvictForDeletion {
                node,
                nodeclaim,
                pods,
            } => {
                let drained = executor::drain(self.kube.clone(), &pods).await;
                self.mark_eviction_failing(&nodeclaim, !drained.failed.is_empty(), now)
                    .await?;
                info!(target: TICK, %node, left = pods.len(), evicted = drained.evicted.len(), failed = drained.failed.len(), "waiting for pods to leave before terminating");
            }
            Action::DeletePods { node, pods } => {
                warn!(target: TICK, %node, pods = pods.len(), "the drain's grace is over (terminationGracePeriod, or a forceful repair); deleting the pods still on the node");
                executor::delete_pods(self.kube.clone(), &pods).await?;
            }
            Action::FinishDeletion {
                nodeclaim,
                instance_id,
                node,
                reason,
            } => {
                // The node goes before the NodeClaim lets go of its finalizer: if deleting the
                // node fails, the NodeClaim is still there for the next tick to finish it.
                self.terminate_instance(instance_id.as_deref(), &reason, ctx.summary)
                    .await?;
                if let Some(node) = node {
                    executor::delete_node(self.kube.clone(), &node, true).await?;
                }
                executor::delete_nodeclaim(self.kube.clone(), &nodeclaim, true).await?;
                info!(target: TICK, nodeclaim = %nodeclaim, "deleted nodeclaim");
            }
            Action::CollectGarbage {
                instance_id,
                nodeclaim,
            } => {
                warn!(target: TICK, instance_id = %instance_id, nodeclaim = ?nodeclaim, "garbage collecting an instance with no nodeclaim");
                ctx.summary.garbage_collected.push(instance_id.clone());
                self.cloud.terminate(&instance_id).await?;
                ctx.summary
                    .metrics
                    .add(metrics::INSTANCES_GARBAGE_COLLECTED, 1.0);
            }
            Action::ForgetNodeClaim {
                nodeclaim,
                instance_id,
                node,
            } => {
                warn!(target: TICK, nodeclaim = %nodeclaim, instance_id = %instance_id, "the nodeclaim's instance is gone; deleting the nodeclaim");
                if let Some(node) = node {
                    executor::delete_node(self.kube.clone(), &node, true).await?;
                }
                executor::delete_nodeclaim(self.kube.clone(), &nodeclaim, true).await?;
                ctx.summary.metrics.add(metrics::NODECLAIMS_STRANDED, 1.0);
                ctx.summary.stranded_deleted.push(nodeclaim);
            }
            Action::SaveUnavailable { offerings } => self.save_unavailable(&offerings, now).await,
            Action::Blocked {
                node,
                reason,
                changed,
            } => super::dry_run::blocked(&node, &reason, changed),
            Action::Scored { .. } => super::dry_run::describe(&action, ctx.summary),
            Action::PoolStatus {
                nodepool,
                nodes,
                resources,
                conditions,
            } => {
                self.write_pool_status(&nodepool, nodes, &resources, conditions)
                    .await
            }
            Action::NodeEvent {
                node,
                uid,
                reason,
                message,
            } => self.node_event(&node, uid, &reason, &message, now).await,
            Action::Rejected { object, event } => {
                super::isolation::log(&object);
                if event {
                    self.rejected_event(&object, now).await;
                }
            }
            Action::SaveRejected { said } => {
                state::store(self.kube.clone(), ns, super::isolation::REJECTED_KEY, &said).await?
            }
            Action::ReleaseNode { node } => {
                info!(target: TICK, %node, "the node is being deleted and no nodeclaim accounts for it; letting it go");
                executor::delete_node(self.kube.clone(), &node, true).await?;
            }
            Action::NodeDeleted { node, nodeclaim } => {
                info!(target: TICK, %node, nodeclaim = %nodeclaim, "the node is being deleted; deleting its nodeclaim");
                executor::delete_nodeclaim(self.kube.clone(), &nodeclaim, false).await?;
            }
            Action::SaveBlocked { blocked } => {
                state::store(self.kube.clone(), ns, disruption::BLOCKED_KEY, &blocked).await?
            }
            Action::SavePending { pending } => {
                state::store(self.kube.clone(), ns, disruption::PENDING_KEY, &pending).await?
            }
            Action::ConfirmLater {
                command,
                savings,
                next: true,
            } => {
                info!(target: DISRUPT, command = %command, savings = savings, "next disruption decided; confirming on a later tick")
            }
            Action::ConfirmLater {
                command, savings, ..
            } => {
                info!(target: DISRUPT, command = %command, savings = savings, "disruption decided; confirming on a later tick")
            }
            Action::Invalidated { command, reason } => {
                info!(target: DISRUPT, command = %command, reason = %reason, "decided disruption no longer holds; not carried out")
            }
            Action::Disrupting {
                command,
                reason,
                savings,
                replacements,
                nodes,
            } => info!(target: DISRUPT, command = command,
                reason = reason,
                savings = format!("${savings:.4}/h"),
                replacement = replacements_text(&replacements),
                "disrupting node(s) {}",
                nodes.join(", ")
            ),
            Action::StartDisruption {
                command,
                replacements,
                candidates,
            } => self.start(command, replacements, candidates, ctx).await?,
            Action::Cordon { node } => {
                executor::update_node(self.kube.clone(), &node, executor::cordoned).await?;
            }
            Action::AwaitReplacement { replacement } => {
                info!(target: DISRUPT, replacement = %replacement, "waiting for the replacement to initialize");
            }
            Action::Abandon {
                replacement,
                why,
                candidates,
            } => {
                warn!(target: DISRUPT, %replacement, %why, "abandoning the disruption");
                self.abandon(&why, &candidates, now).await?;
            }
            Action::DeleteNodeClaim { nodeclaim } => {
                executor::delete_nodeclaim(self.kube.clone(), &nodeclaim, false).await?;
            }
            Action::DrainDisrupted {
                nodeclaim,
                node,
                pods,
                mark_started,
                grace_over,
                progress,
                ..
            } => {
                self.mark_drain(&nodeclaim, mark_started, progress).await?;
                self.drain_disrupted(&nodeclaim, &node, pods, grace_over, ctx.summary)
                    .await?;
            }
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
        ctx.created.push(claim);
        Ok(())
    }

    async fn register(
        &self,
        nodeclaim: &str,
        node: &str,
        provider_id: &str,
        claim: &NodeClaim,
        ctx: &mut Applied<'_>,
    ) -> Result<(), RuntimeError> {
        executor::update_node(self.kube.clone(), node, |n| executor::registered(n, claim)).await?;
        self.set_condition(nodeclaim, "Registered", ctx.now, |status| {
            status.node_name = Some(node.to_string());
        })
        .await?;
        info!(target: TICK, nodeclaim = %nodeclaim, node = %node, provider_id = %provider_id, "registered nodeclaim");
        ctx.summary.metrics.add(metrics::NODECLAIMS_REGISTERED, 1.0);
        ctx.summary.registered.push(nodeclaim.to_string());
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
        let message = format!("Ignored until fixed: {}", object.error);
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

    /// Launches a NodeClaim's instance and records it. A launch that failed deletes the
    /// NodeClaim (its pods are planned again), unless its outcome is unknown (a timeout, a 5xx)
    /// and the NodeClaim is young; a launch whose record failed keeps it. In both kept cases the
    /// next tick's launch adopts the instance by its tag.
    async fn launch_claim(&self, name: &str, ctx: &mut Applied<'_>) {
        let Some(claim) = ctx
            .claims
            .iter_mut()
            .find(|c| c.metadata.name.as_deref() == Some(name))
        else {
            return;
        };
        let launched = match self.launch_retrying(ctx.dump, claim, ctx.now).await {
            Ok(launched) => launched,
            Err(e) => {
                warn!(target: TICK, nodeclaim = %name, error = %e, "failed launching nodeclaim");
                ctx.summary.metrics.add(metrics::LAUNCH_FAILURES, 1.0);
                ctx.summary.launch_failures.push(format!("{name}: {e}"));
                if decide::keep_after_failed_launch(claim, &e, ctx.now) {
                    info!(target: TICK, nodeclaim = %name, "the launch may have happened; the next tick looks for its instance by tag before launching again");
                    return;
                }
                if let Err(e) = executor::delete_nodeclaim(self.kube.clone(), name, true).await {
                    warn!(target: TICK, nodeclaim = %name, error = %e, "could not delete the unlaunched nodeclaim");
                }
                return;
            }
        };
        ctx.summary.launched.push(LaunchSummary {
            nodeclaim: name.to_string(),
            instance_id: launched.instance_id.clone(),
            instance_type: launched.instance_type.clone(),
            zone: launched.zone.clone(),
            capacity_type: launched.capacity_type.clone(),
        });
        let placement = placement_labels(&ctx.resolved, claim, &launched);
        if let Err(e) = self
            .record_launch(claim, &launched, &placement, ctx.now)
            .await
        {
            warn!(target: TICK, nodeclaim = %name, instance_id = %launched.instance_id, error = %e, "launched, but recording the instance failed; the next tick adopts it by tag");
            ctx.summary.failures.push(format!("{name}: {e}"));
            return;
        }
        info!(target: TICK, nodeclaim = %name, provider_id = %launched.provider_id(), instance_type = %launched.instance_type, zone = %launched.zone, capacity_type = %launched.capacity_type, "launched nodeclaim");
        ctx.summary.metrics.add(metrics::NODECLAIMS_LAUNCHED, 1.0);
        claim
            .status
            .get_or_insert_with(Default::default)
            .provider_id = Some(launched.provider_id());
        // This tick's end labels a partition EC2 chose only on a NodeClaim that shows it waits.
        let labels = claim.metadata.labels.get_or_insert_with(Default::default);
        labels.extend(placement.into_iter().map(|(k, v)| (k.to_string(), v)));
    }

    /// [`Tick::launch`], tried again at once when CreateFleet launched nothing for want of
    /// capacity: the offerings it refused are marked unavailable by then, so the next try asks
    /// for the NodeClaim's other types, zones and capacity types (on-demand after spot) in this
    /// tick, instead of a minute later.
    async fn launch_retrying(
        &self,
        dump: &ClusterDump,
        claim: &NodeClaim,
        now: DateTime<Utc>,
    ) -> Result<Launched, RuntimeError> {
        let mut attempt = 0;
        loop {
            let result = self.launch(dump, claim, now, attempt).await;
            let refused = matches!(
                &result,
                Err(RuntimeError::Cloud(
                    fleetwright_cloud::CloudError::NothingLaunched { .. }
                ))
            );
            attempt += 1;
            if !refused || attempt >= LAUNCH_ATTEMPTS || self.deadline.near() {
                return result;
            }
            if let Err(e) = &result {
                info!(target: TICK, nodeclaim = %name_of(claim), error = %e, attempt, "no capacity for the offerings tried; trying the nodeclaim's others");
            }
        }
    }

    /// Asks the cloud for the NodeClaim's instance (a new one, or the one it already has).
    /// `attempt` counts the tries in this tick after CreateFleet launched nothing: each is a new
    /// launch to EC2 (its own idempotency token), since the one before it certainly launched
    /// nothing.
    async fn launch(
        &self,
        dump: &ClusterDump,
        claim: &NodeClaim,
        now: DateTime<Utc>,
        attempt: u32,
    ) -> Result<Launched, RuntimeError> {
        let mut request = LaunchRequest::from_nodeclaim(claim)?;
        if attempt > 0 {
            let uid = request.uid.take().unwrap_or_default();
            request.uid = Some(format!("{uid}#{attempt}"));
        }
        request.overlays = dump
            .nodeoverlays
            .iter()
            .filter_map(|o| fleetwright_kube::convert::overlay(o).ok())
            .collect();
        let nodeclass = dump
            .nodeclasses
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(request.nodeclass.as_str()))
            .ok_or_else(|| fleetwright_cloud::CloudError::Launch {
                nodeclaim: request.nodeclaim.clone(),
                reason: format!("EC2NodeClass {:?} not found", request.nodeclass),
            })?;
        Ok(self.cloud.launch(&request, nodeclass, now).await?)
    }

    /// Writes the instance's labels (its placement group's among them, and its subnet and
    /// security groups, for drift) onto the NodeClaim, and its provider id and Launched
    /// condition into its status.
    async fn record_launch(
        &self,
        claim: &NodeClaim,
        launched: &Launched,
        placement: &[(&str, String)],
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
        let reservation_labels = reservation_labels(launched);
        // The type's own labels (arch, family, size, CPU, memory, ...), as Karpenter writes
        // them, so pods selecting them land on this node and requirements drift sees them.
        let type_labels = match self.cloud.catalog(now).await {
            Ok(catalog) => catalog.type_labels(&launched.instance_type),
            Err(e) => {
                warn!(target: TICK, nodeclaim = %name, error = %e, "no catalog for the instance type's labels");
                Default::default()
            }
        };
        let groups = launched.security_groups.join(",");
        let annotations = [
            (SUBNET_ID, launched.subnet_id.as_str()),
            (SECURITY_GROUP_IDS, groups.as_str()),
        ];
        executor::update_nodeclaim(self.kube.clone(), &name, |current| {
            let mut next = current.clone();
            let map = next.metadata.labels.get_or_insert_with(Default::default);
            for (k, v) in &type_labels {
                map.entry(k.clone()).or_insert_with(|| v.clone());
            }
            for (k, v) in labels {
                map.insert(k.to_string(), v.to_string());
            }
            map.extend(reservation_labels.clone());
            for (k, v) in placement {
                map.insert(k.to_string(), v.clone());
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
        let provider = launched.provider_id();
        self.set_condition(&name, "Launched", now, |status| {
            status.provider_id = Some(provider.clone());
            status.image_id = Some(launched.image_id.clone());
        })
        .await
    }

    /// Writes a NodePool's `status.nodes` and `status.resources`. A failure is logged, not the
    /// tick's: the status only reports, and the next tick writes it again.
    async fn write_pool_status(
        &self,
        name: &str,
        nodes: i64,
        resources: &std::collections::BTreeMap<String, String>,
        conditions: Vec<fleetwright_kube::crds::Condition>,
    ) {
        let written = executor::update_nodepool_status(self.kube.clone(), name, |current| {
            let mut status = current.status.clone().unwrap_or_default();
            status.nodes = Some(nodes);
            status.conditions = conditions.clone();
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

    /// Marks a NodeClaim deleted for `reason` (`unhealthy`, `reservation-expiring`; and its
    /// grace over now when `forceful`), then deletes it. Cut off between the two, the next tick
    /// decides the same again.
    async fn delete_for(
        &self,
        name: &str,
        reason: &str,
        forceful: bool,
        now: DateTime<Utc>,
    ) -> Result<(), RuntimeError> {
        let mut annotations = std::collections::BTreeMap::new();
        annotations.insert(
            DISRUPTION_ANNOTATION.to_string(),
            format!("{reason}/delete"),
        );
        if forceful {
            annotations.insert(
                super::repair::TERMINATION_TIMESTAMP.to_string(),
                now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            );
        }
        self.restamp(name, &annotations).await?;
        executor::delete_nodeclaim(self.kube.clone(), name, false).await?;
        Ok(())
    }

    /// Writes `annotations` onto a NodeClaim (over what it has).
    async fn restamp(
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
    async fn label_nodeclaim(
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

    /// Records on a deleting NodeClaim since when evictions have been failing, or clears it once
    /// they stop failing.
    async fn mark_eviction_failing(
        &self,
        name: &str,
        failing: bool,
        now: DateTime<Utc>,
    ) -> Result<(), RuntimeError> {
        use super::decide::EVICTION_FAILING_ANNOTATION as KEY;
        let stamp = now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        self.update_metadata(name, |m| {
            let marked = m.annotations.as_ref().is_some_and(|a| a.contains_key(KEY));
            if failing && !marked {
                let map = m.annotations.get_or_insert_with(Default::default);
                map.insert(KEY.to_string(), stamp.clone());
            } else if !failing && marked {
                if let Some(map) = m.annotations.as_mut() {
                    map.remove(KEY);
                }
            }
        })
        .await
    }

    /// Changes a NodeClaim's metadata with `change`, writing only when it changed something.
    async fn update_metadata(
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
    async fn mark_drifted(
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
                    let mut drifted = executor::condition("Drifted", true, reason, &stamp);
                    drifted.message = Some(reason.to_string());
                    executor::with_condition(&status, drifted)
                }
                None => {
                    let mut next = status.clone();
                    next.conditions.retain(|c| c.type_ != "Drifted");
                    (next != status).then_some(next)
                }
            }
        })
        .await?;
        Ok(())
    }

    /// Sets condition `type_` True in a NodeClaim's status, with `edit` applied to the status.
    async fn set_condition(
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
    async fn terminate_claim(
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
    async fn terminate_instance(
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

    async fn save_unavailable(&self, offerings: &UnavailableOfferings, now: DateTime<Utc>) {
        let ns = &self.settings.namespace;
        if let Err(e) = super::persist_unavailable(self.kube.clone(), ns, offerings, now).await {
            warn!(target: TICK, error = %e, "could not persist the unavailable offerings");
        }
    }

    /// Creates the replacement (if any), then taints and annotates the candidates with the
    /// command, and the replacement's name once it has one.
    async fn start(
        &self,
        mut command: String,
        replacements: Vec<Action>,
        candidates: Vec<(String, String)>,
        ctx: &mut Applied<'_>,
    ) -> Result<(), RuntimeError> {
        let mut names = Vec::new();
        for replacement in replacements {
            let Action::CreateNodeClaim { claim, .. } = replacement else {
                continue;
            };
            let created = match executor::create_nodeclaim(self.kube.clone(), &claim).await {
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
            ctx.created.push(created);
        }
        if !names.is_empty() {
            command = format!("{command}/{}", names.join(","));
        }
        if let Err(e) = self.mark_candidates(&command, &candidates).await {
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
    async fn mark_candidates(
        &self,
        command: &str,
        candidates: &[(String, String)],
    ) -> Result<(), RuntimeError> {
        for (_, claim) in candidates {
            executor::update_nodeclaim(
                self.kube.clone(),
                claim,
                disruption::with_annotation(Some(command.to_string())),
            )
            .await?;
        }
        for (node, _) in candidates {
            executor::update_node(self.kube.clone(), node, executor::cordoned).await?;
        }
        Ok(())
    }

    /// Deletes the replacements a command that could not start created (not launched yet).
    async fn roll_back(&self, names: &[String], ctx: &mut Applied<'_>) {
        for name in names {
            ctx.created
                .retain(|c| c.metadata.name.as_deref() != Some(name.as_str()));
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
    async fn abandon(
        &self,
        why: &str,
        candidates: &[(String, Option<String>, Option<String>)],
        now: DateTime<Utc>,
    ) -> Result<(), RuntimeError> {
        for (claim, uid, node) in candidates {
            if let Some(node) = node {
                executor::update_node(self.kube.clone(), node, disruption::uncordoned).await?;
            }
            executor::update_nodeclaim(self.kube.clone(), claim, disruption::with_annotation(None))
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
    async fn mark_drain(
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

    /// Drains a candidate's node; once nothing evictable is left (or the grace period is over,
    /// when the pods left are deleted) its NodeClaim is deleted.
    async fn drain_disrupted(
        &self,
        name: &str,
        node: &str,
        pods: Vec<Pod>,
        grace_over: bool,
        summary: &mut TickSummary,
    ) -> Result<(), RuntimeError> {
        let drained = executor::drain(self.kube.clone(), &pods).await;
        info!(target: DISRUPT, node = %node, evicted = drained.evicted.len(), blocked = drained.blocked.len(), failed = drained.failed.len(), "draining node");
        let mut done = drained.done();
        if !done && grace_over {
            let left: Vec<Pod> = pods
                .into_iter()
                .filter(|p| {
                    !drained
                        .evicted
                        .contains(&fleetwright_kube::interruption::pod_key(p))
                })
                .collect();
            warn!(target: DISRUPT, node = %node, pods = left.len(), "terminationGracePeriod is over; deleting the pods still on the node");
            executor::delete_pods(self.kube.clone(), &left).await?;
            done = true;
        }
        if done {
            executor::delete_nodeclaim(self.kube.clone(), name, false).await?;
            summary.disrupted.push(name.to_string());
        }
        Ok(())
    }
}

/// Whether an action is a step that relies on the ones before it on the same objects: a drain
/// on the cordon before it, a deletion on the drain, an initialization on the registration.
/// After a failure on its objects it waits for the next tick; every other action (forgetting a
/// NodeClaim whose instance is gone, a status write) goes ahead.
fn follows_earlier_steps(action: &Action) -> bool {
    matches!(
        action,
        Action::Initialize { .. }
            | Action::DrainDisrupted { .. }
            | Action::EvictForDeletion { .. }
            | Action::DeletePods { .. }
            | Action::FinishDeletion { .. }
            | Action::DeleteNodeClaim { .. }
    )
}

/// The NodeClaim or instance an action terminates, if it terminates one.
/// The placement group labels of a NodeClaim, as Karpenter writes them at launch: the id of the
/// group its EC2NodeClass launches into, as resolved this tick, and in a partition group the
/// partition its instance went to, or an empty value until EC2 says which
/// ([`decide::partition_labels`]).
fn placement_labels(
    resolved: &super::status::Resolutions,
    claim: &NodeClaim,
    launched: &Launched,
) -> Vec<(&'static str, String)> {
    let class = claim.spec.node_class_ref.as_ref().map(|r| &r.name);
    let group = class
        .and_then(|c| resolved.get(c))
        .and_then(|r| r.as_ref().ok())
        .and_then(|r| r.placement_group.as_ref());
    let Some(group) = group else {
        return Vec::new();
    };
    let mut out = vec![(PLACEMENT_GROUP_ID, group.id.clone())];
    if group.strategy == "partition" {
        let partition = launched.partition.map(|p| p.to_string());
        out.push((PLACEMENT_GROUP_PARTITION, partition.unwrap_or_default()));
    }
    out
}

/// The labels of the reservation an instance runs in, as Karpenter writes them: its id, and its
/// type and whether it is interruptible when known.
fn reservation_labels(launched: &Launched) -> Vec<(String, String)> {
    use fleetwright_core::labels::{RESERVATION_ID, RESERVATION_INTERRUPTIBLE, RESERVATION_TYPE};
    let Some(r) = &launched.reservation else {
        return Vec::new();
    };
    let mut out = vec![(RESERVATION_ID.to_string(), r.id.clone())];
    if let Some(kind) = &r.kind {
        out.push((RESERVATION_TYPE.to_string(), kind.clone()));
    }
    if let Some(interruptible) = r.interruptible {
        out.push((
            RESERVATION_INTERRUPTIBLE.to_string(),
            interruptible.to_string(),
        ));
    }
    out
}

/// Logs a repair held back by its pool's health (every tick it stays so).
pub(crate) fn repair_blocked(node: &str, nodepool: &str, unhealthy: usize, nodes: usize) {
    warn!(target: TICK, %node, %nodepool, unhealthy, nodes, "not repairing the node: more than 20% of its nodepool is unhealthy");
}

/// `StorageReady` → `storage_ready`, as Karpenter labels its unhealthy-disruption metric.
fn snake_case(text: &str) -> String {
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

fn terminates(action: &Action) -> Option<String> {
    match action {
        Action::GiveUp { nodeclaim, .. } | Action::FinishDeletion { nodeclaim, .. } => {
            Some(nodeclaim.clone())
        }
        Action::CollectGarbage { instance_id, .. } => Some(instance_id.clone()),
        _ => None,
    }
}

/// `[a, b] + [c]`: each replacement's instance type options; `none` for a delete.
fn replacements_text(replacements: &[Vec<String>]) -> String {
    if replacements.is_empty() {
        return "none".into();
    }
    replacements
        .iter()
        .map(|r| format!("[{}]", r.join(",")))
        .collect::<Vec<_>>()
        .join(" + ")
}
