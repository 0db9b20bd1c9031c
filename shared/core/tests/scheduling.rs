//! Table tests for each scheduling constraint, with concrete numbers on the embedded us-east-1
//! catalog. It is one table, longer than most files: each case is a few lines over the shared
//! builders in `common`, and splitting the table by constraint would only scatter them.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::*;
use fleetwright_core::labels::*;
use fleetwright_core::model::*;
use fleetwright_core::requirements::{Operator, Requirements};
use fleetwright_core::resources::Resources;

#[test]
fn max_pods_five_gives_five_nodes_for_25_tiny_pods() {
    let snap = with_max_pods(snapshot(pods("tiny", 25, 1, 1), vec![pool("default")]), 5);
    let plan = plan(&snap);
    assert_eq!(
        plan.nodeclaims.len(),
        5,
        "{:#?}",
        plan.nodeclaims
            .iter()
            .map(|n| n.pods.len())
            .collect::<Vec<_>>()
    );
    assert!(plan.nodeclaims.iter().all(|n| n.pods.len() == 5));
    assert!(plan.unschedulable.is_empty());
}

#[test]
fn zone_spread_max_skew_one_over_three_zones_is_2_1_1() {
    let ps: Vec<Pod> = (0..4)
        .map(|i| {
            let mut p = labelled(pod(&format!("web-{i}"), 500, 512), &[("app", "web")]);
            p.spread.push(spread(ZONE, 1, &[("app", "web")]));
            p
        })
        .collect();
    let plan = plan(&snapshot(ps, vec![pool_with("default", vec![zones3()])]));
    let mut per_zone: BTreeMap<String, usize> = BTreeMap::new();
    for i in 0..4 {
        *per_zone
            .entry(zone_of(&plan, &format!("default/web-{i}")).expect("single zone"))
            .or_default() += 1;
    }
    let mut counts: Vec<usize> = per_zone.values().copied().collect();
    counts.sort();
    assert_eq!(counts, vec![1, 1, 2], "{per_zone:?}");
}

#[test]
fn hostname_anti_affinity_puts_three_pods_on_three_nodes() {
    let ps: Vec<Pod> = (0..3)
        .map(|i| {
            let mut p = labelled(pod(&format!("db-{i}"), 500, 512), &[("app", "db")]);
            p.anti_affinity.push(term(&[("app", "db")], HOSTNAME));
            p
        })
        .collect();
    let plan = plan(&snapshot(ps, vec![pool("default")]));
    assert_eq!(plan.nodeclaims.len(), 3);
    assert!(plan.nodeclaims.iter().all(|n| n.pods.len() == 1));
}

#[test]
fn daemonset_host_port_blocks_a_pod_on_the_same_port() {
    let mut ds = daemonset("proxy", 50, 50);
    ds.pod.host_ports.push(HostPort {
        port: 8080,
        protocol: "TCP".into(),
        ip: String::new(),
    });
    let mut p = pod("web-0", 100, 100);
    p.host_ports.push(HostPort {
        port: 8080,
        protocol: "TCP".into(),
        ip: String::new(),
    });
    let mut snap = snapshot(vec![p], vec![pool("default")]);
    snap.daemonsets.push(ds);
    let plan = plan(&snap);
    assert!(plan.nodeclaims.is_empty());
    assert_eq!(plan.unschedulable.len(), 1);
    assert!(
        plan.unschedulable[0].reason.contains("8080"),
        "{}",
        plan.unschedulable[0].reason
    );
}

#[test]
fn host_ports_spread_pods_over_nodes() {
    let ps: Vec<Pod> = (0..2)
        .map(|i| {
            let mut p = pod(&format!("hp-{i}"), 100, 100);
            p.host_ports.push(HostPort {
                port: 9000,
                protocol: "TCP".into(),
                ip: String::new(),
            });
            p
        })
        .collect();
    let plan = plan(&snapshot(ps, vec![pool("default")]));
    assert_eq!(plan.nodeclaims.len(), 2);
}

#[test]
fn cpu_limit_three_admits_one_of_two_anti_affine_pods() {
    let ps: Vec<Pod> = (0..2)
        .map(|i| {
            let mut p = labelled(pod(&format!("big-{i}"), 1500, 512), &[("app", "big")]);
            p.anti_affinity.push(term(&[("app", "big")], HOSTNAME));
            p
        })
        .collect();
    let mut np = pool("default");
    np.limits = Some(Resources::new(3000, 0));
    let plan = plan(&snapshot(ps, vec![np]));
    assert_eq!(placed_count(&plan), 1);
    assert_eq!(plan.unschedulable.len(), 1);
    assert!(
        plan.unschedulable[0]
            .reason
            .contains("would exceed its limits (cpu=3) with the NodeClaims this plan makes"),
        "the limit stops it, not the anti-affinity: {}",
        plan.unschedulable[0].reason
    );
}

