//! Packing many pods of a few shapes by node patterns (how many pods of each shape one node of a
//! type holds), the cutting-stock way (Gilmore and Gomory): a linear program over patterns says
//! how many nodes of each to buy; patterns enter it by column generation (a pattern enters when
//! the pods it holds are worth more, at the program's shadow prices of the shapes, than its
//! node costs: a small bounded knapsack per type). The whole nodes of its answer are opened and
//! the pods left are packed again, the same way or exactly, until none is left.
//!
//! Where the aggregate LP (CPU and memory in bulk) mixes types fractionally, a packer that
//! fills those types pod by pod leaves each node a little short in one dimension and opens one
//! more large node for the rest; patterns know which pods fill each type, so the whole part is
//! tight and only a small remainder is rounded.

use super::*;

/// Groups of more distinct shapes are left to the other packers (a deployment has one shape;
/// a group of this many deployments packs well by patterns).
const PATTERN_MAX_SHAPES: usize = 8;

/// Below this many pods the exact and vector packers do as well.
const PATTERN_MIN_PODS: usize = 24;

/// Column generation stops after this many rounds even if patterns still enter.
const ROUNDS: usize = 20;

/// At most this many patterns enter per round (the most profitable per dollar).
const PER_ROUND: usize = 8;

/// The knapsack search per type visits at most this many nodes (then keeps its best so far,
/// which still enters when it is worth its price).
const KNAPSACK_NODES: usize = 1_000;

/// A node pattern: a type (position in the type list) and how many pods of each shape it holds.
type Pattern = (usize, Vec<usize>);

/// A pattern program's answer: each pattern it uses (how many pods of each shape), and its
/// (fractional) number of nodes, the most first.
pub(crate) type Program = Vec<(Vec<usize>, f64)>;

/// The pods of a group in resource vectors over the dimensions they ask for.
struct Shapes {
    /// Per shape: its request in each dimension.
    size: Vec<Vec<i64>>,
    /// Per shape: how many pods have it.
    count: Vec<usize>,
}

