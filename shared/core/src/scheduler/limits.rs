//! NodePool limits in a plan: a limit that does not bind never changes the plan, and one that
//! binds is spent on placing the most pods, then on the price ([`plan_within_limits`]).

use super::*;

/// One plan, as if no pool had limits, kept when it stays within them (each new NodeClaim
/// counted as the largest instance type it may launch as, as Karpenter counts it): a limit that
/// does not bind never changes the plan. Only when the limits bind is the plan made within them,
/// and when pods are then left, made again [`Ctx::thrifty`]: the plan placing more pods wins.
pub(super) fn plan_within_limits(
    snapshot: &Snapshot,
    catalog: &Catalog,
    opts: &ScheduleOptions,
) -> Plan {
    let mut free = Ctx::new(snapshot, catalog, opts.now);
    free.improve_max_pods = opts.improve_max_pods;
    let limits: Vec<PoolLimits> = free.pools.iter_mut().map(PoolLimits::take).collect();
    if limits.iter().all(PoolLimits::is_none) {
        return free.plan(opts);
    }
    free.rebuild_guide();
    let mut plan = free.plan(opts);
    if plan_fits(&plan, &free.pools, &limits) || narrow_to_limits(&mut plan, &free.pools, &limits) {
        return plan;
    }
    let mut limited = Ctx::new(snapshot, catalog, opts.now);
    limited.improve_max_pods = opts.improve_max_pods;
    let plan = limited.plan(opts);
    if plan.unschedulable.is_empty() {
        return plan;
    }
    // A limit binds and pods are left: placing them comes before the price. Types that carry
    // more per unit of the limit (memory-dense ones under a CPU limit, say) may place pods the
    // cheapest plan leaves out.
    let mut thrifty = Ctx::new(snapshot, catalog, opts.now);
    thrifty.improve_max_pods = opts.improve_max_pods;
    thrifty.thrifty = true;
    thrifty.rebuild_guide();
    let other = thrifty.plan(opts);
    let key = |p: &Plan| (p.unschedulable.len(), p.cost.hourly);
    match key(&other) < key(&plan) {
        true => other,
        false => plan,
    }
}

/// A pool's limits as the planning left them: resources (and which of them are limited) and
/// nodes.
struct PoolLimits {
    remaining: Option<Resources>,
    limited: Vec<String>,
    nodes_left: Option<i64>,
}

impl PoolLimits {
    fn take(pool: &mut PoolCtx) -> PoolLimits {
        PoolLimits {
            remaining: pool.remaining.take(),
            limited: std::mem::take(&mut pool.limited),
            nodes_left: pool.nodes_left.take(),
        }
    }

    fn is_none(&self) -> bool {
        self.remaining.is_none() && self.nodes_left.is_none()
    }
}

/// Whether a plan's new NodeClaims fit every pool's limits, each counted as the largest of the
/// instance types it may launch as.
fn plan_fits(plan: &Plan, pools: &[PoolCtx], limits: &[PoolLimits]) -> bool {
    pools.iter().zip(limits).all(|(pool, limit)| {
        let claims: Vec<&NewNodeClaim> = plan
            .nodeclaims
            .iter()
            .filter(|c| c.nodepool == pool.pool.name)
            .collect();
        if limit.nodes_left.is_some_and(|n| (claims.len() as i64) > n) {
            return false;
        }
        let Some(remaining) = &limit.remaining else {
            return true;
        };
        let mut used = Resources::default();
        for claim in claims {
            let mut largest = Resources::default();
            for t in pool
                .types
                .iter()
                .filter(|t| claim.instance_types.contains(&t.name))
            {
                largest.max_with(&t.capacity);
            }
            used.add(&largest);
        }
        within_limits(&used, remaining)
    })
}

/// Narrows the plan's new NodeClaims to fit the limits, when only their largest options keep
/// it from fitting: a NodeClaim's options lose their largest first (never its cheapest, the one
/// its price is of) until the claims, each counted as its largest option left, fit. The plan
/// then launches what it would have, with fewer fallbacks, as Karpenter filters a NodeClaim's
/// options by the limit left. False, and the plan unchanged, when it cannot fit so, or a pool
/// has `minValues` (fewer options could break them).
fn narrow_to_limits(plan: &mut Plan, pools: &[PoolCtx], limits: &[PoolLimits]) -> bool {
    let mut narrowed = plan.nodeclaims.clone();
    for (pool, limit) in pools.iter().zip(limits) {
        if limit.nodes_left.is_some_and(|n| {
            let count = narrowed
                .iter()
                .filter(|c| c.nodepool == pool.pool.name)
                .count();
            count as i64 > n
        }) {
            return false;
        }
        let Some(remaining) = &limit.remaining else {
            continue;
        };
        let mut claims: Vec<&mut NewNodeClaim> = narrowed
            .iter_mut()
            .filter(|c| c.nodepool == pool.pool.name)
            .collect();
        if claims.is_empty() {
            continue;
        }
        let limited = &limit.limited;
        if !pool.min_values.is_empty() || !narrow_pool(&mut claims, pool, remaining, limited) {
            return false;
        }
    }
    plan.nodeclaims = narrowed;
    true
}

