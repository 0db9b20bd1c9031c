//! Improving a packing: re-packing movable pods per set of node requirements into the LP's node
//! mix with vector best fit, splitting half-empty nodes into cheaper smaller ones, and
//! re-splitting pairs of nodes by the pods' memory per CPU.

use std::rc::Rc;

use super::*;

/// How fractional LP node counts become whole nodes before re-packing.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Rounding {
    Down,
    Nearest,
    Up,
}

/// Above this many pod×node pairs in a partition, re-packing tries a reduced set of strategies.
const THOROUGH_WORK: usize = 50_000;

/// Above this many split points per pass (pods summed over all node pairs), pairs are not
/// re-split.
const PAIR_WORK: usize = 20_000;

/// A pair is re-cut only when its pods' memory per CPU differs by more than this factor.
const MIN_SHAPE_SPREAD: f64 = 1.25;

/// A pair is cut at about this many points.
const PAIR_CUTS: usize = 64;

/// At most this many passes over the node pairs.
const PAIR_PASSES: usize = 4;

/// Whether type `t` is in a mask of types.
fn bit(mask: &Bits, t: usize) -> bool {
    mask[t / 64] & (1 << (t % 64)) != 0
}

/// An instance type (its index in the pool) and its price.
type Priced = (usize, f64);

/// Pods with the pool each would be re-packed into (see `Run::home_pool`).
type Homed = Vec<(usize, Option<usize>)>;

/// One packed node: its pods, its type and its price.
pub(crate) type Packed = (Vec<usize>, usize, f64);

/// One way of re-packing: which LP node types to allow (a price band), how to round their
/// counts, where each pod goes, in which order, and what a pod that fits nowhere opens.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Strategy {
    pub band: (f64, f64),
    pub rounding: Rounding,
    pub fit: Fit,
    pub order: Order,
}

impl Strategy {
    /// Combinations over the given price bands: all of them when `thorough`, else a few.
    fn all(bands: Vec<(f64, f64)>, thorough: bool) -> Vec<Strategy> {
        let fits: &[Fit] = if thorough {
            &[Fit::Aligned, Fit::First, Fit::Cosine]
        } else {
            &[Fit::Aligned, Fit::Cosine]
        };
        let orders: &[Order] = if thorough {
            &[Order::Sum, Order::Max, Order::Cpu]
        } else {
            &[Order::Sum]
        };
        let mut out = Vec::new();
        for &band in &bands {
            for rounding in [Rounding::Down, Rounding::Nearest, Rounding::Up] {
                for &fit in fits {
                    for &order in orders {
                        out.push(Strategy {
                            band,
                            rounding,
                            fit,
                            order,
                        });
                    }
                }
            }
        }
        out
    }
}

/// The order pods are re-packed in (largest first by this measure of normalised size).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Order {
    Sum,
    Max,
    Cpu,
}

/// Which open node a pod goes to when re-packing.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Fit {
    /// The node whose remaining capacity best aligns with the pod (largest dot product).
    Aligned,
    /// The first node it fits in, which fills nodes one by one.
    First,
    /// The node whose remaining capacity points the same way as the pod, however empty it is.
    Cosine,
}

