//! What a dry run says of the actions it does not apply: the decisions' log lines, and the
//! summary entries that do not depend on applying them.

use tracing::{info, warn};

use super::action::Action;
use super::execute::{DISRUPT, TICK};
use super::TickSummary;
use crate::metrics;

/// What a dry run says of an action it does not apply: the decision's log line, and the
/// summary entries that do not depend on applying it.
pub(crate) fn describe(action: &Action, summary: &mut TickSummary) {
    match action {
        Action::CreateNodeClaim { nodepool, .. } => {
            summary
                .nodeclaims_created
                .push(format!("{nodepool}<dry-run>"));
        }
        Action::Register { nodeclaim, .. } => summary.registered.push(nodeclaim.clone()),
        Action::Rejected { object, .. } => super::isolation::log(object),
        Action::ReleaseNode { node } => {
            info!(target: TICK, %node, "the node is being deleted and no nodeclaim accounts for it; letting it go");
        }
        Action::NodeDeleted { node, nodeclaim } => {
            info!(target: TICK, %node, nodeclaim = %nodeclaim, "the node is being deleted; deleting its nodeclaim");
        }
        Action::Initialize { nodeclaim, node } => {
            info!(target: TICK, nodeclaim = %nodeclaim, node = %node, "initialized nodeclaim");
            summary.initialized.push(nodeclaim.clone());
        }
        Action::ScaleDown {
            nodepool,
            nodeclaim,
        } => {
            info!(target: TICK, %nodepool, nodeclaim = %nodeclaim, "static nodepool above its replicas; deleting the nodeclaim");
            summary.scaled_down.push(nodeclaim.clone());
        }
        Action::ShortOfReplicas { nodepool, reason } => {
            warn!(target: TICK, %nodepool, %reason, "static nodepool cannot reach its replicas");
        }
        Action::Restamp { nodeclaim, .. } => {
            info!(target: TICK, nodeclaim = %nodeclaim, "re-stamping the nodeclaim's hashes with this version");
            summary.restamped.push(nodeclaim.clone());
        }
        Action::LabelPartition {
            nodeclaim,
            partition,
        } => {
            info!(target: TICK, nodeclaim = %nodeclaim, %partition, "labelling the nodeclaim with its instance's placement group partition");
        }
        Action::MarkDrifted { nodeclaim, reason } => match reason {
            Some(reason) => info!(target: TICK, nodeclaim = %nodeclaim, %reason, "marking drifted"),
            None => {
                info!(target: TICK, nodeclaim = %nodeclaim, "removing the drifted status condition, not drifted")
            }
        },
        Action::Repair {
            nodeclaim,
            node,
            condition,
            forceful,
            ..
        } => {
            warn!(target: TICK, nodeclaim = %nodeclaim, %node, %condition, forceful, "repairing an unhealthy node");
            summary.repaired.push(nodeclaim.clone());
        }
        Action::ReservationExpiring {
            nodeclaim,
            reservation,
            ..
        } => {
            info!(target: TICK, nodeclaim = %nodeclaim, capacity_reservation_id = %reservation, "initiating delete for capacity block expiration");
        }
        Action::RepairBlocked {
            node,
            nodepool,
            unhealthy,
            nodes,
        } => super::execute::repair_blocked(node, nodepool, *unhealthy, *nodes),
        Action::GiveUp { nodeclaim, .. } => {
            warn!(target: TICK, nodeclaim = %nodeclaim, "nodeclaim did not register within 15m; deleting it");
            summary.liveness_deleted.push(nodeclaim.clone());
        }
        Action::CollectGarbage {
            instance_id,
            nodeclaim,
        } => {
            warn!(target: TICK, instance_id = %instance_id, nodeclaim = ?nodeclaim, "garbage collecting an instance with no nodeclaim");
            summary.garbage_collected.push(instance_id.clone());
        }
        Action::ForgetNodeClaim {
            nodeclaim,
            instance_id,
            ..
        } => {
            warn!(target: TICK, nodeclaim = %nodeclaim, instance_id = %instance_id, "the nodeclaim's instance is gone; deleting the nodeclaim");
            summary.stranded_deleted.push(nodeclaim.clone());
        }
        Action::Scored {
            nodepool,
            nodes,
            score,
            approved,
        } => {
            let decision = if *approved { "approved" } else { "rejected" };
            info!(target: DISRUPT, %nodepool, nodes = %nodes.join(","), score, decision, "balanced consolidation move scored");
            summary.metrics.add_by(
                metrics::CONSOLIDATION_MOVES,
                metrics::DECISION,
                decision,
                1.0,
            );
            summary.metrics.add_by(
                metrics::CONSOLIDATION_SCORE,
                metrics::DECISION,
                decision,
                *score,
            );
        }
        Action::PoolStatus {
            nodepool, nodes, ..
        } => {
            info!(target: TICK, %nodepool, nodes, "nodepool status");
        }
        Action::Blocked {
            node,
            reason,
            changed,
        } => blocked(node, reason, *changed),
        Action::ConfirmLater {
            command, savings, ..
        } => {
            info!(target: DISRUPT, command = %command, savings = savings, "disruption decided; confirming on a later tick");
        }
        Action::Invalidated { command, reason } => {
            info!(target: DISRUPT, command = %command, reason = %reason, "decided disruption no longer holds; not carried out");
        }
        Action::Disrupting { nodes, .. } => {
            info!(target: DISRUPT, "disrupting node(s) {} (dry run)", nodes.join(", "))
        }
        Action::AwaitReplacement { replacement } => {
            info!(target: DISRUPT, replacement = %replacement, "waiting for the replacement to initialize");
        }
        Action::Abandon {
            replacement, why, ..
        } => {
            warn!(target: DISRUPT, %replacement, %why, "abandoning the disruption");
        }
        _ => {}
    }
}

/// A disruption candidate left alone: at info when its reason is new since the last tick, else
/// at debug (the same reason every minute is noise).
pub(crate) fn blocked(node: &str, reason: &str, changed: bool) {
    if changed {
        info!(target: DISRUPT, node = %node, reason = %reason, "not disrupting node");
    } else {
        tracing::debug!(target: DISRUPT, node = %node, reason = %reason, "not disrupting node");
    }
}
