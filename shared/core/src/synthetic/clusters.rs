//! Workload mixes of the kind real clusters have, for the real catalog: several weighted and
//! tainted NodePools, nodeSelectors and node affinity (required and preferred), tolerations, zone
//! spread and hostname anti-affinity, memory-heavy and CPU-heavy pods together, and DaemonSets.
//! None is shaped to suit one scheduler: the request menus are the ones the other mixes use, and
//! each constraint is the plain form a Deployment would carry. Deterministic for a seed.

use std::collections::BTreeSet;

use super::{general_purpose_pool, labels, selector, Rng, MIB};
use crate::labels::*;
use crate::model::*;
use crate::requirements::{Operator, Requirement, Requirements};
use crate::resources::Resources;

/// The names of the mixes [`cluster_mix`] builds.
pub const CLUSTER_MIXES: [&str; 4] = ["pools", "selectors", "spread", "shapes"];

/// One named mix of about `count` pods, with its NodePools and DaemonSets.
pub fn cluster_mix(mix: &str, count: usize, seed: u64) -> Option<Snapshot> {
    let mut rng = Rng::new(seed ^ 0x5eed_c105);
    let mut w = Workload::default();
    let nodepools = match mix {
        "pools" => pools(&mut w, &mut rng, count),
        "selectors" => selectors(&mut w, &mut rng, count),
        "spread" => spread(&mut w, &mut rng, count),
        "shapes" => shapes(&mut w, &mut rng, count),
        _ => return None,
    };
    Some(Snapshot {
        pods: w.pods,
        nodepools,
        daemonsets: w.daemonsets,
        ..Default::default()
    })
}

#[derive(Default)]
struct Workload {
    pods: Vec<Pod>,
    daemonsets: Vec<DaemonSet>,
}

impl Workload {
    /// A Deployment's pods: `replicas` copies of `template` named `name-N`, labelled `app=name`.
    fn deployment(&mut self, name: &str, replicas: usize, template: &Pod) -> &mut [Pod] {
        let start = self.pods.len();
        for r in 0..replicas {
            let mut p = template.clone();
            p.namespace = "default".into();
            p.name = format!("{name}-{r}");
            p.uid = format!("uid-{name}-{r}");
            p.labels.insert("app".into(), name.into());
            self.pods.push(p);
        }
        &mut self.pods[start..]
    }

    fn daemonset(&mut self, name: &str, cpu: i64, mem_mib: i64) {
        self.daemonsets.push(super::daemonset(name, cpu, mem_mib));
    }
}

fn pod(rng: &mut Rng, cpus: &[i64], mems_mib: &[i64]) -> Pod {
    Pod::new(
        "default",
        "template",
        Resources::new(*rng.pick(cpus), *rng.pick(mems_mib) * MIB),
    )
}

const SMALL_CPU: [i64; 5] = [100, 250, 500, 1000, 1500];
const SMALL_MEM: [i64; 6] = [128, 256, 512, 1024, 2048, 4096];

fn pool(name: &str, weight: i32, reqs: &[(&str, Operator, &[&str])]) -> NodePool {
    let mut pool = super::zonal_pool(name, weight, reqs);
    pool.requirements.add(Requirement::single(ARCH, "amd64"));
    pool
}

fn taint(key: &str, value: &str) -> Taint {
    Taint {
        key: key.into(),
        value: value.into(),
        effect: TaintEffect::NoSchedule,
    }
}

fn tolerate(key: &str, value: &str) -> Toleration {
    Toleration {
        key: Some(key.into()),
        exists: false,
        value: value.into(),
        effect: Some(TaintEffect::NoSchedule),
    }
}

/// Three NodePools: spot (weight 50), on-demand (weight 10) and a tainted batch pool. Web pods
/// go anywhere; a quarter are batch pods that tolerate the taint and select the pool's label; some
/// select on-demand capacity.
fn pools(w: &mut Workload, rng: &mut Rng, count: usize) -> Vec<NodePool> {
    let generation = &["4"][..];
    let spot = pool(
        "spot",
        50,
        &[
            (CAPACITY_TYPE, Operator::In, &[CAPACITY_SPOT]),
            (INSTANCE_CATEGORY, Operator::In, &["c", "m", "r"]),
            (INSTANCE_GENERATION, Operator::Gt, generation),
        ],
    );
    let on_demand = pool(
        "on-demand",
        10,
        &[
            (CAPACITY_TYPE, Operator::In, &[CAPACITY_ON_DEMAND]),
            (INSTANCE_CATEGORY, Operator::In, &["c", "m"]),
            (INSTANCE_GENERATION, Operator::Gt, generation),
        ],
    );
    let mut batch = pool(
        "batch",
        0,
        &[
            (
                CAPACITY_TYPE,
                Operator::In,
                &[CAPACITY_SPOT, CAPACITY_ON_DEMAND],
            ),
            (INSTANCE_CATEGORY, Operator::In, &["c", "m", "r"]),
            (INSTANCE_GENERATION, Operator::Gt, generation),
        ],
    );
    batch.labels = labels(&[("workload", "batch")]);
    batch.taints = vec![taint("workload", "batch")];
    let per = (count / 20).max(1);
    for d in 0..20 {
        let name = format!("svc-{d}");
        let mut template = pod(rng, &SMALL_CPU, &SMALL_MEM);
        match d % 4 {
            0 => {
                template
                    .node_selector
                    .insert(CAPACITY_TYPE.into(), CAPACITY_ON_DEMAND.into());
            }
            1 => {
                template = pod(rng, &[1000, 2000, 4000], &[4096, 8192, 16384]);
                template
                    .node_selector
                    .insert("workload".into(), "batch".into());
                template.tolerations.push(tolerate("workload", "batch"));
            }
            _ => {}
        }
        w.deployment(&name, per, &template);
    }
    w.daemonset("aws-node", 25, 64);
    vec![spot, on_demand, batch]
}