impl<'a> Ctx<'a> {
    /// A pod that re-packing may move to another new node of the same pool with the same node
    /// requirements (so its node selector, required node affinity, zone and capacity type hold
    /// as before): no host ports, a strictest reading (its preferences as requirements) that
    /// some pool can meet, so that a move keeps every preference, and topology only on zone or
    /// capacity type (whose counts such a move leaves unchanged) or hostname anti-affinity or
    /// spread (which re-packing keeps, see [`Self::hostname_anti`]).
    pub(crate) fn is_movable(&self, i: usize) -> bool {
        let class = &self.classes[self.class_of[&i]];
        let pod = &self.snapshot.pods[i];
        let groups = &self.base_topology.groups;
        let v = &class.variants[0];
        (class.variants.len() == 1 || v.pools.iter().any(Option::is_some))
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
                        || keeps_apart(id)
                })
    }

    /// Hostname anti-affinity and spread of a movable pod: the groups it owns and those that
    /// count it. Re-packing keeps an owner off every node that holds a pod its group counts.
    /// For a hostname spread that is at most one counted pod per node where an owner goes: a
    /// new node's domain is always at count zero, so a skew of one allows no more, and a larger
    /// skew is kept to one (stricter, never a violation).
    pub(crate) fn hostname_anti(&self, i: usize) -> (Vec<usize>, Vec<usize>) {
        let class = &self.classes[self.class_of[&i]];
        let groups = &self.base_topology.groups;
        let is_anti = |g: &usize| keeps_apart(&groups[*g].id);
        let owns = class.variants[0]
            .owned
            .iter()
            .map(|(g, _)| *g)
            .filter(is_anti)
            .collect();
        let counted = class.member_of.iter().copied().filter(is_anti).collect();
        (owns, counted)
    }

    /// The instance types of pool `p` whose own labels (family, size, architecture, CPU
    /// count, …) meet `reqs` and that are offered under them, computed once per requirements:
    /// re-packed pods may name any of these labels, not only zone and capacity type.
    pub(crate) fn allowed_types(&self, p: usize, reqs: &Requirements) -> Option<Rc<Allowed>> {
        if let Some(found) = self.type_masks.borrow().get(&p).and_then(|m| m.get(reqs)) {
            return found.clone();
        }
        let mask = self.pool_compat(p, reqs).map(|mask| {
            let pool = &self.pools[p];
            let mut by_price: Vec<(usize, f64)> = (0..pool.types.len())
                .filter(|&t| bit(&mask, t))
                .filter_map(|t| Some((t, pool.types[t].cheapest_offering(reqs)?.price)))
                .collect();
            by_price.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
            Rc::new(Allowed { mask, by_price })
        });
        self.type_masks
            .borrow_mut()
            .entry(p)
            .or_default()
            .insert(reqs.clone(), mask.clone());
        mask
    }

    /// The cheapest type of pool `p` offered under `reqs` whose usable resources hold `used`.
    /// Types are in pool-price order, and narrower requirements never make a type cheaper than
    /// its pool price, so the scan stops once no later type can win.
    pub(crate) fn cheapest_fit(
        &self,
        p: usize,
        used: &Resources,
        reqs: &Requirements,
    ) -> Option<(usize, f64)> {
        let allowed = self.allowed_types(p, reqs)?;
        self.cheapest_fit_in(p, used, &allowed)
    }

    /// [`Self::cheapest_fit`] among the `allowed` types (already found for the requirements):
    /// the first of them, by their price under the requirements, that holds `used`.
    pub(crate) fn cheapest_fit_in(
        &self,
        p: usize,
        used: &Resources,
        allowed: &Allowed,
    ) -> Option<(usize, f64)> {
        let usable = &self.pools[p].usable;
        allowed
            .by_price
            .iter()
            .find(|(t, _)| used.fits_in(&usable[*t]))
            .copied()
    }

    /// A lower bound on what `used` costs in pool `p` under `reqs`: its CPU, or its memory, at
    /// the lowest price per unit of any type allowed.
    fn cheapest_bound(&self, p: usize, reqs: &Requirements, used: &Resources) -> f64 {
        let Some(allowed) = self.allowed_types(p, reqs) else {
            return 0.0;
        };
        let usable = &self.pools[p].usable;
        let per = |unit: fn(&Resources) -> i64| {
            allowed
                .by_price
                .iter()
                .filter(|(t, _)| unit(&usable[*t]) > 0)
                .map(|(t, price)| price / unit(&usable[*t]) as f64)
                .fold(f64::INFINITY, f64::min)
        };
        let cpu = per(|r| r.cpu) * used.cpu as f64;
        let memory = per(|r| r.memory) * used.memory as f64;
        [cpu, memory]
            .into_iter()
            .filter(|x| x.is_finite())
            .fold(0.0, f64::max)
    }

    /// Splits one packed node into smaller ones when they cost less together (a half-empty
    /// large node often costs more than two small nodes that hold the same pods, and so does a
    /// full node of a type dear for what it holds).
    pub(crate) fn split(&self, p: usize, reqs: &Requirements, bin: Packed) -> Vec<Packed> {
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
        let dear = fill > 0.75 && *price > 1.5 * self.cheapest_bound(p, reqs, &used);
        if members.len() < 2
            || (fill > 0.75 && !dear)
            || pool
                .price
                .first()
                .is_none_or(|cheapest| *cheapest > price * 0.5)
        {
            return vec![bin];
        }
        let cost = |k: &Vec<Packed>| k.iter().map(|(_, _, price)| price).sum::<f64>();
        let smaller = [Rounding::Up, Rounding::Nearest]
            .into_iter()
            .flat_map(|r| [Fit::First, Fit::Aligned].map(|f| (r, f)))
            .filter_map(|(rounding, fit)| {
                let s = Strategy {
                    band: (0.0, price * 0.75),
                    rounding,
                    fit,
                    order: Order::Sum,
                };
                self.vector_pack(p, members, reqs, s)
            })
            .filter(|k| k.len() > 1)
            .min_by(|a, b| cost(a).total_cmp(&cost(b)));
        match smaller {
            Some(k) if cost(&k) + 1e-9 < *price => k,
            _ => vec![bin],
        }
    }

    /// Improves a packing two nodes at a time. The pods of a pair, sorted by memory per CPU,
    /// are cut at every point into two nodes of their cheapest fitting types (one side may be
    /// empty, which merges the pair). The cheapest cut replaces the pair when it costs less.
    /// Cuts that would put two pods kept apart on one node are skipped, and pairs of pods of
    /// one shape are left alone.
    pub(crate) fn improve_pairs(&self, p: usize, reqs: &Requirements, packing: &mut Vec<Packed>) {
        let pairs = packing.len() * packing.len().saturating_sub(1) / 2;
        let pods: usize = packing.iter().map(|(members, _, _)| members.len()).sum();
        if pairs * pods / packing.len().max(1) > PAIR_WORK {
            return;
        }
        // Pods with hostname anti-affinity, found once: pairs holding any are left alone.
        let anti: BTreeSet<usize> = packing
            .iter()
            .flat_map(|(members, _, _)| members.iter().copied())
            .filter(|&i| {
                let (owns, counted) = self.hostname_anti(i);
                !owns.is_empty() || !counted.is_empty()
            })
            .collect();
        for _ in 0..PAIR_PASSES {
            let mut improved = false;
            for a in 0..packing.len() {
                for b in a + 1..packing.len() {
                    if packing[a].0.is_empty() || packing[b].0.is_empty() {
                        continue;
                    }
                    if let Some((left, right)) =
                        self.best_cut(p, reqs, &anti, &packing[a], &packing[b])
                    {
                        packing[a] = left;
                        packing[b] = right;
                        improved = true;
                    }
                }
            }
            packing.retain(|(members, _, _)| !members.is_empty());
            if !improved {
                break;
            }
        }
    }

    /// The pods sorted by memory per CPU (indices break ties), where a pair is cut; None when
    /// they are all of about one shape: those gain nothing from the order, only tighter nodes
    /// that a real scheduler, binding pods in its own order, may fail to fill.
    fn by_memory_per_cpu(&self, mut order: Vec<usize>) -> Option<Vec<usize>> {
        let pods = &self.snapshot.pods;
        let per_cpu = |i: usize| {
            let r = &pods[i].requests;
            r.memory as f64 / r.cpu.max(1) as f64
        };
        order.sort_by(|&x, &y| per_cpu(x).total_cmp(&per_cpu(y)).then(x.cmp(&y)));
        let (first, last) = (per_cpu(*order.first()?), per_cpu(*order.last()?));
        (last > first * MIN_SHAPE_SPREAD).then_some(order)
    }

    /// The cheapest cut of two nodes' pods (sorted by memory per CPU) into two nodes, when it
    /// costs less than the pair does now.
    fn best_cut(
        &self,
        p: usize,
        reqs: &Requirements,
        anti: &BTreeSet<usize>,
        a: &Packed,
        b: &Packed,
    ) -> Option<(Packed, Packed)> {
        let pods = &self.snapshot.pods;
        let order: Vec<usize> = a.0.iter().chain(&b.0).copied().collect();
        let mut order = self.by_memory_per_cpu(order)?;
        // Positions of pods that may not share a node: a cut must part every such pair.
        let apart = self.apart_pairs(&order, anti);
        let mut total = Resources::default();
        for &i in &order {
            total.add(&pods[i].requests);
        }
        let side = |used: &Resources, empty: bool| -> Option<Priced> {
            if empty {
                Some((0, 0.0))
            } else {
                self.cheapest_fit(p, used, reqs)
            }
        };
        let mut best: Option<(usize, Priced, Priced)> = None;
        let mut best_price = a.2 + b.2 - 1e-9;
        // Large pairs are cut at about PAIR_CUTS evenly spaced points.
        let stride = order.len().div_ceil(PAIR_CUTS).max(1);
        let mut prefix = Resources::default();
        for k in 0..=order.len() {
            let last = k == order.len();
            let parts = apart.iter().all(|&(x, y)| (x < k) != (y < k));
            if (k % stride == 0 || last) && parts {
                let rest = total.minus(&prefix);
                if let (Some(l), Some(r)) = (side(&prefix, k == 0), side(&rest, last)) {
                    if l.1 + r.1 < best_price {
                        best_price = l.1 + r.1;
                        best = Some((k, l, r));
                    }
                }
            }
            if let Some(&i) = order.get(k) {
                prefix.add(&pods[i].requests);
            }
        }
        let (k, (lt, lp), (rt, rp)) = best?;
        let right = order.split_off(k);
        Some(((order, lt, lp), (right, rt, rp)))
    }

    /// The position pairs of `order` that may not share a node (hostname anti-affinity or
    /// spread, either way), among the pods of `anti` only.
    fn apart_pairs(&self, order: &[usize], anti: &BTreeSet<usize>) -> Vec<(usize, usize)> {
        let marked: Vec<(usize, KeptApart)> = order
            .iter()
            .enumerate()
            .filter(|(_, i)| anti.contains(i))
            .map(|(x, &i)| (x, self.hostname_anti(i)))
            .collect();
        let meets = |a: &[usize], b: &[usize]| a.iter().any(|g| b.contains(g));
        let mut pairs = Vec::new();
        for (n, (x, gx)) in marked.iter().enumerate() {
            for (y, gy) in &marked[n + 1..] {
                if meets(&gx.0, &gy.1) || meets(&gy.0, &gx.1) {
                    pairs.push((*x, *y));
                }
            }
        }
        pairs
    }

    /// Packs `pods` into pool `p`: bins of the LP's types (rounded) first, each pod to the open
    /// bin whose remaining capacity best aligns with it (dot product of normalised vectors),
    /// overflow into new bins of the LP's largest type, then each bin shrunk to its
    /// cheapest fitting type. Returns (pods, type, price) per bin.
    pub(crate) fn vector_pack(
        &self,
        p: usize,
        pods: &[usize],
        reqs: &Requirements,
        strategy: Strategy,
    ) -> Option<Vec<Packed>> {
        let Strategy {
            band: (min_price, max_price),
            rounding,
            fit,
            order: order_by,
        } = strategy;
        let pool = &self.pools[p];
        let mut demand = Resources::default();
        for &i in pods {
            demand.add(&self.snapshot.pods[i].requests);
        }
        let allowed = self.allowed_types(p, reqs)?;
        let mut cols: Vec<(usize, usize, f64)> = allowed
            .by_price
            .iter()
            .filter(|(_, price)| *price >= min_price && *price <= max_price)
            .map(|&(t, price)| (p, t, price))
            .collect();
        cols.sort_by_key(|c| c.1);
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
        let size = |i: &usize| {
            let v = norm(&self.snapshot.pods[*i].requests);
            match order_by {
                Order::Sum => v.iter().sum::<f64>(),
                Order::Max => v.iter().copied().fold(0.0, f64::max),
                Order::Cpu => v[0],
            }
        };
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
                        Fit::Cosine => {
                            let len = (l[0] * l[0] + l[1] * l[1] + l[2] * l[2]).sqrt().max(1e-12);
                            (v[0] * l[0] + v[1] * l[1] + v[2] * l[2]) / len
                        }
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
}

