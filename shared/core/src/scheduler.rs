//! Scheduling simulation and bin-packing: places pending pods on existing nodes, then in-flight
//! NodeClaims, then new NodeClaims whose instance-type options are the cheapest types that fit,
//! honouring requests, node selectors and affinity, tolerations, pod (anti-)affinity, topology
//! spread, host ports, DaemonSet overhead, NodePool weights, limits and requirements, and volume
//! zones. First-fit-decreasing, capped by the LP optimum's node size, then improved by trying
//! other caps; the plan carries its cost and the LP lower bound.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::catalog::{offering_allowed, Catalog, InstanceType, NodeClassSettings};
use crate::labels::*;
use crate::lp;
use crate::model::*;
use crate::plan::{Cost, ExistingPlacement, NewNodeClaim, Plan, RequirementOut, Unschedulable};
use crate::requirements::{Requirement, Requirements};
use crate::resources::Resources;
use crate::topology::{GroupKey, Kind, Topology};

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
}

impl Default for ScheduleOptions {
    fn default() -> Self {
        ScheduleOptions {
            now: 0,
            max_options: 60,
            improve_above: 1.02,
            improve_max_pods: 3000,
        }
    }
}

/// Schedules every pending pod of the snapshot and returns the plan.
pub fn schedule(snapshot: &Snapshot, catalog: &Catalog, opts: &ScheduleOptions) -> Plan {
    let mut ctx = Ctx::new(snapshot, catalog);
    ctx.improve_max_pods = opts.improve_max_pods;
    ctx.plan(opts)
}

type Bits = Vec<u64>;

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
}

impl PoolCtx {
    pub fn label_values(&self, key: &str) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        if let Some(r) = self.base.get(key) {
            if !r.is_complement() {
                out.extend(r.values().iter().cloned());
                return out;
            }
        }
        for t in &self.types {
            match key {
                ZONE | CAPACITY_TYPE => {
                    for o in t
                        .offerings
                        .iter()
                        .filter(|o| o.available && offering_allowed(o, &self.base))
                    {
                        out.insert(if key == ZONE {
                            o.zone.clone()
                        } else {
                            o.capacity_type.clone()
                        });
                    }
                }
                _ => {
                    if let Some(r) = t.requirements.get(key) {
                        out.extend(
                            r.values()
                                .iter()
                                .filter(|v| self.base.get(key).is_none_or(|b| b.has(v)))
                                .cloned(),
                        );
                    }
                }
            }
        }
        out
    }
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
    pub pods: Vec<usize>,
    pub reserved: Resources,
    /// The LP target type's usable resources, when the bin was opened for one.
    pub limit: Option<Resources>,
}

pub(crate) struct Ctx<'a> {
    pub snapshot: &'a Snapshot,
    pub pools: Vec<PoolCtx>,
    /// Pending pod indices in first-fit-decreasing order.
    pub pending: Vec<usize>,
    pub class_of: HashMap<usize, usize>,
    pub classes: Vec<Class>,
    pub base_bins: Vec<Bin>,
    pub base_topology: Topology,
    guide: Vec<Guide>,
    improve_max_pods: usize,
}

/// How fractional LP node counts become whole nodes before re-packing.
#[derive(Clone, Copy, Debug)]
enum Rounding {
    Down,
    Nearest,
    Up,
}

/// Which open node a pod goes to when re-packing.
#[derive(Clone, Copy, Debug)]
enum Fit {
    /// The node whose remaining capacity best aligns with the pod (largest dot product).
    Aligned,
    /// The first node it fits in, which fills nodes one by one.
    First,
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
}

