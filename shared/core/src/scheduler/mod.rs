//! Scheduling simulation and bin-packing: places pending pods on existing nodes, then in-flight
//! NodeClaims, then new NodeClaims whose instance-type options are the cheapest types that fit,
//! honouring requests, node selectors and affinity, tolerations, pod (anti-)affinity, topology
//! spread, host ports, DaemonSet overhead, NodePool weights, limits and requirements, and volume
//! zones. First-fit-decreasing, capped by the LP optimum's node size, then improved by trying
//! other caps; the plan carries its cost and the LP lower bound.

mod allocatable;
mod classes;
mod fixed;
mod limits;
pub mod moving;
mod output;
mod place;
mod pools;
mod repack;
mod reserve;
pub(crate) mod verdict;
mod volumes;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::catalog::{offering_allowed, Catalog, InstanceType};
use crate::labels::*;
use crate::lp;
use crate::model::*;
use crate::plan::{Cost, ExistingPlacement, NewNodeClaim, Plan, RequirementOut, Unschedulable};
use crate::requirements::{Requirement, Requirements};
use crate::resources::Resources;
use crate::topology::{GroupKey, Kind, Topology};
use classes::pending_pods;
pub use classes::INITIALIZATION_GRACE;
pub use fixed::static_claim;
use pools::build_pools;
pub use pools::emptied_by;
pub(crate) use pools::within_limits;

/// Knobs for one scheduling pass.
#[derive(Clone, Debug)]
pub struct ScheduleOptions {
    /// Seconds since the Unix epoch (the core never reads the clock).
    pub now: i64,
    /// Instance-type options kept per NodeClaim (CreateFleet takes at most 60 overrides).
    pub max_options: usize,
    /// Try alternative packings when the first is more than this factor above the LP bound...
    pub improve_above: f64,
    /// ...and there are at most this many pending pods (also the limit for re-packing nodes).
    pub improve_max_pods: usize,
    /// Plan the pods of nodes being deleted too ([`moving`]), as provisioning does.
    pub plan_moving_pods: bool,
}

impl Default for ScheduleOptions {
    fn default() -> Self {
        ScheduleOptions {
            now: 0,
            max_options: 60,
            improve_above: 1.02,
            improve_max_pods: 3000,
            plan_moving_pods: false,
        }
    }
}

/// Up to this many pending pods, every packing tried is improved before the cheapest is kept.
const IMPROVE_EACH_PODS: usize = 200;

/// Schedules every pending pod of the snapshot and returns the plan.
pub fn schedule(snapshot: &Snapshot, catalog: &Catalog, opts: &ScheduleOptions) -> Plan {
    if opts.plan_moving_pods {
        return schedule_with_moving_pods(snapshot, catalog, opts);
    }
    let once = |snapshot: &Snapshot| limits::plan_within_limits(snapshot, catalog, opts);
    let settled = reserve::settle(snapshot, once(snapshot), once);
    reserve::best(snapshot, settled, once)
}

/// The plan with the pods of leaving nodes placed as pending pods. One that finds no place is
/// still running where it is, so it is not reported as unschedulable: its eviction waits, and
/// once it is pending it is planned (and reported) as any other.
fn schedule_with_moving_pods(
    snapshot: &Snapshot,
    catalog: &Catalog,
    opts: &ScheduleOptions,
) -> Plan {
    let unbound = moving::unbound(snapshot, opts.now);
    let opts = ScheduleOptions {
        plan_moving_pods: false,
        ..opts.clone()
    };
    let mut plan = schedule(&unbound, catalog, &opts);
    let moving: BTreeSet<String> = moving::moving_pods(snapshot, opts.now)
        .into_iter()
        .map(|i| snapshot.pods[i].key())
        .collect();
    plan.unschedulable.retain(|u| !moving.contains(&u.pod));
    plan
}

type Bits = Vec<u64>;

/// Per pool, per node requirements: the allowed instance types, or None when none is.
type TypeMasks = BTreeMap<usize, HashMap<Requirements, Option<std::rc::Rc<Allowed>>>>;

/// The instance types of a pool that some requirements allow: as a mask, and with their price
/// under the requirements, cheapest first.
pub(crate) struct Allowed {
    pub mask: Bits,
    pub by_price: Vec<(usize, f64)>,
}

impl std::ops::Deref for Allowed {
    type Target = Bits;