impl Ctx<'_> {
    /// Whether [`Self::pattern_pack`] may act on `pods`: enough of them, in few enough shapes.
    pub(crate) fn suits_patterns(&self, pods: &[usize]) -> bool {
        pods.len() >= PATTERN_MIN_PODS && self.shapes_of(pods, PATTERN_MAX_SHAPES).is_some()
    }

    /// Packs `pods` (a few shapes, none kept apart) into pool `p` under `reqs` by patterns,
    /// over the types that cost at most `share` of the group's aggregate LP bound (the first
    /// always), with the program's node counts rounded by `rounding`. None when the group does
    /// not suit (too many shapes, nothing whole to open) or a pod fits no type.
    pub(crate) fn pattern_pack(
        &self,
        p: usize,
        pods: &[usize],
        reqs: &Requirements,
        share: f64,
        rounding: Rounding,
    ) -> Option<Vec<Packed>> {
        let (requests, members) = self.shapes_of(pods, PATTERN_MAX_SHAPES)?;
        let program = self.solved_program(p, reqs, share, &requests, &members)?;
        let whole = rounded(&program, rounding)?;
        let mut next = vec![0usize; members.len()];
        let mut out: Vec<Packed> = Vec::new();
        for (pattern, nodes) in whole {
            for _ in 0..nodes {
                let mut on = Vec::new();
                for (k, &c) in pattern.iter().enumerate() {
                    let take = c.min(members[k].len() - next[k]);
                    on.extend_from_slice(&members[k][next[k]..next[k] + take]);
                    next[k] += take;
                }
                if on.is_empty() {
                    break;
                }
                let mut used = Resources::default();
                for &i in &on {
                    used.add(&self.snapshot.pods[i].requests);
                }
                let (t, price) = self.cheapest_fit(p, &used, reqs)?;
                out.push((on, t, price));
            }
        }
        if out.is_empty() {
            return None;
        }
        let rest: Vec<usize> = members
            .iter()
            .zip(&next)
            .flat_map(|(m, &n)| m[n..].iter().copied())
            .collect();
        if !rest.is_empty() {
            out.extend(self.pack_rest(p, &rest, reqs, share, rounding)?);
        }
        Some(out)
    }

    /// The pods a pattern packing left: by patterns again (the same way), or by the quick
    /// packers, whichever costs less.
    fn pack_rest(
        &self,
        p: usize,
        rest: &[usize],
        reqs: &Requirements,
        share: f64,
        rounding: Rounding,
    ) -> Option<Vec<Packed>> {
        let again = self
            .suits_patterns(rest)
            .then(|| self.pattern_pack(p, rest, reqs, share, rounding))
            .flatten();
        again
            .into_iter()
            .chain(self.quick_pack(p, rest, reqs))
            .min_by(|a, b| cost(a).total_cmp(&cost(b)))
    }

    /// The pattern program of a group (its shapes' `requests` and `members`) in pool `p`
    /// under `reqs` over the types within `share` of its bound, solved once per pool,
    /// requirements, share and shapes with their counts.
    fn solved_program(
        &self,
        p: usize,
        reqs: &Requirements,
        share: f64,
        requests: &[Resources],
        members: &[Vec<usize>],
    ) -> Option<Program> {
        let mut total = Resources::default();
        for (r, m) in requests.iter().zip(members) {
            for _ in 0..m.len() {
                total.add(r);
            }
        }
        let dims: Vec<&str> = total.names().filter(|n| total.get(n) > 0).collect();
        let shapes = Shapes {
            size: requests
                .iter()
                .map(|r| dims.iter().map(|d| r.get(d)).collect())
                .collect(),
            count: members.iter().map(Vec::len).collect(),
        };
        let key = format!("{p}|{reqs}|{share}|{:?}|{:?}", shapes.size, shapes.count);
        if let Some(found) = self.pattern_programs.borrow().get(&key) {
            return found.clone();
        }
        let program = self
            .undominated(p, reqs, &dims, &total, share)
            .and_then(|types| self.pattern_program(&shapes, &types));
        self.pattern_programs
            .borrow_mut()
            .insert(key, program.clone());
        program
    }

    /// A few pods exactly; more by a few vector packings over every type, each node split
    /// when smaller ones cost less.
    fn quick_pack(&self, p: usize, pods: &[usize], reqs: &Requirements) -> Option<Vec<Packed>> {
        let exact = self
            .exact_pack(p, pods, reqs)
            .or_else(|| self.exact_pack_by_shape(p, pods, reqs));
        if exact.is_some() {
            return exact;
        }
        let top = self.pools[p].price.last().copied().unwrap_or(f64::INFINITY);
        [Rounding::Down, Rounding::Nearest, Rounding::Up]
            .into_iter()
            .flat_map(|rounding| [Fit::Aligned, Fit::Cosine].map(|fit| (rounding, fit)))
            .filter_map(|(rounding, fit)| {
                let strategy = Strategy {
                    band: (0.0, top),
                    rounding,
                    fit,
                    order: Order::Sum,
                };
                self.vector_pack(p, pods, reqs, strategy)
            })
            .map(|k| {
                k.into_iter()
                    .flat_map(|bin| self.split(p, reqs, bin))
                    .collect::<Vec<_>>()
            })
            .min_by(|a, b| cost(a).total_cmp(&cost(b)))
    }

    /// The types of pool `p` offered under `reqs` that no cheaper (or equally priced, earlier)
    /// type holds everything of, in `dims`: (type, price, usable in each dimension).
    fn undominated(
        &self,
        p: usize,
        reqs: &Requirements,
        dims: &[&str],
        total: &Resources,
        share: f64,
    ) -> Option<Vec<(usize, f64, Vec<i64>)>> {
        let allowed = self.allowed_types(p, reqs)?;
        let usable = &self.pools[p].usable;
        let cols: Vec<(usize, usize, f64)> = allowed
            .by_price
            .iter()
            .map(|&(t, price)| (p, t, price))
            .collect();
        let (estimate, _) = self.lp_priced(total, &cols)?;
        let mut kept: Vec<(usize, f64, Vec<i64>)> = Vec::new();
        for (n, &(t, price)) in allowed.by_price.iter().enumerate() {
            if n > 0 && price > estimate * share {
                break;
            }
            let cap: Vec<i64> = dims.iter().map(|d| usable[t].get(d)).collect();
            if cap.iter().any(|c| *c <= 0) {
                continue;
            }
            let dominated = kept
                .iter()
                .any(|(_, _, k)| k.iter().zip(&cap).all(|(a, b)| a >= b));
            if !dominated {
                kept.push((t, price, cap));
            }
        }
        (!kept.is_empty()).then_some(kept)
    }

    /// The pattern program solved by column generation: the patterns that entered and the
    /// (fractional) number of nodes of each. Starts from one single-shape pattern per shape
    /// and type, so every shape that fits some type is covered.
    fn pattern_program(
        &self,
        shapes: &Shapes,
        types: &[(usize, f64, Vec<i64>)],
    ) -> Option<Program> {
        let kinds = shapes.count.len();
        let mut patterns: Vec<Pattern> = Vec::new();
        for (j, (_, _, cap)) in types.iter().enumerate() {
            for k in 0..kinds {
                let n = fits_times(&shapes.size[k], cap).min(shapes.count[k]);
                if n > 0 {
                    let mut pattern = vec![0; kinds];
                    pattern[k] = n;
                    patterns.push((j, pattern));
                }
            }
        }
        let demand: Vec<f64> = shapes.count.iter().map(|&n| n as f64).collect();
        let mut seen: BTreeSet<Pattern> = patterns.iter().cloned().collect();
        let mut round = 0;
        let counts = loop {
            let columns: Vec<lp::Column> = patterns
                .iter()
                .map(|(j, pattern)| lp::Column {
                    capacity: pattern.iter().map(|&c| c as f64).collect(),
                    price: types[*j].1,
                })
                .collect();
            let s = lp::solve(&demand, &columns)?;
            round += 1;
            if round > ROUNDS {
                break s.counts;
            }
            let mut entering: Vec<(f64, Pattern)> = types
                .iter()
                .enumerate()
                .filter_map(|(j, (_, price, cap))| {
                    let (worth, pattern) = best_pattern(shapes, &s.prices, cap);
                    (worth > price * (1.0 + 1e-9) + 1e-9).then(|| (worth / price, (j, pattern)))
                })
                .filter(|(_, pattern)| !seen.contains(pattern))
                .collect();
            if entering.is_empty() {
                break s.counts;
            }
            entering.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            for (_, pattern) in entering.into_iter().take(PER_ROUND) {
                seen.insert(pattern.clone());
                patterns.push(pattern);
            }
        };
        let mut used: Program = patterns
            .into_iter()
            .zip(counts)
            .filter(|(_, x)| *x > 1e-9)
            .map(|((_, pattern), x)| (pattern, x))
            .collect();
        // The most-used patterns first: they are opened first.
        used.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        Some(used)
    }
}

