//! Metamorphic properties of the planner over generated clusters: six pool shapes (Karpenter's
//! docs pool with its limit, an open pool, burstable only, spot only, on-demand amd64, and two
//! weighted pools), pods singly, in Deployments and mixed, with every constraint kind, 60
//! cases per property from a fixed seed. Each property compares two plans of related inputs:
//! - a limit that does not bind never changes the cost (within 1 %);
//! - renaming pods and reordering them never changes the cost (within 1 %);
//! - widening a pool (more types or capacity types) does not raise the cost (within 1 % on
//!   these cases; a wider search finds cases that it does, docs/benchmarks.md); more
//!   zones can raise it for good reason, when pods spread over zones
//!   (`more_zones_can_raise_the_cost_of_a_zone_spread` shows it);
//! - a plan for a batch costs at most 5 % more than plans for the two halves of it.
//!
//! The target for the last is 1 %; each prints what it measures. `FW_META_SEED=N` and
//! `FW_META_CASES=N` draw other cases (a wider search than the fixed ones, which may fail), and
//! `FW_META_DUMP=1` with `--nocapture` prints each case beyond 1.005 with both plans.

mod common;

use std::io::Write;

use common::*;
use fleetwright_core::check::{violations, Claim};
use fleetwright_core::labels::*;
use fleetwright_core::model::*;
use fleetwright_core::requirements::Operator;
use fleetwright_core::resources::Resources;
use fleetwright_core::Plan;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{RngAlgorithm, TestRng, TestRunner};

/// The pool shapes, each with a wider pool that holds every type, zone and capacity type of it.
#[derive(Clone, Copy, Debug)]
enum Shape {
    /// Karpenter's docs default pool: linux amd64, on-demand, categories c/m/r, generation > 2,
    /// `limits: cpu: 1000`.
    Docs,
    /// Every family, both architectures, spot and on-demand.
    Open,
    /// Burstable families only.
    Burstable,
    Spot,
    OnDemandAmd64,
    /// A weight-50 spot pool of category c beside a weight-10 on-demand pool.
    Weighted,
}

const SHAPES: [Shape; 6] = [
    Shape::Docs,
    Shape::Open,
    Shape::Burstable,
    Shape::Spot,
    Shape::OnDemandAmd64,
    Shape::Weighted,
];

fn cores(n: i64) -> Resources {
    let mut r = Resources::default();
    r.set("cpu", n * 1000);
    r
}

/// The pools of a shape; `wide` drops one of its restrictions (a wider pool of the same name).
fn pools(shape: Shape, wide: bool) -> Vec<NodePool> {
    let ct = |v: &[&str]| req(CAPACITY_TYPE, Operator::In, v);
    let both = ct(&["spot", "on-demand"]);
    match shape {
        Shape::Docs => {
            let mut reqs = vec![
                req(ARCH, Operator::In, &["amd64"]),
                req(OS, Operator::In, &["linux"]),
                req(INSTANCE_GENERATION, Operator::Gt, &["2"]),
            ];
            if !wide {
                reqs.push(ct(&["on-demand"]));
                reqs.push(req(INSTANCE_CATEGORY, Operator::In, &["c", "m", "r"]));
            }
            let mut p = pool_with("default", reqs);
            p.limits = Some(cores(1000));
            vec![p]
        }
        Shape::Open => {
            let mut reqs = vec![both, zones3()];
            if !wide {
                reqs.push(req(ARCH, Operator::In, &["arm64"]));
            }
            vec![pool_with("open", reqs)]
        }
        Shape::Burstable => {
            let families: &[&str] = if wide {
                &["t3", "t3a", "t4g", "m6i", "m6a", "m7g", "c6i", "c7g"]
            } else {
                &["t3", "t3a", "t4g"]
            };
            vec![pool_with(
                "burst",
                vec![req(INSTANCE_FAMILY, Operator::In, families), both],
            )]
        }
        Shape::Spot => {
            let reqs = if wide {
                vec![both]
            } else {
                vec![ct(&["spot"])]
            };
            vec![pool_with("spot", reqs)]
        }
        Shape::OnDemandAmd64 => {
            let mut reqs = vec![ct(&["on-demand"])];
            if !wide {
                reqs.push(req(ARCH, Operator::In, &["amd64"]));
            }
            vec![pool_with("od", reqs)]
        }
        Shape::Weighted => {
            let mut spot = pool_with(
                "spot-c",
                vec![ct(&["spot"]), req(INSTANCE_CATEGORY, Operator::In, &["c"])],
            );
            spot.weight = 50;
            let mut od = pool_with(
                "general",
                if wide {
                    vec![both]
                } else {
                    vec![ct(&["on-demand"])]
                },
            );
            od.weight = 10;
            vec![spot, od]
        }
    }
}