#[test]
fn node_limit_caps_new_nodeclaims() {
    let ps: Vec<Pod> = (0..3)
        .map(|i| {
            let mut p = labelled(pod(&format!("x-{i}"), 100, 100), &[("app", "x")]);
            p.anti_affinity.push(term(&[("app", "x")], HOSTNAME));
            p
        })
        .collect();
    let mut np = pool("default");
    let mut limits = Resources::default();
    limits.extended.insert("nodes".into(), 2);
    np.limits = Some(limits);
    let plan = plan(&snapshot(ps, vec![np]));
    assert_eq!(plan.nodeclaims.len(), 2);
    assert_eq!(plan.unschedulable.len(), 1);
}

#[test]
fn heavier_nodepool_wins() {
    let mut light = pool("light");
    light.weight = 20;
    let mut heavy = pool("heavy");
    heavy.weight = 100;
    let plan = plan(&snapshot(pods("p", 3, 500, 512), vec![light, heavy]));
    assert!(!plan.nodeclaims.is_empty());
    assert!(plan.nodeclaims.iter().all(|n| n.nodepool == "heavy"));
}

#[test]
fn custom_label_not_defined_by_the_nodepool_is_unschedulable() {
    let mut p = pod("picky", 100, 100);
    p.node_selector.insert("team".into(), "payments".into());
    let first = plan(&snapshot(vec![p.clone()], vec![pool("default")]));
    assert_eq!(first.unschedulable.len(), 1);
    assert!(
        first.unschedulable[0].reason.contains("team"),
        "{}",
        first.unschedulable[0].reason
    );
    // The same label defined on the pool's template makes it schedulable.
    let mut np = pool("default");
    np.labels.insert("team".into(), "payments".into());
    let plan = plan(&snapshot(vec![p], vec![np]));
    assert!(plan.unschedulable.is_empty());
    assert_eq!(plan.nodeclaims[0].labels["team"], "payments");
}

#[test]
fn node_selector_on_arch_restricts_types() {
    let mut p = pod("arm", 1000, 1024);
    p.node_selector.insert(ARCH.into(), "arm64".into());
    let plan = plan(&snapshot(vec![p], vec![pool("default")]));
    let nc = &plan.nodeclaims[0];
    let catalog = fleetwright_core::Catalog::embedded();
    let types = catalog.instance_types(&Default::default());
    for name in &nc.instance_types {
        let t = types.iter().find(|t| &t.name == name).unwrap();
        assert_eq!(
            t.requirements.single_valued_labels()[ARCH],
            "arm64",
            "{name}"
        );
    }
}

#[test]
fn required_node_affinity_terms_are_ored() {
    let mut p = pod("either", 500, 512);
    let mut impossible = Requirements::new();
    impossible.add(req(INSTANCE_FAMILY, Operator::In, &["no-such-family"]));
    let mut possible = Requirements::new();
    possible.add(req(INSTANCE_FAMILY, Operator::In, &["m5"]));
    p.required_terms = vec![impossible, possible];
    let plan = plan(&snapshot(vec![p], vec![pool("default")]));
    assert!(plan.unschedulable.is_empty());
    assert!(plan.nodeclaims[0]
        .instance_types
        .iter()
        .all(|t| t.starts_with("m5.")));
}

#[test]
fn preferred_node_affinity_is_honoured_then_relaxed() {
    let mut p = pod("prefers", 500, 512);
    let mut pref = Requirements::new();
    pref.add(req(INSTANCE_FAMILY, Operator::In, &["c6i"]));
    p.preferred_terms = vec![(50, pref)];
    let plan1 = plan(&snapshot(vec![p.clone()], vec![pool("default")]));
    assert!(plan1.nodeclaims[0]
        .instance_types
        .iter()
        .all(|t| t.starts_with("c6i.")));
    // The pool forbids c6i: the preference is dropped and the pod still lands.
    let np = pool_with(
        "default",
        vec![req(INSTANCE_FAMILY, Operator::NotIn, &["c6i"])],
    );
    let plan2 = plan(&snapshot(vec![p], vec![np]));
    assert!(plan2.unschedulable.is_empty());
    assert!(plan2.nodeclaims[0]
        .instance_types
        .iter()
        .all(|t| !t.starts_with("c6i.")));
}

/// A preferred anti-affinity over zones spreads the pods while zones last, and then the rest
/// still land: read as required on the strictest rung, it binds the pod that has it, and never
/// keeps the next pod out of a zone once the pods that prefer to stand apart are placed.
#[test]
fn preferred_zone_anti_affinity_spreads_then_places_the_rest() {
    let ps: Vec<Pod> = (0..3)
        .map(|i| {
            let mut p = labelled(pod(&format!("api-{i}"), 1000, 2048), &[("app", "api")]);
            p.preferred_anti_affinity
                .push((100, term(&[("app", "api")], ZONE)));
            p
        })
        .collect();
    let two_zones = pool_with(
        "default",
        vec![req(ZONE, Operator::In, &["us-east-1a", "us-east-1b"])],
    );
    let plan = plan(&snapshot(ps, vec![two_zones]));
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    let zones: BTreeSet<&String> = plan.nodeclaims.iter().flat_map(|n| &n.zones).collect();
    assert_eq!(zones.len(), 2, "the first two stand apart: {zones:?}");
}