/// The whole nodes to open of a program's answer: its node counts rounded (down, or to the
/// nearest whole node); when that leaves none (a few large nodes, each used in part), one node
/// of its most-used pattern, if that is used for half a node or more. None when nothing opens.
fn rounded(program: &Program, rounding: Rounding) -> Option<Vec<(&Vec<usize>, usize)>> {
    let whole: Vec<(&Vec<usize>, usize)> = program
        .iter()
        .map(|(pattern, x)| {
            let n = match rounding {
                Rounding::Down => (x + 1e-6).floor(),
                Rounding::Nearest | Rounding::Up => x.round(),
            };
            (pattern, n as usize)
        })
        .filter(|(_, n)| *n > 0)
        .collect();
    if !whole.is_empty() {
        return Some(whole);
    }
    let (pattern, x) = program.first()?;
    (*x >= 0.5).then(|| vec![(pattern, 1)])
}

/// How many times `size` fits in `cap`.
fn fits_times(size: &[i64], cap: &[i64]) -> usize {
    size.iter()
        .zip(cap)
        .filter(|(s, _)| **s > 0)
        .map(|(s, c)| (c / s).max(0) as usize)
        .min()
        .unwrap_or(usize::MAX)
}

/// The pattern of most worth (Σ price × count) that fits `cap`, with at most each shape's pod
/// count of it: a bounded knapsack in a few dimensions, by depth-first branch and bound over the
/// shapes (most worth per share of the node first), bounded by the fractional knapsack in each
/// dimension alone.
fn best_pattern(shapes: &Shapes, prices: &[f64], cap: &[i64]) -> (f64, Vec<usize>) {
    let kinds = shapes.count.len();
    let share = |k: usize| -> f64 {
        shapes.size[k]
            .iter()
            .zip(cap)
            .map(|(s, c)| *s as f64 / (*c).max(1) as f64)
            .fold(0.0, f64::max)
    };
    let mut order: Vec<usize> = (0..kinds).filter(|&k| prices[k] > 1e-12).collect();
    order.sort_by(|&a, &b| {
        (prices[b] / share(b).max(1e-12))
            .total_cmp(&(prices[a] / share(a).max(1e-12)))
            .then(a.cmp(&b))
    });
    // Per dimension, the shapes by worth per unit of it (most first), for the bound.
    let by_dim: Vec<Vec<usize>> = (0..cap.len())
        .map(|d| {
            let per_unit = |k: usize| {
                let size = shapes.size[k][d];
                if size > 0 {
                    prices[k] / size as f64
                } else {
                    f64::INFINITY
                }
            };
            let mut ks = order.clone();
            ks.sort_by(|&a, &b| per_unit(b).total_cmp(&per_unit(a)).then(a.cmp(&b)));
            ks
        })
        .collect();
    let mut rank = vec![usize::MAX; kinds];
    for (r, &k) in order.iter().enumerate() {
        rank[k] = r;
    }
    let mut search = Knapsack {
        shapes,
        prices,
        order,
        by_dim,
        rank,
        best: (0.0, vec![0; kinds]),
        nodes: 0,
    };
    let mut pattern = vec![0; kinds];
    let mut left = cap.to_vec();
    search.visit(0, &mut left, 0.0, &mut pattern);
    search.best
}