/// One general pool with both architectures; pods select arm64, require families, require more
/// than three vCPUs outside the r category, or prefer on-demand.
fn selectors(w: &mut Workload, rng: &mut Rng, count: usize) -> Vec<NodePool> {
    // Both architectures and both capacity types: the pods' selectors do the choosing.
    let mut general = pool(
        "general",
        0,
        &[
            (INSTANCE_CATEGORY, Operator::In, &["c", "m", "r"]),
            (INSTANCE_GENERATION, Operator::Gt, &["2"]),
            (
                CAPACITY_TYPE,
                Operator::In,
                &[CAPACITY_SPOT, CAPACITY_ON_DEMAND],
            ),
        ],
    );
    general.requirements = {
        let mut reqs = Requirements::new();
        for r in general.requirements.iter().filter(|r| r.key != ARCH) {
            reqs.add(r.clone());
        }
        reqs.add(Requirement::in_values(
            ARCH,
            ["amd64", "arm64"].map(String::from),
        ));
        reqs
    };
    let per = (count / 20).max(1);
    for d in 0..20 {
        let mut template = pod(rng, &SMALL_CPU, &SMALL_MEM);
        match d % 5 {
            0 => {
                template.node_selector.insert(ARCH.into(), "arm64".into());
            }
            1 => {
                let mut term = Requirements::new();
                term.add(Requirement::in_values(
                    INSTANCE_FAMILY,
                    ["m6i", "m7i", "c6i", "c7i", "m6a"].map(String::from),
                ));
                template.required_terms.push(term);
            }
            2 => {
                let mut term = Requirements::new();
                term.add(
                    Requirement::new(INSTANCE_CATEGORY, Operator::NotIn, &["r"]).expect("valid"),
                );
                term.add(Requirement::new(INSTANCE_CPU, Operator::Gt, &["3"]).expect("valid"));
                template.required_terms.push(term);
            }
            3 => {
                let mut term = Requirements::new();
                term.add(Requirement::single(CAPACITY_TYPE, CAPACITY_ON_DEMAND));
                template.preferred_terms.push((50, term));
            }
            _ => {}
        }
        w.deployment(&format!("sel-{d}"), per, &template);
    }
    w.daemonset("aws-node", 25, 64);
    vec![general]
}

/// Half the pods spread over zones (max skew 1); a tenth in groups of eight that avoid sharing a
/// host; the rest plain.
fn spread(w: &mut Workload, rng: &mut Rng, count: usize) -> Vec<NodePool> {
    let zonal = count / 2 / 10;
    for d in 0..10 {
        let name = format!("zonal-{d}");
        let template = pod(rng, &SMALL_CPU, &SMALL_MEM);
        for p in w.deployment(&name, zonal.max(1), &template) {
            p.spread.push(SpreadConstraint {
                max_skew: 1,
                topology_key: ZONE.into(),
                hard: true,
                selector: selector(&[("app", &name)]),
                min_domains: None,
                node_affinity_policy: crate::model::InclusionPolicy::Honor,
                node_taints_policy: crate::model::InclusionPolicy::Ignore,
            });
        }
    }
    let groups = (count / 10 / 8).max(1);
    for d in 0..groups {
        let name = format!("solo-{d}");
        let template = pod(rng, &[500, 1000, 2000], &[1024, 2048, 4096]);
        for p in w.deployment(&name, 8, &template) {
            p.anti_affinity.push(PodAffinityTerm {
                selector: selector(&[("app", &name)]),
                namespaces: Namespaces::Listed(BTreeSet::from(["default".to_string()])),
                topology_key: HOSTNAME.into(),
            });
        }
    }
    let plain = count.saturating_sub(w.pods.len()) / 10;
    for d in 0..10 {
        let template = pod(rng, &SMALL_CPU, &SMALL_MEM);
        w.deployment(&format!("plain-{d}"), plain.max(1), &template);
    }
    w.daemonset("aws-node", 25, 64);
    vec![general_purpose_pool()]
}

/// Memory-heavy (8–32 GiB for 1–2 vCPUs), CPU-heavy (4–8 vCPUs for 2–4 GiB) and small pods
/// together, with two DaemonSets, on a general pool and a weighted memory-optimised one.
fn shapes(w: &mut Workload, rng: &mut Rng, count: usize) -> Vec<NodePool> {
    let per = (count / 15).max(1);
    for d in 0..15 {
        let template = match d % 3 {
            0 => pod(rng, &[1000, 2000], &[8192, 16384, 32768]),
            1 => pod(rng, &[4000, 6000, 8000], &[2048, 4096]),
            _ => pod(rng, &SMALL_CPU, &SMALL_MEM),
        };
        w.deployment(&format!("shape-{d}"), per, &template);
    }
    w.daemonset("aws-node", 25, 64);
    w.daemonset("log-agent", 100, 200);
    let memory = pool(
        "memory",
        20,
        &[
            (INSTANCE_CATEGORY, Operator::In, &["r", "x"]),
            (INSTANCE_GENERATION, Operator::Gt, &["5"]),
        ],
    );
    vec![memory, general_purpose_pool()]
}

#[cfg(test)]
#[path = "../../tests/unit/synthetic/clusters.rs"]
mod tests;
