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
        .filter(|n| {
            n.deleting
                || going.contains(n.name.as_str())
                || n.provider_id.as_deref().is_some_and(|p| going.contains(p))
        })
        .map(|n| n.name.as_str())
        .collect()
}

/// The node names and provider ids of the NodeClaims being deleted, and of those `also` picks.
fn claims_of(snapshot: &Snapshot, also: impl Fn(&NodeClaim) -> bool) -> BTreeSet<&str> {
    snapshot
        .nodeclaims
        .iter()
        .filter(|c| c.deleting || also(c))
        .flat_map(|c| [c.node_name.as_deref(), c.provider_id.as_deref()])
        .flatten()
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
/// refuses those): capacity for a pod that may never leave would only be waste.
pub fn moving_pods(snapshot: &Snapshot, now: i64) -> Vec<usize> {
    let draining = draining_nodes(snapshot);
    if draining.is_empty() {
        return Vec::new();
    }
    snapshot
        .pods
        .iter()
        .enumerate()
        .filter(|(_, p)| p.node_name.as_deref().is_some_and(|n| draining.contains(n)))
        .filter(|(_, p)| reschedulable(p, now) && !blocked(snapshot, p))
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
mod tests {
    use super::*;
    use crate::model::{Node, NodePool, Pdb, Protection, Taint, TaintEffect};
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

    fn claim(name: &str, node: &str) -> NodeClaim {
        NodeClaim {
            name: name.into(),
            node_name: Some(node.into()),
            ..Default::default()
        }
    }

    fn tainted(name: &str) -> Node {
        let mut n = node(name);
        n.taints.push(Taint {
            key: TAINT_DISRUPTED.into(),
            value: String::new(),
            effect: TaintEffect::NoSchedule,
        });
        n
    }

    /// Nodes kept, commanded (a delete command), deleting, of a deleting NodeClaim, and
    /// tainted with no command behind the taint; a pod on each.
    fn cluster() -> Snapshot {
        let mut deleting = node("deleting");
        deleting.deleting = true;
        let mut commanded = claim("c-commanded", "commanded");
        commanded
            .annotations
            .insert(DISRUPTION_COMMAND.into(), "underutilized/delete".into());
        let mut claim_deleting = claim("c-claim-deleting", "claim-deleting");
        claim_deleting.deleting = true;
        let names = [
            "kept",
            "commanded",
            "deleting",
            "claim-deleting",
            "leftover",
        ];
        Snapshot {
            nodes: vec![
                node("kept"),
                tainted("commanded"),
                deleting,
                node("claim-deleting"),
                tainted("leftover"),
            ],
            nodeclaims: vec![commanded, claim_deleting],
            pods: names.iter().map(|n| pod(&format!("on-{n}"), n)).collect(),
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
    fn the_pods_of_commanded_deleting_and_claim_deleted_nodes_move() {
        let snapshot = cluster();
        let moving = ["on-commanded", "on-deleting", "on-claim-deleting"];
        assert_eq!(names(&snapshot, 0), moving);
        let unbound = unbound(&snapshot, 0);
        let bound: Vec<&str> = unbound
            .pods
            .iter()
            .filter(|p| p.node_name.is_some())
            .map(|p| p.name.as_str())
            .collect();
        assert_eq!(
            bound,
            ["on-kept", "on-leftover"],
            "a taint alone moves nothing"
        );
        let leaving = leaving_nodes(&snapshot);
        assert!(
            leaving.contains("leftover") && !leaving.contains("kept"),
            "{leaving:?}"
        );
    }

    #[test]
    fn a_command_whose_replacement_is_gone_moves_nothing() {
        let mut snapshot = cluster();
        snapshot.nodeclaims[0]
            .annotations
            .insert(DISRUPTION_COMMAND.into(), "drifted/replace/c-new".into());
        assert!(!names(&snapshot, 0).contains(&"on-commanded"));
        snapshot.nodeclaims.push(NodeClaim {
            name: "c-new".into(),
            ..Default::default()
        });
        assert!(names(&snapshot, 0).contains(&"on-commanded"));
    }

    #[test]
    fn the_nodes_of_static_pools_are_refilled_by_their_pool_not_planned_for() {
        let mut snapshot = cluster();
        snapshot.nodes[2]
            .labels
            .insert(crate::labels::NODEPOOL.into(), "fixed".into());
        snapshot.nodepools.push(NodePool {
            name: "fixed".into(),
            replicas: Some(2),
            ..Default::default()
        });
        assert!(!names(&snapshot, 0).contains(&"on-deleting"));
    }

    #[test]
    fn pods_that_will_not_leave_or_are_replaced_already_do_not_move() {
        let mut snapshot = cluster();
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
        let added: Vec<&str> = names(&snapshot, 60)
            .into_iter()
            .filter(|n| !n.starts_with("on-"))
            .collect();
        assert_eq!(added, ["stateful-terminating", "protected-until-50"]);
    }

    #[test]
    fn a_pdb_that_allows_no_eviction_ever_or_a_second_pdb_keeps_pods_unplanned() {
        let mut snapshot = cluster();
        let mut selector = Requirements::new();
        selector.add(Requirement::single("app", "shop"));
        let pdb = Pdb {
            namespace: "shop".into(),
            name: "one".into(),
            selector,
            disruptions_allowed: 0,
            fully_blocking: false,
        };
        snapshot.pdbs.push(pdb.clone());
        assert_eq!(names(&snapshot, 0).len(), 3, "a PDB exhausted for now");
        snapshot.pdbs[0].fully_blocking = true;
        assert!(names(&snapshot, 0).is_empty());
        snapshot.pdbs[0].fully_blocking = false;
        snapshot.pdbs.push(Pdb {
            name: "two".into(),
            ..pdb
        });
        assert!(
            names(&snapshot, 0).is_empty(),
            "the Eviction API refuses such pods"
        );
    }

    #[test]
    fn no_draining_node_borrows_the_snapshot() {
        let mut snapshot = cluster();
        snapshot.nodes.truncate(1);
        snapshot.nodeclaims.clear();
        assert!(matches!(unbound(&snapshot, 0), Cow::Borrowed(_)));
    }
}
