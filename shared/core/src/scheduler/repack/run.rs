//! Re-packing a scheduling run's new bins: partition by partition into cheaper packings,
//! regrouped when some bins are mixed, then each bin widened to what its pods need.

use super::*;

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
            best.exchange_pods(p);
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
    pub(super) fn open_packed(&mut self, p: usize, reqs: &Requirements, packing: Vec<Packed>) {
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
                volumes: Vec::new(),
                volume_limits: Default::default(),
                pods: members,
                reserved: Resources::default(),
                limit: None,
            });
        }
    }
}