#[test]
fn pool_taints_need_tolerations_but_startup_taints_do_not() {
    let taint = Taint {
        key: "dedicated".into(),
        value: "gpu".into(),
        effect: TaintEffect::NoSchedule,
    };
    let mut np = pool("tainted");
    np.taints.push(taint.clone());
    np.startup_taints.push(Taint {
        key: "cni-not-ready".into(),
        value: String::new(),
        effect: TaintEffect::NoSchedule,
    });
    let plain = pod("plain", 100, 100);
    let plan1 = plan(&snapshot(vec![plain.clone()], vec![np.clone()]));
    assert_eq!(plan1.unschedulable.len(), 1);
    assert!(
        plan1.unschedulable[0]
            .reason
            .contains("dedicated=gpu:NoSchedule"),
        "{}",
        plan1.unschedulable[0].reason
    );
    let mut tolerant = plain;
    tolerant.tolerations.push(Toleration {
        key: Some("dedicated".into()),
        value: "gpu".into(),
        ..Default::default()
    });
    let plan2 = plan(&snapshot(vec![tolerant], vec![np]));
    assert!(plan2.unschedulable.is_empty());
}

#[test]
fn zone_pod_affinity_colocates_in_one_zone() {
    let ps: Vec<Pod> = (0..6)
        .map(|i| {
            let mut p = labelled(pod(&format!("cache-{i}"), 2000, 2048), &[("app", "cache")]);
            p.affinity.push(term(&[("app", "cache")], ZONE));
            p
        })
        .collect();
    let plan = plan(&snapshot(ps, vec![pool("default")]));
    let zones: BTreeSet<String> = plan
        .nodeclaims
        .iter()
        .flat_map(|n| n.zones.clone())
        .collect();
    assert_eq!(zones.len(), 1, "{zones:?}");
    assert_eq!(placed_count(&plan), 6);
}

#[test]
fn pod_affinity_to_absent_pods_is_unschedulable() {
    let mut p = labelled(pod("follower", 100, 100), &[("app", "follower")]);
    p.affinity.push(term(&[("app", "leader")], HOSTNAME));
    let plan = plan(&snapshot(vec![p], vec![pool("default")]));
    assert_eq!(plan.unschedulable.len(), 1);
    assert!(
        plan.unschedulable[0].reason.contains("affinity"),
        "{}",
        plan.unschedulable[0].reason
    );
}

#[test]
fn pod_affinity_follows_a_bound_pod_to_its_node() {
    let mut leader = labelled(pod("leader", 100, 100), &[("app", "leader")]);
    leader.node_name = Some("n1".into());
    let mut follower = pod("follower", 100, 100);
    follower.affinity.push(term(&[("app", "leader")], HOSTNAME));
    let mut snap = snapshot(vec![leader, follower], vec![pool("default")]);
    snap.nodes
        .push(node("n1", "us-east-1a", "m5.large", 1930, 6903));
    snap.nodes
        .push(node("n2", "us-east-1b", "m5.large", 1930, 6903));
    let plan = plan(&snap);
    assert_eq!(
        plan.existing,
        vec![fleetwright_core::plan::ExistingPlacement {
            pod: "default/follower".into(),
            node: "n1".into()
        }]
    );
}

#[test]
fn inverse_anti_affinity_keeps_pods_off_a_repelling_pod_node() {
    let mut guard = labelled(pod("guard", 100, 100), &[("app", "guard")]);
    guard.node_name = Some("n1".into());
    guard
        .anti_affinity
        .push(term(&[("app", "noisy")], HOSTNAME));
    let noisy = labelled(pod("noisy", 100, 100), &[("app", "noisy")]);
    let quiet = labelled(pod("quiet", 100, 100), &[("app", "quiet")]);
    let mut snap = snapshot(vec![guard, noisy, quiet], vec![pool("default")]);
    snap.nodes
        .push(node("n1", "us-east-1a", "m5.large", 1930, 6903));
    let plan = plan(&snap);
    assert!(plan
        .existing
        .iter()
        .any(|e| e.pod == "default/quiet" && e.node == "n1"));
    assert!(plan.existing.iter().all(|e| e.pod != "default/noisy"));
    assert_eq!(plan.nodeclaims.len(), 1);
    assert_eq!(plan.nodeclaims[0].pods, vec!["default/noisy"]);
}

#[test]
fn hostname_spread_max_skew_two_packs_two_per_node() {
    let ps: Vec<Pod> = (0..6)
        .map(|i| {
            let mut p = labelled(pod(&format!("s-{i}"), 100, 100), &[("app", "s")]);
            p.spread.push(spread(HOSTNAME, 2, &[("app", "s")]));
            p
        })
        .collect();
    let plan = plan(&snapshot(ps, vec![pool("default")]));
    assert_eq!(plan.nodeclaims.len(), 3);
}

/// Pods per zone of a plan's new NodeClaims and the number left unschedulable.
fn zones_and_unschedulable(plan: &fleetwright_core::Plan) -> (BTreeMap<String, usize>, usize) {
    let mut per_zone: BTreeMap<String, usize> = BTreeMap::new();
    for n in &plan.nodeclaims {
        assert_eq!(n.zones.len(), 1, "a spread pins its node to one zone");
        *per_zone.entry(n.zones[0].clone()).or_default() += n.pods.len();
    }
    (per_zone, plan.unschedulable.len())
}

