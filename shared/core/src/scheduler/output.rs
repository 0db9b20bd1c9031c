//! Turning the final bins into the plan: NodeClaims with their cheapest launch options, the
//! placements on existing capacity, unschedulable pods with reasons, and the cost.

use super::*;
use crate::catalog::Offering;

/// Why a pod that only reserved capacity could take is left pending.
pub const RESERVATIONS_USED_UP: &str =
    "only capacity reservations can take it, and they have no instances left";

pub(crate) fn round6(x: f64) -> f64 {
    // Plus +0.0: an empty plan costs 0, not -0.
    (x * 1e6).round() / 1e6 + 0.0
}

/// The instances each capacity reservation can still take in this plan, by reservation id
/// (absent: the reservation's own count); each NodeClaim whose cheapest option is reserved
/// takes one.
pub(crate) type Reserved = BTreeMap<String, usize>;

/// Whether an offering can be bought for a new NodeClaim: available, and, when it is a
/// reservation's, the reservation has an instance left in this plan.
fn usable(o: &Offering, left: &Reserved) -> bool {
    o.available
        && o.reservation
            .as_ref()
            .is_none_or(|r| left.get(&r.id).copied().unwrap_or(r.available) > 0)
}

/// The cheapest offering of a type that the requirements allow and that can be bought.
fn cheapest<'a>(
    it: &'a InstanceType,
    reqs: &Requirements,
    left: &Reserved,
) -> Option<&'a Offering> {
    it.offerings
        .iter()
        .filter(|o| usable(o, left) && offering_allowed(o, reqs))
        .min_by(|a, b| {
            a.price
                .total_cmp(&b.price)
                .then_with(|| a.zone.cmp(&b.zone))
        })
}

pub(crate) fn node_claim_out(
    pool: &PoolCtx,
    bin: &Bin,
    snap: &Snapshot,
    max_options: usize,
    left: &mut Reserved,
) -> NewNodeClaim {
    let priced = launch_options(pool, bin, snap, max_options, left);
    let keep = truncate_with_min_values(pool, &priced, max_options);
    let chosen: Vec<usize> = keep.iter().map(|(_, t)| *t).collect();
    let reservation = chosen
        .first()
        .and_then(|&t| cheapest(&pool.types[t], &bin.reqs, left))
        .and_then(|o| o.reservation.clone());
    if let Some(r) = &reservation {
        let n = left.entry(r.id.clone()).or_insert(r.available);
        *n = n.saturating_sub(1);
    }
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
    let relaxed = relax_min_values(pool, &chosen, &mut reqs);
    NewNodeClaim {
        nodepool: pool.pool.name.clone(),
        instance_types: names,
        capacity_types: capacity_types.into_iter().collect(),
        zones: zones.into_iter().collect(),
        pods: bin.pods.iter().map(|&i| snap.pods[i].key()).collect(),
        requests,
        price: round6(keep.first().map(|(p, _)| *p).unwrap_or(0.0)),
        requirements: reqs
            .iter()
            .flat_map(RequirementOut::from_requirement)
            .collect(),
        labels: pool.pool.labels.clone(),
        taints: pool.pool.taints.clone(),
        startup_taints: pool.pool.startup_taints.clone(),
        node_class: pool.pool.node_class.clone(),
        min_values_relaxed: (!pool.min_values.is_empty()).then_some(relaxed),
        reservation: reservation.map(|r| r.id),
    }
}

/// Whether the bin's cheapest option, counting every reservation as unused, is a reservation
/// this plan has already used up: the packing counted on an instance that is not there.
fn short_of_reservation(pool: &PoolCtx, bin: &Bin, snap: &Snapshot, left: &Reserved) -> bool {
    let reserved = |t: &InstanceType| t.offerings.iter().any(|o| o.reservation.is_some());
    if !pool.types.iter().any(reserved) {
        return false;
    }
    let unlimited = launch_options(pool, bin, snap, 1, &Reserved::new());
    unlimited
        .first()
        .and_then(|&(_, t)| pool.types[t].cheapest_offering(&bin.reqs))
        .and_then(|o| o.reservation.as_ref())
        .is_some_and(|r| left.get(&r.id) == Some(&0))
}

/// The values an instance type offers for `key` (every one: a type is offered as spot and
/// on-demand, in several zones), as Karpenter counts them for `minValues`.
pub(crate) fn type_values<'p>(pool: &'p PoolCtx, t: usize, key: &str) -> Vec<&'p str> {
    pool.types[t]
        .requirements
        .get(key)
        .filter(|r| r.len() != usize::MAX)
        .map(|r| r.values().iter().map(String::as_str).collect())
        .unwrap_or_default()
}

/// Lowers each `minValues` of the NodeClaim's requirements to the distinct values its options
/// keep, where they keep fewer (only `BestEffort` places a pod so); true when any was lowered.
fn relax_min_values(pool: &PoolCtx, chosen: &[usize], reqs: &mut Requirements) -> bool {
    let mut relaxed = false;
    for (key, min) in &pool.min_values {
        let kept: BTreeSet<&str> = chosen
            .iter()
            .flat_map(|&t| type_values(pool, t, key))
            .collect();
        if kept.len() < *min {
            if let Some(r) = reqs.get(key) {
                let lowered = r.clone().with_min_values(Some(kept.len().max(1)));
                reqs.replace(lowered);
                relaxed = true;
            }
        }
    }
    relaxed
}

