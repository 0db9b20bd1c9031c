//! Karpenter v1.15's terminate-first drift and repair (its `TerminateFirstDrift` and
//! `TerminateFirstRepair` gates): a static pool at its `limits.nodes` cannot stage a
//! replacement, so with the gate its drifted or unhealthy node goes first, within the budget,
//! and the pool's refill takes the slot it frees; without it the node stays, reported blocked.

use super::*;

/// A static pool of two replicas at `limits.nodes: 2`, holding two m5 nodes that have drifted
/// (its requirements now allow c5 only), under a budget of `budget`.
fn at_limit(budget: &str) -> Cluster {
    let mut pool = general(budget);
    pool.replicas = Some(2);
    let mut limits = Resources::default();
    limits.extended.insert("nodes".into(), 2);
    pool.limits = Some(limits);
    let mut c = Cluster::new(pool);
    c.node("n1", "m5.2xlarge", "on-demand")
        .node("n2", "m5.2xlarge", "on-demand");
    c.pod("a", "n1", 500);
    c.snapshot.nodepools[0].requirements.add(
        Requirement::new(crate::labels::INSTANCE_FAMILY, Operator::In, &["c5"]).expect("valid"),
    );
    c
}

fn blocked_at_limit(plan: &DisruptionPlan) -> usize {
    plan.blocked
        .iter()
        .filter(|b| b.reason.contains("limits.nodes 2"))
        .count()
}

#[test]
fn with_the_gate_a_drifted_node_at_the_node_limit_goes_first_within_the_budget() {
    let mut c = at_limit("1");
    c.snapshot.nodepools[0].terminate_first.drift = true;
    let plan = c.plan();
    assert_eq!(plan.disruptions.len(), 1, "{plan:?}");
    let d = &plan.disruptions[0];
    assert_eq!(
        (d.command, d.reason, d.terminate_first),
        (Command::Delete, Reason::Drifted, Some(STATIC_AT_LIMIT))
    );
    assert!(d.replacements.is_empty() && d.moves.is_empty(), "{d:?}");
    assert!(
        plan.blocked.iter().any(|b| b.reason.contains("budget")),
        "the other node waits for the budget: {:?}",
        plan.blocked
    );
    let again = validate(
        &c.snapshot,
        Catalog::embedded(),
        NOW,
        Reason::Drifted,
        &d.nodes,
    );
    assert_eq!(again.map(|v| v.terminate_first), Ok(Some(STATIC_AT_LIMIT)));
    // A budget of both takes both, one command each.
    c.snapshot.nodepools[0].budgets[0].nodes = "100%".into();
    let plan = c.plan();
    assert_eq!(plan.disruptions.len(), 2, "{plan:?}");
    assert!(plan.disruptions.iter().all(|d| d.terminate_first.is_some()));
}

#[test]
fn without_the_drift_gate_or_in_a_deleting_pool_the_drifted_nodes_stay_blocked() {
    let mut c = at_limit("100%");
    let plan = c.plan();
    assert!(plan.disruptions.is_empty(), "{plan:?}");
    assert_eq!(blocked_at_limit(&plan), 2, "{:?}", plan.blocked);
    // The repair gate is not the drift gate.
    c.snapshot.nodepools[0].terminate_first.repair = true;
    assert!(c.plan().disruptions.is_empty());
    // Nothing refills a deleting pool.
    c.snapshot.nodepools[0].terminate_first.drift = true;
    c.snapshot.nodepools[0].deleting = true;
    let plan = c.plan();
    assert!(plan.disruptions.is_empty(), "{plan:?}");
    assert_eq!(blocked_at_limit(&plan), 2, "{:?}", plan.blocked);
}

#[test]
fn with_room_or_above_its_replicas_the_gate_changes_nothing() {
    let mut c = at_limit("100%");
    c.snapshot.nodepools[0].terminate_first.drift = true;
    if let Some(l) = c.snapshot.nodepools[0].limits.as_mut() {
        l.extended.insert("nodes".into(), 3);
    }
    // One replacement is staged; the other node waits for room, not terminated first.
    let plan = c.plan();
    assert_eq!(plan.disruptions.len(), 1, "{plan:?}");
    let d = &plan.disruptions[0];
    assert_eq!((d.command, d.terminate_first), (Command::Replace, None));
    assert_eq!(blocked_at_limit(&plan), 0);
    assert!(
        plan.blocked
            .iter()
            .any(|b| b.reason.contains("limits.nodes 3")),
        "{:?}",
        plan.blocked
    );
    // Above its replicas, the scale-down goes first.
    c.snapshot.nodepools[0].replicas = Some(1);
    if let Some(l) = c.snapshot.nodepools[0].limits.as_mut() {
        l.extended.insert("nodes".into(), 2);
    }
    let plan = c.plan();
    assert!(plan.disruptions.is_empty(), "{plan:?}");
    assert!(
        plan.blocked.iter().all(|b| b.reason.contains("scale-down")),
        "{:?}",
        plan.blocked
    );
}

