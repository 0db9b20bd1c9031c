//! Karpenter v1's semantics where they differ from a plain reading of the budgets: expiration
//! is not a method here (the tick deletes expired NodeClaims outright), a PDB holds a node only
//! when it allows no disruption, drift bounded by a `terminationGracePeriod` takes nodes whose
//! pods are held, and a multi-node replacement is never as dear as a candidate of its own type.

use super::*;

fn exhausted_pdb() -> Pdb {
    shop_pdb("checkout", 0)
}

#[test]
fn an_expired_node_is_no_command_of_the_plan() {
    let mut p = general("100%");
    p.expire_after = Some(1800);
    p.consolidate_after = None;
    let mut c = Cluster::new(p);
    c.node("old", "m5.large", "on-demand");
    c.snapshot.nodeclaims[0].expire_after = Some(1800);
    c.pod("a", "old", 1500);
    let plan = c.plan();
    assert!(plan.disruptions.is_empty(), "{plan:?}");
    // Nor is it taken by another method: an empty expired node is the tick's to delete.
    c.snapshot.pods.clear();
    let plan = c.plan();
    assert!(plan.disruptions.is_empty(), "{plan:?}");
    c.snapshot.nodepools[0].consolidate_after = Some(0);
    assert!(c.plan().disruptions.is_empty());
    c.snapshot.nodeclaims[0].expire_after = None;
    assert_eq!(c.plan().disruptions.len(), 1);
}

#[test]
fn a_pdb_that_allows_one_disruption_lets_a_node_with_two_of_its_pods_go() {
    let mut c = Cluster::new(general("100%"));
    c.node("big", "m5.2xlarge", "on-demand");
    c.pod("checkout-1", "big", 200);
    c.pod("checkout-2", "big", 200);
    let mut pdb = exhausted_pdb();
    pdb.disruptions_allowed = 1;
    c.snapshot.pdbs.push(pdb);
    let plan = c.plan();
    assert_eq!(plan.disruptions.len(), 1, "{plan:?}");
    assert_eq!(plan.disruptions[0].nodes, ["big"]);
    assert_eq!(plan.disruptions[0].reason, Reason::Underutilized);

    c.snapshot.pdbs[0].disruptions_allowed = 0;
    let plan = c.plan();
    assert!(plan.disruptions.is_empty(), "{plan:?}");
    assert_eq!(
        plan.blocked[0].reason,
        "pod shop/checkout-1 has PDB checkout (0 disruptions allowed)"
    );
}

#[test]
fn drift_takes_a_node_whose_pods_are_held_only_with_a_termination_grace_period() {
    for held_by in ["pdb", "pod annotation"] {
        let mut c = Cluster::new(general("100%"));
        c.node("n", "m5.large", "on-demand");
        let pod = c.pod("checkout-1", "n", 1500);
        match held_by {
            "pdb" => c.snapshot.pdbs.push(exhausted_pdb()),
            _ => pod.do_not_disrupt = Protection::Always,
        }
        new_ami(&mut c);
        let plan = c.plan();
        assert!(plan.disruptions.is_empty(), "{held_by}: {plan:?}");
        assert_eq!(plan.blocked.len(), 1, "{held_by}: {plan:?}");

        c.snapshot.nodeclaims[0].termination_grace_period = Some(600);
        let plan = c.plan();
        assert_eq!(plan.disruptions.len(), 1, "{held_by}: {plan:?}");
        assert_eq!(plan.disruptions[0].reason, Reason::Drifted);
        assert!(plan.blocked.is_empty(), "{held_by}: {:?}", plan.blocked);
        let valid = validate(
            &c.snapshot,
            Catalog::embedded(),
            NOW,
            Reason::Drifted,
            &["n".to_string()],
        );
        assert!(valid.is_ok(), "{held_by}: {valid:?}");
        let refused = validate(
            &c.snapshot,
            Catalog::embedded(),
            NOW,
            Reason::Underutilized,
            &["n".to_string()],
        );
        assert!(refused.is_err(), "{held_by}: {refused:?}");
    }
}

/// A drifted node whose held pod its `terminationGracePeriod` lets drift take, but which its
/// budget holds back, is blocked for its budget alone: the hold is not what stops it.
#[test]
fn a_drifted_node_its_budget_holds_back_is_blocked_for_the_budget_alone() {
    let mut c = Cluster::new(general("0"));
    c.node("n", "m5.large", "on-demand");
    c.pod("checkout-1", "n", 1500).do_not_disrupt = Protection::Always;
    c.snapshot.nodeclaims[0].termination_grace_period = Some(600);
    new_ami(&mut c);
    let plan = c.plan();
    assert!(plan.disruptions.is_empty(), "{plan:?}");
    let reasons: Vec<&str> = (plan.blocked.iter())
        .filter(|b| b.node == "n")
        .map(|b| b.reason.as_str())
        .collect();
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert!(reasons[0].contains("budget"), "{reasons:?}");
}

#[test]
fn a_node_marked_do_not_disrupt_is_not_drifted_even_with_a_termination_grace_period() {
    let mut c = Cluster::new(general("100%"));
    c.node("n", "m5.large", "on-demand");
    c.pod("a", "n", 1500);
    c.snapshot.nodes[0]
        .annotations
        .insert(DO_NOT_DISRUPT.into(), "true".into());
    c.snapshot.nodeclaims[0].termination_grace_period = Some(600);
    new_ami(&mut c);
    let plan = c.plan();
    assert!(plan.disruptions.is_empty(), "{plan:?}");
}