    fn deref(&self) -> &Bits {
        &self.mask
    }
}

fn bit(bits: &Bits, i: usize) -> bool {
    bits[i / 64] >> (i % 64) & 1 == 1
}

/// A NodePool with its resolved instance types.
pub(crate) struct PoolCtx {
    pub pool: NodePool,
    pub base: Requirements,
    /// Types allowed by the pool, cheapest first.
    pub types: Vec<InstanceType>,
    pub price: Vec<f64>,
    /// Allocatable minus DaemonSet overhead, per type.
    pub usable: Vec<Resources>,
    pub ds_overhead: Vec<Resources>,
    pub ds_ports: Vec<HostPort>,
    pub remaining: Option<Resources>,
    pub nodes_left: Option<i64>,
    /// Min-values requirements of the template.
    pub min_values: Vec<(String, usize)>,
    /// Resource names the pool's limits bound (besides `nodes`).
    pub limited: Vec<String>,
    /// When no type is left: which of the pool's requirements emptied it, in which catalog.
    pub empty: Option<String>,
    /// What the types of its in-flight NodeClaims hold that the pool offers no more (a full
    /// reservation's type, in a pool that allows `reserved` only): they still launch.
    pub inflight_only: Vec<(String, Resources)>,
}

/// A pod's constraints at one relaxation level.
#[derive(Clone, Debug)]
pub(crate) struct Variant {
    pub reqs: Requirements,
    /// Groups this pod must satisfy, with whether the pod counts in them itself.
    pub owned: Vec<(usize, bool)>,
    /// Inverse anti-affinity groups this pod owns.
    pub owner_of: Vec<usize>,
    /// Per pool: the compatible instance types, or None when the pool is ruled out.
    pub pools: Vec<Option<std::rc::Rc<Bits>>>,
}

/// Pods that are interchangeable for scheduling.
pub(crate) struct Class {
    pub variants: Vec<Variant>,
    /// Groups that count this pod.
    pub member_of: Vec<usize>,
    /// Inverse groups whose owners repel this pod.
    pub repelled_by: Vec<usize>,
}

/// A place pods can go: an existing node, an in-flight NodeClaim, or a new NodeClaim.
#[derive(Clone, Debug)]
pub(crate) struct Bin {
    pub name: String,
    pub pool: Option<usize>,
    pub inflight: bool,
    pub reqs: Requirements,
    pub taints: Vec<Taint>,
    pub used: Resources,
    /// Existing bins: allocatable. New bins: the largest usable over the options.
    pub max_usable: Resources,
    pub options: Vec<u32>,
    pub ports: Vec<HostPort>,
    /// The volumes its pods mount, (CSI driver, claim), each once; kept only where a driver
    /// has a limit.
    pub volumes: Vec<(String, String)>,
    /// Each CSI driver's attach limit: an existing node's CSINode (a new NodeClaim's types
    /// carry none on AWS, as in Karpenter's AWS provider).
    pub volume_limits: BTreeMap<String, u32>,
    pub pods: Vec<usize>,
    pub reserved: Resources,
    /// The LP target type's usable resources, when the bin was opened for one.
    pub limit: Option<Resources>,
}

pub(crate) struct Ctx<'a> {
    pub snapshot: &'a Snapshot,
    /// Seconds since the Unix epoch (0: no clock, so no node is overdue to initialize).
    pub now: i64,
    pub pools: Vec<PoolCtx>,
    /// Pending pod indices in first-fit-decreasing order.
    pub pending: Vec<usize>,
    pub class_of: HashMap<usize, usize>,
    pub classes: Vec<Class>,
    pub base_bins: Vec<Bin>,
    pub base_topology: Topology,
    guide: Vec<Guide>,
    improve_max_pods: usize,
    /// Set when the pools' limits bind: a pool with limits is planned by how much of them each
    /// type spends, not by its price, and a new NodeClaim lists no type that would spend more
    /// than the one it was opened for ([`limits::plan_within_limits`]).
    thrifty: bool,
    /// Per pool and node requirements: the instance types whose own labels meet them (see
    /// [`Ctx::allowed_types`]).
    type_masks: std::cell::RefCell<TypeMasks>,
    /// Pattern programs already solved (see `repack::patterns`), by pool, requirements, type
    /// price cap and the shapes' sizes and counts.
    pattern_programs: std::cell::RefCell<HashMap<String, Option<repack::Program>>>,
    /// Groups already packed from scratch (see `Ctx::pack_group`): the same groups come up
    /// again in each way of regrouping.
    packings: std::cell::RefCell<HashMap<repack::GroupKey, Option<Vec<repack::Packed>>>>,
    /// The best vector packing of each group (see `Ctx::pack_group`).
    vector_packings: std::cell::RefCell<HashMap<repack::VectorKey, Option<Vec<repack::Packed>>>>,
}

