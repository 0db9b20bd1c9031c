//! Launching a NodeClaim's instance: CreateFleet (tried again over its other offerings when one
//! had no capacity), and the instance recorded on the NodeClaim.

use chrono::{DateTime, Utc};
use fleetwright_cloud::{Cloud, LaunchRequest, Launched};
use fleetwright_core::disruption::{SECURITY_GROUP_IDS, SUBNET_ID};
use fleetwright_core::labels::{
    CAPACITY_TYPE, INSTANCE_TYPE, PLACEMENT_GROUP_ID, PLACEMENT_GROUP_PARTITION, ZONE,
};
use fleetwright_crds::NodeClaim;
use fleetwright_kube::dump::ClusterDump;
use fleetwright_kube::executor;
use tracing::{info, warn};

use super::Applied;
use crate::error::RuntimeError;
use crate::metrics;
use crate::tick::claims::name_of;
use crate::tick::machine::Outcome;
use crate::tick::provision;
use crate::tick::say::TICK;
use crate::tick::{LaunchSummary, Tick};
use fleetwright_crds::conditions;

impl<C: Cloud> Tick<C> {
    /// Launches a NodeClaim's instance and records it. A launch that failed deletes the
    /// NodeClaim (its pods are planned again), unless its outcome is unknown (a timeout, a 5xx)
    /// and the NodeClaim is young; a launch whose record failed keeps it. In both kept cases the
    /// next tick's launch adopts the instance by its tag.
    pub(super) async fn launch_claim(&self, name: &str, claim: &NodeClaim, ctx: &mut Applied<'_>) {
        let launched = match self.launch_retrying(ctx.dump, claim, ctx.now).await {
            Ok(launched) => launched,
            Err(e) => {
                warn!(target: TICK, nodeclaim = %name, error = %e, "failed launching nodeclaim");
                ctx.summary.metrics.add(metrics::LAUNCH_FAILURES, 1.0);
                ctx.summary.launch_failures.push(format!("{name}: {e}"));
                if provision::keep_after_failed_launch(claim, &e, ctx.now) {
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
        let placement = placement_labels(ctx.resolved, claim, &launched);
        if let Err(e) = self
            .record_launch(claim, &launched, &placement, ctx.now)
            .await
        {
            warn!(target: TICK, nodeclaim = %name, instance_id = %launched.instance_id, error = %e, "launched, but recording the instance failed; the next tick adopts it by tag");
            ctx.summary.failures.push(format!("{name}: {e}"));
            ctx.outcomes.push(Outcome::Launched {
                nodeclaim: name.to_string(),
                instance_id: launched.instance_id.clone(),
                recorded: None,
            });
            return;
        }
        info!(target: TICK, nodeclaim = %name, provider_id = %launched.provider_id(), instance_type = %launched.instance_type, zone = %launched.zone, capacity_type = %launched.capacity_type, "launched nodeclaim");
        ctx.summary.metrics.add(metrics::NODECLAIMS_LAUNCHED, 1.0);
        // This tick's end labels a partition EC2 chose only on a NodeClaim that shows it waits.
        ctx.outcomes.push(Outcome::Launched {
            nodeclaim: name.to_string(),
            instance_id: launched.instance_id.clone(),
            recorded: Some((
                launched.provider_id(),
                placement
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect(),
            )),
        });
    }

    /// [`Tick::launch`], tried again at once when CreateFleet launched nothing for want of
    /// capacity: the offerings it refused are marked unavailable by then, so the next try asks
    /// for the NodeClaim's other types, zones and capacity types (on-demand after spot) in this
    /// tick, instead of a minute later.
    pub(super) async fn launch_retrying(
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
            if !refused || attempt >= super::LAUNCH_ATTEMPTS || self.deadline.near() {
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
    pub(super) async fn launch(
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
    pub(super) async fn record_launch(
        &self,
        claim: &NodeClaim,
        launched: &Launched,
        placement: &[(&str, String)],
        now: DateTime<Utc>,
    ) -> Result<(), RuntimeError> {
        let name = name_of(claim);
        let labels = [
            (INSTANCE_TYPE, launched.instance_type.as_str()),
            (ZONE, launched.zone.as_str()),
            (CAPACITY_TYPE, launched.capacity_type.as_str()),
        ];
        let reservation_labels = reservation_labels(launched);
        let groups = launched.security_groups.join(",");
        let annotations = [
            (SUBNET_ID, launched.subnet_id.as_str()),
            (SECURITY_GROUP_IDS, groups.as_str()),
        ];
        executor::update_nodeclaim(self.kube.clone(), &name, |current| {
            let mut next = current.clone();
            let map = next.metadata.labels.get_or_insert_with(Default::default);
            for (k, v) in &launched.type_labels {
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
        self.set_condition(&name, conditions::LAUNCHED, now, |status| {
            status.provider_id = Some(provider.clone());
            status.image_id = Some(launched.image_id.clone());
        })
        .await
    }
}

/// The NodeClaim or instance an action terminates, if it terminates one.
/// The placement group labels of a NodeClaim, as Karpenter writes them at launch: the id of the
/// group its EC2NodeClass launches into, as resolved this tick, and in a partition group the
/// partition its instance went to, or an empty value until EC2 says which
/// ([`crate::tick::finish::partition_labels`]).
pub(super) fn placement_labels(
    resolved: &crate::tick::status::Resolutions,
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
