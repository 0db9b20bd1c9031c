//! Packing pods that carry placement constraints (nodeSelector, required node affinity,
//! tolerations to a tainted pool, preferences) on the embedded catalog: they get the same cost
//! improvements as unconstrained pods, grouped by what they need of their node, and every plan
//! passes the independent checker.

mod common;

use fleetwright_core::check::{violations, Claim};
use fleetwright_core::labels::*;
use fleetwright_core::model::*;
use fleetwright_core::requirements::{Operator, Requirement, Requirements};
use fleetwright_core::synthetic::{cluster_mix, general_purpose_pool};
use fleetwright_core::{schedule, Catalog, Plan, Resources};

const GIB: i64 = 1 << 30;

fn plan(snapshot: &Snapshot) -> Plan {
    let plan = schedule(snapshot, Catalog::embedded(), &Default::default());
    let broken = violations(snapshot, &common::catalog_types(), &Claim::of_plan(&plan));
    assert!(broken.is_empty(), "{broken:?}");
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    plan
}

fn deployment(name: &str, replicas: usize, cpu: i64, mem: i64) -> Vec<Pod> {
    (0..replicas)
        .map(|r| {
            let mut p = Pod::new("default", &format!("{name}-{r}"), Resources::new(cpu, mem));
            p.labels.insert("app".into(), name.into());
            p
        })
        .collect()
}

/// A tainted on-demand pool of c and m types.
fn tainted_on_demand_pool() -> NodePool {
    let mut reqs = Requirements::new();
    reqs.add(Requirement::new(INSTANCE_CATEGORY, Operator::In, &["c", "m"]).expect("valid"));
    reqs.add(Requirement::new(INSTANCE_GENERATION, Operator::Gt, &["4"]).expect("valid"));
    reqs.add(Requirement::single(CAPACITY_TYPE, CAPACITY_ON_DEMAND));
    reqs.add(Requirement::single(ARCH, "amd64"));
    reqs.add(Requirement::in_values(
        ZONE,
        ["us-east-1a", "us-east-1b", "us-east-1c"].map(String::from),
    ));
    NodePool {
        name: "dedicated".into(),
        requirements: reqs,
        labels: [("team".to_string(), "payments".to_string())].into(),
        taints: vec![Taint {
            key: "team".into(),
            value: "payments".into(),
            effect: TaintEffect::NoSchedule,
        }],
        node_class: "default".into(),
        ..Default::default()
    }
}

/// 24 pods of 3 CPU and 4 GiB, pinned by nodeSelector and toleration to the tainted pool. They
/// were planned onto one c6a.24xlarge ($3.672/h) by first fit, since pods with node requirements
/// were never re-packed; several 4xlarge nodes hold them for about $3.06/h.
#[test]
fn pinned_pods_on_a_tainted_pool_are_repacked_like_any_others() {
    let mut pods = deployment("payments", 24, 3000, 4 * GIB);
    for p in &mut pods {
        p.node_selector.insert("team".into(), "payments".into());
        p.tolerations.push(Toleration {
            key: Some("team".into()),
            exists: false,
            value: "payments".into(),
            effect: Some(TaintEffect::NoSchedule),
        });
    }
    let snapshot = Snapshot {
        pods,
        nodepools: vec![general_purpose_pool(), tainted_on_demand_pool()],
        ..Default::default()
    };
    let plan = plan(&snapshot);
    assert!(
        plan.nodeclaims.iter().all(|n| n.nodepool == "dedicated"),
        "{:?}",
        plan.nodeclaims
    );
    assert!(
        plan.cost.hourly <= 3.06 + 1e-6,
        "${:.3}/h on {:?}",
        plan.cost.hourly,
        plan.nodeclaims
            .iter()
            .map(|n| &n.instance_types[0])
            .collect::<Vec<_>>()
    );
}

/// Pods that prefer on-demand capacity make their node on-demand. Pods without that preference
/// do not fill those nodes by first fit and pay on-demand prices: packed by what they need, they
/// run on spot.
#[test]
fn pods_without_a_preference_do_not_pay_for_their_neighbours_one() {
    let mut preferring = deployment("ledger", 6, 1000, 2 * GIB);
    for p in &mut preferring {
        let mut term = Requirements::new();
        term.add(Requirement::single(CAPACITY_TYPE, CAPACITY_ON_DEMAND));
        p.preferred_terms.push((50, term));
    }
    let plain = deployment("web", 30, 1000, 2 * GIB);
    let mut pool = general_purpose_pool();
    pool.requirements.add(Requirement::in_values(
        CAPACITY_TYPE,
        [CAPACITY_SPOT, CAPACITY_ON_DEMAND].map(String::from),
    ));
    let snapshot = Snapshot {
        pods: preferring.into_iter().chain(plain).collect(),
        nodepools: vec![pool],
        ..Default::default()
    };
    let plan = plan(&snapshot);
    for claim in &plan.nodeclaims {
        let web = claim.pods.iter().any(|p| p.starts_with("default/web-"));
        let on_demand_only = claim.capacity_types == [CAPACITY_ON_DEMAND];
        assert!(
            !(web && on_demand_only),
            "a web pod pays on-demand for its neighbours' preference: {claim:?}"
        );
    }
}

/// The real-cluster mixes (several pools, selectors, affinity, tolerations, spread) at 300 pods
/// over several seeds: every plan passes the checker, and the selectors mix, where first fit
/// shares nodes among pods of different needs narrowed to the strictest of them, costs well
/// under first fit (3.0 × the LP bound at 300 pods, seed 1, for first fit; about 2.1 here).
#[test]
fn constrained_mixes_pass_the_checker_and_selectors_no_longer_share_narrowed_nodes() {
    for seed in 1..=4 {
        for mix in ["pools", "selectors", "spread", "shapes"] {
            let snapshot = cluster_mix(mix, 300, seed).expect("known mix");
            let plan = plan(&snapshot);
            if mix == "selectors" {
                let ratio = plan.cost.hourly / plan.cost.lower_bound;
                assert!(ratio < 2.5, "selectors, seed {seed}: {ratio:.3}");
            }
        }
    }
}
