//! The pods that must leave nodes being deleted, planned together with the pending pods, as
//! Karpenter's provisioner plans them: the capacity a draining node's pods need launches in one
//! batch while the drain goes on, instead of a node at a time as evictions trickle in (which
//! would leave several small nodes for consolidation to undo).

use std::borrow::Cow;
use std::collections::BTreeSet;

use crate::labels::{DISRUPTION_COMMAND, TAINT_DISRUPTED};
use crate::model::{NodeClaim, Pod, Snapshot};

/// The nodes that are no capacity for new pods: the Node or its NodeClaim has a deletion
/// timestamp, or it is tainted `karpenter.sh/disrupted` (a disruption command's, or one left
/// behind by another autoscaler).
pub fn leaving_nodes(snapshot: &Snapshot) -> BTreeSet<&str> {
    let deleting = claims_of(snapshot, |_| false);
    snapshot
        .nodes
        .iter()
        .filter(|n| {
            n.deleting
                || n.taints.iter().any(|t| t.key == TAINT_DISRUPTED)
                || deleting.contains(n.name.as_str())
                || n.provider_id
                    .as_deref()
                    .is_some_and(|p| deleting.contains(p))
        })
        .map(|n| n.name.as_str())
        .collect()
}

/// The nodes whose pods will need a place elsewhere soon: the Node or its NodeClaim is being
/// deleted, or its NodeClaim carries a disruption command whose replacements all exist (one
/// whose replacement is gone is about to be abandoned, and its node kept). A taint alone
/// moves nothing: no one may ever drain such a node. Nodes of static NodePools are left out:
/// their pool's own refill replaces them, and planning their pods elsewhere too would launch
/// twice.
pub fn draining_nodes(snapshot: &Snapshot) -> BTreeSet<&str> {
    let claims: BTreeSet<&str> = snapshot
        .nodeclaims
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    let going = claims_of(snapshot, |c| commanded(c, &claims));
    let static_pools: BTreeSet<&str> = snapshot
        .nodepools
        .iter()
        .filter(|p| p.replicas.is_some())
        .map(|p| p.name.as_str())
        .collect();
    snapshot
        .nodes
        .iter()
        .filter(|n| !n.nodepool().is_some_and(|p| static_pools.contains(p)))
        .filter(|n| n.deleting || n.is_in(&going))
        .map(|n| n.name.as_str())
        .collect()
}

/// The node names and provider ids of the NodeClaims being deleted, and of those `also` picks.
fn claims_of(snapshot: &Snapshot, also: impl Fn(&NodeClaim) -> bool) -> BTreeSet<&str> {
    snapshot
        .nodeclaims
        .iter()
        .filter(|c| c.deleting || also(c))
        .flat_map(NodeClaim::node_keys)
        .collect()
}

/// Whether a NodeClaim carries a disruption command (`<reason>/<command>[/<replacements>]`)
/// whose replacements all exist.
fn commanded(claim: &NodeClaim, claims: &BTreeSet<&str>) -> bool {
    let Some(command) = claim.annotations.get(DISRUPTION_COMMAND) else {
        return false;
    };
    command
        .splitn(3, '/')
        .nth(2)
        .into_iter()
        .flat_map(|r| r.split(','))
        .filter(|r| !r.is_empty())
        .all(|r| claims.contains(r))
}

/// The indices of the pods on draining nodes that will need a place elsewhere: not terminal,
/// not being deleted (a StatefulSet's pod excepted, whose successor waits for it), not a
/// DaemonSet's or a static pod, not protected by `karpenter.sh/do-not-disrupt`, and not held
/// by a PodDisruptionBudget that allows no eviction ever, nor covered by two (the Eviction API
/// refuses those): capacity for a pod that may never leave would only be waste. On a node whose
/// drain has a deadline (a repair's termination timestamp), every pod leaves by then, held or
/// not, so those pods get their capacity too, as Karpenter's repair pre-spins for them.
pub fn moving_pods(snapshot: &Snapshot, now: i64) -> Vec<usize> {
    let draining = draining_nodes(snapshot);
    if draining.is_empty() {
        return Vec::new();
    }
    let bounded = claims_of(snapshot, |_| false)
        .into_iter()
        .filter(|k| deadline_of(snapshot, k))
        .collect::<BTreeSet<&str>>();
    snapshot
        .pods
        .iter()
        .enumerate()
        .filter(|(_, p)| p.node_name.as_deref().is_some_and(|n| draining.contains(n)))
        .filter(|(_, p)| {
            let leaves = reschedulable(p, now) && !blocked(snapshot, p);
            leaves
                || (bounded.contains(p.node_name.as_deref().unwrap_or_default()) && p.needs_place())
        })
        .map(|(i, _)| i)
        .collect()
}

/// Whether the deleting NodeClaim of node `key` (its name or provider id) has a deadline.
fn deadline_of(snapshot: &Snapshot, key: &str) -> bool {
    snapshot.nodeclaims.iter().any(|c| {
        c.deleting
            && c.annotations
                .contains_key(crate::labels::TERMINATION_TIMESTAMP)
            && [c.node_name.as_deref(), c.provider_id.as_deref()].contains(&Some(key))
    })
}

fn reschedulable(pod: &Pod, now: i64) -> bool {
    pod.needs_place() && !pod.do_not_disrupt.holds(now)
}

fn blocked(snapshot: &Snapshot, pod: &Pod) -> bool {
    let covering: Vec<_> = snapshot
        .pdbs
        .iter()
        .filter(|b| b.namespace == pod.namespace && b.selector.matches_labels(&pod.labels))
        .collect();
    covering.len() > 1 || covering.iter().any(|b| b.fully_blocking)
}

/// The snapshot with the moving pods unbound, so that the plan places them as it places
/// pending pods (borrowed unchanged when no pod moves).
pub(crate) fn unbound(snapshot: &Snapshot, now: i64) -> Cow<'_, Snapshot> {
    let moving = moving_pods(snapshot, now);
    if moving.is_empty() {
        return Cow::Borrowed(snapshot);
    }
    let mut out = snapshot.clone();
    for i in moving {
        out.pods[i].node_name = None;
    }
    Cow::Owned(out)
}

#[cfg(test)]
#[path = "../../tests/unit/scheduler/moving.rs"]
mod tests;
