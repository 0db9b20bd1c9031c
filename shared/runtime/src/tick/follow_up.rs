//! When the tick should run again before its schedule, decided purely from the actions it
//! applied: a command in flight (replacements starting, drains that move, deletions) is looked
//! at again every [`POLL`], as Karpenter's disruption controller polls, and so are a launch
//! whose node has not yet joined and initialized (Karpenter watches Nodes; the tick cannot, so it
//! polls until the node is ready for its pods) and a node just initialized, whose pods are about
//! to bind (see [`after`]). A deletion that
//! completes is such an action too, so the next round starts [`POLL`] after it instead of at the
//! next scheduled minute. The disruption phase adds two waits of its own: a new decision's
//! confirmation, [`CONFIRM_AFTER`](super::in_progress::CONFIRM_AFTER) after it was made, and
//! the moment an empty node waits out its pool's `consolidateAfter`, and, no sooner than
//! [`UNDERUSED_FOLLOW_UP`](super::disruption::UNDERUSED_FOLLOW_UP), the moment a half-empty one
//! does (not a fuller one: on a busy cluster some node's pods change every second, and following
//! each of those would tick without end).

use chrono::Duration;

use super::action::Action;

/// How soon a command in flight is looked at again.
pub const POLL: Duration = Duration::seconds(10);

/// How soon after this action the tick should run again, if sooner than its schedule. A drain
/// is followed only while it moves: its pods left changed since its last pass, or some are still
/// shutting down; one a PodDisruptionBudget holds is left to the schedule, however long its
/// grace period. A decision's confirmation is not an action's: the disruption phase gives it
/// ([`super::disruption::Decided`]), for new decisions only, so a command that keeps failing its
/// validation is not followed every 15 s.
pub fn after(action: &Action) -> Option<Duration> {
    match action {
        Action::DrainDisrupted {
            progress,
            pods,
            held,
            next_due,
            ..
        } => {
            let leaving = pods
                .iter()
                .chain(held)
                .any(|p| p.metadata.deletion_timestamp.is_some());
            let moving = (progress.is_some() || leaving).then_some(POLL);
            moving.into_iter().chain(*next_due).min()
        }
        // A drain a budget holds still wakes when a pod's own shutdown must begin (its grace
        // before the deadline), and at the deadline.
        Action::EvictForDeletion { next_due, .. } => *next_due,
        Action::StartDisruption { .. }
        | Action::AwaitReplacement { .. }
        | Action::DeleteNodeClaim { .. }
        | Action::DropReplacement { .. }
        | Action::DeletePods { .. }
        | Action::FinishDeletion { .. }
        | Action::ForgetNodeClaim { .. }
        | Action::NodeDeleted { .. } => Some(POLL),
        // Its pods bind in the seconds after; the next read records them, so that a pod that
        // leaves before the schedule's next tick is still seen to have gone.
        Action::Initialize { .. } => Some(POLL),
        // Its node joins within a minute or so, and its pods wait for the tick to register and
        // initialize it; the tick polls until then (see `decide::joining`).
        Action::Launch { .. } => Some(POLL),
        // A reboot's next step is looked at as a command's is; a drain with pods left, when its
        // bound ends (the reboot goes on then, whatever a budget still holds).
        Action::Reboot {
            step:
                super::action::RebootStep::Drain {
                    pods,
                    held,
                    until_bound,
                },
            ..
        } => match pods.is_empty() && held.is_empty() {
            true => Some(POLL),
            false => *until_bound,
        },
        Action::Reboot { .. } => Some(POLL),
        _ => None,
    }
}

/// The soonest follow-up of `current` and these actions'.
pub fn soonest(current: Option<Duration>, actions: &[Action]) -> Option<Duration> {
    actions.iter().filter_map(after).chain(current).min()
}

#[cfg(test)]
#[path = "../../tests/unit/tick/follow_up.rs"]
mod tests;
