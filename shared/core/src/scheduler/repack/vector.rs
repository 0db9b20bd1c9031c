//! LP-guided vector packing: the LP's node mix over a price band, rounded to whole nodes, and
//! pods placed one by one, largest first, each on the open node a fit rule picks; the
//! strategies (band, rounding, fit and order) it is tried with.

use super::*;

/// How fractional LP node counts become whole nodes before re-packing.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Rounding {
    Down,
    Nearest,
    Up,
}

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
    pub(super) fn all(bands: Vec<(f64, f64)>, thorough: bool) -> Vec<Strategy> {
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

impl Ctx<'_> {
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