impl<'c, 'a> Run<'c, 'a> {
    /// Re-packing as it was, and after taking movable pods out of mixed bins; the cheaper wins
    /// (regrouping is cheaper where it acts, but changes what re-packing then sees). The run is
    /// cloned only when some bin is mixed: it holds every existing node's bin.
    pub(crate) fn improved(mut self) -> Self {
        let pools = self.ctx.pools.len();
        let mixed = (0..pools).any(|p| self.has_mixed_bins(p));
        // Regrouping only the mixed bins keeps the others' packing; regrouping every bin of
        // movable pods too lets the pods that may go anywhere fill around those that may not
        // (a node of 16 GiB pods needs the 8 GiB pods of the bins beside it).
        let ways = [
            (Fill::NarrowFirst, false),
            (Fill::WideFirst, false),
            (Fill::Never, false),
            (Fill::NarrowFirst, true),
            (Fill::WideFirst, true),
        ];
        let tries: Vec<Self> = if mixed {
            ways.into_iter()
                .filter_map(|(fill, all)| self.clone().regrouped(fill, all))
                .collect()
        } else {
            Vec::new()
        };
        for p in 0..pools {
            self.repack_bins(p);
        }
        let key = |r: &Self| (r.failed.len(), r.hourly());
        let best = tries
            .into_iter()
            .min_by(|a, b| key(a).0.cmp(&key(b).0).then(key(a).1.total_cmp(&key(b).1)));
        let mut best = match best {
            Some(r) if (r.failed.len(), r.hourly()) < (self.failed.len(), self.hourly() - 1e-9) => {
                r
            }
            _ => self,
        };
        for p in 0..pools {
            best.relax_bins(p);
        }
        best
    }