/// The branch-and-bound state of [`best_pattern`].
struct Knapsack<'s> {
    shapes: &'s Shapes,
    prices: &'s [f64],
    order: Vec<usize>,
    /// Per dimension, the shapes by worth per unit of it.
    by_dim: Vec<Vec<usize>>,
    /// Each shape's depth in `order`.
    rank: Vec<usize>,
    best: (f64, Vec<usize>),
    nodes: usize,
}

impl Knapsack<'_> {
    fn visit(&mut self, depth: usize, left: &mut [i64], worth: f64, pattern: &mut [usize]) {
        self.nodes += 1;
        if worth > self.best.0 {
            self.best = (worth, pattern.to_vec());
        }
        if depth == self.order.len()
            || self.nodes > KNAPSACK_NODES
            || worth + self.bound(depth, left) <= self.best.0 + 1e-12
        {
            return;
        }
        let k = self.order[depth];
        let size = &self.shapes.size[k];
        let most = fits_times(size, left).min(self.shapes.count[k]);
        for n in (0..=most).rev() {
            for (l, s) in left.iter_mut().zip(size) {
                *l -= s * n as i64;
            }
            pattern[k] = n;
            self.visit(depth + 1, left, worth + self.prices[k] * n as f64, pattern);
            for (l, s) in left.iter_mut().zip(size) {
                *l += s * n as i64;
            }
        }
        pattern[k] = 0;
    }

    /// An upper bound on what the shapes from `depth` on can add in `left`: in each dimension
    /// alone, the fractional knapsack (most worth per unit first); the least of those.
    fn bound(&self, depth: usize, left: &[i64]) -> f64 {
        let mut least = f64::INFINITY;
        for (d, shapes) in self.by_dim.iter().enumerate() {
            let mut room = left[d].max(0) as f64;
            let mut worth = 0.0;
            for &k in shapes.iter().filter(|&&k| self.rank[k] >= depth) {
                let size = self.shapes.size[k][d] as f64;
                let pods = self.shapes.count[k] as f64;
                let take = if size > 0.0 {
                    pods.min(room / size)
                } else {
                    pods
                };
                worth += take * self.prices[k];
                room -= take * size;
            }
            least = least.min(worth);
        }
        least
    }
}

#[cfg(test)]
#[path = "../../../tests/unit/scheduler/repack/patterns.rs"]
mod tests;
