//! Improving a packed group node by node: splitting a half-empty or dear node into cheaper
//! smaller ones, and re-cutting pairs of nodes by their pods' memory per CPU.

use super::*;

/// A pair is re-cut only when its pods' memory per CPU differs by more than this factor.
const MIN_SHAPE_SPREAD: f64 = 1.25;

impl Ctx<'_> {
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
    pub(super) fn by_memory_per_cpu(&self, mut order: Vec<usize>) -> Option<Vec<usize>> {
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
}
