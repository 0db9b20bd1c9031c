//! A pod's own shutdown before its node's deadline: which pods of a drain must be deleted now,
//! with what is left of their grace, so that they end by the time the node goes.

use chrono::{DateTime, Duration, Utc};
use k8s_openapi::api::core::v1::Pod;

use super::action::Action;

/// Pods whose own shutdown must start now to end by the node's deadline.
pub(crate) struct Due {
    pub(crate) pods: Vec<Pod>,
    /// Each pod's grace, cut to the time left before the deadline.
    pub(crate) grace_seconds: i64,
}

impl Due {
    pub(crate) fn into_action(self, node: &str) -> Action {
        Action::DeletePods {
            node: node.to_string(),
            pods: self.pods,
            grace_seconds: Some(self.grace_seconds),
        }
    }
}

/// The grace a pod asks for when its spec says nothing: the API server's default.
pub const DEFAULT_POD_GRACE_SECONDS: i64 = 30;

/// Splits a drain's pods by the node's `deadline` (None: no deadline, nothing is due): a pod
/// still running at `deadline − its terminationGracePeriodSeconds` is deleted then, with what
/// is left of its grace (at least 1 s), as Karpenter's termination does, so its shutdown ends
/// by the time the node goes instead of being cut short there. The others are still evicted.
/// A pod already shutting down is on its way and is neither.
/// How long until the next of these pods falls due (its own grace before `deadline`), or until
/// the deadline itself: a tick then deletes what is left, so each pod gets its full shutdown
/// however the schedule falls. None without a deadline, or when nothing is ahead.
pub(crate) fn next_due(
    pods: &[Pod],
    deadline: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Option<Duration> {
    let deadline = deadline?;
    pods.iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| due_at(p, deadline))
        .chain(std::iter::once(deadline))
        .filter(|at| *at > now)
        .map(|at| at - now)
        .min()
}

/// When the pod must be deleted for its own grace to end by `deadline`. A grace too long to
/// count back from the deadline (the API server sets no upper bound) is due at once.
fn due_at(pod: &Pod, deadline: DateTime<Utc>) -> DateTime<Utc> {
    let grace = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .unwrap_or(DEFAULT_POD_GRACE_SECONDS);
    Duration::try_seconds(grace)
        .and_then(|g| deadline.checked_sub_signed(g))
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

pub(crate) fn due_before(
    pods: Vec<Pod>,
    deadline: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> (Option<Due>, Vec<Pod>) {
    let Some(deadline) = deadline else {
        return (None, pods);
    };
    let (due, rest): (Vec<Pod>, Vec<Pod>) = pods
        .into_iter()
        .partition(|p| p.metadata.deletion_timestamp.is_none() && now >= due_at(p, deadline));
    let due = (!due.is_empty()).then(|| Due {
        pods: due,
        grace_seconds: (deadline - now).num_seconds().max(1),
    });
    (due, rest)
}
