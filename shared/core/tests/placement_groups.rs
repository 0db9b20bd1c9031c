//! Placement groups in the scheduler, as Karpenter resolves them: every instance type of a
//! class in a placement group carries the group's id, and a partition group's partitions 1 to
//! N, as requirements, so a pod can select a partition and a topology spread over
//! `karpenter.k8s.aws/placement-group-partition` has those partitions as its domains. A class
//! with no placement group offers no partition.

mod common;

use std::collections::BTreeMap;

use common::*;
use fleetwright_core::catalog::{NodeClassSettings, PlacementGroup};
use fleetwright_core::labels::*;
use fleetwright_core::model::*;
use fleetwright_core::{Catalog, Plan};

fn in_group(pods: Vec<Pod>, partitions: u32) -> Snapshot {
    let mut snap = snapshot(pods, vec![pool_with("default", vec![zones3()])]);
    snap.node_classes.insert(
        "default".into(),
        NodeClassSettings {
            placement_group: Some(PlacementGroup {
                id: "pg-0123456789abcdef0".into(),
                partitions,
            }),
            ..Default::default()
        },
    );
    snap
}

/// `n` pods of `app: mpi` spreading over partitions (skew 1), one to a node.
fn spreading_pods(n: usize) -> Vec<Pod> {
    (0..n)
        .map(|i| {
            let mut p = labelled(pod(&format!("mpi-{i}"), 500, 512), &[("app", "mpi")]);
            p.spread
                .push(spread(PLACEMENT_GROUP_PARTITION, 1, &[("app", "mpi")]));
            p.anti_affinity.push(term(&[("app", "mpi")], HOSTNAME));
            p
        })
        .collect()
}

/// The partitions a NodeClaim's requirements allow.
fn partitions_of(plan: &Plan, i: usize) -> Vec<String> {
    plan.nodeclaims[i]
        .requirements
        .iter()
        .filter(|r| r.key == PLACEMENT_GROUP_PARTITION && r.operator == "In")
        .flat_map(|r| r.values.clone())
        .collect()
}

#[test]
fn every_type_of_a_class_in_a_partition_group_carries_its_id_and_partitions() {
    let settings = NodeClassSettings {
        placement_group: Some(PlacementGroup {
            id: "pg-1".into(),
            partitions: 3,
        }),
        ..Default::default()
    };
    let types = Catalog::embedded().instance_types(&settings);
    assert!(!types.is_empty());
    for t in &types {
        let id = t
            .requirements
            .get(PLACEMENT_GROUP_ID)
            .expect("the group's id");
        assert_eq!(
            id.values().iter().collect::<Vec<_>>(),
            ["pg-1"],
            "{}",
            t.name
        );
        let parts = t
            .requirements
            .get(PLACEMENT_GROUP_PARTITION)
            .expect("partitions");
        assert_eq!(parts.values().len(), 3, "{}", t.name);
        assert!(["1", "2", "3"].iter().all(|p| parts.has(p)), "{}", t.name);
    }
    let cluster_group = NodeClassSettings {
        placement_group: Some(PlacementGroup {
            id: "pg-2".into(),
            partitions: 0,
        }),
        ..Default::default()
    };
    let t = &Catalog::embedded().instance_types(&cluster_group)[0];
    assert!(t.requirements.get(PLACEMENT_GROUP_ID).is_some());
    assert!(t.requirements.get(PLACEMENT_GROUP_PARTITION).is_none());
    let none = &Catalog::embedded().instance_types(&NodeClassSettings::default())[0];
    assert!(none.requirements.get(PLACEMENT_GROUP_ID).is_none());
}

#[test]
fn a_spread_over_partitions_puts_each_nodeclaim_in_one_partition_evenly() {
    let ps = spreading_pods(6);
    let plan = plan(&in_group(ps, 3));
    assert_eq!(plan.nodeclaims.len(), 6, "{:?}", plan.unschedulable);
    let mut per_partition: BTreeMap<String, usize> = BTreeMap::new();
    for i in 0..plan.nodeclaims.len() {
        let parts = partitions_of(&plan, i);
        assert_eq!(
            parts.len(),
            1,
            "claim {i} is not pinned to one partition: {parts:?}"
        );
        *per_partition.entry(parts[0].clone()).or_default() += 1;
    }
    assert_eq!(
        per_partition,
        BTreeMap::from([("1".into(), 2), ("2".into(), 2), ("3".into(), 2)])
    );
}

#[test]
fn a_pod_selecting_a_partition_gets_a_nodeclaim_in_it_and_waits_for_one_beyond_the_group() {
    let mut p = pod("shard-2", 500, 512);
    p.node_selector
        .insert(PLACEMENT_GROUP_PARTITION.into(), "2".into());
    let selected = plan(&in_group(vec![p.clone()], 3));
    assert_eq!(selected.nodeclaims.len(), 1, "{:?}", selected.unschedulable);
    assert_eq!(partitions_of(&selected, 0), ["2"]);

    p.node_selector
        .insert(PLACEMENT_GROUP_PARTITION.into(), "4".into());
    let beyond = plan(&in_group(vec![p], 3));
    assert!(beyond.nodeclaims.is_empty(), "{:?}", beyond.nodeclaims);
    assert_eq!(beyond.unschedulable.len(), 1);
}

#[test]
fn a_spread_over_partitions_without_a_partition_group_says_so() {
    let ps = spreading_pods(2);
    let pools = vec![pool_with("default", vec![zones3()])];
    let unplaced = plan(&snapshot(ps, pools));
    assert!(unplaced.nodeclaims.is_empty(), "{:?}", unplaced.nodeclaims);
    assert_eq!(unplaced.unschedulable.len(), 2);
    for u in &unplaced.unschedulable {
        assert!(
            u.reason
                .contains(&format!("topology spread over {PLACEMENT_GROUP_PARTITION}")),
            "{}",
            u.reason
        );
    }
}