    /// Widens each new bin of pool `p` whose pods may all move to what those pods need: the
    /// pool's requirements with each pod's own (and the zone and capacity type the bin pinned,
    /// for pods in a topology). A pod that left a bin does not take the requirements it brought
    /// with it, and a bin that kept an architecture or a zone only for such a pod costs more
    /// than its pods need. Kept where a cheaper type then holds the pods.
    pub(crate) fn relax_bins(&mut self, p: usize) {
        let ctx = self.ctx;
        let pool = &ctx.pools[p];
        if pool.remaining.is_some() || !pool.min_values.is_empty() {
            return;
        }
        for b in 0..self.bins.len() {
            let bin = &self.bins[b];
            let new = bin.pool == Some(p) && !bin.inflight && bin.name.is_empty();
            if !new || bin.pods.is_empty() || !bin.pods.iter().all(|&i| ctx.is_movable(i)) {
                continue;
            }
            let relaxed = bin.pods.iter().fold(pool.base.clone(), |r, &i| {
                r.intersection(&ctx.own_reqs(p, i, &bin.reqs))
            });
            if relaxed == bin.reqs {
                continue;
            }
            let now = ctx.cheapest_fit(p, &bin.used, &bin.reqs);
            let Some((t, price)) = ctx.cheapest_fit(p, &bin.used, &relaxed) else {
                continue;
            };
            if now.is_some_and(|(_, was)| price + 1e-9 >= was) {
                continue;
            }
            let bin = &mut self.bins[b];
            bin.reqs = relaxed;
            bin.options = vec![t as u32];
            bin.max_usable = pool.usable[t].clone();
        }
    }

    /// This run regrouped pool by pool with `fill` (the mixed bins, or with `all` every new bin
    /// of movable pods too), then re-packed; None when regrouping changed nothing.
    fn regrouped(mut self, fill: Fill, all: bool) -> Option<Self> {
        let mut changed = false;
        for p in 0..self.ctx.pools.len() {
            changed |= self.regroup(p, fill, all);
        }
        for p in 0..self.ctx.pools.len() {
            self.repack_bins(p);
        }
        changed.then_some(self)
    }

