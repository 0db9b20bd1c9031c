//! Property tests over random clusters: no node is over-committed in any resource, every placed
//! pod satisfies its hard constraints, and the same input yields byte-identical output.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::*;
use fleetwright_core::catalog::InstanceType;
use fleetwright_core::labels::*;
use fleetwright_core::model::*;
use fleetwright_core::requirements::Operator;
use fleetwright_core::resources::Resources;
use fleetwright_core::{Catalog, Plan};
use proptest::prelude::*;

#[derive(Clone, Debug)]
struct App {
    replicas: usize,
    cpu: i64,
    mem_mib: i64,
    arch: Option<&'static str>,
    zone: Option<&'static str>,
    spot_only: bool,
    anti: bool,
    /// A zone spread, with its nodeTaintsPolicy.
    spread: Option<InclusionPolicy>,
    tolerates: bool,
}

fn app() -> impl Strategy<Value = App> {
    (
        1usize..8,
        prop::sample::select(vec![50i64, 250, 500, 1000, 2000, 3500]),
        prop::sample::select(vec![64i64, 256, 1024, 4096, 9000]),
        prop::option::weighted(0.3, prop::sample::select(vec!["amd64", "arm64"])),
        prop::option::weighted(0.2, prop::sample::select(vec!["us-east-1a", "us-east-1b"])),
        prop::bool::weighted(0.2),
        prop::bool::weighted(0.3),
        prop::option::weighted(
            0.3,
            prop::sample::select(vec![InclusionPolicy::Ignore, InclusionPolicy::Honor]),
        ),
        prop::bool::weighted(0.5),
    )
        .prop_map(
            |(replicas, cpu, mem_mib, arch, zone, spot_only, anti, spread, tolerates)| App {
                replicas,
                cpu,
                mem_mib,
                arch,
                zone,
                spot_only,
                anti,
                spread,
                tolerates,
            },
        )
}

fn cluster(apps: &[App], tainted_pool: bool, max_pods: Option<i64>) -> Snapshot {
    let mut pods = Vec::new();
    for (a, spec) in apps.iter().enumerate() {
        let name = format!("app-{a}");
        for r in 0..spec.replicas {
            let mut p = labelled(
                pod(&format!("{name}-{r}"), spec.cpu, spec.mem_mib),
                &[("app", &name)],
            );
            if let Some(arch) = spec.arch {
                p.node_selector.insert(ARCH.into(), arch.into());
            }
            if let Some(zone) = spec.zone {
                p.node_selector.insert(ZONE.into(), zone.into());
            }
            if spec.spot_only {
                p.node_selector.insert(CAPACITY_TYPE.into(), "spot".into());
            }
            if spec.anti {
                p.anti_affinity.push(term(&[("app", &name)], HOSTNAME));
            }
            if let Some(taints) = spec.spread {
                let mut s = spread(ZONE, 1, &[("app", &name)]);
                s.node_taints_policy = taints;
                p.spread.push(s);
            }
            if spec.tolerates {
                p.tolerations.push(Toleration {
                    key: Some("team".into()),
                    value: "x".into(),
                    ..Default::default()
                });
            }
            pods.push(p);
        }
    }
    let families = req(
        INSTANCE_FAMILY,
        Operator::In,
        &["c6i", "m6i", "r6i", "c6g", "m6g", "t3"],
    );
    let mut general = pool_with("general", vec![zones3(), families.clone()]);
    general.weight = 10;
    let mut pools = vec![general];
    if tainted_pool {
        let mut t = pool_with("team-x", vec![zones3(), families]);
        t.weight = 50;
        t.taints.push(Taint {
            key: "team".into(),
            value: "x".into(),
            effect: TaintEffect::NoSchedule,
        });
        pools.push(t);
    }
    let mut snap = snapshot(pods, pools);
    snap.daemonsets.push(daemonset("agent", 50, 64));
    match max_pods {
        Some(n) => with_max_pods(snap, n),
        None => snap,
    }
}

fn type_table(snap: &Snapshot) -> BTreeMap<String, InstanceType> {
    let settings = snap
        .node_classes
        .get("default")
        .cloned()
        .unwrap_or_default();
    Catalog::embedded()
        .instance_types(&settings)
        .into_iter()
        .map(|t| (t.name.clone(), t))
        .collect()
}