/// `nodeTaintsPolicy`: a zone only a tainted NodePool offers is a domain of the spread under
/// the default `Ignore` (it stays empty, so the spread stops at one pod per usable zone, as
/// Karpenter and kube-scheduler do), and no domain under `Honor`.
#[test]
fn a_spread_honouring_taints_ignores_a_zone_only_a_tainted_pool_offers() {
    let zones_ab = req(ZONE, Operator::In, &["us-east-1a", "us-east-1b"]);
    let mut gpu = pool_with("gpu", vec![zones3()]);
    gpu.taints.push(Taint {
        key: "dedicated".into(),
        value: "gpu".into(),
        effect: TaintEffect::NoSchedule,
    });
    let run = |policy: InclusionPolicy| {
        let ps: Vec<Pod> = (0..4)
            .map(|i| {
                let mut p = labelled(pod(&format!("web-{i}"), 500, 512), &[("app", "web")]);
                let mut s = spread(ZONE, 1, &[("app", "web")]);
                s.node_taints_policy = policy;
                p.spread.push(s);
                p
            })
            .collect();
        let pools = vec![pool_with("default", vec![zones_ab.clone()]), gpu.clone()];
        zones_and_unschedulable(&plan(&snapshot(ps, pools)))
    };
    let (honoured, pending) = run(InclusionPolicy::Honor);
    assert_eq!(pending, 0, "{honoured:?}");
    assert_eq!(honoured.values().copied().collect::<Vec<_>>(), vec![2, 2]);
    let (ignored, pending) = run(InclusionPolicy::Ignore);
    assert_eq!(pending, 2, "{ignored:?}");
    assert_eq!(ignored.values().copied().collect::<Vec<_>>(), vec![1, 1]);
}

/// `nodeAffinityPolicy`: pods the spread selects on a node the owner's nodeSelector does not
/// match are not counted under the default `Honor` (the new pods spread evenly), and are under
/// `Ignore` (their zone is full already, so the new pods avoid it).
#[test]
fn a_spread_counts_only_pods_on_nodes_its_node_selector_matches() {
    let mut other = node("other-1", "us-east-1a", "m5.xlarge", 4000, 16384);
    other.labels.insert("team".into(), "other".into());
    let bound: Vec<Pod> = (0..3)
        .map(|i| {
            let mut p = labelled(pod(&format!("old-{i}"), 100, 128), &[("app", "web")]);
            p.node_name = Some("other-1".into());
            p
        })
        .collect();
    let run = |policy: InclusionPolicy| {
        let mut ps = bound.clone();
        ps.extend((0..3).map(|i| {
            let mut p = labelled(pod(&format!("web-{i}"), 500, 512), &[("app", "web")]);
            p.node_selector.insert("team".into(), "mine".into());
            let mut s = spread(ZONE, 1, &[("app", "web")]);
            s.node_affinity_policy = policy;
            p.spread.push(s);
            p
        }));
        let pools = vec![pool_with(
            "mine",
            vec![zones3(), req("team", Operator::In, &["mine"])],
        )];
        let mut snap = snapshot(ps, pools);
        snap.nodes.push(other.clone());
        zones_and_unschedulable(&plan(&snap))
    };
    let (honoured, pending) = run(InclusionPolicy::Honor);
    assert_eq!(pending, 0);
    assert_eq!(
        honoured.values().copied().collect::<Vec<_>>(),
        vec![1, 1, 1]
    );
    let (ignored, pending) = run(InclusionPolicy::Ignore);
    assert_eq!(pending, 0);
    assert_eq!(ignored.get("us-east-1a"), None, "{ignored:?}");
    assert_eq!(ignored.values().sum::<usize>(), 3);
}

#[test]
fn capacity_type_spread_uses_both_capacity_types() {
    let ps: Vec<Pod> = (0..4)
        .map(|i| {
            let mut p = labelled(pod(&format!("ct-{i}"), 1000, 1024), &[("app", "ct")]);
            p.spread.push(spread(CAPACITY_TYPE, 1, &[("app", "ct")]));
            p
        })
        .collect();
    let plan = plan(&snapshot(ps, vec![pool("default")]));
    let mut per_ct: BTreeMap<String, usize> = BTreeMap::new();
    for n in &plan.nodeclaims {
        assert_eq!(n.capacity_types.len(), 1);
        *per_ct.entry(n.capacity_types[0].clone()).or_default() += n.pods.len();
    }
    assert_eq!(per_ct.get("spot"), Some(&2), "{per_ct:?}");
    assert_eq!(per_ct.get("on-demand"), Some(&2), "{per_ct:?}");
}