/// Two lightly used nodes, an m5.2xlarge and an m5.large, whose pods fit on one m5.large. A
/// replacement of both by an m5.xlarge saves less than deleting the m5.2xlarge alone and
/// keeping the m5.large, which also moves half the pods.
#[test]
fn a_multi_node_replacement_is_never_as_dear_as_a_candidate_of_its_type() {
    let mut c = Cluster::new(pool(
        &["m5.large", "m5.xlarge", "m5.2xlarge"],
        "on-demand",
        "100%",
    ));
    c.node("big", "m5.2xlarge", "on-demand");
    c.node("small", "m5.large", "on-demand");
    c.pod("a", "big", 500);
    c.pod("b", "small", 500);
    let plan = c.plan();
    assert_eq!(plan.disruptions.len(), 1, "{plan:?}");
    let d = &plan.disruptions[0];
    assert_eq!(
        (d.command, d.nodes.as_slice()),
        (Command::Delete, &["big".to_string()][..])
    );
}

/// A node expiring now is deleted by the tick this minute: it takes its place in the budget,
/// so a drift under a one-node budget waits for it.
#[test]
fn a_node_expiring_now_takes_its_place_in_the_budget() {
    let mut c = Cluster::new(general("1"));
    c.node("old", "m5.large", "on-demand");
    c.node("n", "m5.large", "on-demand");
    c.pod("a", "old", 1500);
    c.pod("b", "n", 1500);
    new_ami(&mut c);
    assert_eq!(c.plan().disruptions.len(), 1);
    c.snapshot.nodeclaims[0].expire_after = Some(1800);
    let plan = c.plan();
    assert!(plan.disruptions.is_empty(), "{plan:?}");
    assert!(
        plan.blocked
            .iter()
            .any(|b| b.node == "n" && b.reason.contains("budget")),
        "{:?}",
        plan.blocked
    );
}

/// A static pool at its `limits.nodes` cannot stage a drifted node's replacement: the node is
/// kept and reported blocked, never replaced by one node over the limit (Karpenter's static
/// drift without its alpha terminate-first gate). Room for one more stages one command, however
/// many the budget allows.
#[test]
fn a_static_pool_at_its_node_limit_keeps_its_drifted_nodes_blocked() {
    let mut pool = general("100%");
    pool.replicas = Some(2);
    let mut limits = crate::resources::Resources::default();
    limits.extended.insert("nodes".into(), 2);
    pool.limits = Some(limits);
    let mut c = Cluster::new(pool);
    c.node("n1", "m5.2xlarge", "on-demand")
        .node("n2", "m5.2xlarge", "on-demand");
    c.snapshot.nodepools[0].requirements.add(
        Requirement::new(crate::labels::INSTANCE_FAMILY, Operator::In, &["c5"]).expect("valid"),
    );
    let plan = c.plan();
    assert!(plan.disruptions.is_empty(), "{plan:?}");
    let blocked: Vec<&str> = plan.blocked.iter().map(|b| b.reason.as_str()).collect();
    assert!(
        blocked.len() == 2 && blocked.iter().all(|r| r.contains("limits.nodes 2")),
        "{blocked:?}"
    );
    if let Some(l) = c.snapshot.nodepools[0].limits.as_mut() {
        l.extended.insert("nodes".into(), 3);
    }
    let plan = c.plan();
    assert_eq!(plan.disruptions.len(), 1, "{plan:?}");
    assert_eq!(plan.disruptions[0].replacements.len(), 1);
}

/// A deleting NodeClaim's instance still runs, so it counts against `limits.nodes`: neither a
/// drifted node's replacement nor a refill may be staged over the limit while it drains.
#[test]
fn a_deleting_nodeclaim_counts_against_a_static_pools_node_limit() {
    let mut pool = general("100%");
    pool.replicas = Some(2);
    let mut limits = crate::resources::Resources::default();
    limits.extended.insert("nodes".into(), 3);
    pool.limits = Some(limits);
    let mut c = Cluster::new(pool);
    c.node("n1", "m5.2xlarge", "on-demand")
        .node("n2", "m5.2xlarge", "on-demand")
        .node("n3", "m5.2xlarge", "on-demand");
    c.snapshot.nodeclaims[2].deleting = true;
    c.snapshot.nodepools[0].requirements.add(
        Requirement::new(crate::labels::INSTANCE_FAMILY, Operator::In, &["c5"]).expect("valid"),
    );
    let plan = c.plan();
    assert!(plan.disruptions.is_empty(), "{plan:?}");
    c.snapshot.nodeclaims[0].deleting = true;
    let refill = crate::replicas::plan(&c.snapshot, Catalog::embedded(), NOW);
    assert!(refill.create.is_empty(), "{refill:?}");
    assert!(!refill.short.is_empty());
}

/// A consolidation replacement's own instance-type requirement allows only its cheaper types:
/// a launch that finds them short of capacity fails instead of falling back to a type as dear
/// as the candidate, which consolidation would only replace again and again.
#[test]
fn a_replacements_requirement_allows_only_its_cheaper_types() {
    let mut c = Cluster::new(general("100%"));
    c.node("big", "m5.xlarge", "on-demand");
    c.pod("small", "big", 250);
    let plan = c.plan();
    let r = plan.disruptions[0]
        .replacement
        .as_ref()
        .expect("a replacement");
    let allowed: Vec<&String> = r
        .nodeclaim
        .requirements
        .iter()
        .filter(|q| q.key == crate::labels::INSTANCE_TYPE && q.operator == "In")
        .flat_map(|q| q.values.iter())
        .collect();
    assert!(!allowed.is_empty());
    assert!(
        allowed.iter().all(|t| r.instance_types.contains(t)),
        "{allowed:?}"
    );
    assert!(!allowed
        .iter()
        .any(|t| *t == "m5.8xlarge" || *t == "m5.16xlarge"));
}