fn check_plan(snap: &Snapshot, plan: &Plan) -> Result<(), TestCaseError> {
    let types = type_table(snap);
    let pods: BTreeMap<String, &Pod> = snap.pods.iter().map(|p| (p.key(), p)).collect();
    let mut zone_counts: BTreeMap<String, BTreeMap<String, i32>> = BTreeMap::new();
    for nc in &plan.nodeclaims {
        prop_assert!(!nc.instance_types.is_empty());
        let mut total = Resources::default();
        for key in &nc.pods {
            total.add(&pods[key].requests);
        }
        for name in &nc.instance_types {
            let t = &types[name];
            // Requests (with DaemonSet overhead) never exceed any option's allocatable.
            prop_assert!(
                nc.requests.fits_in(&t.allocatable),
                "{name} cannot hold {}",
                nc.requests
            );
            prop_assert!(total.fits_in(&t.allocatable));
            let labels = t.requirements.single_valued_labels();
            for key in &nc.pods {
                let p = pods[key];
                if let Some(arch) = p.node_selector.get(ARCH) {
                    prop_assert_eq!(&labels[ARCH], arch, "{} on {}", key, name);
                }
            }
        }
        let pool = snap
            .nodepools
            .iter()
            .find(|p| p.name == nc.nodepool)
            .expect("pool");
        let mut apps_here: BTreeMap<&str, usize> = BTreeMap::new();
        for key in &nc.pods {
            let p = pods[key];
            prop_assert!(
                tolerates_all(&p.tolerations, &pool.taints).is_none(),
                "{} does not tolerate {}",
                key,
                pool.name
            );
            if let Some(zone) = p.node_selector.get(ZONE) {
                prop_assert_eq!(&nc.zones, &vec![zone.clone()]);
            }
            if p.node_selector.contains_key(CAPACITY_TYPE) {
                prop_assert_eq!(&nc.capacity_types, &vec!["spot".to_string()]);
            }
            let app = p.labels["app"].as_str();
            *apps_here.entry(app).or_default() += 1;
            if !p.spread.is_empty() {
                prop_assert_eq!(
                    nc.zones.len(),
                    1,
                    "spread pod {} on a multi-zone claim",
                    key
                );
                *zone_counts
                    .entry(app.to_string())
                    .or_default()
                    .entry(nc.zones[0].clone())
                    .or_default() += 1;
            }
        }
        for key in &nc.pods {
            let p = pods[key];
            if !p.anti_affinity.is_empty() {
                prop_assert_eq!(
                    apps_here[p.labels["app"].as_str()],
                    1,
                    "anti-affine {} shares a node",
                    key
                );
            }
        }
    }
    for (app, counts) in zone_counts {
        // Domains honour the pod's node selector (nodeAffinityPolicy: Honor).
        let selected = snap
            .pods
            .iter()
            .find(|p| p.labels["app"] == app)
            .and_then(|p| p.node_selector.get(ZONE));
        let zones: Vec<&str> = match selected {
            Some(z) => vec![z.as_str()],
            None => vec!["us-east-1a", "us-east-1b", "us-east-1c"],
        };
        let values: Vec<i32> = zones
            .iter()
            .map(|z| counts.get(*z).copied().unwrap_or(0))
            .collect();
        let (min, max) = (values.iter().min().unwrap(), values.iter().max().unwrap());
        prop_assert!(max - min <= 1, "{app} zone skew {values:?}");
    }
    let placed: BTreeSet<&String> = plan.nodeclaims.iter().flat_map(|n| n.pods.iter()).collect();
    let unschedulable: BTreeSet<&String> = plan.unschedulable.iter().map(|u| &u.pod).collect();
    prop_assert_eq!(placed.len() + unschedulable.len(), snap.pods.len());
    prop_assert!(plan.cost.lower_bound <= plan.cost.hourly + 1e-9);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn plans_respect_resources_and_constraints(
        apps in prop::collection::vec(app(), 1..6),
        tainted in any::<bool>(),
        max_pods in prop::option::of(4i64..20),
    ) {
        let snap = cluster(&apps, tainted, max_pods);
        let plan = plan(&snap);
        check_plan(&snap, &plan)?;
    }

    #[test]
    fn same_input_gives_byte_identical_output(apps in prop::collection::vec(app(), 1..5), tainted in any::<bool>()) {
        let snap = cluster(&apps, tainted, None);
        let a = serde_json::to_string(&plan(&snap)).unwrap();
        let b = serde_json::to_string(&plan(&snap.clone())).unwrap();
        prop_assert_eq!(a, b);
    }
}

#[test]
fn existing_nodes_are_never_overcommitted() {
    let mut snap = snapshot(pods("fill", 12, 400, 700), vec![pool("default")]);
    let mut bound = pod("bound", 1000, 1000);
    bound.node_name = Some("n1".into());
    snap.pods.push(bound);
    snap.nodes
        .push(node("n1", "us-east-1a", "m5.large", 1930, 6903));
    let plan = plan(&snap);
    let on_n1 = plan.existing.iter().filter(|e| e.node == "n1").count() as i64;
    assert_eq!(
        on_n1, 2,
        "1930m allocatable − 1000m bound leaves room for two 400m pods"
    );
}