#[test]
fn schedule_anyway_spread_is_relaxed_when_it_cannot_hold() {
    // Only one zone is allowed by the pool, but the spread wants 3 zones with maxSkew 1.
    let np = pool_with("default", vec![req(ZONE, Operator::In, &["us-east-1a"])]);
    let ps: Vec<Pod> = (0..3)
        .map(|i| {
            let mut p = labelled(pod(&format!("soft-{i}"), 500, 512), &[("app", "soft")]);
            let mut s = spread(ZONE, 1, &[("app", "soft")]);
            s.hard = false;
            p.spread.push(s);
            p
        })
        .collect();
    let soft = plan(&snapshot(ps.clone(), vec![np.clone()]));
    assert!(soft.unschedulable.is_empty());
    // The same constraint as DoNotSchedule with minDomains 3 cannot be met beyond one pod.
    let hard: Vec<Pod> = ps
        .into_iter()
        .map(|mut p| {
            p.spread[0].hard = true;
            p.spread[0].min_domains = Some(3);
            p
        })
        .collect();
    let plan = plan(&snapshot(hard, vec![np]));
    assert_eq!(placed_count(&plan), 1);
    assert_eq!(plan.unschedulable.len(), 2);
}

#[test]
fn daemonset_overhead_counts_only_daemonsets_that_land() {
    // A 1.9 CPU pod fits m5.large (1930m allocatable) only if no DaemonSet takes CPU there.
    let np = pool_with(
        "default",
        vec![req(INSTANCE_TYPE, Operator::In, &["m5.large", "m5.xlarge"])],
    );
    let p = pod("tight", 1900, 1024);
    let mut arm_only = daemonset("arm-agent", 200, 100);
    arm_only
        .pod
        .node_selector
        .insert(ARCH.into(), "arm64".into());
    let mut snap = snapshot(vec![p.clone()], vec![np.clone()]);
    snap.daemonsets.push(arm_only);
    assert_eq!(plan(&snap).nodeclaims[0].instance_types[0], "m5.large");
    let mut snap = snapshot(vec![p], vec![np]);
    snap.daemonsets.push(daemonset("logger", 200, 100));
    let plan = plan(&snap);
    assert_eq!(plan.nodeclaims[0].instance_types, vec!["m5.xlarge"]);
    assert_eq!(plan.nodeclaims[0].requests.cpu, 2100);
}

#[test]
fn bound_volume_zone_pins_the_node_zone() {
    let mut p = pod("stateful", 500, 512);
    p.volume_zones = Some(BTreeSet::from(["us-east-1c".to_string()]));
    let plan = plan(&snapshot(vec![p], vec![pool("default")]));
    assert_eq!(plan.nodeclaims[0].zones, vec!["us-east-1c"]);
}

#[test]
fn existing_nodes_are_used_before_new_ones_then_inflight_claims() {
    let mut snap = snapshot(pods("fill", 3, 500, 512), vec![pool("default")]);
    snap.nodes
        .push(node("n1", "us-east-1a", "m5.large", 1930, 6903));
    let plan1 = plan(&snap);
    assert_eq!(plan1.existing.len(), 3);
    assert!(plan1.nodeclaims.is_empty());
    // A launched-but-unregistered claim absorbs pods too.
    let mut snap = snapshot(pods("fill", 3, 500, 512), vec![pool("default")]);
    let mut claim = NodeClaim {
        name: "default-abc".into(),
        nodepool: "default".into(),
        ..Default::default()
    };
    claim
        .requirements
        .add(req(INSTANCE_TYPE, Operator::In, &["m5.xlarge"]));
    claim.labels.insert(NODEPOOL.into(), "default".into());
    snap.nodeclaims.push(claim);
    let plan2 = plan(&snap);
    assert_eq!(plan2.existing.len(), 3);
    assert!(plan2.existing.iter().all(|e| e.node == "default-abc"));
}

#[test]
fn cordoned_and_tainted_nodes_are_skipped() {
    let mut snap = snapshot(pods("p", 1, 100, 100), vec![pool("default")]);
    let mut cordoned = node("n1", "us-east-1a", "m5.large", 1930, 6903);
    cordoned.unschedulable = true;
    let mut tainted = node("n2", "us-east-1a", "m5.large", 1930, 6903);
    tainted.taints.push(Taint {
        key: "dedicated".into(),
        value: "x".into(),
        effect: TaintEffect::NoSchedule,
    });
    snap.nodes.extend([cordoned, tainted]);
    let plan = plan(&snap);
    assert!(plan.existing.is_empty());
    assert_eq!(plan.nodeclaims.len(), 1);
}

#[test]
fn gpu_requests_pick_gpu_types() {
    let mut p = pod("train", 1000, 4096);
    p.requests.set(RESOURCE_NVIDIA_GPU, 1);
    let plan = plan(&snapshot(vec![p], vec![pool("default")]));
    let nc = &plan.nodeclaims[0];
    assert!(
        nc.instance_types
            .iter()
            .all(|t| t.starts_with('g') || t.starts_with('p')),
        "{:?}",
        nc.instance_types
    );
}

