//! What each [`Action`] says in the log, and when: the one place its line is written, so the
//! live tick and the dry run say the same words. Lines that need what applying found (the
//! instance a launch got, the pods a drain evicted) are the executor's own; for those a dry run
//! says what it would do, from what was decided.

use tracing::{debug, info, warn};

use super::action::Action;

/// The log target of the tick's lifecycle lines (what the simulator's log calls the component).
pub(crate) const TICK: &str = "fleetwright_runtime::tick";
/// The log target of the disruption lines.
pub(crate) const DISRUPT: &str = "fleetwright_runtime::disrupt";

/// When the live tick says an action's line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum When {
    /// Before applying it (it reports a decision, or what is about to be done).
    Before,
    /// Once it succeeded.
    After,
    /// The executor says it, with what applying found.
    Own,
}

impl Action {
    /// When the live tick says this action's line.
    pub(crate) fn when(&self) -> When {
        use Action::*;
        match self {
            CreateNodeClaim { .. }
            | Launch { .. }
            | EvictForDeletion { .. }
            | FinishDeletion { .. }
            | StartDisruption { .. }
            | PodRecords { .. }
            | Reboot { .. }
            | DrainDisrupted { .. } => When::Own,
            Register { .. }
            | Restamp { .. }
            | LabelPartition { .. }
            | MarkDrifted { .. }
            | ScaleDown { .. }
            | Repair { .. }
            | Expire { .. }
            | ReservationExpiring { .. }
            | NodeClassStatus { .. }
            | Initialize { .. }
            | SaveUnavailable { .. }
            | PoolStatus { .. }
            | NodeEvent { .. }
            | SaveBlocked { .. }
            | SavePending { .. }
            | Cordon { .. }
            | SaveRejected { .. }
            | DeleteNodeClaim { .. }
            | DropReplacement { .. }
            | RecordRepairFailure { .. }
            | DeleteDrained { .. } => When::After,
            ShortOfReplicas { .. }
            | RepairBlocked { .. }
            | GiveUp { .. }
            | DeletePods { .. }
            | ForgetNodeClaim { .. }
            | CollectGarbage { .. }
            | Blocked { .. }
            | Scored { .. }
            | ConfirmLater { .. }
            | Disrupting { .. }
            | Invalidated { .. }
            | DisruptionWaits { .. }
            | AwaitReplacement { .. }
            | Abandon { .. }
            | Rejected { .. }
            | NodeDeleted { .. }
            | ReleaseNode { .. } => When::Before,
        }
    }