/// How new bins pick their LP target type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// The LP type with the most nodes still to open.
    MostLeft,
    /// The LP type whose cpu:memory ratio is closest to the pod's.
    ShapeMatch,
    /// No targets and no size cap: plain first-fit-decreasing.
    NoTargets,
    /// No targets and no size cap, and a pod tries the new NodeClaims with the fewest pods
    /// first (Karpenter's order): pods that must stand apart (hostname anti-affinity) open
    /// their own nodes, and the others spread over those before one node takes them all.
    FewestPods,
    /// [`Mode::FewestPods`] over the pods in Karpenter's queue order (most CPU, then most
    /// memory, first; within a priority): under a binding limit, the order that fills
    /// Karpenter's NodeClaims as it does, tried so that Fleetwright places what Karpenter would.
    CpuFirst,
    /// [`Mode::NoTargets`] over the pods smallest first (within a priority): under a binding
    /// limit, the most pods the limit can hold, when the largest would spend it on a few.
    LeastFirst,
}

/// What the LP says about one pool's new capacity.
#[derive(Clone, Debug)]
struct Guide {
    cap: f64,
    targets: Vec<(usize, f64)>,
}

#[derive(Clone)]
struct Run<'c, 'a> {
    ctx: &'c Ctx<'a>,
    bins: Vec<Bin>,
    topo: Topology,
    remaining: Vec<Option<Resources>>,
    nodes_left: Vec<Option<i64>>,
    cap: Vec<f64>,
    /// Per pool: LP node types and how many of each are still to be opened.
    targets: Vec<Vec<(usize, f64)>>,
    mode: Mode,
    placed: BTreeMap<usize, usize>,
    failed: Vec<usize>,
}

/// Staged changes for one placement.
struct Commit {
    reqs: Option<Requirements>,
    options: Option<Vec<u32>>,
}

impl<'a> Ctx<'a> {
    pub fn new(snapshot: &'a Snapshot, catalog: &Catalog, now: i64) -> Self {
        let pools = build_pools(snapshot, catalog);
        let mut ctx = Ctx {
            snapshot,
            now,
            pools,
            pending: Vec::new(),
            class_of: HashMap::new(),
            classes: Vec::new(),
            base_bins: Vec::new(),
            base_topology: Topology::default(),
            guide: Vec::new(),
            improve_max_pods: ScheduleOptions::default().improve_max_pods,
            thrifty: false,
            type_masks: Default::default(),
            pattern_programs: Default::default(),
            packings: Default::default(),
            vector_packings: Default::default(),
        };
        ctx.build_bins();
        ctx.pending = pending_pods(snapshot);
        ctx.build_classes();
        ctx.record_bound_pods();
        ctx.guide = ctx.lp_guide();
        ctx.order_by_normalised_size();
        ctx
    }

    /// The LP guide and the pod order again, after the pools' limits changed.
    fn rebuild_guide(&mut self) {
        self.guide = self.lp_guide();
        self.order_by_normalised_size();
    }

    /// First-fit-decreasing order by size normalised to the LP's typical node, so that CPU,
    /// memory and pod slots fill together (priority first; names break ties).
    fn order_by_normalised_size(&mut self) {
        let mut shape = Resources::default();
        let mut weight = 0.0;
        for (p, g) in self.guide.iter().enumerate() {
            for (t, x) in &g.targets {
                let u = &self.pools[p].usable[*t];
                shape.cpu += (u.cpu as f64 * x) as i64;
                shape.memory += (u.memory as f64 * x) as i64;
                shape.pods += (u.pods as f64 * x) as i64;
                weight += x;
            }
        }
        if weight <= 0.0 {
            return;
        }
        let (c, m, n) = (
            shape.cpu.max(1) as f64,
            shape.memory.max(1) as f64,
            shape.pods.max(1) as f64,
        );
        let pods = &self.snapshot.pods;
        let size = |i: usize| {
            let r = &pods[i].requests;
            r.cpu as f64 / c + r.memory as f64 / m + r.pods as f64 / n
        };
        self.pending.sort_by(|&a, &b| {
            pods[b]
                .priority
                .cmp(&pods[a].priority)
                .then(size(b).total_cmp(&size(a)))
                .then(pods[a].namespace.cmp(&pods[b].namespace))
                .then(pods[a].name.cmp(&pods[b].name))
        });
    }