/// A constraint every pod of an app carries.
#[derive(Clone, Copy, Debug)]
enum Constraint {
    None,
    Arch,
    ZoneSpread,
    HostnameAntiAffinity,
    HostnameSpread,
}

#[derive(Clone, Debug)]
struct App {
    replicas: usize,
    cpu: i64,
    mem_mib: i64,
    constraint: Constraint,
}

fn app() -> impl Strategy<Value = App> {
    (
        prop::sample::select(vec![1usize, 1, 1, 2, 3, 5, 8]),
        prop::sample::select(vec![100i64, 250, 500, 1000, 2000]),
        prop::sample::select(vec![256i64, 512, 1024, 2048, 4096, 8192]),
        prop::sample::select(vec![
            Constraint::None,
            Constraint::None,
            Constraint::Arch,
            Constraint::ZoneSpread,
            Constraint::HostnameAntiAffinity,
            Constraint::HostnameSpread,
        ]),
    )
        .prop_map(|(replicas, cpu, mem_mib, constraint)| App {
            replicas,
            cpu,
            mem_mib,
            constraint,
        })
}

/// The pods of the apps; `prefix` renames every pod and label value (no constraint names one
/// from outside its app).
fn pods_of(apps: &[App], prefix: &str) -> Vec<Pod> {
    let mut out = Vec::new();
    for (a, spec) in apps.iter().enumerate() {
        let name = format!("{prefix}app{a}");
        for r in 0..spec.replicas {
            let mut p = labelled(
                pod(&format!("{name}-{r}"), spec.cpu, spec.mem_mib),
                &[("app", &name)],
            );
            match spec.constraint {
                Constraint::None => {}
                Constraint::Arch => {
                    p.node_selector.insert(ARCH.into(), "amd64".into());
                }
                Constraint::ZoneSpread => p.spread.push(spread(ZONE, 1, &[("app", &name)])),
                Constraint::HostnameAntiAffinity => {
                    p.anti_affinity.push(term(&[("app", &name)], HOSTNAME))
                }
                Constraint::HostnameSpread => p.spread.push(spread(HOSTNAME, 1, &[("app", &name)])),
            }
            out.push(p);
        }
    }
    out
}

/// The plan for a snapshot, after the independent checker found no constraint it breaks.
fn checked(snap: Snapshot) -> Plan {
    let plan = plan(&snap);
    let broken = violations(&snap, &catalog_types(), &Claim::of_plan(&plan));
    assert!(broken.is_empty(), "{broken:#?}");
    plan
}

fn cost(plan: &Plan) -> f64 {
    plan.nodeclaims.iter().map(|c| c.price).sum()
}

fn all_placed(plan: &Plan, pods: usize) -> bool {
    plan.unschedulable.is_empty() && placed_count(plan) == pods
}

fn shape() -> impl Strategy<Value = Shape> {
    prop::sample::select(SHAPES.to_vec())
}

/// Generated cases per property, from a fixed seed (the same cases on every run).
const CASES: usize = 60;

/// The cases: apps and a pool shape each. `FW_META_SEED` (a number) and `FW_META_CASES` draw
/// other cases, for a wider search than the fixed ones.
fn cases(min_apps: usize) -> Vec<(Vec<App>, Shape)> {
    let number = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    let rng = match number("FW_META_SEED") {
        Some(seed) => {
            let mut bytes = [0u8; 32];
            bytes[..8].copy_from_slice(&seed.to_le_bytes());
            TestRng::from_seed(RngAlgorithm::ChaCha, &bytes)
        }
        None => TestRng::deterministic_rng(RngAlgorithm::ChaCha),
    };
    let mut runner = TestRunner::new_with_rng(ProptestConfig::default(), rng);
    let strategy = (prop::collection::vec(app(), min_apps..8), shape());
    let count = number("FW_META_CASES").map_or(CASES, |n| n as usize);
    (0..count)
        .map(|_| strategy.new_tree(&mut runner).unwrap().current())
        .collect()
}

