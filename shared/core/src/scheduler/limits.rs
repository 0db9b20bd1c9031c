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
    let plan = free.plan(opts);
    if plan_fits(&plan, &free.pools, &limits) {
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

/// A pool's limits as the planning left them: resources and nodes.
struct PoolLimits {
    remaining: Option<Resources>,
    nodes_left: Option<i64>,
}

impl PoolLimits {
    fn take(pool: &mut PoolCtx) -> PoolLimits {
        pool.limited.clear();
        PoolLimits {
            remaining: pool.remaining.take(),
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