/// What the LP says about one pool's new capacity.
#[derive(Clone, Debug)]
struct Guide {
    cap: f64,
    targets: Vec<(usize, f64)>,
}

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
    pub fn new(snapshot: &'a Snapshot, catalog: &Catalog) -> Self {
        let pools = build_pools(snapshot, catalog);
        let mut ctx = Ctx {
            snapshot,
            pools,
            pending: Vec::new(),
            class_of: HashMap::new(),
            classes: Vec::new(),
            base_bins: Vec::new(),
            base_topology: Topology::default(),
            guide: Vec::new(),
            improve_max_pods: ScheduleOptions::default().improve_max_pods,
        };
        ctx.build_bins();
        ctx.pending = pending_pods(snapshot);
        ctx.build_classes();
        ctx.record_bound_pods();
        ctx.guide = ctx.lp_guide();
        ctx.order_by_normalised_size();
        ctx
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

    fn build_bins(&mut self) {
        let snap = self.snapshot;
        let mut names: BTreeSet<&str> = BTreeSet::new();
        for node in &snap.nodes {
            names.insert(&node.name);
            if node.unschedulable
                || node.deleting
                || node.taints.iter().any(|t| t.key == TAINT_DISRUPTED)
            {
                continue;
            }
            let mut labels = node.labels.clone();
            labels
                .entry(HOSTNAME.to_string())
                .or_insert_with(|| node.name.clone());
            self.base_bins.push(Bin {
                name: node.name.clone(),
                pool: None,
                inflight: false,
                reqs: Requirements::from_labels(&labels),
                taints: node
                    .taints
                    .iter()
                    .filter(|t| !is_ephemeral_taint(&t.key))
                    .cloned()
                    .collect(),
                used: Resources::default(),
                max_usable: node.allocatable.clone(),
                options: Vec::new(),
                ports: Vec::new(),
                pods: Vec::new(),
                reserved: Resources::default(),
                limit: None,
            });
        }
        for claim in &snap.nodeclaims {
            let has_node = claim
                .node_name
                .as_deref()
                .is_some_and(|n| names.contains(n));
            if has_node || claim.deleting {
                continue;
            }
            let Some(allocatable) = self.claim_allocatable(claim) else {
                continue;
            };
            let mut reqs = claim.requirements.clone();
            for (k, v) in &claim.labels {
                reqs.add(Requirement::single(k, v));
            }
            reqs.add(Requirement::single(HOSTNAME, &claim.name));
            self.base_bins.push(Bin {
                name: claim.name.clone(),
                pool: None,
                inflight: true,
                reqs,
                taints: claim.taints.clone(),
                used: Resources::default(),
                max_usable: allocatable,
                options: Vec::new(),
                ports: Vec::new(),
                pods: Vec::new(),
                reserved: Resources::default(),
                limit: None,
            });
        }
    }

    /// An in-flight claim's allocatable: its status, or the smallest type it may still launch as.
    fn claim_allocatable(&self, claim: &NodeClaim) -> Option<Resources> {
        if let Some(a) = &claim.allocatable {
            return Some(a.clone());
        }
        let pool = self.pools.iter().find(|p| p.pool.name == claim.nodepool)?;
        let allowed = claim.requirements.get(INSTANCE_TYPE);
        let candidates = pool
            .types
            .iter()
            .enumerate()
            .filter(|(_, t)| allowed.is_none_or(|r| r.has(&t.name)));
        let mut smallest: Option<Resources> = None;
        for (i, _) in candidates {
            let u = &pool.usable[i];
            smallest = Some(match smallest {
                None => u.clone(),
                Some(s) if (u.cpu, u.memory) < (s.cpu, s.memory) => u.clone(),
                Some(s) => s,
            });
        }
        smallest
    }

    fn build_classes(&mut self) {
        let snap = self.snapshot;
        let mut by_shape: HashMap<String, usize> = HashMap::new();
        let mut compat_cache: HashMap<(Requirements, usize), Option<std::rc::Rc<Bits>>> =
            HashMap::new();
        let mut topo = Topology::default();
        // Inverse groups from bound pods' anti-affinity terms.
        for pod in snap
            .pods
            .iter()
            .filter(|p| p.node_name.is_some() && !p.terminal)
        {
            for term in &pod.anti_affinity {
                topo.intern(inverse_key(term), |k| self.universe(&k.key, &k.owner_reqs));
            }
        }
        let pending = self.pending.clone();
        for &i in &pending {
            let pod = &snap.pods[i];
            let shape = shape_key(pod);
            if let Some(c) = by_shape.get(&shape) {
                self.class_of.insert(i, *c);
                continue;
            }
            let variants = relaxations(pod)
                .into_iter()
                .map(|(reqs, spreads, aff, anti)| {
                    let pools = (0..self.pools.len())
                        .map(|p| {
                            if tolerates_all(&pod.tolerations, &self.pools[p].pool.taints).is_some()
                            {
                                return None;
                            }
                            compat_cache
                                .entry((reqs.clone(), p))
                                .or_insert_with(|| self.pool_compat(p, &reqs).map(std::rc::Rc::new))
                                .clone()
                        })
                        .collect();
                    let mut owned = Vec::new();
                    let mut owner_of = Vec::new();
                    for s in &spreads {
                        let key = GroupKey {
                            key: s.topology_key.clone(),
                            kind: Kind::Spread {
                                max_skew: s.max_skew,
                                min_domains: s.min_domains,
                            },
                            inverse: false,
                            namespaces: Namespaces::Listed(BTreeSet::from([pod.namespace.clone()])),
                            selector: s.selector.clone(),
                            owner_reqs: reqs.clone(),
                        };
                        let g = topo.intern(key, |k| self.universe(&k.key, &k.owner_reqs));
                        owned.push((g, s.selector.matches_labels(&pod.labels)));
                    }
                    for (term, kind) in aff
                        .iter()
                        .map(|t| (t, Kind::Affinity))
                        .chain(anti.iter().map(|t| (t, Kind::Anti)))
                    {
                        let self_match = term.selects(&pod.namespace, &pod.labels);
                        let is_anti = kind == Kind::Anti;
                        let key = GroupKey {
                            key: term.topology_key.clone(),
                            kind,
                            inverse: false,
                            namespaces: term.namespaces.clone(),
                            selector: term.selector.clone(),
                            owner_reqs: Requirements::new(),
                        };
                        owned.push((
                            topo.intern(key, |k| self.universe(&k.key, &k.owner_reqs)),
                            self_match,
                        ));
                        if is_anti {
                            owner_of.push(topo.intern(inverse_key(term), |k| {
                                self.universe(&k.key, &k.owner_reqs)
                            }));
                        }
                    }
                    Variant {
                        reqs,
                        owned,
                        owner_of,
                        pools,
                    }
                })
                .collect();
            let c = self.classes.len();
            self.classes.push(Class {
                variants,
                member_of: Vec::new(),
                repelled_by: Vec::new(),
            });
            by_shape.insert(shape, c);
            self.class_of.insert(i, c);
        }
        // Membership needs every group to exist first.
        let mut first_pod: BTreeMap<usize, usize> = BTreeMap::new();
        for &i in &pending {
            first_pod.entry(self.class_of[&i]).or_insert(i);
        }
        for (c, i) in first_pod {
            let pod = &snap.pods[i];
            let (member_of, repelled_by) = memberships(&topo, pod);
            self.classes[c].member_of = member_of;
            self.classes[c].repelled_by = repelled_by;
        }
        self.base_topology = topo;
    }

    fn record_bound_pods(&mut self) {
        let snap = self.snapshot;
        let bin_of: HashMap<String, usize> = self
            .base_bins
            .iter()
            .enumerate()
            .filter(|(_, b)| !b.inflight)
            .map(|(i, b)| (b.name.clone(), i))
            .collect();
        let node_labels: HashMap<&str, &BTreeMap<String, String>> = snap
            .nodes
            .iter()
            .map(|n| (n.name.as_str(), &n.labels))
            .collect();
        for pod in snap.pods.iter().filter(|p| !p.terminal) {
            let Some(node) = pod.node_name.as_deref() else {
                continue;
            };
            if let Some(&b) = bin_of.get(node) {
                self.base_bins[b].used.add(&pod.requests);
                self.base_bins[b]
                    .ports
                    .extend(pod.host_ports.iter().cloned());
            }
            let (member_of, _) = memberships(&self.base_topology, pod);
            let mut owned: Vec<usize> = Vec::new();
            for term in &pod.anti_affinity {
                let key = inverse_key(term);
                if let Some(g) = self.base_topology.groups.iter().position(|g| g.id == key) {
                    owned.push(g);
                }
            }
            for g in member_of.into_iter().chain(owned) {
                let group = &mut self.base_topology.groups[g];
                if group.is_hostname() {
                    if let Some(&b) = bin_of.get(node) {
                        group.record_host(b);
                    }
                } else if let Some(v) = node_labels.get(node).and_then(|l| l.get(&group.id.key)) {
                    group.record_value(v);
                }
            }
        }
    }

    /// Domains a spread may use: values new nodes of compatible pools can take, plus existing nodes'.
    fn universe(&self, key: &str, owner: &Requirements) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for pool in &self.pools {
            if pool.base.compatible(owner).is_err() {
                continue;
            }
            out.extend(pool.label_values(key));
        }
        for node in &self.snapshot.nodes {
            if let Some(v) = node.labels.get(key) {
                if Requirements::from_labels(&node.labels)
                    .compatible(owner)
                    .is_ok()
                {
                    out.insert(v.clone());
                }
            }
        }
        if let Some(r) = owner.get(key) {
            out.retain(|v| r.has(v));
        }
        out
    }

    /// The instance types of pool `p` that node requirements `reqs` allow, or None if the pool
    /// is out. Taints and resource fit are checked per pod elsewhere.
    fn pool_compat(&self, p: usize, reqs: &Requirements) -> Option<Bits> {
        let pool = &self.pools[p];
        pool.base.compatible(reqs).ok()?;
        let joint = pool.base.intersection(reqs);
        let mut bits = vec![0u64; pool.types.len().div_ceil(64)];
        let mut any = false;
        for (i, t) in pool.types.iter().enumerate() {
            if t.requirements.intersects(reqs).is_ok() && t.cheapest_offering(&joint).is_some() {
                bits[i / 64] |= 1 << (i % 64);
                any = true;
            }
        }
        any.then_some(bits)
    }

    pub fn plan(&self, opts: &ScheduleOptions) -> Plan {
        let guide = &self.guide;
        let mut best = self.run(guide, Mode::ShapeMatch).into_plan(opts);
        let ratio = |p: &Plan| {
            if p.cost.lower_bound > 0.0 {
                p.cost.hourly / p.cost.lower_bound
            } else {
                1.0
            }
        };
        // Other packings, when they are cheap to try and may help; the cheapest plan wins.
        for mode in [Mode::MostLeft, Mode::NoTargets] {
            if ratio(&best) <= opts.improve_above || self.pending.len() > opts.improve_max_pods {
                break;
            }
            let alt = self.run(guide, mode).into_plan(opts);
            let better = alt.unschedulable.len() < best.unschedulable.len()
                || (alt.unschedulable.len() == best.unschedulable.len()
                    && alt.cost.hourly + 1e-9 < best.cost.hourly);
            if better {
                best = alt;
            }
        }
        best
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
                let cols: Vec<(usize, usize)> =
                    (0..self.pools[p].types.len()).map(|t| (p, t)).collect();
                let Some((_, counts)) = self.lp(&demand[p], &cols) else {
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

    /// A pod that re-packing may move to another node of the same pool, zone and capacity
    /// type: no node requirements, host ports or relaxation, and topology only on zone or
    /// capacity type (whose counts such a move leaves unchanged).
    fn is_movable(&self, i: usize) -> bool {
        let class = &self.classes[self.class_of[&i]];
        let pod = &self.snapshot.pods[i];
        let groups = &self.base_topology.groups;
        let v = &class.variants[0];
        class.variants.len() == 1
            && v.reqs.is_empty()
            && pod.host_ports.is_empty()
            && v.owned
                .iter()
                .map(|(g, _)| g)
                .chain(&v.owner_of)
                .chain(&class.member_of)
                .chain(&class.repelled_by)
                .all(|g| {
                    let id = &groups[*g].id;
                    matches!(id.key.as_str(), ZONE | CAPACITY_TYPE)
                        || (id.key == HOSTNAME && id.kind == Kind::Anti)
                })
    }

    /// Hostname anti-affinity of a movable pod: the groups it owns and those that count it.
    fn hostname_anti(&self, i: usize) -> (Vec<usize>, Vec<usize>) {
        let class = &self.classes[self.class_of[&i]];
        let groups = &self.base_topology.groups;
        let is_anti = |g: &usize| {
            groups[*g].id.key == HOSTNAME
                && groups[*g].id.kind == Kind::Anti
                && !groups[*g].id.inverse
        };
        let owns = class.variants[0]
            .owned
            .iter()
            .map(|(g, _)| *g)
            .filter(is_anti)
            .collect();
        let counted = class.member_of.iter().copied().filter(is_anti).collect();
        (owns, counted)
    }

    /// The cheapest type of pool `p` offered under `reqs` whose usable resources hold `used`.
    /// Types are in pool-price order, and narrower requirements never make a type cheaper than
    /// its pool price, so the scan stops once no later type can win.
    fn cheapest_fit(
        &self,
        p: usize,
        used: &Resources,
        reqs: &Requirements,
    ) -> Option<(usize, f64)> {
        let pool = &self.pools[p];
        let mut best: Option<(usize, f64)> = None;
        for t in 0..pool.types.len() {
            if best.is_some_and(|(_, b)| pool.price[t] >= b) {
                break;
            }
            if !used.fits_in(&pool.usable[t]) {
                continue;
            }
            if let Some(o) = pool.types[t].cheapest_offering(reqs) {
                if best.is_none_or(|(_, b)| o.price < b) {
                    best = Some((t, o.price));
                }
            }
        }
        best
    }

    /// Splits one packed node into smaller ones when they cost less together (a half-empty
    /// large node often costs more than two small nodes that hold the same pods).
    fn split(
        &self,
        p: usize,
        reqs: &Requirements,
        bin: (Vec<usize>, usize, f64),
    ) -> Vec<(Vec<usize>, usize, f64)> {
        let (members, t, price) = &bin;
        let pool = &self.pools[p];
        let mut used = Resources::default();
        for &i in members {
            used.add(&self.snapshot.pods[i].requests);
        }
        let usable = &pool.usable[*t];
        let fill = [
            used.cpu as f64 / usable.cpu.max(1) as f64,
            used.memory as f64 / usable.memory.max(1) as f64,
            used.pods as f64 / usable.pods.max(1) as f64,
        ]
        .into_iter()
        .fold(0.0, f64::max);
        if members.len() < 2
            || fill > 0.75
            || pool
                .price
                .first()
                .is_none_or(|cheapest| *cheapest > price * 0.5)
        {
            return vec![bin];
        }
        let cost =
            |k: &Vec<(Vec<usize>, usize, f64)>| k.iter().map(|(_, _, price)| price).sum::<f64>();
        let smaller = [Rounding::Up, Rounding::Nearest]
            .into_iter()
            .flat_map(|r| [Fit::First, Fit::Aligned].map(|f| (r, f)))
            .filter_map(|(r, f)| self.vector_pack(p, members, reqs, price * 0.75, r, f))
            .filter(|k| k.len() > 1)
            .min_by(|a, b| cost(a).total_cmp(&cost(b)));
        match smaller {
            Some(k) if cost(&k) + 1e-9 < *price => k,
            _ => vec![bin],
        }
    }

    /// Packs `pods` into pool `p`: bins of the LP's types (rounded) first, each pod to the open
    /// bin whose remaining capacity best aligns with it (dot product of normalised vectors),
    /// overflow into new bins of the LP's largest type, then each bin shrunk to its
    /// cheapest fitting type. Returns (pods, type, price) per bin.
    fn vector_pack(
        &self,
        p: usize,
        pods: &[usize],
        reqs: &Requirements,
        max_price: f64,
        rounding: Rounding,
        fit: Fit,
    ) -> Option<Vec<(Vec<usize>, usize, f64)>> {
        let pool = &self.pools[p];
        let mut demand = Resources::default();
        for &i in pods {
            demand.add(&self.snapshot.pods[i].requests);
        }
        let cols: Vec<(usize, usize, f64)> = (0..pool.types.len())
            .filter_map(|t| {
                pool.types[t]
                    .cheapest_offering(reqs)
                    .map(|o| (p, t, o.price))
            })
            .filter(|(_, _, price)| *price <= max_price)
            .collect();
        let (_, counts) = self.lp_priced(&demand, &cols)?;
        let lp_types: Vec<(usize, f64)> = counts
            .iter()
            .zip(&cols)
            .filter(|(x, _)| **x > 1e-9)
            .map(|(x, (_, t, _))| (*t, *x))
            .collect();
        let overflow = lp_types
            .iter()
            .max_by(|a, b| pool.price[a.0].total_cmp(&pool.price[b.0]))?
            .0;
        let anti: BTreeMap<usize, (Vec<usize>, Vec<usize>)> =
            pods.iter().map(|&i| (i, self.hostname_anti(i))).collect();
        let mut bins: Vec<(usize, Resources, Vec<usize>)> = Vec::new();
        // Per bin: hostname anti-affinity groups with an owner present, and with a counted pod present.
        let mut owners: Vec<BTreeSet<usize>> = Vec::new();
        let mut counted: Vec<BTreeSet<usize>> = Vec::new();
        for (t, x) in &lp_types {
            let n = match rounding {
                Rounding::Down => x.floor(),
                Rounding::Nearest => x.round(),
                Rounding::Up => x.ceil(),
            };
            for _ in 0..(n as usize) {
                bins.push((*t, pool.usable[*t].clone(), Vec::new()));
                owners.push(BTreeSet::new());
                counted.push(BTreeSet::new());
            }
        }
        let scale = [
            demand.cpu.max(1) as f64,
            demand.memory.max(1) as f64,
            demand.pods.max(1) as f64,
        ];
        let norm = |r: &Resources| {
            [
                r.cpu as f64 / scale[0],
                r.memory as f64 / scale[1],
                r.pods as f64 / scale[2],
            ]
        };
        let mut order: Vec<usize> = pods.to_vec();
        let size = |i: &usize| norm(&self.snapshot.pods[*i].requests).iter().sum::<f64>();
        order.sort_by(|a, b| size(b).total_cmp(&size(a)).then(a.cmp(b)));
        for i in order {
            let req = &self.snapshot.pods[i].requests;
            let v = norm(req);
            let (owns, counts_in) = &anti[&i];
            let allowed = |b: usize| {
                owns.iter().all(|g| !counted[b].contains(g))
                    && counts_in.iter().all(|g| !owners[b].contains(g))
            };
            let best = bins
                .iter()
                .enumerate()
                .filter(|(b, (_, left, _))| req.fits_in(left) && allowed(*b))
                .map(|(b, (_, left, _))| {
                    let l = norm(left);
                    let score = match fit {
                        Fit::Aligned => v[0] * l[0] + v[1] * l[1] + v[2] * l[2],
                        Fit::First => -(b as f64),
                    };
                    (b, score)
                })
                .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))
                .map(|(b, _)| b);
            let b = match best {
                Some(b) => b,
                None => {
                    let t = if req.fits_in(&pool.usable[overflow]) {
                        overflow
                    } else {
                        (0..pool.types.len()).find(|&t| req.fits_in(&pool.usable[t]))?
                    };
                    bins.push((t, pool.usable[t].clone(), Vec::new()));
                    owners.push(BTreeSet::new());
                    counted.push(BTreeSet::new());
                    bins.len() - 1
                }
            };
            bins[b].1.sub(req);
            bins[b].2.push(i);
            owners[b].extend(owns.iter().copied());
            counted[b].extend(counts_in.iter().copied());
        }
        let mut out = Vec::new();
        for (t, left, members) in bins {
            if members.is_empty() {
                continue;
            }
            let used = pool.usable[t].minus(&left);
            let (cheapest, price) = self.cheapest_fit(p, &used, reqs)?;
            out.push((members, cheapest, price));
        }
        Some(out)
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

    /// The LP bound for `demand` over (pool, type, price) columns.
    fn lp_priced(
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
        let use_targets = mode != Mode::NoTargets;
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
        for &i in &self.pending {
            if !run.place(i) {
                run.failed.push(i);
            }
        }
        if self.pending.len() <= self.improve_max_pods {
            for p in 0..self.pools.len() {
                run.repack_bins(p);
            }
        }
        run
    }
}

