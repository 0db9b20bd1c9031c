//! Properties of disruption plans over random clusters: a plan never exceeds a budget, never
//! picks a node holding a do-not-disrupt pod, never strands a pod (every pod of the disrupted
//! nodes fits, by an independent scheduling run, on the remaining nodes plus the replacement),
//! and consolidation never raises the hourly cost. And no churn: applying the decisions one
//! after another settles within a few rounds, each strictly cheaper, no node replaced by one of
//! its own type, after which a new decision yields no command.

use std::collections::{BTreeMap, BTreeSet};

use fleetwright_core::budget::{self, Reason};
use fleetwright_core::catalog::{Catalog, InstanceType, NodeClassSettings};
use fleetwright_core::disruption::{self, DisruptionPlan};
use fleetwright_core::labels::*;
use fleetwright_core::model::*;
use fleetwright_core::requirements::{Requirement, Requirements};
use fleetwright_core::resources::Resources;
use fleetwright_core::{schedule, ScheduleOptions};
use proptest::prelude::*;

const NOW: i64 = 1_795_429_800;
const TYPES: [&str; 4] = ["m5.large", "m5.xlarge", "m5.2xlarge", "c5.xlarge"];

fn types() -> BTreeMap<String, InstanceType> {
    Catalog::embedded()
        .instance_types(&NodeClassSettings::default())
        .into_iter()
        .filter(|t| TYPES.contains(&t.name.as_str()))
        .map(|t| (t.name.clone(), t))
        .collect()
}

