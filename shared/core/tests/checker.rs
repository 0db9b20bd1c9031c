//! The independent plan checker (`fleetwright_core::check`): it catches each kind of broken
//! constraint in a hand-broken plan, and finds nothing wrong in Fleetwright's plans for generated
//! small clusters of every kind the real-cluster mixes have (several weighted and tainted pools,
//! selectors, node affinity, tolerations, zone spread, hostname anti-affinity, DaemonSets), on the
//! embedded catalog and over many seeds.

mod common;

use std::collections::BTreeSet;

use fleetwright_core::check::{violations, Claim};
use fleetwright_core::labels::{HOSTNAME, ZONE};
use fleetwright_core::model::*;
use fleetwright_core::synthetic::{cluster_mix, general_purpose_pool, CLUSTER_MIXES};
use fleetwright_core::{schedule, Catalog, Resources, ScheduleOptions};

const GIB: i64 = 1 << 30;

fn pod(name: &str, cpu: i64, mem: i64) -> Pod {
    let mut p = Pod::new("default", name, Resources::new(cpu, mem));
    p.labels.insert("app".into(), "x".into());
    p
}

/// A claim from the general-purpose pool; no zones given means the pool's three.
fn claim(pods: &[&str], types: &[&str], zones: &[&str]) -> Claim {
    let zones = if zones.is_empty() {
        &["us-east-1a", "us-east-1b", "us-east-1c"][..]
    } else {
        zones
    };
    Claim {
        nodepool: "general-purpose".into(),
        pods: pods.iter().map(|p| format!("default/{p}")).collect(),
        instance_types: types.iter().map(|t| t.to_string()).collect(),
        zones: zones.iter().map(|z| z.to_string()).collect(),
        capacity_types: vec!["on-demand".into()],
    }
}

fn snapshot(pods: Vec<Pod>) -> Snapshot {
    Snapshot {
        pods,
        nodepools: vec![general_purpose_pool()],
        ..Default::default()
    }
}

fn anti(p: &mut Pod, key: &str) {
    let mut selector = fleetwright_core::Requirements::new();
    selector.add(fleetwright_core::Requirement::single("app", "x"));
    p.anti_affinity.push(PodAffinityTerm {
        selector,
        namespaces: Namespaces::Listed(BTreeSet::from(["default".to_string()])),
        topology_key: key.into(),
    });
}

#[test]
fn a_plan_that_fits_passes() {
    let snap = snapshot(vec![pod("a", 500, GIB), pod("b", 500, GIB)]);
    let plan = [claim(&["a", "b"], &["m5.large"], &[])];
    assert_eq!(
        violations(&snap, &common::catalog_types(), &plan),
        Vec::<String>::new()
    );
}

#[test]
fn too_many_requests_for_an_option_are_caught() {
    let snap = snapshot(vec![pod("a", 1500, GIB), pod("b", 1500, GIB)]);
    // Two 1.5-CPU pods do not fit a 2-vCPU m5.large, whatever m5.xlarge holds.
    let plan = [claim(&["a", "b"], &["m5.xlarge", "m5.large"], &[])];
    let found = violations(&snap, &common::catalog_types(), &plan);
    assert!(
        found
            .iter()
            .any(|v| v.contains("m5.large") && v.contains("cpu")),
        "{found:?}"
    );
}

#[test]
fn a_selector_the_node_does_not_meet_is_caught() {
    let mut a = pod("a", 500, GIB);
    a.node_selector
        .insert("kubernetes.io/arch".into(), "arm64".into());
    let found = violations(
        &snapshot(vec![a]),
        &common::catalog_types(),
        &[claim(&["a"], &["m5.large"], &[])],
    );
    assert!(
        found.iter().any(|v| v.contains("nodeSelector")),
        "{found:?}"
    );
}

#[test]
fn a_taint_the_pod_does_not_tolerate_is_caught() {
    let mut snap = snapshot(vec![pod("a", 500, GIB)]);
    snap.nodepools[0].taints.push(Taint {
        key: "dedicated".into(),
        value: "gpu".into(),
        effect: TaintEffect::NoSchedule,
    });
    let found = violations(
        &snap,
        &common::catalog_types(),
        &[claim(&["a"], &["m5.large"], &[])],
    );
    assert!(found.iter().any(|v| v.contains("taint")), "{found:?}");
}

#[test]
fn anti_affine_pods_on_one_host_or_possibly_one_zone_are_caught() {
    let (mut a, mut b) = (pod("a", 100, GIB), pod("b", 100, GIB));
    anti(&mut a, HOSTNAME);
    anti(&mut b, HOSTNAME);
    let snap = snapshot(vec![a.clone(), b.clone()]);
    let one_host = [claim(&["a", "b"], &["m5.large"], &[])];
    assert!(!violations(&snap, &common::catalog_types(), &one_host).is_empty());
    let two_hosts = [
        claim(&["a"], &["m5.large"], &[]),
        claim(&["b"], &["m5.large"], &[]),
    ];
    assert_eq!(
        violations(&snap, &common::catalog_types(), &two_hosts),
        Vec::<String>::new()
    );
    anti(&mut a, ZONE);
    let snap = snapshot(vec![a, b]);
    // Two hosts, but both may land in the same zone.
    assert!(!violations(&snap, &common::catalog_types(), &two_hosts).is_empty());
    let apart = [
        claim(&["a"], &["m5.large"], &["us-east-1a"]),
        claim(&["b"], &["m5.large"], &["us-east-1b"]),
    ];
    assert_eq!(
        violations(&snap, &common::catalog_types(), &apart),
        Vec::<String>::new()
    );
}