fn inverse_key(term: &PodAffinityTerm) -> GroupKey {
    GroupKey {
        key: term.topology_key.clone(),
        kind: Kind::Anti,
        inverse: true,
        namespaces: term.namespaces.clone(),
        selector: term.selector.clone(),
        owner_reqs: Requirements::new(),
    }
}

/// Which groups count a pod, and which inverse groups repel it.
fn memberships(topo: &Topology, pod: &Pod) -> (Vec<usize>, Vec<usize>) {
    let mut member_of = Vec::new();
    let mut repelled_by = Vec::new();
    for (g, group) in topo.groups.iter().enumerate() {
        if !group.id.namespaces.contains(&pod.namespace)
            || !group.id.selector.matches_labels(&pod.labels)
        {
            continue;
        }
        if group.id.inverse {
            repelled_by.push(g);
        } else {
            member_of.push(g);
        }
    }
    (member_of, repelled_by)
}

fn is_ephemeral_taint(key: &str) -> bool {
    matches!(
        key,
        "node.kubernetes.io/not-ready"
            | "node.kubernetes.io/unreachable"
            | "node.cloudprovider.kubernetes.io/uninitialized"
            | TAINT_UNREGISTERED
    )
}

/// Pods with no node, not terminal, and not DaemonSet pods, largest first.
fn pending_pods(snapshot: &Snapshot) -> Vec<usize> {
    let mut pending: Vec<usize> = snapshot
        .pods
        .iter()
        .enumerate()
        .filter(|(_, p)| p.node_name.is_none() && !p.terminal && !p.is_daemonset())
        .map(|(i, _)| i)
        .collect();
    pending.sort_by(|&a, &b| {
        let (pa, pb) = (&snapshot.pods[a], &snapshot.pods[b]);
        pb.priority
            .cmp(&pa.priority)
            .then(pb.requests.cpu.cmp(&pa.requests.cpu))
            .then(pb.requests.memory.cmp(&pa.requests.memory))
            .then(pa.namespace.cmp(&pb.namespace))
            .then(pa.name.cmp(&pb.name))
    });
    pending
}