fn pool(budget: &str) -> NodePool {
    let mut requirements = Requirements::new();
    requirements.add(Requirement::in_values(
        INSTANCE_TYPE,
        TYPES.iter().map(|t| t.to_string()),
    ));
    requirements.add(Requirement::single(CAPACITY_TYPE, CAPACITY_ON_DEMAND));
    requirements.add(Requirement::single(ZONE, "us-east-1a"));
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

fn node(name: &str, t: &InstanceType) -> (Node, NodeClaim) {
    let labels: BTreeMap<String, String> = [
        (INSTANCE_TYPE, t.name.as_str()),
        (ZONE, "us-east-1a"),
        (CAPACITY_TYPE, CAPACITY_ON_DEMAND),
        (NODEPOOL, "default"),
        (HOSTNAME, name),
        (ARCH, "amd64"),
        (OS, "linux"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let node = Node {
        name: name.into(),
        labels: labels.clone(),
        allocatable: t.allocatable.clone(),
        capacity: t.capacity.clone(),
        ready: true,
        created: NOW - 3600,
        ..Default::default()
    };
    let claim = NodeClaim {
        name: format!("claim-{name}"),
        nodepool: "default".into(),
        labels,
        node_name: Some(name.into()),
        launched: true,
        registered: true,
        initialized: true,
        created: NOW - 3600,
        ..Default::default()
    };
    (node, claim)
}

/// A random node: its type and its pods as (millicores, do-not-disrupt).
fn random_node() -> impl Strategy<Value = (usize, Vec<(i64, bool)>)> {
    (
        0..TYPES.len(),
        prop::collection::vec(
            (
                prop::sample::select(vec![100i64, 250, 500, 1000]),
                prop::bool::weighted(0.05),
            ),
            0..4,
        ),
    )
}

fn cluster(nodes: &[(usize, Vec<(i64, bool)>)], budget: &str) -> Snapshot {
    let types = types();
    let mut snapshot = Snapshot {
        nodepools: vec![pool(budget)],
        ..Default::default()
    };
    for (i, (t, pods)) in nodes.iter().enumerate() {
        let name = format!("n{i}");
        let (n, c) = node(&name, &types[TYPES[*t]]);
        let room = n.allocatable.get("cpu");
        snapshot.nodes.push(n);
        snapshot.nodeclaims.push(c);
        let mut used = 0;
        for (j, (cpu, keep)) in pods.iter().enumerate() {
            used += cpu;
            if used > room {
                break;
            }
            let mut pod = Pod::new(
                "apps",
                &format!("p{i}-{j}"),
                Resources::new(*cpu, 256 << 20),
            );
            pod.node_name = Some(name.clone());
            pod.owner_kind = Some("ReplicaSet".into());
            if *keep {
                pod.do_not_disrupt = Protection::Always;
            }
            snapshot.pods.push(pod);
        }
    }
    snapshot
}

/// Independently checks that the disrupted nodes' pods fit on the rest plus the replacement.
fn strands_nothing(snapshot: &Snapshot, plan: &DisruptionPlan) -> Result<(), String> {
    let types = types();
    for d in &plan.disruptions {
        let gone: BTreeSet<&str> = d.nodes.iter().map(String::as_str).collect();
        let mut sim = snapshot.clone();
        sim.nodes.retain(|n| !gone.contains(n.name.as_str()));
        sim.nodeclaims
            .retain(|c| !c.node_name.as_deref().is_some_and(|n| gone.contains(n)));
        for (k, r) in d.replacements.iter().enumerate() {
            let t = types.get(&r.instance_types[0]).ok_or_else(|| {
                format!(
                    "replacement type {} is outside the pool",
                    r.instance_types[0]
                )
            })?;
            let (n, c) = node(&format!("replacement-{k}"), t);
            sim.nodes.push(n);
            sim.nodeclaims.push(c);
        }
        for p in &mut sim.pods {
            if p.node_name.as_deref().is_some_and(|n| gone.contains(n)) {
                p.node_name = None;
            }
        }
        let plan = schedule(
            &sim,
            Catalog::embedded(),
            &ScheduleOptions {
                now: NOW,
                ..Default::default()
            },
        );
        if !plan.nodeclaims.is_empty() || !plan.unschedulable.is_empty() {
            return Err(format!(
                "{d:?} strands pods: {:?} {:?}",
                plan.nodeclaims.len(),
                plan.unschedulable
            ));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn disruption_plans_keep_budgets_pods_and_costs(
        nodes in prop::collection::vec(random_node(), 1..7),
        budget in prop::sample::select(vec!["0%", "20%", "50%", "100%", "1", "2"]),
    ) {
        let snapshot = cluster(&nodes, budget);
        let plan = disruption::plan(&snapshot, Catalog::embedded(), NOW);
        let disrupted: Vec<&str> = plan.disruptions.iter().flat_map(|d| d.nodes.iter().map(String::as_str)).collect();
        for d in &plan.disruptions {
            let allowed = budget::allowed(&snapshot.nodepools[0], d.reason, snapshot.nodes.len(), 0, NOW);
            prop_assert!(d.nodes.len() <= allowed, "{d:?} exceeds the budget {budget} ({allowed})");
            if matches!(d.reason, Reason::Empty | Reason::Underutilized) {
                prop_assert!(d.savings > 0.0, "consolidation raised the cost: {d:?}");
            }
        }
        for p in snapshot.pods.iter().filter(|p| p.do_not_disrupt != Protection::None) {
            prop_assert!(!disrupted.contains(&p.node_name.as_deref().unwrap_or_default()), "{} has a do-not-disrupt pod", p.node_name.as_deref().unwrap_or_default());
        }
        prop_assert!(strands_nothing(&snapshot, &plan).is_ok(), "{:?}", strands_nothing(&snapshot, &plan));
    }

    #[test]
    fn consolidation_settles_without_churn(
        nodes in prop::collection::vec(random_node(), 1..7),
    ) {
        let settled = settle(cluster(&nodes, "100%"));
        prop_assert!(settled.is_ok(), "{:?}", settled);
    }
}

fn hourly(snapshot: &Snapshot) -> f64 {
    let types = types();
    snapshot
        .nodes
        .iter()
        .filter_map(|n| types.get(n.labels.get(INSTANCE_TYPE)?))
        .filter_map(|t| {
            t.offerings
                .iter()
                .find(|o| o.zone == "us-east-1a" && o.capacity_type == CAPACITY_ON_DEMAND)
        })
        .map(|o| o.price)
        .sum()
}

/// Applies the first command of each decision (its nodes gone, each replacement a node of its
/// cheapest type, the displaced pods bound where an independent scheduling run puts them) until
/// a decision has none. Fails on a round that does not lower the cost, a node replaced by its
/// own type, a pod with no place, or more than 10 rounds.
fn settle(mut snapshot: Snapshot) -> Result<(), String> {
    let types = types();
    for round in 0..10 {
        let plan = disruption::plan_sequence(&mut snapshot.clone(), Catalog::embedded(), NOW);
        let Some(d) = plan.disruptions.into_iter().next() else {
            return Ok(());
        };
        let before = hourly(&snapshot);
        let gone: BTreeSet<String> = d.nodes.iter().cloned().collect();
        let own: BTreeSet<String> = snapshot
            .nodes
            .iter()
            .filter(|n| gone.contains(&n.name))
            .filter_map(|n| n.labels.get(INSTANCE_TYPE).cloned())
            .collect();
        snapshot.nodes.retain(|n| !gone.contains(&n.name));
        snapshot
            .nodeclaims
            .retain(|c| !c.node_name.as_ref().is_some_and(|n| gone.contains(n)));
        for (k, r) in d.replacements.iter().enumerate() {
            let t = &r.instance_types[0];
            if own.contains(t) {
                return Err(format!(
                    "round {round}: {d:?} replaces a node by its own type {t}"
                ));
            }
            let (n, c) = node(&format!("r{round}-{k}"), &types[t]);
            snapshot.nodes.push(n);
            snapshot.nodeclaims.push(c);
        }
        for p in &mut snapshot.pods {
            if p.node_name.as_ref().is_some_and(|n| gone.contains(n)) {
                p.node_name = None;
            }
        }
        let placed = schedule(
            &snapshot,
            Catalog::embedded(),
            &ScheduleOptions {
                now: NOW,
                ..Default::default()
            },
        );
        if !placed.nodeclaims.is_empty() || !placed.unschedulable.is_empty() {
            return Err(format!("round {round}: {d:?} leaves pods without a place"));
        }
        for e in placed.existing {
            if let Some(p) = snapshot.pods.iter_mut().find(|p| p.key() == e.pod) {
                p.node_name = Some(e.node);
            }
        }
        let after = hourly(&snapshot);
        if after >= before - 1e-9 {
            return Err(format!(
                "round {round}: {d:?} took ${before:.4}/h to ${after:.4}/h"
            ));
        }
    }
    Err("still deciding commands after 10 rounds".into())
}

/// When the tick looks again before its schedule: the moment an empty node waits out the pool's
/// `consolidateAfter`, and the moment a node whose pods request less than half of both its CPU
/// and its memory does (a node a load drop left). A fuller node, a node whose wait is over and
/// a node of a pool that consolidates only empty nodes give no such moment.
#[test]
fn the_plan_names_when_an_empty_or_half_empty_node_settles() {
    let settles = |pods: Vec<(i64, bool)>, policy: ConsolidationPolicy, event: i64| {
        let mut snapshot = cluster(&[(0, pods)], "100%");
        snapshot.nodepools[0].consolidate_after = Some(60);
        snapshot.nodepools[0].consolidation_policy = policy;
        snapshot.nodes[0].last_pod_event = event;
        let plan = disruption::plan(&snapshot, Catalog::embedded(), NOW);
        (plan.empty_settles_at, plan.underused_settles_at)
    };
    let under = ConsolidationPolicy::WhenEmptyOrUnderutilized;
    let recent = NOW - 20;
    assert_eq!(settles(vec![], under, recent), (Some(recent + 60), None));
    // m5.large: 2 vCPU; 250m of it is under half of both.
    assert_eq!(
        settles(vec![(250, false)], under, recent),
        (None, Some(recent + 60))
    );
    assert_eq!(
        settles(vec![(1000, false), (500, false)], under, recent),
        (None, None)
    );
    let empty_only = ConsolidationPolicy::WhenEmpty;
    assert_eq!(
        settles(vec![(250, false)], empty_only, recent),
        (None, None)
    );
    assert_eq!(settles(vec![(250, false)], under, NOW - 600), (None, None));
}