/// The ratios a property measured (one per case it applies to): min, median, max.
fn summary(name: &str, mut ratios: Vec<f64>) -> (f64, f64, f64) {
    ratios.sort_by(f64::total_cmp);
    let out = (
        ratios[0],
        ratios[ratios.len() / 2],
        ratios[ratios.len() - 1],
    );
    // Reported beside the test's result, whether it passes or not.
    let _ = writeln!(
        std::io::stderr(),
        "{name}: {} cases, ratio min {:.3} median {:.3} max {:.3}",
        ratios.len(),
        out.0,
        out.1,
        out.2
    );
    out
}

/// With `FW_META_DUMP` set, a case beyond 1.005 with both plans, on stderr beside the result.
fn dump(tag: &str, apps: &[App], shape: Shape, a: &Plan, b: &Plan) {
    if std::env::var("FW_META_DUMP").is_err() {
        return;
    }
    let r = cost(a) / cost(b).max(1e-9);
    if r <= 1.005 {
        return;
    }
    let mut out = format!("=== {tag} {shape:?} ratio {r:.4}\n");
    for x in apps {
        out += &format!("  app {x:?}\n");
    }
    for (n, p) in [("A", a), ("B", b)] {
        out += &format!("  plan {n} ${:.4}\n", cost(p));
        for c in &p.nodeclaims {
            out += &format!(
                "    {} {} {:?} {:?} pods={:?}\n",
                c.price, c.instance_types[0], c.zones, c.capacity_types, c.pods
            );
        }
    }
    let _ = std::io::stderr().write_all(out.as_bytes());
}

fn ratio(a: &Plan, b: &Plan) -> f64 {
    cost(a) / cost(b).max(1e-9)
}

#[test]
fn a_limit_that_does_not_bind_never_changes_the_cost() {
    let ratios: Vec<f64> = cases(1)
        .into_iter()
        .map(|(apps, shape)| {
            let pods = pods_of(&apps, "");
            let base = checked(snapshot(pods.clone(), pools(shape, false)));
            let mut limited = pools(shape, false);
            for p in &mut limited {
                p.limits = Some(cores(100_000));
            }
            let with_limit = checked(snapshot(pods, limited));
            assert_eq!(placed_count(&base), placed_count(&with_limit));
            ratio(&with_limit, &base)
        })
        .collect();
    let (min, _, max) = summary("limit of 100,000 CPU / none", ratios);
    assert!((0.99..=1.01).contains(&min) && max <= 1.01, "{min} {max}");
}

/// Renamed and reversed, against as generated: within 1 % on these cases (a wider random
/// search has found a case at 3 %: the heuristics still see the pods' order).
#[test]
fn renaming_and_reordering_pods_changes_the_cost_little() {
    let ratios: Vec<f64> = cases(1)
        .into_iter()
        .map(|(apps, shape)| {
            let base = checked(snapshot(pods_of(&apps, ""), pools(shape, false)));
            let mut renamed = pods_of(&apps, "zz-renamed-");
            renamed.reverse();
            let other = checked(snapshot(renamed, pools(shape, false)));
            assert_eq!(placed_count(&base), placed_count(&other));
            dump("rename", &apps, shape, &other, &base);
            dump("rename", &apps, shape, &base, &other);
            ratio(&other, &base).max(ratio(&base, &other))
        })
        .collect();
    let (_, _, max) = summary(
        "renamed and reversed / as generated (the larger way)",
        ratios,
    );
    assert!(max <= 1.01, "{max}");
}

#[test]
fn widening_a_pool_does_not_raise_the_cost_on_these_cases() {
    let ratios: Vec<f64> = cases(1)
        .into_iter()
        .filter_map(|(apps, shape)| {
            let pods = pods_of(&apps, "");
            let narrow = checked(snapshot(pods.clone(), pools(shape, false)));
            if !all_placed(&narrow, pods.len()) {
                return None;
            }
            let wide = checked(snapshot(pods.clone(), pools(shape, true)));
            assert!(all_placed(&wide, pods.len()), "{:?}", wide.unschedulable);
            dump("wide", &apps, shape, &wide, &narrow);
            Some(ratio(&wide, &narrow))
        })
        .collect();
    let (_, _, max) = summary("wider pool / narrower", ratios);
    assert!(max <= WIDER_TOLERANCE, "{max}");
}