    /// Re-packs pool `p`'s new bins that hold only movable pods, one partition of equal
    /// requirements at a time, into the LP's node mix with dot-product best fit, and keeps
    /// each result that is cheaper. Pools with limits or minValues are left as they are.
    pub(crate) fn repack_bins(&mut self, p: usize) {
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
            // Bins with equal requirements (the pool's, their pods' and the zone and capacity
            // type chosen) can trade pods: each pod's requirements hold on every one of them.
            partitions.entry(bin.reqs.to_string()).or_default().push(b);
        }
        for bins in partitions.into_values() {
            self.repack_partition(p, &bins);
        }
    }

    pub(crate) fn repack_partition(&mut self, p: usize, bins: &[usize]) {
        let ctx = self.ctx;
        let reqs = self.bins[bins[0]].reqs.clone();
        let pods: Vec<usize> = bins
            .iter()
            .flat_map(|&b| self.bins[b].pods.iter().copied())
            .collect();
        let current: Vec<Packed> = bins
            .iter()
            .filter_map(|&b| {
                let (t, price) = ctx.cheapest_fit(p, &self.bins[b].used, &self.bins[b].reqs)?;
                Some((self.bins[b].pods.clone(), t, price))
            })
            .collect();
        let before = if current.len() == bins.len() {
            cost(&current)
        } else {
            f64::INFINITY
        };
        let Some(packing) =
            ctx.pack_group(p, &pods, &reqs, Some(current), bins.len(), Patterns::On)
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
        self.open_packed(p, &reqs, packing);
    }

    /// New bins of pool `p` for a packing, each at its chosen type.
    fn open_packed(&mut self, p: usize, reqs: &Requirements, packing: Vec<Packed>) {
        let ctx = self.ctx;
        let pool = &ctx.pools[p];
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
}

/// A group packed from scratch: pool, requirements, pods, patterns, the node count it had.
pub(crate) type GroupKey = (usize, String, Vec<usize>, Patterns, usize);

/// A group's vector packings: pool, requirements, pods, whether every strategy was tried.
pub(crate) type VectorKey = (usize, String, Vec<usize>, bool);

/// Whether a group's nodes may also be packed by patterns ([`Ctx::pattern_pack`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Patterns {
    On,
    Off,
}

/// Whether and in which order groups packed together fill each other's nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fill {
    /// The groups allowed the fewest types first; later, wider groups fill their nodes.
    NarrowFirst,
    /// The widest groups first; narrower ones fill what their requirements allow.
    WideFirst,
    /// Each group on nodes of its own.
    Never,
}

/// A new node while groups are packed: its pool, requirements, pods, type, price and use.
pub(crate) struct Open {
    pub pool: usize,
    pub reqs: Requirements,
    pub pods: Vec<usize>,
    pub t: usize,
    pub price: f64,
    pub used: Resources,
}

