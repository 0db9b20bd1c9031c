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
        Action::DrainDisrupted { progress, pods, .. } => {
            let leaving = pods.iter().any(|p| p.metadata.deletion_timestamp.is_some());
            (progress.is_some() || leaving).then_some(POLL)
        }
        Action::StartDisruption { .. }
        | Action::AwaitReplacement { .. }
        | Action::DeleteNodeClaim { .. }
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
        _ => None,
    }
}

/// The soonest follow-up of `current` and these actions'.
pub fn soonest(current: Option<Duration>, actions: &[Action]) -> Option<Duration> {
    actions.iter().filter_map(after).chain(current).min()
}

#[cfg(test)]
mod tests {
    use super::super::in_progress::CONFIRM_AFTER;
    use super::*;
    use k8s_openapi::api::core::v1::Pod;

    fn drain(progress: Option<&str>, pods: Vec<Pod>) -> Action {
        Action::DrainDisrupted {
            nodeclaim: "c1".into(),
            node: "n1".into(),
            pods,
            mark_started: None,
            grace_over: false,
            due: Vec::new(),
            due_grace: None,
            progress: progress.map(str::to_string),
            stalled_since: None,
        }
    }

    fn leaving() -> Pod {
        let mut pod = Pod::default();
        pod.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        pod
    }

    #[test]
    fn a_command_in_flight_is_polled_and_the_soonest_follow_up_wins() {
        let delete = Action::DeleteNodeClaim {
            nodeclaim: "c1".into(),
        };
        assert_eq!(soonest(None, std::slice::from_ref(&delete)), Some(POLL));
        assert_eq!(soonest(Some(CONFIRM_AFTER), &[delete]), Some(POLL));
        assert_eq!(
            soonest(Some(Duration::seconds(3)), &[]),
            Some(Duration::seconds(3))
        );
    }

    #[test]
    fn a_drain_is_followed_only_while_it_moves() {
        assert_eq!(
            after(&drain(Some("3@2026-11-26T10:00:00Z"), Vec::new())),
            Some(POLL)
        );
        assert_eq!(after(&drain(None, vec![leaving()])), Some(POLL));
        // A PodDisruptionBudget holds every pod: nothing changed, nothing is leaving.
        assert_eq!(after(&drain(None, vec![Pod::default()])), None);
    }

    #[test]
    fn nothing_in_flight_waits_for_the_schedule() {
        let waits = Action::DisruptionWaits {
            pods: 1,
            creating: true,
        };
        let confirm = Action::ConfirmLater {
            command: "empty/delete:n1".into(),
            savings: 0.1,
            next: false,
        };
        assert_eq!(soonest(None, &[waits, confirm]), None);
    }
}
