//! The disruption decisions' table tests: each method, budgets, blocking, and consolidation.

use std::collections::BTreeMap;

use super::*;
use crate::catalog::{Catalog, NodeClassSettings};
use crate::labels::{CAPACITY_TYPE, DO_NOT_DISRUPT, INSTANCE_TYPE, TAINT_DISRUPTED, ZONE};
use crate::labels::{HOSTNAME, NODEPOOL, PLACEMENT_GROUP_ID, RESERVATION_ID};
use crate::model::{Budget, ConsolidationPolicy, Pdb};
use crate::model::{Node, NodeClaim, NodePool, Pod, Snapshot};
use crate::model::{NodeClassState, Protection, Taint};
use crate::requirements::{Operator, Requirement, Requirements};
use crate::resources::Resources;

const NOW: i64 = 1_795_429_800;
const ZONE_A: &str = "us-east-1a";

fn pool(types: &[&str], capacity: &str, budget: &str) -> NodePool {
    let mut requirements = Requirements::new();
    requirements.add(Requirement::in_values(
        INSTANCE_TYPE,
        types.iter().map(|t| t.to_string()),
    ));
    requirements.add(Requirement::single(CAPACITY_TYPE, capacity));
    requirements.add(Requirement::single(ZONE, ZONE_A));
    NodePool {
        name: "default".into(),
        requirements,
        node_class: "default".into(),
        consolidate_after: Some(0),
        budgets: vec![Budget {
            nodes: budget.into(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// A general pool: m5 and c5 sizes, on-demand.
fn general(budget: &str) -> NodePool {
    pool(
        &[
            "m5.large",
            "m5.xlarge",
            "m5.2xlarge",
            "m5.4xlarge",
            "m5.8xlarge",
            "c5.large",
            "c5.xlarge",
            "c5.2xlarge",
        ],
        "on-demand",
        budget,
    )
}

struct Cluster {
    snapshot: Snapshot,
}

impl Cluster {
    fn new(pool: NodePool) -> Self {
        Cluster {
            snapshot: Snapshot {
                nodepools: vec![pool],
                ..Default::default()
            },
        }
    }

    /// A ready, initialized node of `instance_type` with its NodeClaim.
    fn node(&mut self, name: &str, instance_type: &str, capacity: &str) -> &mut Self {
        let catalog = Catalog::embedded();
        let t = catalog
            .instance_types(&NodeClassSettings::default())
            .into_iter()
            .find(|t| t.name == instance_type)
            .expect("a known type");
        let labels: BTreeMap<String, String> = [
            (INSTANCE_TYPE, instance_type),
            (ZONE, ZONE_A),
            (CAPACITY_TYPE, capacity),
            (NODEPOOL, "default"),
            (HOSTNAME, name),
            (crate::labels::ARCH, "amd64"),
            (crate::labels::OS, "linux"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        self.snapshot.nodes.push(Node {
            name: name.into(),
            labels: labels.clone(),
            allocatable: t.allocatable.clone(),
            capacity: t.capacity.clone(),
            ready: true,
            created: NOW - 3600,
            ..Default::default()
        });
        self.snapshot.nodeclaims.push(NodeClaim {
            name: format!("claim-{name}"),
            nodepool: "default".into(),
            labels,
            node_name: Some(name.into()),
            image_id: Some("ami-old".into()),
            launched: true,
            registered: true,
            initialized: true,
            created: NOW - 3600,
            ..Default::default()
        });
        self
    }

    fn pod(&mut self, name: &str, node: &str, cpu: i64) -> &mut Pod {
        let mut pod = Pod::new("shop", name, Resources::new(cpu, 128 << 20));
        pod.node_name = Some(node.into());
        pod.owner_kind = Some("ReplicaSet".into());
        pod.labels.insert("app".into(), "shop".into());
        self.snapshot.pods.push(pod);
        self.snapshot.pods.last_mut().expect("just pushed")
    }

    fn plan(&self) -> DisruptionPlan {
        plan(&self.snapshot, Catalog::embedded(), NOW)
    }
}

/// Every node's image drifted: the default class now resolves another AMI.
fn new_ami(c: &mut Cluster) {
    c.snapshot.node_class_state.insert(
        "default".into(),
        NodeClassState {
            images: ["ami-new".to_string()].into(),
            ..Default::default()
        },
    );
}

/// A PodDisruptionBudget over the `shop` pods (`app: shop`), allowing `allowed` disruptions.
fn shop_pdb(name: &str, allowed: i32) -> Pdb {
    Pdb {
        namespace: "shop".into(),
        name: name.into(),
        selector: Requirements::from_labels(
            &[("app".to_string(), "shop".to_string())]
                .into_iter()
                .collect::<BTreeMap<_, _>>(),
        ),
        disruptions_allowed: allowed,
        fully_blocking: false,
    }
}

fn deleted(plan: &DisruptionPlan) -> usize {
    plan.disruptions.iter().map(|d| d.nodes.len()).sum()
}

#[test]
fn empty_nodes_are_deleted_within_the_budget() {
    for (budget, expected) in [("30%", 3), ("0%", 0), ("100%", 10)] {
        let mut c = Cluster::new(general(budget));
        for i in 0..10 {
            c.node(&format!("n{i}"), "m5.large", "on-demand");
        }
        let plan = c.plan();
        assert_eq!(deleted(&plan), expected, "budget {budget}: {plan:?}");
        if expected > 0 {
            assert_eq!(plan.disruptions.len(), 1);
            assert_eq!(plan.disruptions[0].command, Command::Delete);
            assert_eq!(plan.disruptions[0].reason, Reason::Empty);
        }
    }
}

/// As Karpenter counts a budget's total, a node whose NodeClaim has not initialized is left out:
/// four empty nodes, two of them still starting, under 50 % allow one deletion, not two.
#[test]
fn nodes_not_yet_initialized_are_no_part_of_a_budgets_total() {
    let mut c = Cluster::new(general("50%"));
    for i in 0..4 {
        c.node(&format!("n{i}"), "m5.large", "on-demand");
    }
    for claim in &mut c.snapshot.nodeclaims[2..] {
        claim.initialized = false;
    }
    let plan = c.plan();
    assert_eq!(deleted(&plan), 1, "{plan:?}");
}

/// A node of the pool whose NodeClaim the read lacks (it did not read) may be mid-disruption:
/// it takes a slot of the budget and adds nothing to the total, so the budget fails closed.
#[test]
fn a_node_whose_nodeclaim_did_not_read_takes_a_slot() {
    let mut c = Cluster::new(general("1"));
    for i in 0..3 {
        c.node(&format!("n{i}"), "m5.large", "on-demand");
    }
    assert_eq!(deleted(&c.plan()), 1);
    c.snapshot.nodeclaims.remove(0);
    let plan = c.plan();
    assert_eq!(deleted(&plan), 0, "{plan:?}");
}

/// A node rebooting for repair has its NodeClaim's initialization reset, yet it is down: it
/// still counts against its pool's budget, as Karpenter counts it.
#[test]
fn a_rebooting_node_still_counts_against_the_budget() {
    let mut c = Cluster::new(general("1"));
    for i in 0..3 {
        c.node(&format!("n{i}"), "m5.large", "on-demand");
    }
    c.snapshot.nodeclaims[0].initialized = false;
    c.snapshot.nodes[0].taints.push(Taint {
        key: crate::labels::TAINT_REBOOTING.into(),
        value: String::new(),
        effect: crate::model::TaintEffect::NoSchedule,
    });
    let plan = c.plan();
    assert_eq!(deleted(&plan), 0, "{plan:?}");
}

/// As Karpenter's `IsReschedulable` reads a node: a static (mirror) pod and a terminating pod
/// need no place elsewhere, so a node with only those is empty. A terminating StatefulSet pod
/// still does, since its successor waits for it.
#[test]
fn a_node_with_only_static_and_terminating_pods_is_empty() {
    let mut c = Cluster::new(general("100%"));
    c.node("n1", "m5.large", "on-demand")
        .node("n2", "m5.large", "on-demand");
    c.pod("static", "n1", 100).owner_kind = Some("Node".into());
    c.pod("leaving", "n1", 100).deleting = true;
    let stateful = c.pod("db-0", "n2", 100);
    stateful.owner_kind = Some("StatefulSet".into());
    stateful.deleting = true;
    let plan = c.plan();
    let empty: Vec<&str> = (plan.disruptions.iter())
        .filter(|d| d.reason == Reason::Empty)
        .flat_map(|d| d.nodes.iter().map(String::as_str))
        .collect();
    assert_eq!(empty, ["n1"], "{plan:?}");
}

/// A node that is not Ready, once nothing on it needs a place (its pods evicted, or
/// terminating), is deleted by emptiness within its budget, of which it takes a slot itself, as
/// Karpenter counts a node that is not Ready. One that still holds a running pod is no candidate.
#[test]
fn a_dead_node_is_deleted_once_empty_within_a_budget_it_takes_a_slot_of() {
    let mut c = Cluster::new(general("1"));
    c.node("dead", "m5.large", "on-demand")
        .node("busy", "m5.large", "on-demand");
    c.snapshot.nodes[0].ready = false;
    c.pod("stuck", "dead", 100).deleting = true;
    c.pod("web", "busy", 100);
    let plan = c.plan();
    assert_eq!(
        deleted(&plan),
        0,
        "its own slot uses the budget of one: {plan:?}"
    );
    c.snapshot.nodepools[0].budgets[0].nodes = "2".into();
    let plan = c.plan();
    let empty: Vec<&str> = (plan.disruptions.iter())
        .filter(|d| d.reason == Reason::Empty)
        .flat_map(|d| d.nodes.iter().map(String::as_str))
        .collect();
    assert_eq!(empty, ["dead"], "{plan:?}");
    // The dead node still runs a pod: no candidate.
    c.snapshot.pods[0].deleting = false;
    let plan = c.plan();
    assert!(
        (plan.disruptions.iter()).all(|d| !d.nodes.contains(&"dead".to_string())),
        "{plan:?}"
    );
}

/// A DaemonSet's or static pod annotated `karpenter.sh/do-not-disrupt` holds its node, as
/// Karpenter lets it, though such a pod needs no place elsewhere.
#[test]
fn a_daemonset_pod_with_do_not_disrupt_holds_its_node() {
    let mut c = Cluster::new(general("100%"));
    c.node("n1", "m5.large", "on-demand");
    let agent = c.pod("agent-x", "n1", 100);
    agent.owner_kind = Some("DaemonSet".into());
    agent.do_not_disrupt = Protection::Always;
    let plan = c.plan();
    assert_eq!(deleted(&plan), 0, "{plan:?}");
    assert!(
        (plan.blocked.iter()).any(|b| b.node == "n1" && b.reason.contains("shop/agent-x")),
        "{:?}",
        plan.blocked
    );
    c.snapshot.pods[0].do_not_disrupt = Protection::None;
    assert_eq!(deleted(&c.plan()), 1);
}

#[test]
fn nodes_of_a_command_in_progress_are_no_candidates_and_use_up_the_budget() {
    let mut c = Cluster::new(general("3"));
    for i in 0..10 {
        c.node(&format!("n{i}"), "m5.large", "on-demand");
    }
    for node in &mut c.snapshot.nodes[..2] {
        node.taints.push(Taint {
            key: TAINT_DISRUPTED.into(),
            value: String::new(),
            effect: crate::model::TaintEffect::NoSchedule,
        });
    }
    let plan = c.plan();
    assert_eq!(deleted(&plan), 1, "3 allowed, 2 in progress: {plan:?}");
    assert!(!plan.disruptions[0]
        .nodes
        .iter()
        .any(|n| n == "n0" || n == "n1"));
}

#[test]
fn a_new_command_leaves_room_for_the_pods_of_one_in_progress() {
    // "moving" is being drained; its 1.5-CPU pod needs the room "target" has. Deleting
    // "target" or "spare" would pack the other's pod there and leave it 1.3 CPU: the moving
    // pod would be stranded, so neither may simply go.
    let m5 = || pool(&["m5.large", "m5.xlarge"], "on-demand", "100%");
    let mut c = Cluster::new(m5());
    c.node("moving", "m5.xlarge", "on-demand")
        .node("target", "m5.xlarge", "on-demand")
        .node("spare", "m5.xlarge", "on-demand");
    c.pod("a", "moving", 1500);
    c.pod("b", "target", 100);
    c.pod("c", "spare", 2500);
    c.snapshot.nodes[0].taints.push(Taint {
        key: TAINT_DISRUPTED.into(),
        value: String::new(),
        effect: crate::model::TaintEffect::NoSchedule,
    });
    let plan = c.plan();
    assert!(
        plan.disruptions
            .iter()
            .all(|d| d.command != Command::Delete && !d.nodes.contains(&"moving".to_string())),
        "{plan:?}"
    );
}

#[test]
fn lightly_used_nodes_go_in_one_multi_node_command_within_the_budget() {
    let mut c = Cluster::new(general("30%"));
    for i in 0..10 {
        c.node(&format!("n{i}"), "m5.large", "on-demand");
        c.pod(&format!("p{i}"), &format!("n{i}"), 100);
    }
    let plan = c.plan();
    assert_eq!(plan.disruptions.len(), 1, "{plan:?}");
    let d = &plan.disruptions[0];
    assert_eq!(
        (d.command, d.reason, d.nodes.len()),
        (Command::Delete, Reason::Underutilized, 3)
    );
    assert!(d.savings > 0.0);
}

#[test]
fn the_lighter_of_two_nodes_is_deleted_unless_its_pod_is_pinned() {
    let m5 = || pool(&["m5.large", "m5.xlarge"], "on-demand", "100%");
    let two_nodes = |pin: bool| {
        let mut c = Cluster::new(m5());
        c.node("busy", "m5.xlarge", "on-demand")
            .node("light", "m5.large", "on-demand");
        c.pod("a", "busy", 1700);
        c.pod("b", "busy", 1700);
        let light = c.pod("c", "light", 300);
        if pin {
            light.node_selector.insert(HOSTNAME.into(), "light".into());
        }
        c.plan()
    };
    let plan = two_nodes(false);
    assert_eq!(plan.disruptions.len(), 1, "{plan:?}");
    assert_eq!(plan.disruptions[0].nodes, ["light"]);
    assert_eq!(plan.disruptions[0].command, Command::Delete);
    let plan = two_nodes(true);
    assert!(plan.disruptions.is_empty(), "{plan:?}");
}

/// As Karpenter: an on-demand node in a pool that allows spot too is replaced by spot.
#[test]
fn an_on_demand_node_is_replaced_by_spot_when_its_pool_allows_both() {
    let mut both = general("100%");
    let mut requirements = Requirements::new();
    for key in [INSTANCE_TYPE, ZONE] {
        if let Some(r) = both.requirements.get(key) {
            requirements.add(r.clone());
        }
    }
    requirements.add(Requirement::in_values(
        CAPACITY_TYPE,
        ["spot", "on-demand"].map(String::from),
    ));
    both.requirements = requirements;
    let mut c = Cluster::new(both);
    c.node("big", "m5.8xlarge", "on-demand");
    c.pod("small", "big", 250);
    let plan = c.plan();
    let replacement = plan.disruptions[0].replacement.as_ref().expect("a replace");
    assert_eq!(
        replacement.capacity_types,
        vec!["spot".to_string()],
        "{plan:?}"
    );
    // The NodeClaim launched says so too: a spot shortage fails the launch rather than buying
    // the spot-priced types on demand.
    let capacity: Vec<(&str, &[String])> = (replacement.nodeclaim.requirements.iter())
        .filter(|r| r.key == CAPACITY_TYPE)
        .map(|r| (r.operator.as_str(), r.values.as_slice()))
        .collect();
    assert_eq!(
        capacity,
        vec![("In", &["spot".to_string()][..])],
        "{plan:?}"
    );
}

#[test]
fn an_oversized_node_is_replaced_by_a_cheaper_type_and_three_are_merged() {
    let mut c = Cluster::new(general("100%"));
    c.node("big", "m5.8xlarge", "on-demand");
    c.pod("small", "big", 250);
    let plan = c.plan();
    let d = &plan.disruptions[0];
    assert_eq!(
        (d.command, d.reason),
        (Command::Replace, Reason::Underutilized),
        "{plan:?}"
    );
    let r = d.replacement.as_ref().unwrap();
    assert!(
        !r.instance_types.iter().any(|t| t == "m5.8xlarge"),
        "{:?}",
        r.instance_types
    );
    assert!(r.price < 1.536 && d.savings > 0.0);

    let mut three = Cluster::new(general("100%"));
    for i in 0..3 {
        three.node(&format!("big{i}"), "m5.8xlarge", "on-demand");
        three.pod(&format!("small{i}"), &format!("big{i}"), 250);
    }
    let plan = three.plan();
    assert_eq!(plan.disruptions.len(), 1, "{plan:?}");
    let d = &plan.disruptions[0];
    assert_eq!((d.command, d.nodes.len()), (Command::Replace, 3));
}

#[test]
fn two_nodes_of_the_cheapest_type_lose_one_without_a_same_type_replacement() {
    let mut c = Cluster::new(pool(&["m5.large", "m5.xlarge"], "on-demand", "100%"));
    c.node("x", "m5.large", "on-demand")
        .node("y", "m5.large", "on-demand");
    c.pod("a", "x", 500);
    c.pod("b", "y", 500);
    let plan = c.plan();
    assert_eq!(plan.disruptions.len(), 1, "{plan:?}");
    assert_eq!(plan.disruptions[0].command, Command::Delete);
    assert_eq!(plan.disruptions[0].nodes.len(), 1);
}

#[test]
fn spot_to_spot_needs_fifteen_cheaper_spot_types() {
    let mut spot = pool(&["m5.xlarge", "m5.large", "c5.large"], "spot", "100%");
    spot.spot_to_spot = true;
    let mut c = Cluster::new(spot);
    c.node("s", "m5.xlarge", "spot");
    c.pod("a", "s", 250);
    let plan = c.plan();
    assert!(plan.disruptions.is_empty(), "{plan:?}");
    assert!(
        plan.blocked
            .iter()
            .any(|b| b.node == "s" && b.reason.contains("15 cheaper spot types")),
        "{:?}",
        plan.blocked
    );
}

/// `karpenter.sh/do-not-disrupt: "10m"` (Karpenter v1.12) protects a pod for ten minutes from
/// its start, and a node for ten minutes from its creation; then the node is consolidated.
#[test]
fn a_do_not_disrupt_duration_protects_until_it_has_passed() {
    let started = NOW - 5 * 60;
    let mut c = Cluster::new(general("100%"));
    c.node("keep", "m5.8xlarge", "on-demand");
    c.pod("batch", "keep", 100).do_not_disrupt = Protection::from_annotation(Some("10m"), started);
    let blocked = c.plan();
    assert!(blocked.disruptions.is_empty(), "{:?}", blocked.disruptions);
    assert!(
        blocked.blocked[0].reason.contains("pod shop/batch"),
        "{:?}",
        blocked.blocked
    );
    let later = plan(&c.snapshot, Catalog::embedded(), started + 10 * 60);
    assert_eq!(deleted(&later), 1, "{:?}", later.blocked);

    let mut n = Cluster::new(general("100%"));
    n.node("fresh", "m5.8xlarge", "on-demand");
    n.pod("web", "fresh", 100);
    let node = &mut n.snapshot.nodes[0];
    node.created = started;
    node.annotations.insert(DO_NOT_DISRUPT.into(), "1h".into());
    assert!(n.plan().disruptions.is_empty());
    assert_eq!(
        deleted(&plan(&n.snapshot, Catalog::embedded(), started + 3600)),
        1
    );
}

#[test]
fn go_durations_parse_and_other_values_protect_for_good() {
    use crate::quantity::parse_duration_seconds as secs;
    assert_eq!(secs("5m"), Some(300));
    assert_eq!(secs("1h30m"), Some(5400));
    assert_eq!(secs("1.5h"), Some(5400));
    assert_eq!(secs("90s"), Some(90));
    assert_eq!(secs("1500ms"), Some(2));
    assert_eq!(secs("0"), Some(0));
    assert_eq!(secs("5"), None);
    assert_eq!(secs("soon"), None);
    assert_eq!(
        Protection::from_annotation(Some("soon"), 0),
        Protection::Always
    );
    assert_eq!(
        Protection::from_annotation(Some("false"), 0),
        Protection::None
    );
    assert_eq!(Protection::from_annotation(None, 0), Protection::None);
    assert_eq!(
        Protection::from_annotation(Some("2m"), 100),
        Protection::Until(220)
    );
    assert!(Protection::Until(220).holds(219) && !Protection::Until(220).holds(220));
}

#[test]
fn do_not_disrupt_pods_and_exhausted_pdbs_block_their_nodes() {
    let mut c = Cluster::new(general("100%"));
    c.node("keep", "m5.8xlarge", "on-demand");
    c.pod("precious", "keep", 100).do_not_disrupt = Protection::Always;
    let plan = c.plan();
    assert!(plan.disruptions.is_empty());
    assert!(
        plan.blocked[0].reason.contains(DO_NOT_DISRUPT),
        "{:?}",
        plan.blocked
    );

    let mut p = Cluster::new(general("100%"));
    p.node("guarded", "m5.8xlarge", "on-demand");
    p.pod("checkout-1", "guarded", 100);
    p.snapshot.pdbs.push(shop_pdb("checkout", 0));
    let plan = p.plan();
    assert!(plan.disruptions.is_empty());
    assert_eq!(
        plan.blocked[0].reason,
        "pod shop/checkout-1 has PDB checkout (0 disruptions allowed)"
    );
}

/// The Eviction API refuses (500) a pod that two PDBs cover, whatever they allow: its node is
/// no candidate, and says why.
#[test]
fn a_pod_two_pdbs_cover_blocks_its_node() {
    let mut p = Cluster::new(general("100%"));
    p.node("guarded", "m5.8xlarge", "on-demand");
    p.pod("checkout-1", "guarded", 100);
    for name in ["checkout", "shop-wide"] {
        p.snapshot.pdbs.push(shop_pdb(name, 5));
    }
    let plan = p.plan();
    assert!(plan.disruptions.is_empty(), "{plan:?}");
    assert!(
        plan.blocked[0]
            .reason
            .contains("more than one PDB (checkout, shop-wide)"),
        "{:?}",
        plan.blocked
    );
}

#[test]
fn a_new_ami_drifts_nodes_one_budget_at_a_time() {
    let mut c = Cluster::new(general("1"));
    for i in 0..3 {
        c.node(&format!("n{i}"), "m5.large", "on-demand");
        c.pod(&format!("p{i}"), &format!("n{i}"), 1500);
    }
    c.snapshot.node_class_state.insert(
        "default".into(),
        NodeClassState {
            images: ["ami-new".to_string()].into(),
            ..Default::default()
        },
    );
    let plan = c.plan();
    assert_eq!(plan.disruptions.len(), 1, "{plan:?}");
    assert_eq!(plan.disruptions[0].reason, Reason::Drifted);
    assert_eq!(
        plan.blocked
            .iter()
            .filter(|b| b.reason.contains("budget"))
            .count(),
        2
    );
}

#[test]
fn drift_is_found_for_each_changed_part_and_never_for_unknown_or_foreign_hashes() {
    let mut c = Cluster::new(general("1"));
    c.node("n", "m5.large", "on-demand");
    let mut pool = c.snapshot.nodepools[0].clone();
    pool.template_hash = Some("pool-2".into());
    let state = NodeClassState {
        hash: Some("class-2".into()),
        images: ["ami-old".to_string()].into(),
        subnets: ["subnet-a".to_string()].into(),
        security_groups: ["sg-1".to_string(), "sg-2".to_string()].into(),
        reservations: Some(["cr-1".to_string()].into()),
        placement_group: Some(Some("pg-1".into())),
    };
    c.snapshot
        .node_class_state
        .insert(pool.node_class.clone(), state);
    let mut base = c.snapshot.nodeclaims[0].clone();
    base.labels.insert(PLACEMENT_GROUP_ID.into(), "pg-1".into());
    let with = |pairs: &[(&str, &str)]| {
        let mut claim = base.clone();
        for (k, v) in pairs {
            claim.annotations.insert(k.to_string(), v.to_string());
        }
        claim
    };
    let labelled = |key: &str, value: Option<&str>| {
        let mut claim = base.clone();
        match value {
            Some(v) => claim.labels.insert(key.into(), v.into()),
            None => claim.labels.remove(key),
        };
        claim
    };
    let cases: Vec<(NodeClaim, Option<&str>)> = vec![
        (with(&[]), None),
        (
            with(&[(SUBNET_ID, "subnet-a"), (SECURITY_GROUP_IDS, "sg-1,sg-2")]),
            None,
        ),
        (with(&[(SUBNET_ID, "subnet-b")]), Some("SubnetDrift")),
        (
            with(&[(SECURITY_GROUP_IDS, "sg-1")]),
            Some("SecurityGroupDrift"),
        ),
        // Karpenter's order: security groups before the subnet.
        (
            with(&[(SUBNET_ID, "subnet-b"), (SECURITY_GROUP_IDS, "sg-1")]),
            Some("SecurityGroupDrift"),
        ),
        (
            with(&[
                (NODECLASS_HASH, "class-1"),
                (NODECLASS_HASH_VERSION, CLASS_HASH_VERSION),
            ]),
            Some("NodeClassDrift"),
        ),
        (
            with(&[
                (NODECLASS_HASH, "class-2"),
                (NODECLASS_HASH_VERSION, CLASS_HASH_VERSION),
            ]),
            None,
        ),
        (
            with(&[(NODEPOOL_HASH, "pool-1"), (NODEPOOL_HASH_VERSION, "v3")]),
            Some("NodePoolDrifted"),
        ),
        (
            with(&[(NODEPOOL_HASH, "pool-2"), (NODEPOOL_HASH_VERSION, "v3")]),
            None,
        ),
        // Hashes of another version (Karpenter v1.14's v5 class hash, Fleetwright's own before): not
        // compared; the tick re-stamps them.
        (
            with(&[(NODECLASS_HASH, "123"), (NODECLASS_HASH_VERSION, "v5")]),
            None,
        ),
        (
            with(&[
                (NODEPOOL_HASH, "456"),
                (NODEPOOL_HASH_VERSION, LEGACY_HASH_VERSION),
            ]),
            None,
        ),
        (labelled(RESERVATION_ID, Some("cr-1")), None),
        (
            labelled(RESERVATION_ID, Some("cr-gone")),
            Some("CapacityReservationDrift"),
        ),
        (
            labelled(PLACEMENT_GROUP_ID, Some("pg-2")),
            Some("PlacementGroupDrift"),
        ),
        (
            labelled(PLACEMENT_GROUP_ID, None),
            Some("PlacementGroupDrift"),
        ),
    ];
    for (claim, expected) in cases {
        assert_eq!(
            drift(&claim, &pool, &c.snapshot, Catalog::embedded(), NOW),
            expected,
            "{:?} {:?}",
            claim.annotations,
            claim.labels
        );
    }
}

/// Karpenter's `InstanceTypeNotFound`: a NodeClaim over an hour old whose type has no offering
/// in its zone with its capacity type any more (a reserved one may fall back to on-demand). A
/// type the catalog does not know is never drift.
#[test]
fn a_type_no_longer_offered_where_the_node_runs_is_drift_after_an_hour() {
    let mut c = Cluster::new(general("1"));
    c.node("n", "m5.large", "on-demand");
    let pool = c.snapshot.nodepools[0].clone();
    let mut claim = c.snapshot.nodeclaims[0].clone();
    let mut m5 = Catalog::embedded()
        .instance_types(&NodeClassSettings::default())
        .into_iter()
        .find(|t| t.name == "m5.large")
        .expect("m5.large");
    let everywhere = Catalog::from_types("us-east-1", vec![m5.clone()]);
    m5.offerings.retain(|o| o.zone != ZONE_A);
    let elsewhere = Catalog::from_types("us-east-1", vec![m5]);
    let drift_at = |claim: &NodeClaim, catalog: &Catalog, age: i64| {
        let mut claim = claim.clone();
        claim.created = NOW - age;
        drift(&claim, &pool, &c.snapshot, catalog, NOW)
    };
    assert_eq!(drift_at(&claim, &everywhere, 7200), None);
    assert_eq!(
        drift_at(&claim, &elsewhere, 7200),
        Some("InstanceTypeNotFound")
    );
    assert_eq!(
        drift_at(&claim, &elsewhere, 1800),
        None,
        "not checked in the first hour"
    );
    claim.labels.insert(CAPACITY_TYPE.into(), "reserved".into());
    claim.created = NOW - 7200;
    let mut any_capacity = pool.clone();
    any_capacity.requirements = Requirements::new();
    assert_eq!(
        drift(&claim, &any_capacity, &c.snapshot, &everywhere, NOW),
        None,
        "reserved falls back to on-demand"
    );
    let mut unknown = c.snapshot.nodeclaims[0].clone();
    unknown
        .labels
        .insert(INSTANCE_TYPE.into(), "z9.huge".into());
    unknown.created = NOW - 7200;
    assert_eq!(
        drift(&unknown, &any_capacity, &c.snapshot, &elsewhere, NOW),
        None
    );
}

/// Karpenter checks the NodePool's requirements against the node's labels directly: each
/// narrowing that leaves the node outside is drift, each that keeps it inside (or widens) is not.
#[test]
fn a_pool_narrowed_past_its_node_is_requirements_drift_and_one_widened_is_not() {
    let mut c = Cluster::new(general("1"));
    c.node("n", "m5.large", "on-demand");
    let claim = c.snapshot.nodeclaims[0].clone();
    let narrowed = |key: &str, op: Operator, values: &[&str]| {
        let mut pool = c.snapshot.nodepools[0].clone();
        pool.requirements
            .add(Requirement::new(key, op, values).expect("valid"));
        pool
    };
    let mut widened = c.snapshot.nodepools[0].clone();
    widened.requirements = Requirements::new();
    widened
        .requirements
        .add(Requirement::exists(crate::labels::INSTANCE_FAMILY));
    let cases: Vec<(NodePool, Option<&str>)> = vec![
        (c.snapshot.nodepools[0].clone(), None),
        (widened, None),
        (
            narrowed(CAPACITY_TYPE, Operator::In, &["spot"]),
            Some("RequirementsDrifted"),
        ),
        (
            narrowed(ZONE, Operator::NotIn, &[ZONE_A]),
            Some("RequirementsDrifted"),
        ),
        // The family and the CPU count come from the catalog's labels for m5.large.
        (
            narrowed(crate::labels::INSTANCE_FAMILY, Operator::NotIn, &["m5"]),
            Some("RequirementsDrifted"),
        ),
        (
            narrowed(crate::labels::INSTANCE_FAMILY, Operator::In, &["m5", "c5"]),
            None,
        ),
        (
            narrowed(crate::labels::INSTANCE_CPU, Operator::Gt, &["2"]),
            Some("RequirementsDrifted"),
        ),
        (
            narrowed(crate::labels::ARCH, Operator::In, &["arm64"]),
            Some("RequirementsDrifted"),
        ),
        // A custom label the node does not carry: strictly incompatible, as in Karpenter.
        (
            narrowed("team", Operator::In, &["a"]),
            Some("RequirementsDrifted"),
        ),
        (
            narrowed("team", Operator::DoesNotExist, &[] as &[&str]),
            None,
        ),
    ];
    for (pool, expected) in cases {
        assert_eq!(
            drift(&claim, &pool, &c.snapshot, Catalog::embedded(), NOW),
            expected,
            "{}",
            pool.requirements
        );
    }
    let mut unknown = claim.clone();
    unknown
        .labels
        .insert(INSTANCE_TYPE.into(), "z9.huge".into());
    let mut family = c.snapshot.nodepools[0].clone();
    family.requirements = Requirements::new();
    family.requirements.add(
        Requirement::new(crate::labels::INSTANCE_FAMILY, Operator::NotIn, &["m5"]).expect("valid"),
    );
    assert_eq!(
        drift(&unknown, &family, &c.snapshot, Catalog::embedded(), NOW),
        None,
        "unknown type: only its own labels count"
    );
}

/// The drift method replaces a requirements-drifted node, within the budget.
#[test]
fn a_requirements_drifted_node_is_replaced_by_one_the_pool_allows() {
    let mut c = Cluster::new(general("1"));
    c.node("n", "m5.large", "on-demand");
    c.pod("a", "n", 500);
    c.snapshot.nodepools[0].requirements.add(
        Requirement::new(crate::labels::INSTANCE_FAMILY, Operator::In, &["c5"]).expect("valid"),
    );
    let plan = c.plan();
    let d = plan.disruptions.first().expect("a drift command");
    assert_eq!(d.reason, Reason::Drifted);
    assert_eq!(d.command, Command::Replace);
    let replacement = d.replacements.first().expect("a replacement");
    assert!(
        replacement
            .instance_types
            .iter()
            .all(|t| t.starts_with("c5.")),
        "{:?}",
        replacement.instance_types
    );
}

/// A static pool's nodes: never emptied or consolidated, but a drifted one is replaced by the
/// node its template launches, so the pool keeps its replicas; the replica count holds while
/// the command is under way (the tainted node's replacement stands in for it).
#[test]
fn a_static_pool_is_never_consolidated_and_its_drifted_node_is_replaced_one_for_one() {
    let mut pool = general("100%");
    pool.replicas = Some(2);
    let mut c = Cluster::new(pool);
    c.node("n1", "m5.2xlarge", "on-demand")
        .node("n2", "m5.2xlarge", "on-demand");
    c.pod("a", "n1", 500);
    assert!(
        c.plan().disruptions.is_empty(),
        "{:?}",
        c.plan().disruptions
    );
    assert!(crate::replicas::plan(&c.snapshot, Catalog::embedded(), NOW)
        .create
        .is_empty());

    c.snapshot.nodepools[0].requirements.add(
        Requirement::new(crate::labels::INSTANCE_FAMILY, Operator::In, &["c5"]).expect("valid"),
    );
    let plan = c.plan();
    assert_eq!(plan.disruptions.len(), 2, "{:?}", plan.disruptions);
    for d in &plan.disruptions {
        assert_eq!((d.reason, d.command), (Reason::Drifted, Command::Replace));
        assert_eq!(d.replacements.len(), 1, "one for one: {:?}", d.replacements);
        assert!(d.replacements[0]
            .instance_types
            .iter()
            .all(|t| t.starts_with("c5.")));
        assert_eq!(d.replacements[0].nodeclaim.nodepool, "default");
    }
    // n1 is being replaced: its node is tainted, its replacement is in flight.
    c.snapshot.nodes[0].taints.push(Taint {
        key: TAINT_DISRUPTED.into(),
        value: String::new(),
        effect: crate::model::TaintEffect::NoSchedule,
    });
    c.snapshot.nodeclaims.push(NodeClaim {
        name: "replacement".into(),
        nodepool: "default".into(),
        created: NOW,
        ..Default::default()
    });
    let replicas = crate::replicas::plan(&c.snapshot, Catalog::embedded(), NOW);
    assert!(
        replicas.create.is_empty() && replicas.delete.is_empty(),
        "{replicas:?}"
    );
    c.snapshot.nodepools[0].replicas = Some(1);
    let replicas = crate::replicas::plan(&c.snapshot, Catalog::embedded(), NOW);
    assert_eq!(
        replicas.delete,
        vec!["replacement".to_string()],
        "not yet a node: first to go"
    );
}

/// Balanced (Karpenter v1.14): a move is made only when its savings fraction of the pool's
/// cost is at least half its disruption fraction. Replacing busy m5.2xlarge nodes with c5.2xlarge
/// saves 11 % for every pod restarted: taken by WhenEmptyOrUnderutilized, refused by Balanced.
/// With a nearly empty node among them, Balanced makes the move worth it (merging them all onto
/// one larger node saves half the cost) and reports every move it scored.
#[test]
fn balanced_consolidation_refuses_marginal_moves_and_makes_worthwhile_ones() {
    let cluster = |policy: ConsolidationPolicy| {
        let mut pool = general("100%");
        pool.consolidation_policy = policy;
        let mut c = Cluster::new(pool);
        for n in ["n1", "n2", "n3", "n4"] {
            c.node(n, "m5.2xlarge", "on-demand");
        }
        for n in ["n1", "n2", "n3"] {
            for i in 0..4 {
                c.pod(&format!("{n}-{i}"), n, 1500);
            }
        }
        c
    };
    let busy = cluster(ConsolidationPolicy::WhenEmptyOrUnderutilized);
    let eager = busy.plan();
    assert!(!eager.disruptions.is_empty(), "{:?}", eager.blocked);
    assert!(eager.scores.is_empty());

    let balanced = cluster(ConsolidationPolicy::Balanced);
    let plan = balanced.plan();
    // n4 is empty here: emptiness is not scored.
    assert_eq!(plan.disruptions[0].reason, Reason::Empty, "{plan:?}");

    let mut c = cluster(ConsolidationPolicy::Balanced);
    c.pod("n4-0", "n4", 500);
    let plan = c.plan();
    let d = plan.disruptions.first().expect("a move that is worth it");
    assert_eq!(d.reason, Reason::Underutilized);
    assert!(d.nodes.contains(&"n4".to_string()), "{d:?}");
    let approved: Vec<&Score> = plan.scores.iter().filter(|s| s.approved).collect();
    assert!(
        approved
            .iter()
            .any(|s| s.nodes == d.nodes && s.score >= 0.5),
        "{:?}",
        plan.scores
    );
    assert!(plan.scores.iter().all(|s| s.approved == (s.score >= 0.5)));

    let mut marginal = cluster(ConsolidationPolicy::Balanced);
    marginal
        .snapshot
        .pods
        .retain(|p| p.node_name.as_deref() != Some("n4"));
    marginal.snapshot.nodes.retain(|n| n.name != "n4");
    marginal
        .snapshot
        .nodeclaims
        .retain(|c| c.name != "claim-n4");
    let plan = marginal.plan();
    assert!(plan.disruptions.is_empty(), "{:?}", plan.disruptions);
    assert!(
        plan.blocked.iter().any(|b| b.reason.contains("Balanced")),
        "{:?}",
        plan.blocked
    );
}

#[test]
fn the_fleet_cost_is_the_owned_nodes_prices_against_the_bound_of_their_pods() {
    let mut c = Cluster::new(general("10%"));
    c.node("n1", "m5.2xlarge", "on-demand")
        .node("n2", "m5.2xlarge", "on-demand");
    c.pod("a", "n1", 1000);
    c.pod("b", "n2", 1000);
    let catalog = Catalog::embedded();
    let cost = fleet_cost(&c.snapshot, catalog, NOW);
    let m5_2xlarge = catalog.on_demand["m5.2xlarge"];
    assert_eq!(cost.nodes, 2);
    assert!((cost.hourly - 2.0 * m5_2xlarge).abs() < 1e-9, "{cost:?}");
    // Two 1-CPU pods fit on far less than two m5.2xlarge: the bound is positive and lower.
    assert!(
        cost.lower_bound > 0.0 && cost.lower_bound < cost.hourly / 2.0,
        "{cost:?}"
    );
    // A node of no NodePool is not Fleetwright's: not priced, and its pods stay put.
    let mut foreign = c.snapshot.clone();
    foreign.nodes[1].labels.remove(NODEPOOL);
    let cost = fleet_cost(&foreign, catalog, NOW);
    assert_eq!(cost.nodes, 1);
    assert!((cost.hourly - m5_2xlarge).abs() < 1e-9);
    // Nor is a node of another provider's NodePool (EKS Auto Mode's), which the read leaves
    // out with its NodeClaims, though the node keeps its pool label.
    let mut auto_mode = c.snapshot.clone();
    auto_mode.nodes[1]
        .labels
        .insert(NODEPOOL.into(), "general-purpose".into());
    auto_mode
        .nodeclaims
        .retain(|claim| claim.node_name.as_deref() != Some("n2"));
    let cost = fleet_cost(&auto_mode, catalog, NOW);
    assert_eq!(cost.nodes, 1);
    assert!((cost.hourly - m5_2xlarge).abs() < 1e-9);
}

/// A pool of m5 sizes from xlarge up, on-demand.
fn m5_sizes() -> NodePool {
    pool(
        &["m5.xlarge", "m5.2xlarge", "m5.4xlarge", "m5.8xlarge"],
        "on-demand",
        "100%",
    )
}

#[test]
fn a_node_too_large_for_its_pods_is_split_into_two_cheaper_ones() {
    let mut c = Cluster::new(m5_sizes());
    c.node("big", "m5.8xlarge", "on-demand");
    for i in 0..17 {
        c.pod(&format!("p{i}"), "big", 1000);
    }
    let plan = c.plan();
    let d = &plan.disruptions[0];
    assert_eq!(
        (d.command, d.reason, d.replacements.len()),
        (Command::Replace, Reason::Underutilized, 2),
        "{plan:?}"
    );
    assert!(d.replacement.is_none(), "`replacement` is for one only");
    let price: f64 = d.replacements.iter().map(|r| r.price).sum();
    assert!(price < 1.536 * (1.0 - MIN_SPLIT_SAVINGS), "{price}");
    assert!(d
        .replacements
        .iter()
        .all(|r| !r.instance_types.iter().any(|t| t == "m5.8xlarge")));
    // The room kept for kube-scheduler's spreading: one more of the largest pod.
    let room: i64 = d
        .replacements
        .iter()
        .map(|r| r.nodeclaim.requests.cpu)
        .sum();
    assert!(room >= 17_000, "{room}");
    let json = serde_json::to_value(d).unwrap();
    assert_eq!(json["replacements"].as_array().map(Vec::len), Some(2));
    assert!(json["replacement"].is_null());
}

#[test]
fn a_split_that_saves_nothing_is_not_made() {
    // 3.5 CPU on an m5.xlarge: two m5.large would cost the same, and no single type is cheaper.
    let mut c = Cluster::new(pool(&["m5.large", "m5.xlarge"], "on-demand", "100%"));
    c.node("x", "m5.xlarge", "on-demand");
    for i in 0..7 {
        c.pod(&format!("p{i}"), "x", 500);
    }
    let plan = c.plan();
    assert!(plan.disruptions.is_empty(), "{plan:?}");
}

#[test]
fn an_empty_node_and_a_consolidation_are_decided_together_in_sequence() {
    let mut c = Cluster::new(general("100%"));
    c.node("empty", "m5.large", "on-demand");
    c.node("big", "m5.8xlarge", "on-demand");
    c.pod("small", "big", 250);
    let plan = plan_sequence(&mut c.snapshot.clone(), Catalog::embedded(), NOW);
    let kinds: Vec<(Command, Reason)> = plan
        .disruptions
        .iter()
        .map(|d| (d.command, d.reason))
        .collect();
    assert_eq!(
        kinds,
        vec![
            (Command::Delete, Reason::Empty),
            (Command::Replace, Reason::Underutilized)
        ],
        "{plan:?}"
    );
    // The second never counts on the first's node.
    assert!(!plan.disruptions[1].nodes.contains(&"empty".to_string()));
}

#[test]
fn a_decided_command_is_validated_against_the_cluster_as_it_is_now() {
    let mut c = Cluster::new(general("100%"));
    c.node("big", "m5.8xlarge", "on-demand");
    c.pod("small", "big", 250);
    let nodes = vec!["big".to_string()];
    let now = validate(
        &c.snapshot,
        Catalog::embedded(),
        NOW,
        Reason::Underutilized,
        &nodes,
    )
    .expect("still holds");
    assert_eq!(now.command, Command::Replace);
    // Pinned since: its pod may no longer move.
    c.snapshot.pods[0].do_not_disrupt = Protection::Always;
    let e = validate(
        &c.snapshot,
        Catalog::embedded(),
        NOW,
        Reason::Underutilized,
        &nodes,
    )
    .unwrap_err();
    assert!(e.contains("big"), "{e}");
    // And an empty delete no longer holds once a pod landed.
    let mut e2 = Cluster::new(general("100%"));
    e2.node("idle", "m5.large", "on-demand");
    let idle = vec!["idle".to_string()];
    assert!(validate(&e2.snapshot, Catalog::embedded(), NOW, Reason::Empty, &idle).is_ok());
    e2.pod("arrived", "idle", 250);
    assert!(validate(&e2.snapshot, Catalog::embedded(), NOW, Reason::Empty, &idle).is_err());
}

#[path = "disruption_v1_semantics.rs"]
mod v1_semantics;

#[path = "disruption_terminate_first.rs"]
mod terminate_first;

#[path = "disruption_reserved.rs"]
mod reserved;

#[path = "disruption_spot.rs"]
mod spot;

#[path = "disruption_order.rs"]
mod order;
