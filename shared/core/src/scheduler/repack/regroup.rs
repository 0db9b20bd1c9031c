//! Regrouping a pool's new nodes by what their pods need: the pods of mixed nodes (pods that
//! may not move beside ones that may, or movable pods that need different things of their
//! node), and on request every node of movable pods with them, are taken out, grouped by their
//! own requirements and home pool, and packed again group by group; kept when cheaper.

use super::*;

impl Run<'_, '_> {
    /// Takes the movable pods out of pool `p`'s new bins (those beside pods that may not move
    /// too, whose requirements often narrowed the bin: a pod preferring on-demand capacity makes
    /// its bin on-demand for every pod in it) and packs them by their own requirements, each
    /// group on its own nodes. Kept when the bins left behind, shrunk to their cheapest fitting
    /// types, and the new ones cost less than the bins did. Returns whether it changed anything.
    pub(crate) fn regroup(&mut self, p: usize, fill: Fill, all: bool) -> bool {
        let ctx = self.ctx;
        let pool = &ctx.pools[p];
        if pool.remaining.is_some() || !pool.min_values.is_empty() {
            return false;
        }
        // Mixed bins: those with pods that may not move or with movable pods of different
        // requirements. A bin of movable pods that all need the same is re-packing's, unless
        // `all` asks for every such new bin to be regrouped with them.
        let movable = |b: usize| {
            let bin = &self.bins[b];
            !bin.inflight
                && bin.name.is_empty()
                && !bin.pods.is_empty()
                && bin.pods.iter().all(|&i| ctx.is_movable(i))
        };
        let bins: Vec<usize> = (0..self.bins.len())
            .filter(|&b| self.bins[b].pool == Some(p) && (self.mixed(p, b) || (all && movable(b))))
            .collect();
        if bins.is_empty() {
            return false;
        }
        let mut groups: BTreeMap<(usize, String), (Requirements, Vec<usize>)> = BTreeMap::new();
        let mut before = 0.0;
        let mut after = 0.0;
        let mut kept: Vec<(usize, Vec<usize>, Resources)> = Vec::new();
        for &b in &bins {
            let bin = &self.bins[b];
            let Some((_, price)) = ctx.cheapest_fit(p, &bin.used, &bin.reqs) else {
                return false;
            };
            before += price;
            let (moving, staying): (Homed, Homed) = bin
                .pods
                .iter()
                .map(|&i| (i, self.home_pool(i, p)))
                .partition(|&(i, home)| home.is_some() && ctx.is_movable(i));
            let staying: Vec<usize> = staying.into_iter().map(|(i, _)| i).collect();
            for (i, home) in moving {
                let q = home.unwrap_or(p);
                let reqs = ctx.own_reqs(q, i, &bin.reqs);
                groups
                    .entry((q, reqs.to_string()))
                    .or_insert_with(|| (reqs, Vec::new()))
                    .1
                    .push(i);
            }
            let mut used = Resources::default();
            for &i in &staying {
                used.add(&ctx.snapshot.pods[i].requests);
            }
            if !staying.is_empty() {
                let Some((_, price)) = ctx.cheapest_fit(p, &used, &bin.reqs) else {
                    return false;
                };
                after += price;
            }
            kept.push((b, staying, used));
        }
        let groups: Vec<(usize, (Requirements, Vec<usize>))> =
            groups.into_iter().map(|((q, _), g)| (q, g)).collect();
        let Some(open) = ctx.pack_groups(groups, fill) else {
            return false;
        };
        after += total(&open);
        if after + 1e-9 >= before {
            return false;
        }
        for (b, staying, used) in kept {
            self.bins[b].pods = staying;
            self.bins[b].used = used;
        }
        for n in open {
            self.open_packed(n.pool, &n.reqs, vec![(n.pods, n.t, n.price)]);
        }
        true
    }

    /// The pool a pod of pool `p`'s bins is re-packed into: the first (highest-weight) pool its
    /// strictest reading fits, as Karpenter would open a node for it, when that pool has no
    /// limits or minValues to keep; otherwise `p` itself, when it fits there; else None.
    fn home_pool(&self, i: usize, p: usize) -> Option<usize> {
        let ctx = self.ctx;
        let v = &ctx.classes[ctx.class_of[&i]].variants[0];
        let free =
            |q: usize| ctx.pools[q].remaining.is_none() && ctx.pools[q].min_values.is_empty();
        let first = v.pools.iter().position(Option::is_some)?;
        if free(first) {
            return Some(first);
        }
        v.pools[p].is_some().then_some(p)
    }

    /// Whether any new bin of pool `p` is mixed (see [`Self::mixed`]).
    pub(crate) fn has_mixed_bins(&self, p: usize) -> bool {
        (0..self.bins.len()).any(|b| self.bins[b].pool == Some(p) && self.mixed(p, b))
    }

    /// Whether new bin `b` of pool `p` holds pods that may not move beside ones that may, or
    /// movable pods that need different things of their node.
    fn mixed(&self, p: usize, b: usize) -> bool {
        let ctx = self.ctx;
        let bin = &self.bins[b];
        let mut seen: Option<String> = None;
        let mut any_staying = false;
        let mut any_moving = false;
        for &i in &bin.pods {
            if !ctx.is_movable(i) {
                any_staying = true;
                continue;
            }
            let Some(home) = self.home_pool(i, p) else {
                any_staying = true;
                continue;
            };
            if home != p {
                return true;
            }
            any_moving = true;
            let key = ctx.own_reqs(p, i, &bin.reqs).to_string();
            if seen.get_or_insert_with(|| key.clone()) != &key {
                return true;
            }
        }
        any_staying && any_moving
    }
}