#[test]
fn pod_eni_request_against_types_without_trunking_names_resource_and_types() {
    let np = pool_with(
        "default",
        vec![req(INSTANCE_TYPE, Operator::In, &["t3.large", "t3.xlarge"])],
    );
    let mut p = pod("sgp", 100, 100);
    p.requests.set(RESOURCE_POD_ENI, 1);
    let plan = plan(&snapshot(vec![p], vec![np]));
    let reason = &plan.unschedulable[0].reason;
    assert!(
        reason.contains("requests vpc.amazonaws.com/pod-eni=1"),
        "{reason}"
    );
    assert!(
        reason.contains("t3.large, t3.xlarge") && reason.contains("provide none"),
        "{reason}"
    );
}

#[test]
fn too_large_pod_reports_the_largest_type() {
    let np = pool_with("default", vec![req(INSTANCE_FAMILY, Operator::In, &["m5"])]);
    let plan = plan(&snapshot(vec![pod("huge", 200_000, 1024)], vec![np]));
    let reason = &plan.unschedulable[0].reason;
    assert!(reason.starts_with("requests cpu=200;"), "{reason}");
    assert!(
        reason.contains("m5.24xlarge") || reason.contains("m5.metal"),
        "{reason}"
    );
}

#[test]
fn min_values_keeps_enough_families_open() {
    let np = pool_with(
        "default",
        vec![req(INSTANCE_FAMILY, Operator::Exists, &[]).with_min_values(Some(5))],
    );
    let plan = plan(&snapshot(vec![pod("p", 500, 512)], vec![np]));
    let families: BTreeSet<&str> = plan.nodeclaims[0]
        .instance_types
        .iter()
        .map(|t| t.split('.').next().unwrap())
        .collect();
    assert!(families.len() >= 5, "{families:?}");
}

/// Karpenter counts every value a type offers for `minValues`: each type is offered as spot and
/// on-demand, so `capacity-type In [spot, on-demand]` with `minValues: 2` is met by any of them.
#[test]
fn min_values_count_every_value_a_type_offers() {
    for key in [CAPACITY_TYPE, ZONE] {
        let values: &[&str] = match key {
            CAPACITY_TYPE => &["spot", "on-demand"],
            _ => &["us-east-1a", "us-east-1b"],
        };
        let np = pool_with(
            "default",
            vec![req(key, Operator::In, values).with_min_values(Some(2))],
        );
        let plan = plan(&snapshot(vec![pod("p", 500, 512)], vec![np]));
        assert!(
            plan.unschedulable.is_empty(),
            "{key}: {:?}",
            plan.unschedulable
        );
        assert_eq!(plan.nodeclaims.len(), 1, "{key}");
    }
}

#[test]
fn options_are_cheapest_first_and_capped_at_sixty() {
    let plan = plan(&snapshot(vec![pod("p", 100, 100)], vec![pool("default")]));
    let nc = &plan.nodeclaims[0];
    assert_eq!(nc.instance_types.len(), 60);
    assert!(nc.price > 0.0);
    assert!(plan.cost.lower_bound <= plan.cost.hourly);
}

#[test]
fn init_containers_and_overhead_raise_requests() {
    let reqs = ContainerRequests {
        containers: vec![Resources::new(100, 100 * MIB)],
        init_containers: vec![(Resources::new(3000, 100 * MIB), false)],
        overhead: Some(Resources::new(250, 0)),
    };
    let mut p = pod("init", 0, 0);
    p.requests = reqs.effective();
    assert_eq!(p.requests.cpu, 3250);
    let np = pool_with(
        "default",
        vec![req(INSTANCE_TYPE, Operator::In, &["m5.large", "m5.xlarge"])],
    );
    let plan = plan(&snapshot(vec![p], vec![np]));
    assert_eq!(plan.nodeclaims[0].instance_types, vec!["m5.xlarge"]);
}

#[test]
fn requirement_gt_lt_on_instance_cpu() {
    let mut p = pod("mid", 100, 100);
    let mut term_reqs = Requirements::new();
    term_reqs.add(req(INSTANCE_CPU, Operator::Gt, &["7"]));
    term_reqs.add(req(INSTANCE_CPU, Operator::Lt, &["17"]));
    p.required_terms = vec![term_reqs];
    let plan = plan(&snapshot(vec![p], vec![pool("default")]));
    let types = fleetwright_core::Catalog::embedded().instance_types(&Default::default());
    for name in &plan.nodeclaims[0].instance_types {
        let cpus: i64 = types.iter().find(|t| &t.name == name).unwrap().capacity.cpu / 1000;
        assert!((8..=16).contains(&cpus), "{name} has {cpus}");
    }
}

#[test]
fn karpenter_benchmark_shape_keeps_one_anti_affine_pod_per_node() {
    // 1,000 pods, a fifth of them mutually anti-affine on hostname: at least 200 nodes, and no
    // node (even after re-packing) holds two of them.
    let snap = Snapshot {
        pods: fleetwright_core::synthetic::benchmark_pods(1000, 42),
        nodepools: vec![fleetwright_core::synthetic::default_pool("default")],
        ..Default::default()
    };
    let plan = fleetwright_core::schedule(
        &snap,
        &fleetwright_core::synthetic::benchmark_catalog(400),
        &Default::default(),
    );
    assert!(plan.unschedulable.is_empty());
    assert!(plan.nodeclaims.len() >= 200, "{}", plan.nodeclaims.len());
    let anti: BTreeSet<String> = snap
        .pods
        .iter()
        .filter(|p| !p.anti_affinity.is_empty())
        .map(|p| p.key())
        .collect();
    assert_eq!(anti.len(), 200);
    for nc in &plan.nodeclaims {
        assert!(
            nc.pods.iter().filter(|p| anti.contains(*p)).count() <= 1,
            "{:?}",
            nc.pods
        );
    }
}

