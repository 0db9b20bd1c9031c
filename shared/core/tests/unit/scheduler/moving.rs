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

/// On a node whose drain has a deadline (a repair's termination timestamp), every pod leaves
/// by then, so a pod a PDB or `do-not-disrupt` holds gets its capacity too.
#[test]
fn a_drain_with_a_deadline_plans_for_the_pods_held_from_eviction_too() {
    let mut snapshot = cluster();
    let mut selector = Requirements::new();
    selector.add(Requirement::single("app", "shop"));
    snapshot.pdbs.push(Pdb {
        namespace: "shop".into(),
        name: "never".into(),
        selector,
        disruptions_allowed: 0,
        fully_blocking: true,
    });
    assert!(names(&snapshot, 0).is_empty());
    let repaired = snapshot
        .nodeclaims
        .iter_mut()
        .find(|c| c.name == "c-claim-deleting")
        .unwrap();
    repaired.annotations.insert(
        crate::labels::TERMINATION_TIMESTAMP.into(),
        "2026-11-25T12:10:00Z".into(),
    );
    assert_eq!(names(&snapshot, 0), ["on-claim-deleting"]);
}