/// Everything about a pod that scheduling reads, except its name.
fn shape_key(pod: &Pod) -> String {
    format!(
        "{}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}",
        pod.namespace,
        pod.labels,
        pod.requests,
        pod.node_selector,
        pod.required_terms,
        pod.preferred_terms,
        pod.tolerations,
        pod.affinity,
        pod.anti_affinity,
        pod.preferred_affinity,
        pod.preferred_anti_affinity,
        pod.spread,
        pod.host_ports,
        pod.volume_zones,
    )
}

type Level = (
    Requirements,
    Vec<SpreadConstraint>,
    Vec<PodAffinityTerm>,
    Vec<PodAffinityTerm>,
);

/// Karpenter's relaxation ladder: the strictest reading first (preferences as requirements), then
/// the next required node-affinity term, then dropping preferred pod affinity, preferred
/// anti-affinity, preferred node affinity, and ScheduleAnyway spreads one at a time.
fn relaxations(pod: &Pod) -> Vec<Level> {
    let mut levels = Vec::new();
    let terms: Vec<Option<&Requirements>> = if pod.required_terms.is_empty() {
        vec![None]
    } else {
        pod.required_terms.iter().map(Some).collect()
    };
    let sorted = |v: &[(i32, PodAffinityTerm)]| {
        let mut v = v.to_vec();
        v.sort_by_key(|t| std::cmp::Reverse(t.0));
        v.into_iter().map(|(_, t)| t).collect::<Vec<_>>()
    };
    let mut pref_aff = sorted(&pod.preferred_affinity);
    let mut pref_anti = sorted(&pod.preferred_anti_affinity);
    let mut pref_node: Vec<(i32, Requirements)> = pod.preferred_terms.clone();
    pref_node.sort_by_key(|t| std::cmp::Reverse(t.0));
    let mut soft: Vec<SpreadConstraint> = pod.spread.iter().filter(|s| !s.hard).cloned().collect();
    let hard: Vec<SpreadConstraint> = pod.spread.iter().filter(|s| s.hard).cloned().collect();
    let mut term_index = 0;
    loop {
        let mut reqs = pod.base_requirements();
        if let Some(term) = terms[term_index] {
            reqs.add_all(term);
        }
        if let Some((_, pref)) = pref_node.first() {
            reqs.add_all(pref);
        }
        let spreads: Vec<SpreadConstraint> = hard.iter().chain(soft.iter()).cloned().collect();
        let aff: Vec<PodAffinityTerm> = pod
            .affinity
            .iter()
            .chain(pref_aff.iter())
            .cloned()
            .collect();
        let anti: Vec<PodAffinityTerm> = pod
            .anti_affinity
            .iter()
            .chain(pref_anti.iter())
            .cloned()
            .collect();
        levels.push((reqs, spreads, aff, anti));
        if term_index + 1 < terms.len() {
            term_index += 1;
        } else if pref_aff.pop().is_some() || pref_anti.pop().is_some() {
        } else if !pref_node.is_empty() {
            pref_node.remove(0);
        } else if soft.pop().is_none() {
            break;
        }
        if levels.len() > 32 {
            break;
        }
    }
    levels
}