    pub fn plan(&self, opts: &ScheduleOptions) -> Plan {
        let guide = &self.guide;
        let small = self.pending.len() <= opts.improve_max_pods;
        // A small batch improves every packing it tries: the packing that improves best is not
        // always the one that starts cheapest.
        let each = small && self.pending.len() <= IMPROVE_EACH_PODS;
        let first = self.run(guide, Mode::ShapeMatch);
        let mut best = if each { first.improved() } else { first };
        // Other packings, when they are cheap to try and may help; the one that places the
        // most pods, then the cheapest, wins. Under a binding limit the cost ratio says nothing
        // of the pods left out, so each is tried while some are.
        let limited = self.pools.iter().any(|p| p.remaining.is_some());
        for mode in [
            Mode::MostLeft,
            Mode::NoTargets,
            Mode::FewestPods,
            Mode::CpuFirst,
            Mode::LeastFirst,
        ] {
            let short = limited && !best.failed.is_empty();
            if !small || (best.ratio() <= opts.improve_above && !short) {
                break;
            }
            if matches!(mode, Mode::CpuFirst | Mode::LeastFirst) && !short {
                break;
            }
            let alt = self.run(guide, mode);
            let alt = if each { alt.improved() } else { alt };
            if (alt.failed.len(), alt.hourly()) < (best.failed.len(), best.hourly() - 1e-9) {
                best = alt;
            }
        }
        if small && !each {
            best = best.improved();
        }
        best.into_plan(opts)
    }

    /// Per pool, the LP optimum for the pods that would go there: its node types with their
    /// fractional counts, and the price of its largest node as a size cap.
    fn lp_guide(&self) -> Vec<Guide> {
        let mut demand: Vec<Resources> = vec![Resources::default(); self.pools.len()];
        for &i in &self.pending {
            let class = &self.classes[self.class_of[&i]];
            if let Some(p) = class.variants[0].pools.iter().position(Option::is_some) {
                demand[p].add(&self.snapshot.pods[i].requests);
            }
        }
        (0..self.pools.len())
            .map(|p| {
                let Some((_, counts)) = self.lp_priced(&demand[p], &self.guide_prices(p)) else {
                    return Guide {
                        cap: f64::INFINITY,
                        targets: Vec::new(),
                    };
                };
                let targets: Vec<(usize, f64)> = counts
                    .iter()
                    .enumerate()
                    .filter(|(_, x)| **x > 1e-9)
                    .map(|(t, x)| (t, *x))
                    .collect();
                let cap = targets
                    .iter()
                    .map(|(t, _)| self.pools[p].price[*t])
                    .fold(0.0, f64::max);
                Guide {
                    cap: if cap > 0.0 { cap } else { f64::INFINITY },
                    targets,
                }
            })
            .collect()
    }

    /// The LP bound for `demand` over the given (pool, type) columns at the pool's prices.
    pub(crate) fn lp(
        &self,
        demand: &Resources,
        cols: &[(usize, usize)],
    ) -> Option<(f64, Vec<f64>)> {
        let priced: Vec<(usize, usize, f64)> = cols
            .iter()
            .map(|(p, t)| (*p, *t, self.pools[*p].price[*t]))
            .collect();
        self.lp_priced(demand, &priced)
    }

