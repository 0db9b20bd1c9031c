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
        .map(|p| {
            let grace = p
                .spec
                .as_ref()
                .and_then(|s| s.termination_grace_period_seconds)
                .unwrap_or(DEFAULT_POD_GRACE_SECONDS);
            deadline - Duration::seconds(grace)
        })
        .chain(std::iter::once(deadline))
        .filter(|at| *at > now)
        .map(|at| at - now)
        .min()
}

pub(crate) fn due_before(
    pods: Vec<Pod>,
    deadline: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> (Option<Due>, Vec<Pod>) {
    let Some(deadline) = deadline else {
        return (None, pods);
    };
    let grace = |p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.termination_grace_period_seconds)
            .unwrap_or(DEFAULT_POD_GRACE_SECONDS)
    };
    let (due, rest): (Vec<Pod>, Vec<Pod>) = pods.into_iter().partition(|p| {
        p.metadata.deletion_timestamp.is_none() && now >= deadline - Duration::seconds(grace(p))
    });
    let due = (!due.is_empty()).then(|| Due {
        pods: due,
        grace_seconds: (deadline - now).num_seconds().max(1),
    });
    (due, rest)
}