/// [`narrow_to_limits`] for one pool's claims and its limits left: every claim keeps the
/// options that spend at most a share `cap` of a limit left (and its cheapest), with the
/// largest `cap` at which the claims fit.
fn narrow_pool(
    claims: &mut [&mut NewNodeClaim],
    pool: &PoolCtx,
    remaining: &Resources,
    limited: &[String],
) -> bool {
    let capacity = |name: &String| -> Resources {
        let mut out = Resources::default();
        for t in pool.types.iter().filter(|t| &t.name == name) {
            for n in limited {
                out.set(n, t.capacity.get(n));
            }
        }
        out
    };
    let share = |r: &Resources| -> f64 {
        limited
            .iter()
            .map(|n| r.get(n).max(0) as f64 / remaining.get(n).max(1) as f64)
            .fold(0.0, f64::max)
    };
    // Per claim, each option's capacity on the limited resources and its share of them.
    let options: Vec<Vec<(Resources, f64)>> = claims
        .iter()
        .map(|c| {
            c.instance_types
                .iter()
                .map(|name| {
                    let cap = capacity(name);
                    let s = share(&cap);
                    (cap, s)
                })
                .collect()
        })
        .collect();
    let kept = |i: usize, s: f64, cap: f64| i == 0 || s <= cap;
    let fits = |cap: f64| {
        let mut used = Resources::default();
        for claim in &options {
            let mut largest = Resources::default();
            for (i, (c, s)) in claim.iter().enumerate() {
                if kept(i, *s, cap) {
                    largest.max_with(c);
                }
            }
            used.add(&largest);
        }
        within_limits(&used, remaining)
    };
    let mut caps: Vec<f64> = options.iter().flatten().map(|(_, s)| *s).collect();
    caps.sort_by(f64::total_cmp);
    caps.dedup();
    if !fits(-1.0) {
        return false;
    }
    // The claims fit at the smallest cap; find the largest cap at which they still do.
    let (mut lo, mut hi) = (0usize, caps.len());
    while lo < hi {
        let mid = (lo + hi) / 2;
        if fits(caps[mid]) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    let cap = if lo == 0 { -1.0 } else { caps[lo - 1] };
    for (claim, options) in claims.iter_mut().zip(&options) {
        let names: Vec<String> = claim
            .instance_types
            .iter()
            .zip(options)
            .enumerate()
            .filter(|(i, (_, (_, s)))| kept(*i, *s, cap))
            .map(|(_, (name, _))| name.clone())
            .collect();
        claim.instance_types = names;
        keep_offered(claim, pool);
    }
    true
}

/// After a NodeClaim's options were narrowed: its zones, capacity types and the requirements
/// on them, and on the instance type, keep only what an option left offers.
fn keep_offered(claim: &mut NewNodeClaim, pool: &PoolCtx) {
    let mut zones = BTreeSet::new();
    let mut capacity_types = BTreeSet::new();
    for t in pool
        .types
        .iter()
        .filter(|t| claim.instance_types.contains(&t.name))
    {
        for o in t.offerings.iter().filter(|o| {
            o.available
                && claim.zones.contains(&o.zone)
                && claim.capacity_types.contains(&o.capacity_type)
        }) {
            zones.insert(o.zone.clone());
            capacity_types.insert(o.capacity_type.clone());
        }
    }
    claim.zones.retain(|z| zones.contains(z));
    claim.capacity_types.retain(|c| capacity_types.contains(c));
    let names: BTreeSet<String> = claim.instance_types.iter().cloned().collect();
    for r in claim.requirements.iter_mut().filter(|r| r.operator == "In") {
        let kept = match r.key.as_str() {
            INSTANCE_TYPE => &names,
            ZONE => &zones,
            CAPACITY_TYPE => &capacity_types,
            _ => continue,
        };
        r.values.retain(|v| kept.contains(v));
    }
}

impl Ctx<'_> {
    /// The columns the guide's LP buys pool `p`'s types by: their prices or, when planning
    /// [`Ctx::thrifty`] a pool with limits, the share of its remaining limits each type spends
    /// (its price only breaks ties).
    pub(super) fn guide_prices(&self, p: usize) -> Vec<(usize, usize, f64)> {
        let pool = &self.pools[p];
        let spend = |t: usize| -> Option<f64> {
            let remaining = pool.remaining.as_ref().filter(|_| self.thrifty)?;
            let share = |n: &String| {
                pool.types[t].capacity.get(n).max(0) as f64 / remaining.get(n).max(1) as f64
            };
            Some(pool.limited.iter().map(share).sum::<f64>())
        };
        (0..pool.types.len())
            .map(|t| {
                let price = pool.price[t];
                (p, t, spend(t).map_or(price, |s| s + price * 1e-6))
            })
            .collect()
    }
}
