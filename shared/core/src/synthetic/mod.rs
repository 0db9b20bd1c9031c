//! Synthetic clusters for benchmarks and property tests: Karpenter's scheduling-benchmark shape
//! (400 linear instance types, five fifths of pod constraints) and named workload mixes for the
//! real catalog. Deterministic for a seed.

use std::collections::{BTreeMap, BTreeSet};

use crate::catalog::{Catalog, InstanceType, Offering};
use crate::labels::*;
use crate::model::*;
use crate::requirements::{Operator, Requirement, Requirements};
use crate::resources::Resources;

const GIB: i64 = 1 << 30;
const MIB: i64 = 1 << 20;

pub use crate::rng::Rng;

mod clusters;
mod generated;
pub use clusters::{cluster_mix, CLUSTER_MIXES};
pub use generated::generated_case;

/// Zones of the synthetic catalog.
pub const ZONES: [&str; 3] = ["test-zone-a", "test-zone-b", "test-zone-c"];

/// The first three zones of us-east-1, as an EC2NodeClass's subnets usually give them.
const REAL_ZONES: [&str; 3] = ["us-east-1a", "us-east-1b", "us-east-1c"];

/// A NodePool of the real catalog over [`REAL_ZONES`], with these requirements and weight.
fn zonal_pool(name: &str, weight: i32, reqs: &[(&str, Operator, &[&str])]) -> NodePool {
    let mut requirements = Requirements::new();
    requirements.add(Requirement::in_values(ZONE, REAL_ZONES.map(String::from)));
    for (key, op, values) in reqs {
        requirements.add(Requirement::new(key, *op, values).expect("a valid requirement"));
    }
    NodePool {
        name: name.into(),
        weight,
        requirements,
        node_class: "default".into(),
        ..Default::default()
    }
}

/// Karpenter's benchmark catalog: type i has i+1 vCPU, 2(i+1) GiB, 10(i+1) pods, priced
/// 0.1 per vCPU + 0.1 per GiB, offered spot and on-demand in three zones.
pub fn benchmark_catalog(count: usize) -> Catalog {
    let types = (0..count)
        .map(|i| {
            let n = i as i64 + 1;
            let name = format!("fake-it-{n}");
            let capacity = Resources {
                cpu: n * 1000,
                memory: 2 * n * GIB,
                ephemeral: 100 * GIB,
                pods: 10 * n,
                extended: BTreeMap::new(),
            };
            let price = 0.1 * n as f64 + 0.1 * (2 * n) as f64;
            let offerings = ZONES
                .iter()
                .flat_map(|z| {
                    [CAPACITY_SPOT, CAPACITY_ON_DEMAND].map(|ct| Offering {
                        zone: z.to_string(),
                        capacity_type: ct.to_string(),
                        price,
                        available: true,
                        reservation: None,
                    })
                })
                .collect();
            let mut reqs = Requirements::new();
            reqs.add(Requirement::single(INSTANCE_TYPE, &name));
            reqs.add(Requirement::single(ARCH, "amd64"));
            reqs.add(Requirement::single(OS, "linux"));
            reqs.add(Requirement::in_values(
                ZONE,
                ZONES.iter().map(|z| z.to_string()),
            ));
            reqs.add(Requirement::in_values(
                CAPACITY_TYPE,
                [CAPACITY_SPOT.to_string(), CAPACITY_ON_DEMAND.to_string()],
            ));
            InstanceType {
                name,
                requirements: reqs,
                allocatable: capacity.clone(),
                capacity,
                overhead: Resources::default(),
                offerings,
            }
        })
        .collect();
    Catalog::from_types("test-region", types)
}

