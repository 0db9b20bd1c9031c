//! Builders shared by the core's integration tests.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};

use fleetwright_core::catalog::{Catalog, KubeletSettings, NodeClassSettings};
use fleetwright_core::labels::*;
use fleetwright_core::model::*;
use fleetwright_core::requirements::{Operator, Requirement, Requirements};
use fleetwright_core::resources::Resources;
use fleetwright_core::{schedule, Plan, ScheduleOptions};

pub const MIB: i64 = 1 << 20;
pub const GIB: i64 = 1 << 30;

pub fn pod(name: &str, cpu: i64, mem_mib: i64) -> Pod {
    Pod::new("default", name, Resources::new(cpu, mem_mib * MIB))
}

pub fn pods(prefix: &str, n: usize, cpu: i64, mem_mib: i64) -> Vec<Pod> {
    (0..n)
        .map(|i| pod(&format!("{prefix}-{i}"), cpu, mem_mib))
        .collect()
}

pub fn labelled(mut p: Pod, pairs: &[(&str, &str)]) -> Pod {
    for (k, v) in pairs {
        p.labels.insert(k.to_string(), v.to_string());
    }
    p
}

pub fn sel(pairs: &[(&str, &str)]) -> Requirements {
    let labels: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Requirements::from_labels(&labels)
}

pub fn req(key: &str, op: Operator, values: &[&str]) -> Requirement {
    Requirement::new(key, op, values).unwrap()
}

pub fn pool(name: &str) -> NodePool {
    NodePool {
        name: name.into(),
        node_class: "default".into(),
        ..Default::default()
    }
}

pub fn pool_with(name: &str, reqs: Vec<Requirement>) -> NodePool {
    let mut p = pool(name);
    for r in reqs {
        p.requirements.add(r);
    }
    p
}

pub fn zones3() -> Requirement {
    req(
        ZONE,
        Operator::In,
        &["us-east-1a", "us-east-1b", "us-east-1c"],
    )
}

pub fn same_ns() -> Namespaces {
    Namespaces::Listed(BTreeSet::from(["default".to_string()]))
}

pub fn term(pairs: &[(&str, &str)], key: &str) -> PodAffinityTerm {
    PodAffinityTerm {
        selector: sel(pairs),
        namespaces: same_ns(),
        topology_key: key.into(),
    }
}

pub fn spread(key: &str, skew: i32, pairs: &[(&str, &str)]) -> SpreadConstraint {
    SpreadConstraint {
        max_skew: skew,
        topology_key: key.into(),
        hard: true,
        selector: sel(pairs),
        min_domains: None,
        node_affinity_policy: fleetwright_core::model::InclusionPolicy::Honor,
        node_taints_policy: fleetwright_core::model::InclusionPolicy::Ignore,
    }
}

pub fn snapshot(pods: Vec<Pod>, pools: Vec<NodePool>) -> Snapshot {
    Snapshot {
        pods,
        nodepools: pools,
        ..Default::default()
    }
}

pub fn with_max_pods(mut snap: Snapshot, max_pods: i64) -> Snapshot {
    snap.node_classes.insert(
        "default".into(),
        NodeClassSettings {
            kubelet: KubeletSettings {
                max_pods: Some(max_pods),
                ..Default::default()
            },
            ..Default::default()
        },
    );
    snap
}

pub fn plan(snap: &Snapshot) -> Plan {
    schedule(snap, Catalog::embedded(), &ScheduleOptions::default())
}

pub fn placed_count(plan: &Plan) -> usize {
    plan.nodeclaims.iter().map(|n| n.pods.len()).sum::<usize>() + plan.existing.len()
}

pub fn zone_of(plan: &Plan, pod: &str) -> Option<String> {
    plan.nodeclaims
        .iter()
        .find(|n| n.pods.iter().any(|p| p == pod))
        .and_then(|n| (n.zones.len() == 1).then(|| n.zones[0].clone()))
}

pub fn daemonset(name: &str, cpu: i64, mem_mib: i64) -> DaemonSet {
    let mut p = Pod::new("kube-system", name, Resources::new(cpu, mem_mib * MIB));
    p.owner_kind = Some("DaemonSet".into());
    p.tolerations.push(Toleration {
        exists: true,
        ..Default::default()
    });
    DaemonSet {
        namespace: "kube-system".into(),
        name: name.into(),
        pod: p,
    }
}

pub fn node(name: &str, zone: &str, itype: &str, cpu: i64, mem_mib: i64) -> Node {
    let mut labels = BTreeMap::new();
    labels.insert(ZONE.to_string(), zone.to_string());
    labels.insert(INSTANCE_TYPE.to_string(), itype.to_string());
    labels.insert(HOSTNAME.to_string(), name.to_string());
    labels.insert(ARCH.to_string(), "amd64".to_string());
    labels.insert(OS.to_string(), "linux".to_string());
    labels.insert(CAPACITY_TYPE.to_string(), "on-demand".to_string());
    let mut allocatable = Resources::new(cpu, mem_mib * MIB);
    allocatable.pods = 110;
    allocatable.ephemeral = 20 * GIB;
    Node {
        name: name.into(),
        labels,
        allocatable: allocatable.clone(),
        capacity: allocatable,
        ready: true,
        ..Default::default()
    }
}

/// The embedded catalog's instance types by name, as the independent checker takes them.
pub fn catalog_types() -> BTreeMap<String, fleetwright_core::InstanceType> {
    Catalog::embedded()
        .instance_types(&NodeClassSettings::default())
        .into_iter()
        .map(|t| (t.name.clone(), t))
        .collect()
}