#[test]
fn a_batch_seldom_costs_more_than_its_two_halves() {
    let ratios: Vec<f64> = cases(2)
        .into_iter()
        .filter_map(|(apps, shape)| {
            let half = apps.len() / 2;
            let whole = checked(snapshot(pods_of(&apps, ""), pools(shape, false)));
            if !all_placed(&whole, pods_of(&apps, "").len()) {
                return None;
            }
            let first = checked(snapshot(pods_of(&apps[..half], ""), pools(shape, false)));
            let second = checked(snapshot(pods_of(&apps[half..], ""), pools(shape, false)));
            let r = cost(&whole) / (cost(&first) + cost(&second)).max(1e-9);
            if r > 1.005 && std::env::var("FW_META_DUMP").is_ok() {
                let mut both = first.clone();
                both.nodeclaims.extend(second.nodeclaims.clone());
                dump("split", &apps, shape, &whole, &both);
            }
            Some(r)
        })
        .collect();
    let (_, _, max) = summary("whole batch / its two halves", ratios);
    assert!(max <= SPLIT_TOLERANCE, "{max}");
}

/// How far the two heuristic properties hold on the cases above: widening within the 1 %
/// target, the split at 1.047 (target 1.01, not reached; docs/benchmarks.md quotes the figures
/// and a wider search). The split's worst case is a whole batch whose cheaper packing needs two
/// moves that each cost more on their own, which no single move or swap finds.
const WIDER_TOLERANCE: f64 = 1.01;
const SPLIT_TOLERANCE: f64 = 1.05;

/// Why widening a pool's zones is not among the properties: a zone spread of skew one has to
/// use every zone the pool may launch in (an empty eligible zone holds the minimum at zero), so
/// five such pods take three nodes over three zones and five over six. kube-scheduler, and
/// Karpenter, would hold the same.
#[test]
fn more_zones_can_raise_the_cost_of_a_zone_spread() {
    let apps = [App {
        replicas: 5,
        cpu: 100,
        mem_mib: 256,
        constraint: Constraint::ZoneSpread,
    }];
    let ct = req(CAPACITY_TYPE, Operator::In, &["on-demand"]);
    let three = checked(snapshot(
        pods_of(&apps, ""),
        vec![pool_with("p", vec![ct.clone(), zones3()])],
    ));
    let six = checked(snapshot(pods_of(&apps, ""), vec![pool_with("p", vec![ct])]));
    let nodes = |p: &Plan| p.nodeclaims.len();
    assert_eq!((nodes(&three), nodes(&six)), (3, 5));
    assert!(cost(&six) > cost(&three));
}

/// The case that held widening at 1.056: in the wider burstable pool, a 2-vCPU anti-affine pod
/// shared a t4g.xlarge with a zone-pinned pod while a t4g.2xlarge in any zone had room for it.
/// Moved there, the pinned node shrinks to a t4g.large, and the wide plan costs what the narrow
/// one does.
#[test]
fn a_pod_moves_into_room_so_a_zone_pinned_node_shrinks() {
    let app = |replicas, cpu, mem_mib, constraint| App {
        replicas,
        cpu,
        mem_mib,
        constraint,
    };
    let apps = [
        app(2, 2000, 8192, Constraint::Arch),
        app(1, 250, 2048, Constraint::ZoneSpread),
        app(1, 2000, 1024, Constraint::HostnameAntiAffinity),
        app(3, 2000, 4096, Constraint::Arch),
        app(8, 1000, 8192, Constraint::None),
        app(1, 500, 512, Constraint::None),
        app(3, 500, 4096, Constraint::HostnameAntiAffinity),
    ];
    let narrow = checked(snapshot(pods_of(&apps, ""), pools(Shape::Burstable, false)));
    let wide = checked(snapshot(pods_of(&apps, ""), pools(Shape::Burstable, true)));
    assert!(all_placed(&wide, 19) && all_placed(&narrow, 19));
    assert!(
        cost(&wide) <= cost(&narrow) + 1e-6,
        "{} > {}",
        cost(&wide),
        cost(&narrow)
    );
}