/// A NodePool with no requirements beyond the defaults.
pub fn default_pool(name: &str) -> NodePool {
    NodePool {
        name: name.to_string(),
        node_class: "default".to_string(),
        ..Default::default()
    }
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn selector(pairs: &[(&str, &str)]) -> Requirements {
    Requirements::from_labels(&labels(pairs))
}

/// Karpenter's benchmark pods: plain, zone spread, hostname spread, zone self-affinity and
/// hostname anti-affinity in equal fifths, with random requests from fixed menus.
pub fn benchmark_pods(count: usize, seed: u64) -> Vec<Pod> {
    let mut rng = Rng::new(seed);
    let cpus = [100, 250, 500, 1000, 1500];
    let mems = [100, 256, 512, 1024, 2048, 4096];
    let values: [&str; 7] = ["a", "b", "c", "d", "e", "f", "g"];
    (0..count)
        .map(|i| {
            let requests = Resources::new(*rng.pick(&cpus), *rng.pick(&mems) * MIB);
            let mut pod = Pod::new("default", &format!("pod-{i}"), requests);
            match i * 5 / count.max(1) {
                0 => pod.labels = labels(&[("my-label", *rng.pick(&values))]),
                1 | 2 => {
                    pod.labels = labels(&[("my-label", *rng.pick(&values))]);
                    let key = if i * 5 / count.max(1) == 1 {
                        ZONE
                    } else {
                        HOSTNAME
                    };
                    pod.spread.push(SpreadConstraint {
                        max_skew: 1,
                        topology_key: key.to_string(),
                        hard: true,
                        selector: selector(&[("my-label", *rng.pick(&values))]),
                        min_domains: None,
                        node_affinity_policy: crate::model::InclusionPolicy::Honor,
                        node_taints_policy: crate::model::InclusionPolicy::Ignore,
                    });
                }
                3 => {
                    let v = *rng.pick(&values);
                    pod.labels = labels(&[("my-affinity", v)]);
                    pod.affinity.push(PodAffinityTerm {
                        selector: selector(&[("my-affinity", v)]),
                        namespaces: Namespaces::Listed(BTreeSet::from(["default".to_string()])),
                        topology_key: ZONE.to_string(),
                    });
                }
                _ => {
                    pod.labels = labels(&[("app", "nginx")]);
                    pod.anti_affinity.push(PodAffinityTerm {
                        selector: selector(&[("app", "nginx")]),
                        namespaces: Namespaces::Listed(BTreeSet::from(["default".to_string()])),
                        topology_key: HOSTNAME.to_string(),
                    });
                }
            }
            pod
        })
        .collect()
}

/// Plain pods only, with the benchmark's request menus.
pub fn plain_pods(count: usize, seed: u64) -> Vec<Pod> {
    let mut rng = Rng::new(seed);
    let cpus = [100, 250, 500, 1000, 1500];
    let mems = [100, 256, 512, 1024, 2048, 4096];
    (0..count)
        .map(|i| {
            Pod::new(
                "default",
                &format!("plain-{i}"),
                Resources::new(*rng.pick(&cpus), *rng.pick(&mems) * MIB),
            )
        })
        .collect()
}

/// The named workload mixes used for the cost-ratio benchmark on the real catalog.
pub const MIXES: [&str; 4] = ["web", "batch", "mixed", "constrained"];

/// A general-purpose NodePool like Karpenter's example: c/m/r families, generation > 2, amd64.
pub fn general_purpose_pool() -> NodePool {
    let mut reqs = Requirements::new();
    reqs.add(Requirement::new(INSTANCE_CATEGORY, Operator::In, &["c", "m", "r"]).expect("valid"));
    reqs.add(Requirement::new(INSTANCE_GENERATION, Operator::Gt, &["2"]).expect("valid"));
    reqs.add(Requirement::single(ARCH, "amd64"));
    // Subnets in three zones, as an EC2NodeClass usually discovers them.
    reqs.add(Requirement::in_values(
        ZONE,
        ["us-east-1a", "us-east-1b", "us-east-1c"].map(String::from),
    ));
    NodePool {
        requirements: reqs,
        ..default_pool("general-purpose")
    }
}

/// A snapshot for one named mix on the given pool, with a logging DaemonSet.
pub fn mix_snapshot(mix: &str, seed: u64) -> Option<Snapshot> {
    let mut rng = Rng::new(seed);
    let mut pods = Vec::new();
    let deployment = |name: &str, replicas: usize, cpu: i64, mem_mib: i64, pods: &mut Vec<Pod>| {
        for r in 0..replicas {
            let mut p = Pod::new(
                "default",
                &format!("{name}-{r}"),
                Resources::new(cpu, mem_mib * MIB),
            );
            p.labels = labels(&[("app", name)]);
            pods.push(p);
        }
    };
    match mix {
        "web" => {
            for d in 0..40 {
                let cpu = *rng.pick(&[100, 200, 250, 500]);
                let mem = *rng.pick(&[128, 256, 512, 768]);
                deployment(&format!("web-{d}"), 50, cpu, mem, &mut pods);
            }
        }
        "batch" => {
            for d in 0..20 {
                let cpu = *rng.pick(&[2000, 4000, 8000]);
                let mem = *rng.pick(&[4096, 8192, 16384, 32768]);
                deployment(&format!("batch-{d}"), 15, cpu, mem, &mut pods);
            }
        }
        "mixed" => {
            for d in 0..20 {
                let cpu = *rng.pick(&[100, 250, 500, 1000, 2000, 4000]);
                let mem = *rng.pick(&[256, 512, 1024, 4096, 8192]);
                deployment(&format!("svc-{d}"), 40, cpu, mem, &mut pods);
            }
        }
        "constrained" => {
            for d in 0..20 {
                let cpu = *rng.pick(&[250, 500, 1000]);
                let mem = *rng.pick(&[512, 1024, 2048]);
                let name = format!("api-{d}");
                let start = pods.len();
                let replicas = if d % 5 == 0 { 6 } else { 60 };
                deployment(&name, replicas, cpu, mem, &mut pods);
                for p in &mut pods[start..] {
                    p.spread.push(SpreadConstraint {
                        max_skew: 1,
                        topology_key: ZONE.to_string(),
                        hard: true,
                        selector: selector(&[("app", &name)]),
                        min_domains: None,
                        node_affinity_policy: crate::model::InclusionPolicy::Honor,
                        node_taints_policy: crate::model::InclusionPolicy::Ignore,
                    });
                    if d % 5 == 0 {
                        p.anti_affinity.push(PodAffinityTerm {
                            selector: selector(&[("app", &name)]),
                            namespaces: Namespaces::Listed(BTreeSet::from(["default".to_string()])),
                            topology_key: HOSTNAME.to_string(),
                        });
                    }
                }
            }
        }
        _ => return None,
    }
    Some(Snapshot {
        pods,
        nodepools: vec![general_purpose_pool()],
        daemonsets: vec![daemonset("aws-node", 25, 64)],
        ..Default::default()
    })
}

/// A kube-system DaemonSet whose pod tolerates every taint.
fn daemonset(name: &str, cpu: i64, mem_mib: i64) -> DaemonSet {
    let mut pod = Pod::new("kube-system", name, Resources::new(cpu, mem_mib * MIB));
    pod.owner_kind = Some("DaemonSet".into());
    pod.tolerations.push(Toleration {
        exists: true,
        ..Default::default()
    });
    DaemonSet {
        namespace: "kube-system".into(),
        name: name.into(),
        pod,
    }
}
