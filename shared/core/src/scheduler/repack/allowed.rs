//! The instance types a pool offers under a set of node requirements, remembered per
//! requirements and sorted by their price under them, and the cheapest of them that holds
//! given resources.

use std::rc::Rc;

use super::*;

impl Ctx<'_> {
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
    pub(super) fn cheapest_bound(&self, p: usize, reqs: &Requirements, used: &Resources) -> f64 {
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
}
