//! Generated clusters for the side-by-side comparison with Karpenter: a pool shape (six, from
//! Karpenter's docs' default pool to weighted spot and on-demand pools) × pod shapes (small,
//! CPU-heavy, memory-heavy, mixed) × constraint kinds (none, a node selector, zone spread,
//! hostname spread, hostname anti-affinity, a preferred zone), 20 to 2,000 pods in Deployments
//! of 1 to 20 replicas. Deterministic for a seed, and drawn without looking at any result.

use super::{selector, zonal_pool as pool, Rng, MIB};
use crate::labels::*;
use crate::model::*;
use crate::requirements::{Operator, Requirement, Requirements};
use crate::resources::Resources;

const POOLS: [&str; 6] = ["docs", "open", "burstable", "spot", "on-demand", "weighted"];
const PODS: [&str; 4] = ["small", "cpu", "memory", "mixed"];
const CONSTRAINTS: [&str; 6] = [
    "none",
    "selector",
    "zone-spread",
    "hostname-spread",
    "anti-affinity",
    "preferred-zone",
];
const SIZES: [usize; 10] = [20, 20, 40, 40, 60, 100, 150, 300, 800, 2000];

/// One generated case: its name (`<pool>/<pods>/<constraint>/<count>/s<seed>`) and cluster.
/// With `limited`, every pool has a CPU limit far above anything the pods need.
pub fn generated_case(seed: u64, limited: bool) -> (String, Snapshot) {
    let mut rng = Rng::new(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x6e6e_7261_7465);
    let pool = *rng.pick(&POOLS);
    let pods = *rng.pick(&PODS);
    let constraint = *rng.pick(&CONSTRAINTS);
    let count = *rng.pick(&SIZES);
    let mut nodepools = pools(pool);
    if limited {
        for p in &mut nodepools {
            p.limits = Some(Resources::new(100_000_000, 0));
        }
    }
    let snapshot = Snapshot {
        pods: workload(&mut rng, pods, constraint, count),
        nodepools,
        daemonsets: vec![super::daemonset("aws-node", 25, 64)],
        ..Default::default()
    };
    let name = format!("{pool}/{pods}/{constraint}/{count}/s{seed}");
    (name, snapshot)
}

fn pools(shape: &str) -> Vec<NodePool> {
    let both: &[&str] = &["spot", "on-demand"];
    match shape {
        "docs" => {
            let mut p = pool(
                "default",
                0,
                &[
                    (ARCH, Operator::In, &["amd64"]),
                    (OS, Operator::In, &["linux"]),
                    (CAPACITY_TYPE, Operator::In, &["on-demand"]),
                    (INSTANCE_CATEGORY, Operator::In, &["c", "m", "r"]),
                    (INSTANCE_GENERATION, Operator::Gt, &["2"]),
                ],
            );
            p.limits = Some(Resources::new(1_000_000, 0));
            vec![p]
        }
        "open" => vec![pool("open", 0, &[(CAPACITY_TYPE, Operator::In, both)])],
        "burstable" => vec![pool(
            "burst",
            0,
            &[
                (INSTANCE_FAMILY, Operator::In, &["t3", "t3a", "t4g"]),
                (CAPACITY_TYPE, Operator::In, both),
            ],
        )],
        "spot" => vec![pool("spot", 0, &[(CAPACITY_TYPE, Operator::In, &["spot"])])],
        "on-demand" => vec![pool(
            "od",
            0,
            &[
                (CAPACITY_TYPE, Operator::In, &["on-demand"]),
                (ARCH, Operator::In, &["amd64"]),
            ],
        )],
        _ => vec![
            pool(
                "spot-c",
                50,
                &[
                    (CAPACITY_TYPE, Operator::In, &["spot"]),
                    (INSTANCE_CATEGORY, Operator::In, &["c"]),
                ],
            ),
            pool(
                "general",
                10,
                &[(CAPACITY_TYPE, Operator::In, &["on-demand"])],
            ),
        ],
    }
}

/// Deployments of 1 to 20 replicas until `count` pods, each with one request shape and, for
/// about half of them, the case's constraint.
fn workload(rng: &mut Rng, pods: &str, constraint: &str, count: usize) -> Vec<Pod> {
    let mut out = Vec::new();
    let mut d = 0;
    while out.len() < count {
        let replicas = (*rng.pick(&[1usize, 1, 2, 3, 5, 8, 12, 20])).min(count - out.len());
        let (cpu, mem) = requests(rng, pods);
        let constrained = constraint != "none" && rng.below(2) == 0;
        let name = format!("app{d}");
        for r in 0..replicas {
            let mut p = Pod::new(
                "default",
                &format!("{name}-{r}"),
                Resources::new(cpu, mem * MIB),
            );
            p.uid = format!("uid-{name}-{r}");
            p.labels.insert("app".into(), name.clone());
            if constrained {
                constrain(&mut p, constraint, &name);
            }
            out.push(p);
        }
        d += 1;
    }
    out
}

fn requests(rng: &mut Rng, pods: &str) -> (i64, i64) {
    let kind = match pods {
        "mixed" => *rng.pick(&["small", "cpu", "memory"]),
        other => other,
    };
    match kind {
        "cpu" => (
            *rng.pick(&[2000, 4000, 6000]),
            *rng.pick(&[1024, 2048, 4096]),
        ),
        "memory" => (
            *rng.pick(&[500, 1000, 2000]),
            *rng.pick(&[8192, 16384, 32768]),
        ),
        _ => (
            *rng.pick(&[100, 250, 500, 1000, 1500]),
            *rng.pick(&[128, 256, 512, 1024, 2048, 4096]),
        ),
    }
}

fn constrain(p: &mut Pod, constraint: &str, app: &str) {
    let spread = |key: &str| SpreadConstraint {
        max_skew: 1,
        topology_key: key.into(),
        hard: true,
        selector: selector(&[("app", app)]),
        min_domains: None,
        node_affinity_policy: InclusionPolicy::Honor,
        node_taints_policy: InclusionPolicy::Ignore,
    };
    match constraint {
        "selector" => {
            p.node_selector.insert(ARCH.into(), "amd64".into());
        }
        "zone-spread" => p.spread.push(spread(ZONE)),
        "hostname-spread" => p.spread.push(spread(HOSTNAME)),
        "anti-affinity" => p.anti_affinity.push(PodAffinityTerm {
            selector: selector(&[("app", app)]),
            namespaces: Namespaces::Listed(["default".to_string()].into()),
            topology_key: HOSTNAME.into(),
        }),
        _ => {
            let mut zone = Requirements::new();
            zone.add(Requirement::single(ZONE, "us-east-1b"));
            p.preferred_terms.push((50, zone));
        }
    }
}

#[cfg(test)]
#[path = "../../tests/unit/synthetic/generated.rs"]
mod tests;
