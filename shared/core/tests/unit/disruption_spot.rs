//! Karpenter's spot-to-spot consolidation (its `SpotToSpotConsolidation` gate, off unless set):
//! without the gate spot nodes are only deleted, never replaced by spot; with it a single spot
//! node needs 15 cheaper spot types and its replacement launches from the 15 cheapest, while a
//! multi-node command needs no such count.

use super::candidates::Prices;
use super::*;

/// A spot pool of eight families from large to 2xlarge (24 types, all cheaper than an
/// m5.8xlarge) and the m5.8xlarge, holding one spot m5.8xlarge with a small pod.
fn oversized_spot_node(gate: bool) -> Cluster {
    let families = ["m5", "c5", "r5", "m5a", "c5a", "r5a", "m6i", "c6i"];
    let mut types: Vec<String> = families
        .iter()
        .flat_map(|f| ["large", "xlarge", "2xlarge"].map(|s| format!("{f}.{s}")))
        .collect();
    types.push("m5.8xlarge".into());
    let names: Vec<&str> = types.iter().map(String::as_str).collect();
    let mut pool = pool(&names, "spot", "100%");
    pool.spot_to_spot = gate;
    let mut c = Cluster::new(pool);
    c.node("big", "m5.8xlarge", "spot");
    c.pod("small", "big", 250);
    c
}

fn spot_price(t: &str) -> f64 {
    let labels: BTreeMap<String, String> =
        [(INSTANCE_TYPE, t), (ZONE, ZONE_A), (CAPACITY_TYPE, "spot")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    Prices::new(Catalog::embedded())
        .of(&labels)
        .expect("priced")
}

#[test]
fn without_the_gate_a_spot_node_is_not_replaced_by_spot() {
    let plan = oversized_spot_node(false).plan();
    assert!(plan.disruptions.is_empty(), "{plan:?}");
    assert!(
        plan.blocked
            .iter()
            .any(|b| b.node == "big" && b.reason.contains("SpotToSpotConsolidation is disabled")),
        "{:?}",
        plan.blocked
    );
}

#[test]
fn with_the_gate_a_spot_node_is_replaced_from_the_fifteen_cheapest_spot_types() {
    let c = oversized_spot_node(true);
    let plan = c.plan();
    assert_eq!(plan.disruptions.len(), 1, "{plan:?}");
    let r = plan.disruptions[0].replacement.as_ref().expect("a replace");
    assert_eq!(r.instance_types.len(), MIN_SPOT_OPTIONS, "{r:?}");
    let kept = r.instance_types.iter().map(|t| spot_price(t));
    let dearest_kept = kept.fold(0.0, f64::max);
    let pool = &c.snapshot.nodepools[0];
    let allowed = pool.requirements.get(INSTANCE_TYPE).expect("types");
    let dropped = (allowed.values().iter()).filter(|t| !r.instance_types.contains(t));
    for t in dropped {
        assert!(
            spot_price(t) >= dearest_kept,
            "{t} is cheaper than a kept type"
        );
    }
    let requirement = |key: &str| {
        (r.nodeclaim.requirements.iter())
            .find(|q| q.key == key && q.operator == "In")
            .map(|q| q.values.clone())
    };
    assert_eq!(requirement(INSTANCE_TYPE).as_ref(), Some(&r.instance_types));
    assert_eq!(requirement(CAPACITY_TYPE), Some(vec!["spot".to_string()]));
}

/// Two half-used spot m5.xlarge nodes go onto one spot m5.large with the gate, one type being
/// enough for a multi-node command; without it one is deleted, its pod moving to the other.
#[test]
fn spot_nodes_merge_onto_spot_with_fewer_than_fifteen_types_only_with_the_gate() {
    for gate in [true, false] {
        let mut pool = pool(&["m5.large", "m5.xlarge"], "spot", "100%");
        pool.spot_to_spot = gate;
        let mut c = Cluster::new(pool);
        c.node("a", "m5.xlarge", "spot")
            .node("b", "m5.xlarge", "spot");
        c.pod("pa", "a", 250);
        c.pod("pb", "b", 250);
        let plan = c.plan();
        assert_eq!(plan.disruptions.len(), 1, "gate {gate}: {plan:?}");
        let d = &plan.disruptions[0];
        if gate {
            assert_eq!(d.nodes.len(), 2, "{plan:?}");
            let r = d.replacement.as_ref().expect("a replace");
            assert_eq!(r.instance_types, vec!["m5.large".to_string()]);
        } else {
            assert_eq!((d.command, d.nodes.len()), (Command::Delete, 1), "{plan:?}");
        }
    }
}