fn build_pools(snapshot: &Snapshot, catalog: &Catalog) -> Vec<PoolCtx> {
    let mut resolved: Vec<(NodeClassSettings, Vec<InstanceType>)> = Vec::new();
    let mut pools: Vec<&NodePool> = snapshot.nodepools.iter().filter(|p| !p.deleting).collect();
    pools.sort_by(|a, b| b.weight.cmp(&a.weight).then(a.name.cmp(&b.name)));
    pools
        .into_iter()
        .map(|pool| {
            let settings = snapshot
                .node_classes
                .get(&pool.node_class)
                .cloned()
                .unwrap_or_default();
            let types = match resolved.iter().find(|(s, _)| *s == settings) {
                Some((_, t)) => t.clone(),
                None => {
                    let t = catalog.instance_types(&settings);
                    resolved.push((settings, t.clone()));
                    t
                }
            };
            pool_ctx(snapshot, pool, types)
        })
        .collect()
}

fn pool_ctx(snapshot: &Snapshot, pool: &NodePool, all: Vec<InstanceType>) -> PoolCtx {
    let base = pool.node_requirements();
    let mut priced: Vec<(f64, InstanceType)> = all
        .into_iter()
        .filter(|t| t.requirements.intersects(&base).is_ok())
        .filter_map(|t| t.cheapest_offering(&base).map(|o| o.price).map(|p| (p, t)))
        .collect();
    priced.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.name.cmp(&b.1.name)));
    let (price, types): (Vec<f64>, Vec<InstanceType>) = priced.into_iter().unzip();
    let mut ds_overhead = Vec::with_capacity(types.len());
    let mut ds_ports = Vec::new();
    let daemons: Vec<&DaemonSet> = snapshot
        .daemonsets
        .iter()
        .filter(|d| tolerates_all(&d.pod.tolerations, &pool.taints).is_none())
        .filter(|d| base.compatible(&d.pod.strict_requirements()).is_ok())
        .collect();
    for d in &daemons {
        ds_ports.extend(d.pod.host_ports.iter().cloned());
    }
    for t in &types {
        let mut overhead = Resources::default();
        for d in &daemons {
            if t.requirements
                .intersects(&d.pod.strict_requirements())
                .is_ok()
            {
                overhead.add(&d.pod.requests);
            }
        }
        ds_overhead.push(overhead);
    }
    let usable = types
        .iter()
        .zip(&ds_overhead)
        .map(|(t, o)| t.allocatable.minus(o))
        .collect();
    let (remaining, nodes_left) = pool_remaining(snapshot, pool);
    let min_values = pool
        .requirements
        .iter()
        .filter_map(|r| r.min_values.map(|m| (r.key.clone(), m)))
        .collect();
    let limited = pool
        .limits
        .iter()
        .flat_map(|l| {
            l.names()
                .filter(|n| *n != "nodes" && l.get(n) != 0)
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect();
    PoolCtx {
        pool: pool.clone(),
        base,
        types,
        price,
        usable,
        ds_overhead,
        ds_ports,
        remaining,
        nodes_left,
        min_values,
        limited,
    }
}

/// Limits minus what the pool's nodes and in-flight claims already hold.
fn pool_remaining(snapshot: &Snapshot, pool: &NodePool) -> (Option<Resources>, Option<i64>) {
    let Some(limits) = &pool.limits else {
        return (None, None);
    };
    let mut used = Resources::default();
    let mut count = 0;
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    for node in snapshot
        .nodes
        .iter()
        .filter(|n| n.nodepool() == Some(&pool.name))
    {
        used.add(if node.capacity.is_zero() {
            &node.allocatable
        } else {
            &node.capacity
        });
        count += 1;
        seen.insert(&node.name);
    }
    for claim in snapshot
        .nodeclaims
        .iter()
        .filter(|c| c.nodepool == pool.name)
    {
        if claim.node_name.as_deref().is_some_and(|n| seen.contains(n)) {
            continue;
        }
        if let Some(c) = claim.capacity.as_ref().or(claim.allocatable.as_ref()) {
            used.add(c);
        }
        count += 1;
    }
    let nodes_limit = limits.extended.get("nodes").copied();
    let mut limits = limits.clone();
    limits.extended.remove("nodes");
    let remaining = limits.minus(&used);
    let mut only_limited = Resources::default();
    for name in limits
        .names()
        .filter(|n| limits.get(n) != 0)
        .collect::<Vec<_>>()
    {
        only_limited.set(name, remaining.get(name));
    }
    // Unlimited fields stay at i64::MAX so comparisons only bind on the limited ones.
    let mut out = Resources {
        cpu: i64::MAX / 4,
        memory: i64::MAX / 4,
        ephemeral: i64::MAX / 4,
        pods: i64::MAX / 4,
        extended: BTreeMap::new(),
    };
    for name in limits
        .names()
        .filter(|n| limits.get(n) != 0)
        .collect::<Vec<_>>()
    {
        out.set(name, only_limited.get(name));
    }
    (Some(out), nodes_limit.map(|n| n - count))
}

/// Whether `capacity` fits the remaining limits (only limited fields are finite).
pub(crate) fn within_limits(capacity: &Resources, remaining: &Resources) -> bool {
    capacity.cpu <= remaining.cpu
        && capacity.memory <= remaining.memory
        && capacity.ephemeral <= remaining.ephemeral
        && capacity.pods <= remaining.pods
        && remaining
            .extended
            .iter()
            .all(|(k, v)| capacity.get(k) <= *v)
}

impl<'c, 'a> Run<'c, 'a> {
    fn place(&mut self, pod_index: usize) -> bool {
        let ctx = self.ctx;
        let class_id = ctx.class_of[&pod_index];
        let class = &ctx.classes[class_id];
        for variant in &class.variants {
            for b in 0..self.bins.len() {
                if let Some(commit) = self.evaluate(&self.bins[b], b, pod_index, class, variant) {
                    self.commit(b, pod_index, class, variant, commit);
                    return true;
                }
            }
            for p in 0..ctx.pools.len() {
                let Some((candidate, target)) = self.new_bin(p, pod_index, variant) else {
                    continue;
                };
                let b = self.bins.len();
                if let Some(commit) = self.evaluate(&candidate, b, pod_index, class, variant) {
                    self.bins.push(candidate);
                    if let Some(entry) =
                        target.and_then(|t| self.targets[p].iter_mut().find(|(x, _)| *x == t))
                    {
                        entry.1 -= 1.0;
                    }
                    if let Some(n) = self.nodes_left[p].as_mut() {
                        *n -= 1;
                    }
                    self.commit(b, pod_index, class, variant, commit);
                    return true;
                }
            }
        }
        false
    }

    /// An empty NodeClaim of pool `p` whose options fit the pod, the limits and the size cap.
    fn new_bin(
        &self,
        p: usize,
        pod_index: usize,
        variant: &Variant,
    ) -> Option<(Bin, Option<usize>)> {
        let pool = &self.ctx.pools[p];
        let bits = variant.pools[p].as_ref()?;
        if self.nodes_left[p].is_some_and(|n| n <= 0) {
            return None;
        }
        let pod = &self.ctx.snapshot.pods[pod_index];
        if pod
            .host_ports
            .iter()
            .any(|hp| pool.ds_ports.iter().any(|d| d.conflicts(hp)))
        {
            return None;
        }
        let remaining = self.remaining[p].as_ref();
        let mut options: Vec<u32> = (0..pool.types.len())
            .filter(|&t| bit(bits, t) && pod.requests.fits_in(&pool.usable[t]))
            .filter(|&t| remaining.is_none_or(|r| within_limits(&pool.types[t].capacity, r)))
            .map(|t| t as u32)
            .collect();
        let first = *options.first()?;
        let target = if pool.min_values.is_empty() {
            self.target_for(p, &options, pod)
        } else {
            None
        };
        let cap = match target {
            Some(t) => pool.price[t],
            None if pool.min_values.is_empty() => self.cap[p].max(pool.price[first as usize]),
            None => f64::INFINITY,
        };
        options.retain(|&t| pool.price[t as usize] <= cap * (1.0 + 1e-9));
        let mut bin = Bin {
            name: String::new(),
            pool: Some(p),
            inflight: false,
            reqs: pool.base.clone(),
            taints: Vec::new(),
            used: Resources::default(),
            max_usable: Resources::default(),
            options,
            ports: pool.ds_ports.clone(),
            pods: Vec::new(),
            reserved: Resources::default(),
            limit: target.map(|t| pool.usable[t].clone()),
        };
        bin.max_usable = capped(max_usable(pool, &bin.options), bin.limit.as_ref());
        Some((bin, target))
    }

    /// The LP type with the most unopened nodes left that this pod fits, if any.
    fn target_for(&self, p: usize, options: &[u32], pod: &Pod) -> Option<usize> {
        let pool = &self.ctx.pools[p];
        let candidates = self.targets[p].iter().filter(|(t, left)| {
            *left > 1e-6 && options.contains(&(*t as u32)) && pod.requests.fits_in(&pool.usable[*t])
        });
        match self.mode {
            Mode::MostLeft => candidates
                .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))
                .map(|(t, _)| *t),
            Mode::ShapeMatch => {
                let shape = |r: &Resources| {
                    ((r.cpu.max(1) as f64 / 1000.0)
                        / (r.memory.max(1) as f64 / (1u64 << 30) as f64))
                        .ln()
                };
                let want = shape(&pod.requests);
                candidates
                    .min_by(|a, b| {
                        let da = (shape(&pool.usable[a.0]) - want).abs();
                        let db = (shape(&pool.usable[b.0]) - want).abs();
                        da.total_cmp(&db)
                            .then(b.1.total_cmp(&a.1))
                            .then(a.0.cmp(&b.0))
                    })
                    .map(|(t, _)| *t)
            }
            Mode::NoTargets => None,
        }
    }

    /// Checks whether the pod fits `bin` under `variant`; returns the staged changes if so.
    fn evaluate(
        &self,
        bin: &Bin,
        b: usize,
        pod_index: usize,
        class: &Class,
        variant: &Variant,
    ) -> Option<Commit> {
        let ctx = self.ctx;
        let pod = &ctx.snapshot.pods[pod_index];
        let req = &pod.requests;
        let used = &bin.used;
        if used.cpu + req.cpu > bin.max_usable.cpu
            || used.memory + req.memory > bin.max_usable.memory
            || used.pods + req.pods > bin.max_usable.pods
        {
            return None;
        }
        let total = used.plus(req);
        if !total.fits_in(&bin.max_usable) {
            return None;
        }
        if let Some(p) = bin.pool {
            variant.pools[p].as_ref()?;
        } else if tolerates_all(&pod.tolerations, &bin.taints).is_some() {
            return None;
        }
        if pod
            .host_ports
            .iter()
            .any(|hp| bin.ports.iter().any(|x| x.conflicts(hp)))
        {
            return None;
        }
        let groups = &self.topo.groups;
        let host_ok = variant
            .owned
            .iter()
            .filter(|(g, _)| groups[*g].is_hostname())
            .all(|(g, s)| groups[*g].allows_host(b, *s))
            && class
                .repelled_by
                .iter()
                .filter(|g| groups[**g].is_hostname())
                .all(|g| groups[*g].host_count(b) == 0);
        if !host_ok {
            return None;
        }
        let mut reqs: Option<Requirements> = None;
        let mut changed: Vec<String> = Vec::new();
        if !variant.reqs.is_empty() {
            bin.reqs.compatible(&variant.reqs).ok()?;
            if bin.pool.is_some() {
                let joint = bin.reqs.intersection(&variant.reqs);
                changed = variant
                    .reqs
                    .keys()
                    .filter(|k| joint.get(k) != bin.reqs.get(k))
                    .cloned()
                    .collect();
                if !changed.is_empty() {
                    reqs = Some(joint);
                }
            }
        }
        self.narrow_topology(bin, class, variant, &mut reqs, &mut changed)?;
        let options = match bin.pool {
            None => None,
            Some(p) => {
                Some(self.filter_options(p, bin, &total, variant, reqs.as_ref(), &changed)?)
            }
        };
        Some(Commit { reqs, options })
    }

    /// Narrows zone-like keys for the pod's constraints (and for groups counting the pod) to
    /// one allowed domain.
    fn narrow_topology(
        &self,
        bin: &Bin,
        class: &Class,
        variant: &Variant,
        reqs: &mut Option<Requirements>,
        changed: &mut Vec<String>,
    ) -> Option<()> {
        let groups = &self.topo.groups;
        let checks = variant
            .owned
            .iter()
            .map(|(g, s)| (*g, *s, true))
            .chain(class.repelled_by.iter().map(|g| (*g, false, true)))
            .chain(class.member_of.iter().map(|g| (*g, true, false)));
        for (g, self_match, constraining) in checks {
            let group = &groups[g];
            if group.is_hostname() {
                continue;
            }
            let key = group.id.key.as_str();
            let current = reqs.as_ref().unwrap_or(&bin.reqs).get(key);
            let candidates: Vec<String> = match current {
                Some(r) if !r.is_complement() => r.values().iter().cloned().collect(),
                Some(r) if bin.pool.is_some() => group
                    .universe
                    .iter()
                    .filter(|v| r.has(v))
                    .cloned()
                    .collect(),
                None if bin.pool.is_some() => group.universe.iter().cloned().collect(),
                _ => Vec::new(),
            };
            if !constraining {
                // A pod that only counts in the group needs its domain pinned so the count is exact.
                if candidates.len() <= 1 || bin.pool.is_none() {
                    continue;
                }
                let best = group
                    .allowed_values(&candidates, true)
                    .into_iter()
                    .next()
                    .or_else(|| candidates.first().cloned())?;
                pin(bin, reqs, changed, key, &best);
                continue;
            }
            let allowed = if group.id.inverse {
                candidates
                    .iter()
                    .filter(|d| group.count(d) == 0)
                    .cloned()
                    .collect()
            } else {
                group.allowed_values(&candidates, self_match)
            };
            let chosen = allowed.first()?;
            if candidates.len() > 1 {
                pin(bin, reqs, changed, key, chosen);
            }
        }
        Some(())
    }

    fn filter_options(
        &self,
        p: usize,
        bin: &Bin,
        total: &Resources,
        variant: &Variant,
        reqs: Option<&Requirements>,
        changed: &[String],
    ) -> Option<Vec<u32>> {
        let pool = &self.ctx.pools[p];
        let bits = variant.pools[p].as_ref()?;
        let offering_keys = changed.iter().any(|k| k == ZONE || k == CAPACITY_TYPE);
        let label_keys: Vec<&String> = changed
            .iter()
            .filter(|k| *k != ZONE && *k != CAPACITY_TYPE)
            .collect();
        let options: Vec<u32> = bin
            .options
            .iter()
            .copied()
            .filter(|&t| {
                let t = t as usize;
                let it = &pool.types[t];
                bit(bits, t)
                    && total.fits_in(&pool.usable[t])
                    && (!offering_keys || it.cheapest_offering(reqs.unwrap_or(&bin.reqs)).is_some())
                    && label_keys.iter().all(|k| {
                        match (it.requirements.get(k), reqs.and_then(|r| r.get(k))) {
                            (Some(have), Some(want)) => have.intersects(want),
                            _ => true,
                        }
                    })
            })
            .collect();
        if options.is_empty() {
            return None;
        }
        for (key, min) in &pool.min_values {
            let distinct: BTreeSet<&str> = options
                .iter()
                .filter_map(|&t| {
                    pool.types[t as usize]
                        .requirements
                        .get(key)
                        .and_then(|r| r.any())
                })
                .collect();
            if distinct.len() < *min {
                return None;
            }
        }
        Some(options)
    }

    fn commit(
        &mut self,
        b: usize,
        pod_index: usize,
        class: &Class,
        variant: &Variant,
        commit: Commit,
    ) {
        let ctx = self.ctx;
        let pod = &ctx.snapshot.pods[pod_index];
        let bin = &mut self.bins[b];
        bin.used.add(&pod.requests);
        bin.ports.extend(pod.host_ports.iter().cloned());
        bin.pods.push(pod_index);
        if let Some(r) = commit.reqs {
            bin.reqs = r;
        }
        if let (Some(options), Some(p)) = (commit.options, bin.pool) {
            let pool = &ctx.pools[p];
            bin.max_usable = capped(max_usable(pool, &options), bin.limit.as_ref());
            bin.options = options;
            if let Some(remaining) = self.remaining[p].as_mut() {
                let mut reserved = Resources::default();
                for &t in &bin.options {
                    let capacity = &pool.types[t as usize].capacity;
                    for name in &pool.limited {
                        reserved.set(name, reserved.get(name).max(capacity.get(name)));
                    }
                }
                remaining.add(&bin.reserved);
                remaining.sub(&reserved);
                bin.reserved = reserved;
            }
        }
        let bin = &self.bins[b];
        for &g in class.member_of.iter().chain(variant.owner_of.iter()) {
            let group = &mut self.topo.groups[g];
            if group.is_hostname() {
                group.record_host(b);
            } else if let Some(v) = bin
                .reqs
                .get(&group.id.key)
                .filter(|r| r.len() == 1)
                .and_then(|r| r.any())
            {
                group.record_value(v);
            }
        }
        self.placed.insert(pod_index, b);
    }

    /// Re-packs pool `p`'s new bins that hold only movable pods, one partition of equal zone
    /// and capacity type at a time, into the LP's node mix with dot-product best fit, and keeps
    /// each result that is cheaper. Pools with limits or minValues are left as they are.
    fn repack_bins(&mut self, p: usize) {
        let ctx = self.ctx;
        let pool = &ctx.pools[p];
        if pool.remaining.is_some() || !pool.min_values.is_empty() {
            return;
        }
        let mut partitions: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for (b, bin) in self.bins.iter().enumerate() {
            if bin.pool != Some(p)
                || bin.pods.is_empty()
                || !bin.pods.iter().all(|&i| ctx.is_movable(i))
            {
                continue;
            }
            let pinned = |k: &str| {
                bin.reqs
                    .get(k)
                    .filter(|r| r.len() == 1)
                    .and_then(|r| r.any())
                    .unwrap_or("*")
                    .to_string()
            };
            partitions
                .entry(format!("{}|{}", pinned(ZONE), pinned(CAPACITY_TYPE)))
                .or_default()
                .push(b);
        }
        for bins in partitions.into_values() {
            self.repack_partition(p, &bins);
        }
    }

    fn repack_partition(&mut self, p: usize, bins: &[usize]) {
        let ctx = self.ctx;
        let pool = &ctx.pools[p];
        let mut reqs = pool.base.clone();
        for key in [ZONE, CAPACITY_TYPE] {
            if let Some(r) = self.bins[bins[0]].reqs.get(key).filter(|r| r.len() == 1) {
                reqs.add(r.clone());
            }
        }
        let pods: Vec<usize> = bins
            .iter()
            .flat_map(|&b| self.bins[b].pods.iter().copied())
            .collect();
        let current: Vec<(Vec<usize>, usize, f64)> = bins
            .iter()
            .filter_map(|&b| {
                let (t, price) = ctx.cheapest_fit(p, &self.bins[b].used, &self.bins[b].reqs)?;
                Some((self.bins[b].pods.clone(), t, price))
            })
            .collect();
        let cost =
            |k: &Vec<(Vec<usize>, usize, f64)>| k.iter().map(|(_, _, price)| price).sum::<f64>();
        let before = if current.len() == bins.len() {
            cost(&current)
        } else {
            f64::INFINITY
        };
        let top = pool.price.last().copied().unwrap_or(f64::INFINITY);
        let repacked = [1.0, 0.5, 0.25, 0.125, 0.0625]
            .into_iter()
            .flat_map(|f| [Rounding::Down, Rounding::Nearest, Rounding::Up].map(|r| (f * top, r)))
            .flat_map(|(max_price, r)| [Fit::Aligned, Fit::First].map(|fit| (max_price, r, fit)))
            .filter_map(|(max_price, r, fit)| ctx.vector_pack(p, &pods, &reqs, max_price, r, fit));
        let best_repacked = repacked.min_by(|a, b| cost(a).total_cmp(&cost(b)));
        let Some(packing) = std::iter::once(current)
            .chain(best_repacked)
            .map(|k| {
                k.into_iter()
                    .flat_map(|bin| ctx.split(p, &reqs, bin))
                    .collect::<Vec<_>>()
            })
            .min_by(|a, b| cost(a).total_cmp(&cost(b)))
        else {
            return;
        };
        if cost(&packing) + 1e-9 >= before {
            return;
        }
        for &b in bins {
            self.bins[b].pods.clear();
            self.bins[b].used = Resources::default();
        }
        for (members, t, _) in packing {
            let mut used = Resources::default();
            for &i in &members {
                used.add(&ctx.snapshot.pods[i].requests);
            }
            let b = self.bins.len();
            for &i in &members {
                self.placed.insert(i, b);
            }
            self.bins.push(Bin {
                name: String::new(),
                pool: Some(p),
                inflight: false,
                reqs: reqs.clone(),
                taints: Vec::new(),
                used,
                max_usable: pool.usable[t].clone(),
                options: vec![t as u32],
                ports: pool.ds_ports.clone(),
                pods: members,
                reserved: Resources::default(),
                limit: None,
            });
        }
    }

    fn into_plan(self, opts: &ScheduleOptions) -> Plan {
        let ctx = self.ctx;
        let snap = ctx.snapshot;
        let mut plan = Plan::default();
        let mut demand = Resources::default();
        let mut columns: BTreeSet<(usize, usize)> = BTreeSet::new();
        for bin in &self.bins {
            if bin.pods.is_empty() {
                continue;
            }
            let Some(p) = bin.pool else {
                for &i in &bin.pods {
                    plan.existing.push(ExistingPlacement {
                        pod: snap.pods[i].key(),
                        node: bin.name.clone(),
                    });
                }
                continue;
            };
            let pool = &ctx.pools[p];
            for &i in &bin.pods {
                demand.add(&snap.pods[i].requests);
            }
            columns.extend((0..pool.types.len()).map(|t| (p, t)));
            plan.nodeclaims
                .push(node_claim_out(pool, bin, snap, opts.max_options));
        }
        for &i in &self.failed {
            plan.unschedulable.push(Unschedulable {
                pod: snap.pods[i].key(),
                reason: crate::explain::reason(ctx, i),
            });
        }
        let hourly: f64 = plan.nodeclaims.iter().map(|n| n.price).sum();
        let cols: Vec<(usize, usize)> = columns.into_iter().collect();
        let lower_bound = ctx.lp(&demand, &cols).map(|(c, _)| c).unwrap_or(0.0);
        plan.cost = Cost {
            hourly: round6(hourly),
            lower_bound: round6(lower_bound.min(hourly)),
        };
        plan
    }
}