impl Ctx<'_> {
    /// Packs groups of pods (pool, requirements, pods) in order of how many types they are
    /// allowed ([`Fill`]); the pods of each later group first fill the room the earlier groups'
    /// nodes have left, where the node's type and price hold under both requirements, and only
    /// the rest get nodes of their own; then pairs of nodes are re-cut across groups. A group pinned to a few families often leaves CPU or
    /// memory idle that pods able to run anywhere can use for nothing.
    pub(crate) fn pack_groups(
        &self,
        groups: Vec<(usize, (Requirements, Vec<usize>))>,
        fill: Fill,
    ) -> Option<Vec<Open>> {
        let some_suit = groups
            .iter()
            .any(|(_, (_, pods))| self.suits_patterns(pods));
        [Patterns::Off, Patterns::On]
            .into_iter()
            .filter(|patterns| some_suit || *patterns == Patterns::Off)
            .filter_map(|patterns| self.pack_groups_with(groups.clone(), fill, patterns))
            .min_by(|a, b| total(a).total_cmp(&total(b)))
    }

    /// [`Self::pack_groups`], each group's own nodes packed with or without patterns (nodes
    /// packed tight by patterns leave later groups less room to fill, so either may win).
    fn pack_groups_with(
        &self,
        groups: Vec<(usize, (Requirements, Vec<usize>))>,
        fill: Fill,
        patterns: Patterns,
    ) -> Option<Vec<Open>> {
        let mut order: Vec<(usize, usize, Requirements, Vec<usize>)> = groups
            .into_iter()
            .map(|(q, (reqs, pods))| {
                let width = self
                    .allowed_types(q, &reqs)
                    .map_or(0, |m| m.iter().map(|w| w.count_ones() as usize).sum());
                (width, q, reqs, pods)
            })
            .collect();
        order.sort_by_key(|(width, ..)| *width);
        if fill == Fill::WideFirst {
            order.reverse();
        }
        let mut open: Vec<Open> = Vec::new();
        for (_, q, reqs, pods) in order {
            let rest = match fill {
                Fill::Never => pods,
                _ => self.fill(q, &reqs, pods, &mut open),
            };
            if rest.is_empty() {
                continue;
            }
            for (members, t, price) in
                self.pack_group(q, &rest, &reqs, None, usize::MAX, patterns)?
            {
                let mut used = Resources::default();
                for &i in &members {
                    used.add(&self.snapshot.pods[i].requests);
                }
                open.push(Open {
                    pool: q,
                    reqs: reqs.clone(),
                    pods: members,
                    t,
                    price,
                    used,
                });
            }
        }
        self.improve_open_pairs(&mut open);
        Some(open)
    }

    /// Places what it can of `pods` (requirements `reqs`, pool `q`) on the open nodes and
    /// returns the pods left. Each node that may take the group (its type offered under both
    /// requirements at the same price) takes, one at a time, the pod whose requests point most
    /// the way its free room does, so a node short of memory takes CPU-heavy pods. Only pods in
    /// no topology move this way.
    fn fill(
        &self,
        q: usize,
        reqs: &Requirements,
        pods: Vec<usize>,
        open: &mut [Open],
    ) -> Vec<usize> {
        let (mut left, mut rest): (Vec<usize>, Vec<usize>) =
            pods.into_iter().partition(|&i| self.in_no_topology(i));
        for n in open.iter_mut() {
            if left.is_empty() {
                break;
            }
            let Some(merged) = self.may_join(q, reqs, n) else {
                continue;
            };
            let usable = &self.pools[q].usable[n.t];
            let mut joined = false;
            while let Some(k) = self.best_aligned(&left, usable, &n.used) {
                let i = left.swap_remove(k);
                n.pods.push(i);
                n.used.add(&self.snapshot.pods[i].requests);
                joined = true;
            }
            if joined {
                n.reqs = merged;
            }
        }
        rest.append(&mut left);
        rest
    }

    /// The requirements node `n` would have with a group of pool `q` needing `reqs` on it, when
    /// its type is offered under them at the same price.
    fn may_join(&self, q: usize, reqs: &Requirements, n: &Open) -> Option<Requirements> {
        let pool = &self.pools[q];
        if n.pool != q {
            return None;
        }
        let merged = n.reqs.intersection(reqs);
        if !self.allowed_types(q, &merged).is_some_and(|m| bit(&m, n.t)) {
            return None;
        }
        let price = pool.types[n.t].cheapest_offering(&merged)?.price;
        (price <= n.price + 1e-9).then_some(merged)
    }

    /// Of `pods`, the one that fits beside `used` in `usable` and whose CPU and memory, as
    /// shares of the node, point most nearly the way its free room does (the larger on a tie).
    fn best_aligned(&self, pods: &[usize], usable: &Resources, used: &Resources) -> Option<usize> {
        let share = |v: i64, of: i64| v as f64 / of.max(1) as f64;
        let free = (
            share(usable.cpu - used.cpu, usable.cpu),
            share(usable.memory - used.memory, usable.memory),
        );
        let mut best: Option<(usize, f64, f64)> = None;
        for (k, &i) in pods.iter().enumerate() {
            let r = &self.snapshot.pods[i].requests;
            if !used.plus(r).fits_in(usable) {
                continue;
            }
            let d = (share(r.cpu, usable.cpu), share(r.memory, usable.memory));
            let size = (d.0 * d.0 + d.1 * d.1).sqrt();
            let cosine = (d.0 * free.0 + d.1 * free.1) / size.max(1e-12);
            let better =
                best.is_none_or(|(_, c, s)| cosine > c + 1e-12 || (cosine > c - 1e-12 && size > s));
            if better {
                best = Some((k, cosine, size));
            }
        }
        best.map(|(k, _, _)| k)
    }

    /// Re-cuts pairs of open nodes of one pool across groups, as [`Self::improve_pairs`] does
    /// within one: the two nodes' pods, sorted by memory per CPU, are cut into two nodes, each
    /// needing what all its pods need, at its cheapest type offered under that. A node full of
    /// CPU-heavy pods and one of memory-heavy pods often become two balanced, cheaper ones.
    /// Only pods in no topology are moved.
    fn improve_open_pairs(&self, open: &mut Vec<Open>) {
        let pods: usize = open.iter().map(|n| n.pods.len()).sum();
        let pairs = open.len() * open.len().saturating_sub(1) / 2;
        if pairs * pods / open.len().max(1) > PAIR_WORK {
            return;
        }
        for _ in 0..PAIR_PASSES {
            let mut improved = false;
            for a in 0..open.len() {
                for b in a + 1..open.len() {
                    if let Some((left, right)) = self.cut_open(&open[a], &open[b]) {
                        open[a] = left;
                        open[b] = right;
                        improved = true;
                    }
                }
            }
            open.retain(|n| !n.pods.is_empty());
            if !improved {
                break;
            }
        }
    }

    /// The cheapest cut of two open nodes' pods into two nodes, when it costs less.
    fn cut_open(&self, a: &Open, b: &Open) -> Option<(Open, Open)> {
        let q = a.pool;
        if b.pool != q || a.pods.is_empty() || b.pods.is_empty() {
            return None;
        }
        let pods = &self.snapshot.pods;
        let order: Vec<usize> = a.pods.iter().chain(&b.pods).copied().collect();
        if !order.iter().all(|&i| self.in_no_topology(i)) {
            return None;
        }
        let mut order = self.by_memory_per_cpu(order)?;
        let own = |i: usize| self.own_reqs(q, i, &Requirements::new());
        let class = |i: usize| self.class_of[&i];
        // What the pods from k on need, for every k (it changes only at a new class).
        type Need = Rc<(Requirements, Option<Rc<Allowed>>)>;
        let need = |reqs: Requirements| -> Need {
            let mask = self.allowed_types(q, &reqs);
            Rc::new((reqs, mask))
        };
        let mut suffix: Vec<Need> = vec![need(Requirements::new()); order.len() + 1];
        let mut seen = BTreeSet::new();
        for k in (0..order.len()).rev() {
            suffix[k] = if seen.insert(class(order[k])) {
                need(suffix[k + 1].0.intersection(&own(order[k])))
            } else {
                suffix[k + 1].clone()
            };
        }
        let fit = |used: &Resources, n: &Need| match &n.1 {
            Some(allowed) => self.cheapest_fit_in(q, used, allowed),
            None => None,
        };
        let mut total = Resources::default();
        for &i in &order {
            total.add(&pods[i].requests);
        }
        let mut best: Option<(usize, Priced, Priced)> = None;
        let mut best_price = a.price + b.price - 1e-9;
        let stride = order.len().div_ceil(PAIR_CUTS).max(1);
        let mut prefix = Resources::default();
        let mut prefix_need = need(Requirements::new());
        let mut seen = BTreeSet::new();
        // The last cut leaves the right side empty: the pair merged into one node.
        for k in 1..=order.len() {
            prefix.add(&pods[order[k - 1]].requests);
            if seen.insert(class(order[k - 1])) {
                prefix_need = need(prefix_need.0.intersection(&own(order[k - 1])));
            }
            let merged = k == order.len();
            if k % stride != 0 && !merged {
                continue;
            }
            let rest = total.minus(&prefix);
            let left = fit(&prefix, &prefix_need);
            let right = if merged {
                Some((0, 0.0))
            } else {
                fit(&rest, &suffix[k])
            };
            if let (Some(l), Some(r)) = (left, right) {
                if l.1 + r.1 < best_price {
                    best_price = l.1 + r.1;
                    best = Some((k, l, r));
                }
            }
        }
        let (k, (lt, lp), (rt, rp)) = best?;
        let right = order.split_off(k);
        let node = |members: Vec<usize>, t: usize, price: f64, reqs: Requirements| {
            let mut used = Resources::default();
            for &i in &members {
                used.add(&pods[i].requests);
            }
            Open {
                pool: q,
                reqs,
                pods: members,
                t,
                price,
                used,
            }
        };
        let classes: BTreeSet<usize> = order.iter().map(|&i| class(i)).collect();
        // Each class is some pod's of `order`, so each finds one.
        let left_reqs = classes.iter().fold(Requirements::new(), |r, &c| {
            match order.iter().find(|&&i| class(i) == c) {
                Some(&i) => r.intersection(&own(i)),
                None => r,
            }
        });
        Some((
            node(order, lt, lp, left_reqs),
            node(right, rt, rp, suffix[k].0.clone()),
        ))
    }

    /// Whether pod `i` takes part in no topology (spread, affinity or anti-affinity).
    fn in_no_topology(&self, i: usize) -> bool {
        let class = &self.classes[self.class_of[&i]];
        let v = &class.variants[0];
        v.owned.is_empty()
            && v.owner_of.is_empty()
            && class.member_of.is_empty()
            && class.repelled_by.is_empty()
    }
}