    /// The LP lower bound on new capacity for `demand`. With capacity reservations among the
    /// types, the LP alone would buy everything at the all-but-free reserved price; instead the
    /// reservations' whole capacity (their instances left × their type's room) is taken off the
    /// demand and the rest bought at the types' prices outside reservations. Any plan's paid
    /// nodes cover at least that rest, so the bound holds.
    pub(crate) fn bound(&self, demand: &Resources, cols: &[(usize, usize)]) -> Option<f64> {
        let reserved = |o: &crate::catalog::Offering| o.reservation.is_some() && o.available;
        let any = cols
            .iter()
            .any(|&(p, t)| self.pools[p].types[t].offerings.iter().any(reserved));
        if !any {
            return self.lp(demand, cols).map(|(c, _)| c);
        }
        let mut rest = demand.clone();
        let mut seen = std::collections::BTreeSet::new();
        for &(p, t) in cols {
            for o in self.pools[p].types[t]
                .offerings
                .iter()
                .filter(|o| reserved(o))
            {
                let Some(r) = o.reservation.as_ref() else {
                    continue;
                };
                if seen.insert(r.id.clone()) {
                    for _ in 0..r.available {
                        rest = rest.minus(&self.pools[p].usable[t]);
                    }
                }
            }
        }
        let names: Vec<String> = rest.names().map(str::to_string).collect();
        for n in &names {
            if rest.get(n) < 0 {
                rest.set(n, 0);
            }
        }
        let priced: Vec<(usize, usize, f64)> = cols
            .iter()
            .filter_map(|&(p, t)| {
                let pool = &self.pools[p];
                let price = pool.types[t]
                    .offerings
                    .iter()
                    .filter(|o| o.available && o.reservation.is_none())
                    .filter(|o| crate::catalog::offering_allowed(o, &pool.base))
                    .map(|o| o.price)
                    .min_by(f64::total_cmp)?;
                Some((p, t, price))
            })
            .collect();
        if rest.names().all(|n| rest.get(n) <= 0) {
            return Some(0.0);
        }
        self.lp_priced(&rest, &priced).map(|(c, _)| c)
    }

    /// The LP bound for `demand` over (pool, type, price) columns.
    pub(crate) fn lp_priced(
        &self,
        demand: &Resources,
        cols: &[(usize, usize, f64)],
    ) -> Option<(f64, Vec<f64>)> {
        let names: Vec<&str> = demand.names().filter(|n| demand.get(n) > 0).collect();
        let scale = |n: &str| match n {
            RESOURCE_CPU => 1000.0,
            RESOURCE_MEMORY | RESOURCE_EPHEMERAL => (1u64 << 30) as f64,
            _ => 1.0,
        };
        let b: Vec<f64> = names
            .iter()
            .map(|n| demand.get(n) as f64 / scale(n))
            .collect();
        let columns: Vec<lp::Column> = cols
            .iter()
            .map(|(p, t, price)| lp::Column {
                capacity: names
                    .iter()
                    .map(|n| self.pools[*p].usable[*t].get(n).max(0) as f64 / scale(n))
                    .collect(),
                price: *price,
            })
            .collect();
        lp::solve(&b, &columns).map(|s| (s.cost, s.counts))
    }

    fn run(&self, guide: &[Guide], mode: Mode) -> Run<'_, 'a> {
        let use_targets = matches!(mode, Mode::MostLeft | Mode::ShapeMatch);
        let mut run = Run {
            ctx: self,
            bins: self.base_bins.clone(),
            topo: self.base_topology.clone(),
            remaining: self.pools.iter().map(|p| p.remaining.clone()).collect(),
            nodes_left: self.pools.iter().map(|p| p.nodes_left).collect(),
            cap: guide
                .iter()
                .map(|g| if use_targets { g.cap } else { f64::INFINITY })
                .collect(),
            targets: guide
                .iter()
                .map(|g| {
                    if use_targets {
                        g.targets.clone()
                    } else {
                        Vec::new()
                    }
                })
                .collect(),
            mode,
            placed: BTreeMap::new(),
            failed: Vec::new(),
        };
        let mut pending = self.pending.clone();
        if mode == Mode::LeastFirst {
            // The usual order is by priority, then largest first: within each priority, reversed.
            let pods = &self.snapshot.pods;
            let rank: HashMap<usize, usize> =
                pending.iter().enumerate().map(|(r, &i)| (i, r)).collect();
            pending.sort_by_key(|&i| {
                (
                    std::cmp::Reverse(pods[i].priority),
                    std::cmp::Reverse(rank[&i]),
                )
            });
        }
        if mode == Mode::CpuFirst {
            let pods = &self.snapshot.pods;
            // Priority first, as every packing of Fleetwright's: under a binding limit the pods
            // that matter most take it first. Stable: the usual order breaks ties.
            let key = |i: usize| {
                let r = &pods[i].requests;
                (pods[i].priority, r.cpu, r.memory)
            };
            pending.sort_by_key(|&i| std::cmp::Reverse(key(i)));
        }
        for i in pending {
            if !run.place(i) {
                run.failed.push(i);
            }
        }
        run
    }
}