/// The freed slot is the refill's once the node's instance is gone, not before: a deleting
/// NodeClaim still counts against `limits.nodes`.
#[test]
fn the_refill_takes_the_slot_once_the_node_is_gone() {
    let mut c = at_limit("1");
    c.snapshot.nodepools[0].terminate_first.drift = true;
    let d = c.plan().disruptions.remove(0);
    as_started(&mut c.snapshot, &d);
    let gone = d.nodes[0].clone();
    for claim in &mut c.snapshot.nodeclaims {
        if claim.node_name.as_deref() == Some(gone.as_str()) {
            claim.deleting = true;
        }
    }
    let refill = crate::replicas::plan(&c.snapshot, Catalog::embedded(), NOW);
    assert!(refill.create.is_empty(), "{refill:?}");
    c.snapshot
        .nodeclaims
        .retain(|claim| claim.node_name.as_deref() != Some(gone.as_str()));
    c.snapshot.nodes.retain(|n| n.name != gone);
    let refill = crate::replicas::plan(&c.snapshot, Catalog::embedded(), NOW);
    assert_eq!(refill.create.len(), 1, "{refill:?}");
    assert!(
        refill.create[0]
            .instance_types
            .iter()
            .all(|t| t.starts_with("c5.")),
        "{:?}",
        refill.create[0].instance_types
    );
}

#[test]
fn with_the_repair_gate_an_unhealthy_node_at_the_node_limit_is_repaired_first() {
    let mut c = at_limit("1");
    let plan = |c: &Cluster| repair_command(&c.snapshot, Catalog::embedded(), "n1", NOW);
    assert!(
        matches!(plan(&c), RepairPlan::Unplaceable(ref why) if why.contains("limits.nodes 2")),
        "{:?}",
        plan(&c)
    );
    c.snapshot.nodepools[0].terminate_first.drift = true;
    assert!(matches!(plan(&c), RepairPlan::Unplaceable(_)));
    c.snapshot.nodepools[0].terminate_first.repair = true;
    match plan(&c) {
        RepairPlan::Go(d) => assert_eq!(
            (d.command, d.reason, d.terminate_first),
            (Command::Delete, Reason::Unhealthy, Some(STATIC_AT_LIMIT))
        ),
        other => panic!("{other:?}"),
    }
}

/// A template that launches nothing now (a family mistyped in the very change that drifted the
/// nodes) would never refill a slot: the nodes stay, whatever the gates say.
#[test]
fn a_pool_whose_template_launches_nothing_never_terminates_first() {
    let mut c = at_limit("100%");
    c.snapshot.nodepools[0].terminate_first.drift = true;
    c.snapshot.nodepools[0].terminate_first.repair = true;
    c.snapshot.nodepools[0].requirements.replace(
        Requirement::new(crate::labels::INSTANCE_FAMILY, Operator::In, &["c55"]).expect("valid"),
    );
    let plan = c.plan();
    assert!(plan.disruptions.is_empty(), "{plan:?}");
    let refused = plan
        .blocked
        .iter()
        .filter(|b| b.reason.contains("nothing would refill it"))
        .count();
    assert_eq!(refused, 2, "{:?}", plan.blocked);
    assert!(matches!(
        repair_command(&c.snapshot, Catalog::embedded(), "n1", NOW),
        RepairPlan::Unplaceable(ref why) if why.contains("nothing would refill it")
    ));
}

/// A static pool sized to its capacity reservation keeps it full: the slot the drifted node
/// frees is its refill's, so it terminates first (Karpenter credits the slot back).
#[test]
fn a_static_pool_in_its_full_reservation_terminates_first_into_the_freed_slot() {
    let mut c = at_limit("1");
    c.snapshot.nodepools[0].terminate_first.drift = true;
    c.snapshot.nodepools[0]
        .requirements
        .replace(Requirement::in_values(
            crate::labels::CAPACITY_TYPE,
            ["reserved".to_string()],
        ));
    c.snapshot.nodepools[0].requirements.replace(
        Requirement::new(crate::labels::INSTANCE_FAMILY, Operator::In, &["c5"]).expect("valid"),
    );
    c.snapshot.node_classes.insert(
        "default".into(),
        crate::catalog::NodeClassSettings {
            reservations: vec![crate::catalog::CapacityReservation {
                id: "cr-0123456789abcdef0".into(),
                instance_type: "c5.2xlarge".into(),
                zone: ZONE_A.into(),
                kind: "default".into(),
                interruptible: false,
                state: "active".into(),
                available: 0,
            }],
            ..Default::default()
        },
    );
    for (node, claim) in c.snapshot.nodes.iter_mut().zip(&mut c.snapshot.nodeclaims) {
        for labels in [&mut node.labels, &mut claim.labels] {
            labels.insert(RESERVATION_ID.into(), "cr-0123456789abcdef0".into());
            labels.insert(CAPACITY_TYPE.into(), "reserved".into());
        }
    }
    let plan = c.plan();
    assert_eq!(plan.disruptions.len(), 1, "{plan:?}");
    assert_eq!(plan.disruptions[0].terminate_first, Some(STATIC_AT_LIMIT));
    // A node outside the reservation frees no slot in it: nothing would refill it.
    for node in &mut c.snapshot.nodes {
        node.labels.remove(RESERVATION_ID);
    }
    let plan = c.plan();
    assert!(plan.disruptions.is_empty(), "{plan:?}");
}