    /// Writes this action's line: the live tick's words, or for an action whose line is the
    /// executor's own ([`When::Own`]), what it would do.
    pub(crate) fn say(&self) {
        match self {
            Action::CreateNodeClaim {
                nodepool,
                requests,
                instance_types,
                ..
            } => {
                info!(target: TICK, nodepool = %nodepool, requests = %requests, instance_types = instance_types.len(), "creating nodeclaim")
            }
            Action::Launch {
                nodeclaim,
                instance_types,
                zones,
                capacity_types,
                ..
            } => say_launch(nodeclaim, instance_types, zones, capacity_types),
            Action::Register {
                nodeclaim,
                node,
                provider_id,
                ..
            } => {
                info!(target: TICK, nodeclaim = %nodeclaim, node = %node, provider_id = %provider_id, "registered nodeclaim")
            }
            Action::Restamp { nodeclaim, .. } => {
                info!(target: TICK, nodeclaim = %nodeclaim, "re-stamped the nodeclaim's hashes with this version")
            }
            Action::LabelPartition {
                nodeclaim,
                partition,
            } => {
                info!(target: TICK, nodeclaim = %nodeclaim, %partition, "labelled the nodeclaim with its instance's placement group partition")
            }
            Action::MarkDrifted { nodeclaim, reason } => match reason {
                Some(reason) => {
                    info!(target: TICK, nodeclaim = %nodeclaim, %reason, "marking drifted")
                }
                None => {
                    info!(target: TICK, nodeclaim = %nodeclaim, "removing the drifted status condition, not drifted")
                }
            },
            Action::ScaleDown {
                nodepool,
                nodeclaim,
            } => {
                info!(target: TICK, %nodepool, nodeclaim = %nodeclaim, "static nodepool above its replicas; deleting the nodeclaim")
            }
            Action::ShortOfReplicas { nodepool, reason } => {
                warn!(target: TICK, %nodepool, %reason, "static nodepool cannot reach its replicas")
            }
            Action::Repair {
                nodeclaim,
                node,
                condition,
                terminate_at,
                ..
            } => {
                let pods_deleted_at = terminate_at
                    .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
                    .unwrap_or_default();
                warn!(target: TICK, nodeclaim = %nodeclaim, %node, %condition, %pods_deleted_at, "deleted the nodeclaim of an unhealthy node")
            }
            Action::Expire {
                nodeclaim,
                node,
                expired_at,
                ..
            } => {
                info!(target: TICK, NodeClaim = %nodeclaim, Node = node.as_deref().unwrap_or(""), expired_at = %expired_at.to_rfc3339(), "deleting expired nodeclaim")
            }
            Action::ReservationExpiring {
                nodeclaim,
                reservation,
                ends,
            } => {
                let ends = ends.map(|t| t.to_rfc3339()).unwrap_or_default();
                info!(target: TICK, nodeclaim = %nodeclaim, capacity_reservation_id = %reservation, %ends, "initiating delete for capacity block expiration")
            }
            Action::NodeClassStatus { nodeclass, .. } => {
                debug!(target: TICK, %nodeclass, "wrote the ec2nodeclass's status")
            }
            Action::RepairBlocked {
                node,
                nodepool,
                unhealthy,
                nodes,
                said,
            } => {
                if *said {
                    warn!(target: TICK, %node, %nodepool, unhealthy, nodes, "not repairing the node: more than 20% of its nodepool is unhealthy")
                }
            }
            Action::Initialize { nodeclaim, node } => {
                info!(target: TICK, nodeclaim = %nodeclaim, node = %node, "initialized nodeclaim")
            }
            Action::GiveUp { nodeclaim, .. } => {
                warn!(target: TICK, nodeclaim = %nodeclaim, "nodeclaim did not register within 15m; deleting it")
            }
            Action::EvictForDeletion {
                node,
                pods,
                held,
                given_up,
                ..
            } => {
                let pods = pod_list(pods);
                let held = pod_list(held);
                let given_up = given_up.join(", ");
                info!(target: TICK, %node, pods = %pods, held = %held, given_up = %given_up, "evicting the pods on the node before terminating it")
            }
            Action::DeletePods {
                node,
                pods,
                grace_seconds: None,
            } => {
                warn!(target: TICK, %node, pods = pods.len(), "the drain's grace is over (terminationGracePeriod, or a forceful repair); deleting the pods still on the node")
            }
            Action::DeletePods {
                node,
                pods,
                grace_seconds: Some(grace),
            } => {
                let pods = pod_list(pods);
                warn!(target: TICK, %node, pods = %pods, grace_seconds = grace, "deleting pods whose own grace would run past the node's terminationGracePeriod")
            }
            Action::FinishDeletion {
                nodeclaim,
                instance_id,
                node,
                reason,
            } => {
                info!(target: TICK, nodeclaim = %nodeclaim, instance_id = ?instance_id, node = ?node, %reason, "terminating the instance, then deleting the node and nodeclaim")
            }
            Action::ForgetNodeClaim {
                nodeclaim,
                instance_id,
                ..
            } => {
                warn!(target: TICK, nodeclaim = %nodeclaim, instance_id = %instance_id, "the nodeclaim's instance is gone; deleting the nodeclaim")
            }
            Action::CollectGarbage {
                instance_id,
                nodeclaim,
            } => {
                warn!(target: TICK, instance_id = %instance_id, nodeclaim = ?nodeclaim, "garbage collecting an instance with no nodeclaim")
            }
            Action::SaveUnavailable { offerings } => {
                debug!(target: TICK, empty = offerings.is_empty(), "saved the unavailable offerings")
            }
            Action::PoolStatus {
                nodepool, nodes, ..
            } => debug!(target: TICK, %nodepool, nodes, "wrote the nodepool's status"),
            Action::PodRecords { records } => {
                let nodeclaims = records.len();
                debug!(target: TICK, nodeclaims, "recording the pods of nodeclaims whose pods changed")
            }
            Action::Blocked {
                node,
                reason,
                changed,
            } => blocked(node, reason, *changed),
            Action::Scored {
                nodepool,
                nodes,
                score,
                approved,
            } => {
                let decision = if *approved { "approved" } else { "rejected" };
                info!(target: DISRUPT, %nodepool, nodes = %nodes.join(","), score, decision, "balanced consolidation move scored")
            }
            Action::NodeEvent {
                node,
                reason,
                message,
                ..
            } => debug!(target: TICK, %node, %reason, %message, "recorded an event on the node"),
            Action::SaveBlocked { blocked } => {
                debug!(target: DISRUPT, nodes = blocked.len(), "saved the blocked nodes already said")
            }
            Action::SavePending { pending } => {
                debug!(target: DISRUPT, commands = pending.len(), "saved the disruptions waiting for confirmation")
            }
            Action::ConfirmLater {
                command,
                savings,
                next: true,
            } => {
                info!(target: DISRUPT, command = %command, savings = savings, "next disruption decided; confirming on a later tick")
            }
            Action::ConfirmLater {
                command,
                savings,
                next: false,
            } => {
                info!(target: DISRUPT, command = %command, savings = savings, "disruption decided; confirming on a later tick")
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
                replacement = replacements_text(replacements),
                "disrupting node(s) {}",
                nodes.join(", ")
            ),
            Action::StartDisruption {
                command,
                replacements,
                candidates,
                ..
            } => {
                let nodes: Vec<&str> = candidates.iter().map(|(n, _)| n.as_str()).collect();
                info!(target: DISRUPT, command = %command, replacements = replacements.len(), nodes = %nodes.join(","), "starting the disruption: creating its replacements, then tainting the nodes karpenter.sh/disrupted:NoSchedule")
            }
            Action::Cordon { node } => {
                debug!(target: DISRUPT, %node, "tainted the node karpenter.sh/disrupted:NoSchedule")
            }
            Action::DisruptionWaits { pods, creating } => {
                debug!(target: DISRUPT, pods, creating, "not disrupting this tick: pods wait for the capacity it provisions")
            }
            Action::Invalidated { command, reason } => {
                info!(target: DISRUPT, command = %command, reason = %reason, "decided disruption no longer holds; not carried out")
            }
            Action::AwaitReplacement { replacement } => {
                info!(target: DISRUPT, replacement = %replacement, "waiting for the replacement to initialize")
            }
            Action::Abandon {
                replacement, why, ..
            } => warn!(target: DISRUPT, %replacement, %why, "abandoning the disruption"),
            Action::Rejected { object, .. } if object.kept => {
                warn!(target: TICK, object = %object.object(), error = %object.error, "part of the object does not read, and fails closed; the rest is read")
            }
            Action::Rejected { object, .. } => {
                warn!(target: TICK, object = %object.object(), error = %object.error, "left the object out of this tick: it could not be read or converted")
            }
            Action::SaveRejected { said } => {
                debug!(target: TICK, objects = said.len(), "saved the rejected objects already evented")
            }
            Action::NodeDeleted { node, nodeclaim } => {
                info!(target: TICK, %node, nodeclaim = %nodeclaim, "the node is being deleted; deleting its nodeclaim")
            }
            Action::ReleaseNode { node } => {
                info!(target: TICK, %node, "the node is being deleted and no nodeclaim accounts for it; letting it go")
            }
            Action::RecordRepairFailure { nodeclaim, mark } => {
                info!(target: DISRUPT, nodeclaim = %nodeclaim, failures = %mark, "the repair's replacements did not initialize; its next repair waits a backoff")
            }
            Action::DropReplacement {
                nodeclaim,
                candidates,
            } => {
                info!(target: DISRUPT, nodeclaim = %nodeclaim, candidates = %candidates, "deleting a replacement whose disruption never started (no candidate's command names it); the next decision plans afresh")
            }
            Action::DeleteNodeClaim { nodeclaim } => {
                debug!(target: DISRUPT, nodeclaim = %nodeclaim, "deleted the nodeclaim of a candidate with no node")
            }
            Action::DeleteDrained { nodeclaim } => {
                debug!(target: DISRUPT, nodeclaim = %nodeclaim, "deleted the nodeclaim of a drained candidate")
            }
            Action::Reboot {
                nodeclaim,
                node,
                step,
            } => {
                let step = serde_json::to_value(step).unwrap_or_default();
                info!(target: TICK, %nodeclaim, %node, step = %step, "reboot step")
            }
            Action::DrainDisrupted {
                node,
                pods,
                held,
                grace_over,
                due,
                due_grace,
                ..
            } => {
                if !due.is_empty() {
                    let due = pod_list(due);
                    warn!(target: DISRUPT, node = %node, pods = %due, grace_seconds = due_grace.unwrap_or_default(), "deleting pods whose own grace would run past the node's terminationGracePeriod")
                }
                let pods = pod_list(pods);
                let held = pod_list(held);
                info!(target: DISRUPT, node = %node, pods = %pods, held = %held, grace_over, "draining node")
            }
        }
    }
}

