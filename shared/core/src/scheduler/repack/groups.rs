//! Packing several groups of pods (pool, requirements, pods) together: later groups fill the
//! room the earlier groups' nodes left, and pairs of nodes are re-cut across groups.

use std::rc::Rc;

use super::*;

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
}

/// The hourly price of open nodes.
pub(super) fn total(open: &[Open]) -> f64 {
    open.iter().map(|n| n.price).sum()
}