#[test]
fn gt_lt_requirements_are_written_back_as_gt_and_lt() {
    let np = pool_with(
        "default",
        vec![
            req(INSTANCE_CPU, Operator::Gt, &["3"]),
            req(INSTANCE_CPU, Operator::Lt, &["9"]),
        ],
    );
    let plan = plan(&snapshot(vec![pod("p", 100, 100)], vec![np]));
    let cpu: Vec<_> = plan.nodeclaims[0]
        .requirements
        .iter()
        .filter(|r| r.key == INSTANCE_CPU)
        .collect();
    let ops: Vec<(&str, &[String])> = cpu
        .iter()
        .map(|r| (r.operator.as_str(), r.values.as_slice()))
        .collect();
    assert_eq!(
        ops,
        vec![
            ("Gt", &["3".to_string()][..]),
            ("Lt", &["9".to_string()][..])
        ]
    );
}

/// An initialized node that went NotReady (its `node.kubernetes.io/not-ready` taint) holds no new
/// pods, so capacity is launched for them; a node still starting (its NodeClaim not initialized)
/// is expected to lose that taint, and pods are counted on it.
#[test]
fn not_ready_taints_block_initialized_nodes_only() {
    use fleetwright_core::model::{NodeClaim, Taint, TaintEffect};
    let not_ready = Taint {
        key: "node.kubernetes.io/not-ready".into(),
        value: String::new(),
        effect: TaintEffect::NoSchedule,
    };
    let with_claim = |initialized: bool| {
        let mut snap = snapshot(vec![pod("web", 500, 512)], vec![pool("default")]);
        let mut n = node("n1", "us-east-1a", "m5.large", 1930, 6903);
        n.taints.push(not_ready.clone());
        snap.nodes.push(n);
        snap.nodeclaims.push(NodeClaim {
            name: "default-n1".into(),
            nodepool: "default".into(),
            node_name: Some("n1".into()),
            launched: true,
            registered: true,
            initialized,
            ..Default::default()
        });
        plan(&snap)
    };
    let starting = with_claim(false);
    assert_eq!(starting.existing.len(), 1, "{:?}", starting.nodeclaims);
    assert!(starting.nodeclaims.is_empty());
    let unhealthy = with_claim(true);
    assert!(unhealthy.existing.is_empty(), "{:?}", unhealthy.existing);
    assert_eq!(unhealthy.nodeclaims.len(), 1);
}

/// A node that registered and never initialized does not hold pending pods for good: within
/// the initialization grace its not-ready taint is expected to go and pods are counted on it;
/// past the grace the taint counts, and the pods get a new NodeClaim. Not Ready is enough
/// (the node lifecycle controller's taint may lag).
#[test]
fn a_node_overdue_to_initialize_holds_no_pending_pods() {
    use fleetwright_core::model::{NodeClaim, TaintEffect};
    use fleetwright_core::scheduler::INITIALIZATION_GRACE;
    let registered = 1_800_000_000;
    let plan_at = |now: i64, tainted: bool| {
        let mut snap = snapshot(vec![pod("web", 500, 512)], vec![pool("default")]);
        let mut n = node("n1", "us-east-1a", "m5.large", 1930, 6903);
        n.created = registered;
        n.ready = false;
        if tainted {
            n.taints.push(bare_taint(
                "node.kubernetes.io/not-ready",
                TaintEffect::NoSchedule,
            ));
        }
        snap.nodes.push(n);
        snap.nodeclaims.push(NodeClaim {
            name: "default-n1".into(),
            nodepool: "default".into(),
            node_name: Some("n1".into()),
            launched: true,
            registered: true,
            created: registered - 40,
            ..Default::default()
        });
        fleetwright_core::schedule(
            &snap,
            fleetwright_core::Catalog::embedded(),
            &fleetwright_core::ScheduleOptions {
                now,
                ..Default::default()
            },
        )
    };
    for tainted in [true, false] {
        let starting = plan_at(registered + INITIALIZATION_GRACE - 1, tainted);
        assert_eq!(starting.existing.len(), 1, "{:?}", starting.nodeclaims);
        assert!(starting.nodeclaims.is_empty());
        let overdue = plan_at(registered + INITIALIZATION_GRACE, tainted);
        assert!(overdue.existing.is_empty(), "{:?}", overdue.existing);
        assert_eq!(overdue.nodeclaims.len(), 1, "tainted: {tainted}");
    }
}