/// A launch a dry run would make: the NodeClaim's instance types (cheapest first), zones and
/// capacity types, as its requirements allow them.
fn say_launch(nodeclaim: &str, types: &[String], zones: &[String], capacity: &[String]) {
    let shown = |values: &[String]| -> String {
        if values.is_empty() {
            return "any".into();
        }
        let mut text = values.iter().take(5).cloned().collect::<Vec<_>>().join(",");
        if values.len() > 5 {
            text.push_str(&format!(" (+{} more)", values.len() - 5));
        }
        text
    };
    let (types, zones, capacity) = (shown(types), shown(zones), shown(capacity));
    info!(target: TICK, nodeclaim = %nodeclaim, instance_types = %types, zones = %zones, capacity_types = %capacity, "launching nodeclaim");
}

/// A disruption candidate left alone: at info when its reason is new since the last tick, else
/// at debug (the same reason every minute is noise).
fn blocked(node: &str, reason: &str, changed: bool) {
    if changed {
        info!(target: DISRUPT, node = %node, reason = %reason, "not disrupting node");
    } else {
        debug!(target: DISRUPT, node = %node, reason = %reason, "not disrupting node");
    }
}

/// `ns/a, ns/b`: the pods an action moves.
fn pod_list(pods: &[k8s_openapi::api::core::v1::Pod]) -> String {
    pods.iter()
        .map(fleetwright_kube::interruption::pod_key)
        .collect::<Vec<_>>()
        .join(", ")
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