fn pin(
    bin: &Bin,
    reqs: &mut Option<Requirements>,
    changed: &mut Vec<String>,
    key: &str,
    value: &str,
) {
    let r = reqs.get_or_insert_with(|| bin.reqs.clone());
    r.add(Requirement::single(key, value));
    if !changed.iter().any(|k| k == key) {
        changed.push(key.to_string());
    }
}

fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

/// Element-wise minimum with an optional limit.
fn capped(mut r: Resources, limit: Option<&Resources>) -> Resources {
    if let Some(l) = limit {
        r.cpu = r.cpu.min(l.cpu);
        r.memory = r.memory.min(l.memory);
        r.ephemeral = r.ephemeral.min(l.ephemeral);
        r.pods = r.pods.min(l.pods);
        for (k, v) in r.extended.iter_mut() {
            *v = (*v).min(l.get(k));
        }
    }
    r
}

fn max_usable(pool: &PoolCtx, options: &[u32]) -> Resources {
    let mut out = Resources::default();
    for &t in options {
        out.max_with(&pool.usable[t as usize]);
    }
    out
}

fn node_claim_out(pool: &PoolCtx, bin: &Bin, snap: &Snapshot, max_options: usize) -> NewNodeClaim {
    let priced = launch_options(pool, bin, snap, max_options);
    let keep = truncate_with_min_values(pool, &priced, max_options);
    let chosen: Vec<usize> = keep.iter().map(|(_, t)| *t).collect();
    let mut zones = BTreeSet::new();
    let mut capacity_types = BTreeSet::new();
    for &t in &chosen {
        for o in pool.types[t]
            .offerings
            .iter()
            .filter(|o| o.available && offering_allowed(o, &bin.reqs))
        {
            zones.insert(o.zone.clone());
            capacity_types.insert(o.capacity_type.clone());
        }
    }
    let mut requests = Resources::default();
    for &i in &bin.pods {
        requests.add(&snap.pods[i].requests);
    }
    if let Some(&t) = chosen.first() {
        requests.add(&pool.ds_overhead[t]);
    }
    let names: Vec<String> = chosen.iter().map(|&t| pool.types[t].name.clone()).collect();
    let mut reqs = bin.reqs.clone();
    reqs.add(Requirement::in_values(INSTANCE_TYPE, names.iter().cloned()));
    reqs.add(Requirement::in_values(ZONE, zones.iter().cloned()));
    reqs.add(Requirement::in_values(
        CAPACITY_TYPE,
        capacity_types.iter().cloned(),
    ));
    NewNodeClaim {
        nodepool: pool.pool.name.clone(),
        instance_types: names,
        capacity_types: capacity_types.into_iter().collect(),
        zones: zones.into_iter().collect(),
        pods: bin.pods.iter().map(|&i| snap.pods[i].key()).collect(),
        requests,
        price: round6(keep.first().map(|(p, _)| *p).unwrap_or(0.0)),
        requirements: reqs.iter().map(RequirementOut::from).collect(),
        labels: pool.pool.labels.clone(),
        taints: pool.pool.taints.clone(),
        startup_taints: pool.pool.startup_taints.clone(),
        node_class: pool.pool.node_class.clone(),
    }
}