/// A hard zone spread of skew one over the pods labelled `app=x`.
fn zone_spread(p: &mut Pod) {
    let mut selector = fleetwright_core::Requirements::new();
    selector.add(fleetwright_core::Requirement::single("app", "x"));
    p.spread.push(SpreadConstraint {
        max_skew: 1,
        topology_key: ZONE.into(),
        hard: true,
        selector,
        min_domains: None,
        node_affinity_policy: InclusionPolicy::Honor,
        node_taints_policy: InclusionPolicy::Ignore,
    });
}

#[test]
fn a_zone_spread_over_its_skew_is_caught() {
    let mut pods: Vec<Pod> = (0..3).map(|i| pod(&format!("p{i}"), 100, GIB)).collect();
    pods.iter_mut().for_each(zone_spread);
    let snap = snapshot(pods);
    let lopsided = [
        claim(&["p0", "p1"], &["m5.large"], &["us-east-1a"]),
        claim(&["p2"], &["m5.large"], &["us-east-1b"]),
    ];
    let found = violations(&snap, &common::catalog_types(), &lopsided);
    assert!(found.iter().any(|v| v.contains("spread")), "{found:?}");
    let even = [
        claim(&["p0"], &["m5.large"], &["us-east-1a"]),
        claim(&["p1"], &["m5.large"], &["us-east-1b"]),
        claim(&["p2"], &["m5.large"], &["us-east-1c"]),
    ];
    assert_eq!(
        violations(&snap, &common::catalog_types(), &even),
        Vec::<String>::new()
    );
}

/// Four spread pods at 2-1-1 over the pool's three zones: within a skew of one, until a zone
/// with no pod of theirs counts too: an existing node's, or a tainted pool's under the default
/// `nodeTaintsPolicy: Ignore`.
#[test]
fn a_zone_with_a_node_or_a_tainted_pool_counts_in_a_spread() {
    let mut pods: Vec<Pod> = (0..4).map(|i| pod(&format!("p{i}"), 100, GIB)).collect();
    pods.iter_mut().for_each(zone_spread);
    let plan = [
        claim(&["p0", "p1"], &["m5.large"], &["us-east-1a"]),
        claim(&["p2"], &["m5.large"], &["us-east-1b"]),
        claim(&["p3"], &["m5.large"], &["us-east-1c"]),
    ];
    let types = common::catalog_types();
    let spread_broken = |snap: &Snapshot| {
        violations(snap, &types, &plan)
            .iter()
            .any(|v| v.contains("spread"))
    };
    let alone = snapshot(pods);
    assert!(!spread_broken(&alone));
    let mut with_node = alone.clone();
    with_node.nodes.push(Node {
        name: "other".into(),
        labels: [(ZONE.to_string(), "us-east-1d".to_string())].into(),
        ..Default::default()
    });
    assert!(spread_broken(&with_node));
    let mut tainted = general_purpose_pool();
    tainted.name = "gpu".into();
    tainted.requirements = fleetwright_core::Requirements::new();
    tainted
        .requirements
        .add(fleetwright_core::Requirement::single(ZONE, "us-east-1d"));
    tainted.taints.push(Taint {
        key: "gpu".into(),
        value: "true".into(),
        effect: TaintEffect::NoSchedule,
    });
    let mut with_pool = alone.clone();
    with_pool.nodepools.push(tainted);
    assert!(spread_broken(&with_pool));
}

/// Fleetwright's plans for generated clusters of up to 30 pods, every mix kind, many seeds.
#[test]
fn fleetwrights_plans_for_generated_small_clusters_break_nothing() {
    let types = common::catalog_types();
    for mix in CLUSTER_MIXES {
        for seed in 1..=6 {
            let count = 10 + (seed as usize * 7) % 21;
            // 10 to 30 pods.
            let snap = cluster_mix(mix, count, seed).expect("a known mix");
            let plan = schedule(&snap, Catalog::embedded(), &ScheduleOptions::default());
            let found = violations(&snap, &types, &Claim::of_plan(&plan));
            assert!(
                found.is_empty(),
                "{mix} seed {seed} ({count} pods): {found:#?}"
            );
            let placed: usize = plan.nodeclaims.iter().map(|n| n.pods.len()).sum();
            assert_eq!(
                placed + plan.unschedulable.len(),
                snap.pods.len(),
                "{mix} seed {seed}: every pod is placed or explained"
            );
        }
    }
}