/// The hostname groups a pod owns and those that count it ([`Ctx::hostname_anti`]).
type KeptApart = (Vec<usize>, Vec<usize>);

/// Whether re-packing keeps the group's owners apart from its counted pods, node by node:
/// hostname anti-affinity (not its inverse) and hard hostname spreads.
fn keeps_apart(id: &crate::topology::GroupKey) -> bool {
    id.key == HOSTNAME
        && !id.inverse
        && match id.kind {
            Kind::Anti => true,
            Kind::Spread { .. } => true,
            Kind::Affinity => false,
        }
}

/// The hourly price of open nodes.
fn total(open: &[Open]) -> f64 {
    open.iter().map(|n| n.price).sum()
}

/// The hourly price of a packing.
fn cost(packing: &[Packed]) -> f64 {
    packing.iter().map(|(_, _, price)| price).sum()
}

impl Ctx<'_> {
    /// The cheapest packing found for `pods` under `reqs` in pool `p`: the LP-guided vector
    /// packings (every strategy when the problem is small), the pattern packings (`patterns`,
    /// when the group suits them) and `current` if given, each with its half-empty nodes split,
    /// then the best one re-cut two nodes at a time. A group packed from scratch is packed once
    /// per plan: each way of regrouping meets the same groups.
    pub(crate) fn pack_group(
        &self,
        p: usize,
        pods: &[usize],
        reqs: &Requirements,
        current: Option<Vec<Packed>>,
        nodes: usize,
        patterns: Patterns,
    ) -> Option<Vec<Packed>> {
        let patterns = match patterns {
            Patterns::On if !self.suits_patterns(pods) => Patterns::Off,
            _ => patterns,
        };
        let key = current
            .is_none()
            .then(|| (p, reqs.to_string(), pods.to_vec(), patterns, nodes));
        if let Some(found) = key
            .as_ref()
            .and_then(|k| self.packings.borrow().get(k).cloned())
        {
            return found;
        }
        // A few pods: the optimum itself, which no heuristic packing can beat.
        let exact = self
            .exact_pack(p, pods, reqs)
            .or_else(|| self.exact_pack_by_shape(p, pods, reqs));
        let packing = match exact {
            Some(exact) => Some(exact),
            None => {
                // Each strategy costs about pods × nodes; try them all only on small problems.
                let thorough = pods.len().saturating_mul(nodes.max(1)) <= THOROUGH_WORK;
                let patterned = match patterns {
                    Patterns::On => self.best_pattern_pack(p, pods, reqs),
                    Patterns::Off => None,
                };
                let candidates = current
                    .into_iter()
                    .chain(self.best_vector_pack(p, pods, reqs, thorough))
                    .chain(patterned);
                self.cheapest_improved(p, reqs, candidates)
            }
        };
        if let Some(key) = key {
            self.packings.borrow_mut().insert(key, packing.clone());
        }
        packing
    }

    /// The cheapest of `candidates` once each has its half-empty nodes split, re-cut two nodes
    /// at a time.
    fn cheapest_improved(
        &self,
        p: usize,
        reqs: &Requirements,
        candidates: impl Iterator<Item = Vec<Packed>>,
    ) -> Option<Vec<Packed>> {
        let mut packing = candidates
            .map(|k| {
                k.into_iter()
                    .flat_map(|bin| self.split(p, reqs, bin))
                    .collect::<Vec<_>>()
            })
            .min_by(|a, b| cost(a).total_cmp(&cost(b)))?;
        self.improve_pairs(p, reqs, &mut packing);
        Some(packing)
    }

    /// The cheapest of the LP-guided vector packings of `pods` (every strategy when
    /// `thorough`, else a few), found once per group.
    fn best_vector_pack(
        &self,
        p: usize,
        pods: &[usize],
        reqs: &Requirements,
        thorough: bool,
    ) -> Option<Vec<Packed>> {
        let key = (p, reqs.to_string(), pods.to_vec(), thorough);
        if let Some(found) = self.vector_packings.borrow().get(&key) {
            return found.clone();
        }
        let top = self.pools[p].price.last().copied().unwrap_or(f64::INFINITY);
        let bands: Vec<(f64, f64)> = [1.0, 0.5, 0.25, 0.125, 0.0625]
            .map(|f| (0.0, f * top))
            .into_iter()
            .chain([0.0625, 0.03125, 0.015625].map(|f| (f * top, top)))
            .collect();
        let best = Strategy::all(bands, thorough)
            .into_iter()
            .filter_map(|s| self.vector_pack(p, pods, reqs, s))
            .min_by(|a, b| cost(a).total_cmp(&cost(b)));
        self.vector_packings.borrow_mut().insert(key, best.clone());
        best
    }

    /// The cheapest packing of `pods` by patterns: over all types and over the cheaper ones
    /// only (smaller nodes round better), rounded down and to the nearest node.
    fn best_pattern_pack(
        &self,
        p: usize,
        pods: &[usize],
        reqs: &Requirements,
    ) -> Option<Vec<Packed>> {
        [1.0, 0.25]
            .into_iter()
            .flat_map(|share| [Rounding::Down, Rounding::Nearest].map(|r| (share, r)))
            .filter_map(|(share, rounding)| self.pattern_pack(p, pods, reqs, share, rounding))
            .min_by(|a, b| cost(a).total_cmp(&cost(b)))
    }

    /// The requirements a movable pod needs of its node in pool `p`: the pool's and its own,
    /// and, when it takes part in a topology (zone or capacity-type spread, hostname
    /// anti-affinity), the zone and capacity type its bin pinned, so the counts stay as planned.
    pub(crate) fn own_reqs(&self, p: usize, i: usize, bin_reqs: &Requirements) -> Requirements {
        let class = &self.classes[self.class_of[&i]];
        let v = &class.variants[0];
        let mut reqs = self.pools[p].base.intersection(&v.reqs);
        let topology = !v.owned.is_empty()
            || !v.owner_of.is_empty()
            || !class.member_of.is_empty()
            || !class.repelled_by.is_empty();
        if topology {
            for key in [ZONE, CAPACITY_TYPE] {
                if let Some(r) = bin_reqs.get(key) {
                    reqs.add(r.clone());
                }
            }
        }
        reqs
    }
}

mod exact;
mod patterns;
mod regroup;
pub(crate) use patterns::Program;
#[cfg(test)]
mod tests;