/// Every pool type that fits the bin's final contents and requirements (within its limit
/// reservation), priced under the bin's requirements and sorted cheapest first. Packing may have
/// capped the options to steer node size; the launch gets the full choice back.
fn launch_options(
    pool: &PoolCtx,
    bin: &Bin,
    snap: &Snapshot,
    max_options: usize,
) -> Vec<(f64, usize)> {
    let mut total = Resources::default();
    for &i in &bin.pods {
        total.add(&snap.pods[i].requests);
    }
    let wanted = max_options.saturating_mul(2).max(max_options + 20);
    let mut priced: Vec<(f64, usize)> = Vec::new();
    for (t, it) in pool.types.iter().enumerate() {
        if pool.min_values.is_empty() && priced.len() >= wanted {
            break;
        }
        let fits = total.fits_in(&pool.usable[t])
            && (pool.remaining.is_none()
                || pool
                    .limited
                    .iter()
                    .all(|n| it.capacity.get(n) <= bin.reserved.get(n)))
            && it.requirements.intersects(&bin.reqs).is_ok();
        if let Some(o) = fits.then(|| it.cheapest_offering(&bin.reqs)).flatten() {
            priced.push((o.price, t));
        }
    }
    priced.sort_by(|a, b| {
        a.0.total_cmp(&b.0)
            .then(pool.types[a.1].name.cmp(&pool.types[b.1].name))
    });
    priced
}

/// Keeps the cheapest `max` options, extended as needed to satisfy every `minValues`.
fn truncate_with_min_values(
    pool: &PoolCtx,
    priced: &[(f64, usize)],
    max: usize,
) -> Vec<(f64, usize)> {
    let mut keep: Vec<(f64, usize)> = priced.iter().take(max).cloned().collect();
    for (key, min) in &pool.min_values {
        let value = |t: usize| {
            pool.types[t]
                .requirements
                .get(key)
                .and_then(|r| r.any())
                .map(str::to_string)
        };
        let mut seen: BTreeSet<String> = keep.iter().filter_map(|(_, t)| value(*t)).collect();
        for (p, t) in priced.iter().skip(max) {
            if seen.len() >= *min {
                break;
            }
            if let Some(v) = value(*t) {
                if seen.insert(v) {
                    keep.push((*p, *t));
                }
            }
        }
    }
    keep
}
