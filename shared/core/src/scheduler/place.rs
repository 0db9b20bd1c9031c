//! Placing one pod: trying existing bins, then new NodeClaims, with resource, taint, host-port,
//! requirement and topology checks, and committing the result.

use super::*;

pub(crate) fn pin(
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

/// Element-wise minimum with an optional limit.
pub(crate) fn capped(mut r: Resources, limit: Option<&Resources>) -> Resources {
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

pub(crate) fn max_usable(pool: &PoolCtx, options: &[u32]) -> Resources {
    let mut out = Resources::default();
    for &t in options {
        out.max_with(&pool.usable[t as usize]);
    }
    out
}

impl<'c, 'a> Run<'c, 'a> {
    pub(crate) fn place(&mut self, pod_index: usize) -> bool {
        let ctx = self.ctx;
        let class_id = ctx.class_of[&pod_index];
        let class = &ctx.classes[class_id];
        let order = matches!(self.mode, Mode::FewestPods | Mode::CpuFirst)
            .then(|| self.fewest_pods_first());
        for variant in &class.variants {
            for k in 0..self.bins.len() {
                let b = order.as_ref().map_or(k, |o| o[k]);
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

    /// The order a pod tries the bins in under [`Mode::FewestPods`]: the nodes and in-flight
    /// NodeClaims as they are, then the new NodeClaims by how few pods they hold.
    fn fewest_pods_first(&self) -> Vec<usize> {
        // Bins are opened after the nodes and in-flight NodeClaims: only that tail is sorted.
        let base = self.ctx.base_bins.len();
        let mut order: Vec<usize> = (0..self.bins.len()).collect();
        order[base..].sort_by_key(|&b| self.bins[b].pods.len());
        order
    }

    /// An empty NodeClaim of pool `p` whose options fit the pod, the limits and the size cap.
    pub(crate) fn new_bin(
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
        if self.ctx.thrifty && remaining.is_some() {
            // The NodeClaim counts against the limits as its largest option: none may spend
            // more of them than the type it is opened for.
            let size = &pool.types[target.unwrap_or(first as usize)].capacity;
            let spends = |t: u32| {
                let capacity = &pool.types[t as usize].capacity;
                pool.limited.iter().any(|n| capacity.get(n) > size.get(n))
            };
            options.retain(|&t| !spends(t));
        }
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
            volumes: Vec::new(),
            volume_limits: Default::default(),
            pods: Vec::new(),
            reserved: Resources::default(),
            limit: target.map(|t| pool.usable[t].clone()),
        };
        bin.max_usable = capped(max_usable(pool, &bin.options), bin.limit.as_ref());
        Some((bin, target))
    }

    /// The LP type with the most unopened nodes left that this pod fits, if any.
    pub(crate) fn target_for(&self, p: usize, options: &[u32], pod: &Pod) -> Option<usize> {
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
            Mode::NoTargets | Mode::FewestPods | Mode::CpuFirst | Mode::LeastFirst => None,
        }
    }

    /// Checks whether the pod fits `bin` under `variant`; returns the staged changes if so.
    pub(crate) fn evaluate(
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
            || bin.exceeds_volume_limits(pod)
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
            // A node that exists is matched by its labels, as kube-scheduler does; a pool's or
            // an in-flight claim's undefined well-known labels are still open.
            if bin.pool.is_none() && !bin.inflight {
                bin.reqs.compatible_with_labels(&variant.reqs).ok()?;
            } else {
                bin.reqs.compatible(&variant.reqs).ok()?;
            }
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
    pub(crate) fn narrow_topology(
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

    pub(crate) fn filter_options(
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
                .flat_map(|&t| super::output::type_values(pool, t as usize, key))
                .collect();
            if distinct.len() < *min && pool.pool.min_values_policy == MinValuesPolicy::Strict {
                return None;
            }
        }
        Some(options)
    }

    pub(crate) fn commit(
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
        bin.mount(pod);
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
            if !group
                .id
                .counts_on(&bin.reqs, &bin.taints, bin.pool.is_none())
            {
                continue;
            }
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
}