/// A node that joined before the tick registered its NodeClaim is one place, not two: its
/// launched, unregistered claim (matched by provider id) is not counted again as in-flight
/// capacity. Counting both let pods "fit" on room that does not exist, and they waited a tick.
#[test]
fn a_joined_node_and_its_unregistered_claim_count_once() {
    use fleetwright_core::model::{NodeClaim, TaintEffect};
    let provider = "aws:///us-east-1a/i-0000000000000001";
    let mut snap = snapshot(pods("web", 2, 1200, 512), vec![pool("default")]);
    let mut n = node("n1", "us-east-1a", "m5.large", 1930, 6903);
    n.provider_id = Some(provider.into());
    n.taints.push(bare_taint(
        "karpenter.sh/unregistered",
        TaintEffect::NoExecute,
    ));
    snap.nodes.push(n);
    snap.nodeclaims.push(NodeClaim {
        name: "default-abcde".into(),
        nodepool: "default".into(),
        provider_id: Some(provider.into()),
        requirements: Requirements::from_labels(&BTreeMap::from([(
            INSTANCE_TYPE.to_string(),
            "m5.large".to_string(),
        )])),
        launched: true,
        ..Default::default()
    });
    let plan = plan(&snap);
    // Two 1.2-CPU pods: one fits the joined node; the other needs a new one.
    assert_eq!(plan.existing.len(), 1, "{:?}", plan.existing);
    assert_eq!(plan.nodeclaims.len(), 1, "{:?}", plan.nodeclaims);
}

/// Found against a real kube-scheduler: a node group's node (no `karpenter.sh/*` labels) had
/// room, and the plan put a pod selecting `karpenter.sh/nodepool` (or a capacity type) on it, so
/// nothing was launched while kube-scheduler, matching labels, left the pod pending. An existing
/// node takes a pod only if its labels satisfy the pod's selectors, well-known keys included.
#[test]
fn an_existing_node_without_a_selected_well_known_label_takes_no_such_pod() {
    for (key, value) in [(NODEPOOL, "default"), (CAPACITY_TYPE, "spot")] {
        let mut p = pod("selective", 1000, 512);
        p.node_selector.insert(key.to_string(), value.to_string());
        let mut snap = snapshot(vec![p], vec![pool("default")]);
        let mut group_node = node("ng-1", "us-east-1a", "m5.2xlarge", 8000, 32 * 1024);
        group_node.labels.remove(CAPACITY_TYPE);
        snap.nodes.push(group_node);
        let planned = plan(&snap);
        assert!(planned.existing.is_empty(), "{key}: {:?}", planned.existing);
        assert_eq!(planned.nodeclaims.len(), 1, "{key}");
        // With the label, the node takes it.
        let mut labelled = snap.clone();
        labelled.nodes[0]
            .labels
            .insert(key.to_string(), value.to_string());
        assert_eq!(plan(&labelled).existing.len(), 1, "{key}");
    }
}

/// A taint with a key and an effect, and no value.
fn bare_taint(key: &str, effect: TaintEffect) -> Taint {
    Taint {
        key: key.into(),
        value: String::new(),
        effect,
    }
}

/// Pods that must stand apart (hostname anti-affinity) open their own nodes, and the other pods
/// fill the room those nodes have left. The 28-pod zone-spread mix (eight 2-vCPU anti-affine
/// pods, twenty small ones) is planned on nine 4-vCPU nodes at $0.48/h, not on one 16-vCPU node
/// beside seven half-empty ones at $0.62/h; Karpenter's provisioner packs it at $0.49/h.
#[test]
fn pods_that_stand_apart_share_their_nodes_with_the_others() {
    let snap = fleetwright_core::synthetic::cluster_mix("spread", 30, 42).expect("a mix");
    let plan = plan(&snap);
    assert_eq!(placed_count(&plan), snap.pods.len());
    assert!(
        plan.cost.hourly <= 1.25 * plan.cost.lower_bound,
        "{:?}: {:#?}",
        plan.cost,
        plan.nodeclaims
    );
}

/// A pod whose node selector names a host can only go to that node, as in Karpenter, which
/// gives every new NodeClaim a placeholder hostname: a node launched for it would never take it,
/// and the next plan would launch another.
#[test]
fn a_pod_that_names_its_host_goes_there_or_stays_pending_and_launches_nothing() {
    let mut pinned = pod("pinned", 500, 512);
    pinned
        .node_selector
        .insert(HOSTNAME.into(), "ip-10-0-1-1.ec2.internal".into());
    let mut snap = snapshot(vec![pinned.clone()], vec![pool("default")]);
    let plan1 = plan(&snap);
    assert!(plan1.nodeclaims.is_empty(), "{:?}", plan1.nodeclaims);
    assert_eq!(plan1.unschedulable.len(), 1);
    assert!(
        plan1.unschedulable[0]
            .reason
            .contains("kubernetes.io/hostname"),
        "{}",
        plan1.unschedulable[0].reason
    );
    snap.nodes.push(node(
        "ip-10-0-1-1.ec2.internal",
        "us-east-1a",
        "m5.large",
        1930,
        7000,
    ));
    let plan2 = plan(&snap);
    assert!(plan2.nodeclaims.is_empty() && plan2.unschedulable.is_empty());
    assert_eq!(plan2.existing.len(), 1);
}
