//! What a dry run says of the actions it does not apply: every action's line (the live tick's
//! words, or what it would do, [`Action::say`]) inside a `dry_run` span, and the summary entries
//! that do not depend on applying it. Every action is named here, so a new one cannot be left
//! silent.

use super::action::Action;
use super::TickSummary;
use crate::metrics;

/// Describes an action a dry run does not apply.
pub(crate) fn describe(action: &Action, summary: &mut TickSummary) {
    let _span = tracing::info_span!("dry_run").entered();
    action.say();
    record(action, summary);
}

/// The summary entries an action makes whether or not it is applied.
fn record(action: &Action, summary: &mut TickSummary) {
    use Action::*;
    match action {
        CreateNodeClaim { nodepool, .. } => {
            summary
                .nodeclaims_created
                .push(format!("{nodepool}<dry-run>"));
        }
        Register { nodeclaim, .. } => summary.registered.push(nodeclaim.clone()),
        Initialize { nodeclaim, .. } => summary.initialized.push(nodeclaim.clone()),
        ScaleDown { nodeclaim, .. } => summary.scaled_down.push(nodeclaim.clone()),
        Restamp { nodeclaim, .. } => summary.restamped.push(nodeclaim.clone()),
        Repair { nodeclaim, .. } => summary.repaired.push(nodeclaim.clone()),
        Reboot {
            nodeclaim,
            step: super::reboot::RebootStep::Commit { .. },
            ..
        } => summary.rebooted.push(nodeclaim.clone()),
        Expire { nodeclaim, .. } => summary.expired.push(nodeclaim.clone()),
        ReservationExpiring { nodeclaim, .. } => {
            summary.reservation_expired.push(nodeclaim.clone())
        }
        GiveUp { nodeclaim, .. } => summary.liveness_deleted.push(nodeclaim.clone()),
        CollectGarbage { instance_id, .. } => summary.garbage_collected.push(instance_id.clone()),
        ForgetNodeClaim { nodeclaim, .. } => summary.stranded_deleted.push(nodeclaim.clone()),
        Scored {
            score, approved, ..
        } => scored(summary, *score, *approved),
        Launch { .. }
        | LabelPartition { .. }
        | MarkDrifted { .. }
        | ShortOfReplicas { .. }
        | NodeClassStatus { .. }
        | RepairBlocked { .. }
        | EvictForDeletion { .. }
        | DeletePods { .. }
        | FinishDeletion { .. }
        | SaveUnavailable { .. }
        | PoolStatus { .. }
        | PodRecords { .. }
        | Blocked { .. }
        | NodeEvent { .. }
        | SaveBlocked { .. }
        | SavePending { .. }
        | ConfirmLater { .. }
        | Disrupting { .. }
        | StartDisruption { .. }
        | Cordon { .. }
        | Invalidated { .. }
        | DisruptionWaits { .. }
        | AwaitReplacement { .. }
        | Abandon { .. }
        | Rejected { .. }
        | SaveRejected { .. }
        | NodeDeleted { .. }
        | ReleaseNode { .. }
        | DeleteNodeClaim { .. }
        | DropReplacement { .. }
        | RecordRepairFailure { .. }
        | DeleteDrained { .. }
        | Reboot { .. }
        | DrainDisrupted { .. } => {}
    }
}

/// Karpenter's `karpenter_consolidation_score` and `karpenter_consolidation_moves_total`.
pub(crate) fn scored(summary: &mut TickSummary, score: f64, approved: bool) {
    let decision = if approved { "approved" } else { "rejected" };
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
        score,
    );
}
