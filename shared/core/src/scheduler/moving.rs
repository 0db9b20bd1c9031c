//! The pods that must leave nodes being deleted, planned together with the pending pods, as
//! Karpenter's provisioner plans them: the capacity a draining node's pods need launches in one
//! batch while the drain goes on, instead of a node at a time as evictions trickle in (which
//! would leave several small nodes for consolidation to undo).

use std::borrow::Cow;
use std::collections::BTreeSet;

use crate::labels::TAINT_DISRUPTED;
use crate::model::{Pod, Snapshot};

/// The nodes being deleted: the Node or its NodeClaim has a deletion timestamp, or a
/// disruption command has tainted it (`karpenter.sh/disrupted`). None of them is capacity.
pub fn leaving_nodes(snapshot: &Snapshot) -> BTreeSet<&str> {
    let claimed: BTreeSet<&str> = snapshot
        .nodeclaims
        .iter()
        .filter(|c| c.deleting)
        .flat_map(|c| [c.node_name.as_deref(), c.provider_id.as_deref()])
        .flatten()
        .collect();
    snapshot
        .nodes
        .iter()
        .filter(|n| {
            n.deleting
                || n.taints.iter().any(|t| t.key == TAINT_DISRUPTED)
                || claimed.contains(n.name.as_str())
                || n.provider_id
                    .as_deref()
                    .is_some_and(|p| claimed.contains(p))
        })
        .map(|n| n.name.as_str())
        .collect()
}

/// The indices of the pods on leaving nodes that will need a place elsewhere: not terminal,
/// not being deleted (a StatefulSet's pod excepted, whose successor waits for it), not a
/// DaemonSet's or a static pod, not protected by `karpenter.sh/do-not-disrupt`, and not held
/// by a PodDisruptionBudget that allows no eviction ever (capacity for a pod that may never
/// leave would only be waste).
pub fn moving_pods(snapshot: &Snapshot, now: i64) -> Vec<usize> {
    let leaving = leaving_nodes(snapshot);
    if leaving.is_empty() {
        return Vec::new();
    }
    snapshot
        .pods
        .iter()
        .enumerate()
        .filter(|(_, p)| p.node_name.as_deref().is_some_and(|n| leaving.contains(n)))
        .filter(|(_, p)| reschedulable(p, now) && !fully_blocked(snapshot, p))
        .map(|(i, _)| i)
        .collect()
}

fn reschedulable(pod: &Pod, now: i64) -> bool {
    let owner = pod.owner_kind.as_deref();
    let active = !pod.deleting || owner == Some("StatefulSet");
    !pod.terminal
        && active
        && owner != Some("DaemonSet")
        && owner != Some("Node")
        && !pod.do_not_disrupt.holds(now)
}

fn fully_blocked(snapshot: &Snapshot, pod: &Pod) -> bool {
    snapshot.pdbs.iter().any(|b| {
        b.fully_blocking && b.namespace == pod.namespace && b.selector.matches_labels(&pod.labels)
    })
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
mod tests {
    use super::*;
    use crate::model::{Node, NodeClaim, Pdb, Protection, Taint};
    use crate::requirements::{Requirement, Requirements};
    use crate::resources::Resources;

    fn pod(name: &str, node: &str) -> Pod {
        let mut p = Pod::new("shop", name, Resources::default());
        p.node_name = Some(node.into());
        p.labels.insert("app".into(), "shop".into());
        p
    }

    fn node(name: &str) -> Node {
        Node {
            name: name.into(),
            ready: true,
            ..Default::default()
        }
    }

    fn cluster() -> Snapshot {
        let mut tainted = node("tainted");
        tainted.taints.push(Taint {
            key: TAINT_DISRUPTED.into(),
            value: String::new(),
            effect: crate::model::TaintEffect::NoSchedule,
        });
        let mut deleting = node("deleting");
        deleting.deleting = true;
        Snapshot {
            nodes: vec![node("kept"), tainted, deleting, node("claim-deleting")],
            nodeclaims: vec![NodeClaim {
                name: "c".into(),
                node_name: Some("claim-deleting".into()),
                deleting: true,
                ..Default::default()
            }],
            pods: ["kept", "tainted", "deleting", "claim-deleting"]
                .iter()
                .map(|n| pod(&format!("on-{n}"), n))
                .collect(),
            ..Default::default()
        }
    }

    fn names(snapshot: &Snapshot, now: i64) -> Vec<&str> {
        moving_pods(snapshot, now)
            .into_iter()
            .map(|i| snapshot.pods[i].name.as_str())
            .collect()
    }

    #[test]
    fn the_pods_of_deleting_tainted_and_claim_deleted_nodes_move() {
        let snapshot = cluster();
        assert_eq!(
            names(&snapshot, 0),
            ["on-tainted", "on-deleting", "on-claim-deleting"]
        );
        let unbound = unbound(&snapshot, 0);
        assert_eq!(unbound.pods[0].node_name.as_deref(), Some("kept"));
        assert!(unbound.pods[1..].iter().all(|p| p.node_name.is_none()));
    }

    #[test]
    fn pods_that_will_not_leave_or_are_replaced_already_do_not_move() {
        let mut snapshot = cluster();
        let base = snapshot.pods.len();
        let mut extra = |name: &str, change: &dyn Fn(&mut Pod)| {
            let mut p = pod(name, "deleting");
            change(&mut p);
            snapshot.pods.push(p);
        };
        extra("daemon", &|p| p.owner_kind = Some("DaemonSet".into()));
        extra("static", &|p| p.owner_kind = Some("Node".into()));
        extra("done", &|p| p.terminal = true);
        extra("terminating", &|p| p.deleting = true);
        extra("kept-by-annotation", &|p| {
            p.do_not_disrupt = Protection::Until(100)
        });
        extra("stateful-terminating", &|p| {
            p.deleting = true;
            p.owner_kind = Some("StatefulSet".into());
        });
        extra("protected-until-50", &|p| {
            p.do_not_disrupt = Protection::Until(50)
        });
        let moved = names(&snapshot, 60);
        let added: Vec<&str> = moved
            .into_iter()
            .filter(|n| !n.starts_with("on-"))
            .collect();
        assert_eq!(added, ["stateful-terminating", "protected-until-50"]);
        assert_eq!(snapshot.pods.len(), base + 7);
    }

    #[test]
    fn a_pdb_that_allows_no_eviction_ever_keeps_its_pods_unplanned() {
        let mut snapshot = cluster();
        let mut selector = Requirements::new();
        selector.add(Requirement::single("app", "shop"));
        snapshot.pdbs.push(Pdb {
            namespace: "shop".into(),
            name: "none".into(),
            selector: selector.clone(),
            disruptions_allowed: 0,
            fully_blocking: false,
        });
        assert_eq!(names(&snapshot, 0).len(), 3, "a PDB exhausted for now");
        snapshot.pdbs[0].fully_blocking = true;
        assert!(names(&snapshot, 0).is_empty());
    }

    #[test]
    fn no_leaving_node_borrows_the_snapshot() {
        let mut snapshot = cluster();
        snapshot.nodes.truncate(1);
        snapshot.nodeclaims.clear();
        assert!(matches!(unbound(&snapshot, 0), Cow::Borrowed(_)));
    }
}
