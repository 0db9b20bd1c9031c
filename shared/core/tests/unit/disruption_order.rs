//! Karpenter v1.15's order and pricing of voluntary disruption: emptiness before drift, an
//! empty node never taken by consolidation (its `Empty` budget is its own), a merge cheaper
//! than the candidates together, every candidate a budget allows tried on its own, a drifted
//! node that cannot move spending no budget, and candidates ranked by price per unit of
//! disruption with a node's own base cost.

use super::*;

/// The plan's one command: its reason and nodes.
fn the_one(plan: &DisruptionPlan) -> (Reason, Vec<String>) {
    assert_eq!(plan.disruptions.len(), 1, "{plan:?}");
    let d = &plan.disruptions[0];
    (d.reason, d.nodes.clone())
}

fn nodes(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| n.to_string()).collect()
}

#[test]
fn an_empty_node_goes_before_a_drifted_one_under_a_one_node_budget() {
    let mut c = Cluster::new(general("1"));
    c.node("busy", "m5.large", "on-demand");
    c.pod("p", "busy", 1500);
    c.node("idle", "m5.large", "on-demand");
    new_ami(&mut c);
    let plan = c.plan();
    assert_eq!(the_one(&plan), (Reason::Empty, nodes(&["idle"])));
}

/// With the `Empty` budget at zero, an empty node stays, even when a consolidation could
/// delete it with an underutilized one under the `Underutilized` budget.
#[test]
fn consolidation_never_takes_an_empty_node_its_empty_budget_holds() {
    let mut pool = general("100%");
    pool.budgets.push(Budget {
        nodes: "0".into(),
        reasons: vec!["Empty".into()],
        ..Default::default()
    });
    let mut c = Cluster::new(pool);
    c.node("idle", "m5.large", "on-demand");
    c.node("half", "m5.xlarge", "on-demand");
    c.pod("p", "half", 250);
    c.node("big", "m5.2xlarge", "on-demand");
    c.pod("q", "big", 3000);
    let plan = c.plan();
    let taken: Vec<&String> = plan.disruptions.iter().flat_map(|d| &d.nodes).collect();
    assert!(!taken.contains(&&"idle".to_string()), "{plan:?}");
}

/// Three m5.large, each with a pod too big to share one, fit together on one 4-vCPU node:
/// dearer than any one of them, cheaper than the three together.
#[test]
fn three_nodes_merge_onto_one_cheaper_than_all_three() {
    let mut c = Cluster::new(general("100%"));
    for i in 0..3 {
        c.node(&format!("n{i}"), "m5.large", "on-demand");
        c.pod(&format!("p{i}"), &format!("n{i}"), 1200);
    }
    let plan = c.plan();
    assert_eq!(plan.disruptions.len(), 1, "{plan:?}");
    let d = &plan.disruptions[0];
    assert_eq!(
        (d.command, d.nodes.len()),
        (Command::Replace, 3),
        "{plan:?}"
    );
    assert_eq!(d.replacements.len(), 1, "{plan:?}");
    assert!(d.savings > 0.0, "{plan:?}");
}

/// Under a one-node budget, the best-ranked node cannot go (its 30 GiB pod fits nothing
/// cheaper); the next one is tried and goes, as Karpenter's single-node pass tries each.
#[test]
fn a_one_node_budget_tries_the_next_candidate_when_the_first_cannot_go() {
    let mut c = Cluster::new(general("1"));
    c.node("a", "m5.2xlarge", "on-demand");
    c.pod("heavy", "a", 7000).requests.memory = 29 << 30;
    c.node("b", "m5.xlarge", "on-demand");
    c.pod("light", "b", 250);
    let plan = c.plan();
    assert_eq!(the_one(&plan), (Reason::Underutilized, nodes(&["b"])));
}

/// Under a one-node budget, a drifted node whose pod has nowhere to go (200 GiB, more than any
/// type of the pool) spends none of it: the next drifted node is replaced.
#[test]
fn a_drifted_node_that_cannot_move_spends_no_budget() {
    let mut c = Cluster::new(general("1"));
    c.node("a", "m5.large", "on-demand");
    c.pod("huge", "a", 500).requests.memory = 200 << 30;
    c.node("b", "m5.large", "on-demand");
    c.pod("free", "b", 500);
    new_ami(&mut c);
    let plan = c.plan();
    assert_eq!(the_one(&plan), (Reason::Drifted, nodes(&["b"])));
}

/// A node whose type its zone no longer offers has no price, and still drifts
/// (`InstanceTypeNotFound`) and is replaced: only emptiness and consolidation weigh prices.
#[test]
fn a_node_whose_offering_is_gone_is_replaced_by_drift() {
    let mut c = Cluster::new(general("1"));
    c.node("n", "m5.large", "on-demand");
    c.pod("p", "n", 500);
    c.snapshot.nodeclaims[0].created = NOW - 7200;
    let mut types = Catalog::embedded().instance_types(&NodeClassSettings::default());
    for t in types.iter_mut().filter(|t| t.name == "m5.large") {
        t.offerings.retain(|o| o.zone != ZONE_A);
    }
    let catalog = Catalog::from_types("us-east-1", types);
    let plan = plan(&c.snapshot, &catalog, NOW);
    assert_eq!(the_one(&plan), (Reason::Drifted, nodes(&["n"])));
}