/// Every pool type that fits the bin's final contents and requirements (within its limit
/// reservation), priced under the bin's requirements and sorted cheapest first. Packing may have
/// capped the options to steer node size; the launch gets the full choice back.
pub(crate) fn launch_options(
    pool: &PoolCtx,
    bin: &Bin,
    snap: &Snapshot,
    max_options: usize,
    left: &Reserved,
) -> Vec<(f64, usize)> {
    let mut total = Resources::default();
    for &i in &bin.pods {
        total.add(&snap.pods[i].requests);
    }
    let wanted = max_options.saturating_mul(2).max(max_options + 20);
    let mut priced: Vec<(f64, usize)> = Vec::new();
    let mut reserved: BTreeSet<usize> = BTreeSet::new();
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
        if let Some(o) = fits.then(|| cheapest(it, &bin.reqs, left)).flatten() {
            priced.push((o.price, t));
            if o.reservation.is_some() {
                reserved.insert(t);
            }
        }
    }
    priced.sort_by(|a, b| {
        a.0.total_cmp(&b.0)
            .then(pool.types[a.1].name.cmp(&pool.types[b.1].name))
    });
    // As Karpenter's AWS provider launches: GPU, accelerator and bare-metal types only when
    // nothing else holds the pods, so a capacity error on the cheap types never buys a p5 for
    // a web pod. A pool with minValues keeps them, since they may count towards its minimum,
    // and a reserved one stays, as Karpenter fills reservations first whatever their type (an
    // idle reservation is paid for all the same).
    let generic: Vec<(f64, usize)> = priced
        .iter()
        .copied()
        .filter(|(_, t)| !is_exotic(&pool.types[*t]) || reserved.contains(t))
        .collect();
    if pool.min_values.is_empty() && !generic.is_empty() {
        return generic;
    }
    priced
}

/// A bare-metal type, or one with GPUs or other accelerators.
fn is_exotic(it: &InstanceType) -> bool {
    let metal = it
        .requirements
        .get(INSTANCE_SIZE)
        .is_some_and(|r| r.values().iter().any(|size| size.contains("metal")));
    metal
        || [
            RESOURCE_NVIDIA_GPU,
            RESOURCE_AMD_GPU,
            RESOURCE_NEURON,
            "aws.amazon.com/neuroncore",
            RESOURCE_HABANA,
        ]
        .iter()
        .any(|name| it.capacity.get(name) > 0)
}

/// Keeps the cheapest `max` options, extended as needed to satisfy every `minValues`.
pub(crate) fn truncate_with_min_values(
    pool: &PoolCtx,
    priced: &[(f64, usize)],
    max: usize,
) -> Vec<(f64, usize)> {
    let mut keep: Vec<(f64, usize)> = priced.iter().take(max).cloned().collect();
    for (key, min) in &pool.min_values {
        let mut seen: BTreeSet<&str> = keep
            .iter()
            .flat_map(|(_, t)| type_values(pool, *t, key))
            .collect();
        for (p, t) in priced.iter().skip(max) {
            if seen.len() >= *min {
                break;
            }
            let before = seen.len();
            seen.extend(type_values(pool, *t, key));
            if seen.len() > before {
                keep.push((*p, *t));
            }
        }
    }
    keep
}

impl<'c, 'a> Run<'c, 'a> {
    /// The hourly price of the new bins, each at its cheapest fitting type.
    pub(crate) fn hourly(&self) -> f64 {
        self.bins
            .iter()
            .filter(|b| !b.pods.is_empty())
            .filter_map(|b| b.pool.map(|p| (p, b)))
            .map(|(p, b)| {
                self.ctx
                    .cheapest_fit(p, &b.used, &b.reqs)
                    .map_or(f64::INFINITY, |(_, c)| c)
            })
            .sum()
    }

    /// Hourly price over the LP bound for the same pods.
    pub(crate) fn ratio(&self) -> f64 {
        let mut demand = Resources::default();
        let mut cols: BTreeSet<(usize, usize)> = BTreeSet::new();
        for b in self.bins.iter().filter(|b| !b.pods.is_empty()) {
            let Some(p) = b.pool else { continue };
            for &i in &b.pods {
                demand.add(&self.ctx.snapshot.pods[i].requests);
            }
            cols.extend((0..self.ctx.pools[p].types.len()).map(|t| (p, t)));
        }
        let cols: Vec<(usize, usize)> = cols.into_iter().collect();
        match self.ctx.lp(&demand, &cols) {
            Some((bound, _)) if bound > 0.0 => self.hourly() / bound,
            _ => 1.0,
        }
    }

    pub(crate) fn into_plan(self, opts: &ScheduleOptions) -> Plan {
        let ctx = self.ctx;
        let snap = ctx.snapshot;
        let mut plan = Plan::default();
        let mut left = Reserved::new();
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
            plan.reservations_short |= short_of_reservation(pool, bin, snap, &left);
            let claim = node_claim_out(pool, bin, snap, opts.max_options, &mut left);
            if claim.instance_types.is_empty() {
                // Only reservations would take it, and this plan has used them up.
                for &i in &bin.pods {
                    plan.unschedulable.push(Unschedulable {
                        pod: snap.pods[i].key(),
                        reason: RESERVATIONS_USED_UP.to_string(),
                    });
                }
                continue;
            }
            plan.nodeclaims.push(claim);
        }
        for &i in &self.failed {
            plan.unschedulable.push(Unschedulable {
                pod: snap.pods[i].key(),
                reason: super::verdict::reason(ctx, i, (&self.remaining, &self.nodes_left)),
            });
        }
        let hourly: f64 = plan.nodeclaims.iter().map(|n| n.price).sum();
        let cols: Vec<(usize, usize)> = columns.into_iter().collect();
        let lower_bound = ctx.bound(&demand, &cols).unwrap_or(0.0);
        plan.cost = Cost {
            hourly: round6(hourly),
            lower_bound: round6(lower_bound.min(hourly)),
        };
        plan
    }
}
