//! NodePools resolved for scheduling: their instance types priced under the pool's
//! requirements, DaemonSet overhead and host ports per type, and what their limits leave.

use super::*;
use crate::catalog::NodeClassSettings;

pub(crate) fn build_pools(snapshot: &Snapshot, catalog: &Catalog) -> Vec<PoolCtx> {
    let mut pools: Vec<&NodePool> = snapshot.nodepools.iter().filter(|p| !p.deleting).collect();
    pools.sort_by(|a, b| b.weight.cmp(&a.weight).then(a.name.cmp(&b.name)));
    pools
        .into_iter()
        .map(|pool| {
            let settings = snapshot.node_class_settings(pool);
            let all = catalog.instance_types_shared(&settings);
            let mut ctx = pool_ctx(snapshot, pool, &all);
            if ctx.types.is_empty() {
                ctx.empty = Some(emptied_by(&ctx.base, (&all, &settings), catalog));
            }
            ctx
        })
        .collect()
}

/// Why no instance type is left for a pool: the first of its requirements (with those before
/// it) that leaves none of the catalog's types with an available offering, and which region's
/// catalog that was, with the values the catalog does have for that key.
pub fn emptied_by(
    base: &Requirements,
    (all, settings): (&[InstanceType], &NodeClassSettings),
    catalog: &Catalog,
) -> String {
    let region = &catalog.region;
    if all.is_empty() {
        return format!("the {region} catalog has no instance type for its EC2NodeClass");
    }
    let mut left: Vec<&InstanceType> = all.iter().collect();
    let mut so_far = Requirements::new();
    for req in base.iter() {
        so_far.add(req.clone());
        let next: Vec<&InstanceType> = left
            .iter()
            .copied()
            .filter(|t| t.requirements.intersects(&so_far).is_ok())
            .filter(|t| t.cheapest_offering(&so_far).is_some())
            .collect();
        if next.is_empty() {
            // Only when the whole set of requirements has types but for the marks: a typo
            // elsewhere is still the requirement's fault.
            if let Some(why) = all_unavailable(base, catalog, settings) {
                return why;
            }
            return format!(
                "requirement {req} leaves none of the {} instance types of the {region} catalog \
                 that its other requirements allow (values there: {})",
                left.len(),
                values_of(&req.key, &left)
            );
        }
        left = next;
    }
    format!("no instance type of the {region} catalog has an available offering under [{base}]")
}

/// When types the requirements allow do exist, and only insufficient-capacity marks left them
/// without an available offering (a type with none resolves to nothing): that is why none is
/// left, not the requirement.
fn all_unavailable(
    reqs: &Requirements,
    catalog: &Catalog,
    settings: &NodeClassSettings,
) -> Option<String> {
    let types = catalog.marked_types(settings);
    let mut names: Vec<&str> = types
        .iter()
        .filter(|t| t.requirements.intersects(reqs).is_ok())
        .filter(|t| t.cheapest_offering(reqs).is_some())
        .map(|t| t.name.as_str())
        .collect();
    if names.is_empty() {
        return None;
    }
    names.sort_unstable();
    let more = names.len().saturating_sub(5);
    let more = if more > 0 {
        format!(" and {more} other(s)")
    } else {
        String::new()
    };
    Some(format!(
        "the {} instance types its requirements allow have no offering available now (a launch \
         error marked them unavailable for a while: insufficient capacity, or a quota or \
         subnet limit): {}{more}",
        catalog.region,
        names[..names.len().min(5)].join(", ")
    ))
}

/// Up to ten values that the types offer for a label key (zones from their offerings).
fn values_of(key: &str, types: &[&InstanceType]) -> String {
    let mut values = std::collections::BTreeSet::new();
    for t in types {
        if key == crate::labels::ZONE || key == crate::labels::CAPACITY_TYPE {
            for o in t.offerings.iter().filter(|o| o.available) {
                values.insert(if key == crate::labels::ZONE {
                    o.zone.clone()
                } else {
                    o.capacity_type.clone()
                });
            }
        } else if let Some(v) = t.requirements.get(key).and_then(|r| r.any()) {
            values.insert(v.to_string());
        }
    }
    let total = values.len();
    let mut shown: Vec<String> = values.into_iter().take(10).collect();
    if total > 10 {
        shown.push(format!("and {} more", total - 10));
    }
    if shown.is_empty() {
        "none".to_string()
    } else {
        shown.join(", ")
    }
}

pub(crate) fn pool_ctx(snapshot: &Snapshot, pool: &NodePool, all: &[InstanceType]) -> PoolCtx {
    let base = pool.node_requirements();
    let mut priced: Vec<(f64, &InstanceType)> = all
        .iter()
        .filter(|t| t.requirements.intersects(&base).is_ok())
        .filter_map(|t| t.cheapest_offering(&base).map(|o| o.price).map(|p| (p, t)))
        .collect();
    priced.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.name.cmp(&b.1.name)));
    let (price, types): (Vec<f64>, Vec<InstanceType>) =
        priced.into_iter().map(|(p, t)| (p, t.clone())).unzip();
    let mut ds_overhead = Vec::with_capacity(types.len());
    let mut ds_ports = Vec::new();
    let daemons: Vec<&DaemonSet> = snapshot
        .daemonsets
        .iter()
        .filter(|d| tolerates_all(&d.pod.tolerations, &pool.taints).is_none())
        .filter(|d| base.compatible(&d.pod.strict_requirements()).is_ok())
        .collect();
    for d in &daemons {
        ds_ports.extend(d.pod.host_ports.iter().cloned());
    }
    for t in &types {
        let mut overhead = Resources::default();
        for d in &daemons {
            if t.requirements
                .intersects(&d.pod.strict_requirements())
                .is_ok()
            {
                overhead.add(&d.pod.requests);
            }
        }
        ds_overhead.push(overhead);
    }
    let usable = types
        .iter()
        .zip(&ds_overhead)
        .map(|(t, o)| t.allocatable.minus(o))
        .collect();
    let inflight_only = inflight_only(snapshot, pool, all, &types, &daemons);
    let (remaining, nodes_left) = pool_remaining(snapshot, pool, &types, all);
    let min_values = pool
        .requirements
        .iter()
        .filter_map(|r| r.min_values.map(|m| (r.key.clone(), m)))
        .collect();
    let limited = pool
        .limits
        .iter()
        .flat_map(|l| {
            l.names()
                .filter(|n| *n != "nodes" && limited_name(l, n))
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect();
    PoolCtx {
        pool: pool.clone(),
        base,
        types,
        price,
        usable,
        ds_overhead,
        ds_ports,
        remaining,
        nodes_left,
        min_values,
        limited,
        empty: None,
        inflight_only,
    }
}

/// The usable room (allocatable less the DaemonSets' share) of each type a NodeClaim of the pool
/// names (in flight, or joined but not yet initialized) that the pool's own types no longer hold: a reservation the claim
/// took is full now, so its type has no offering left for a pool that allows `reserved` only.
/// The claim still launches, and its pods must not be planned again.
fn inflight_only(
    snapshot: &Snapshot,
    pool: &NodePool,
    all: &[InstanceType],
    types: &[InstanceType],
    daemons: &[&DaemonSet],
) -> Vec<(String, Resources)> {
    let mut named: BTreeSet<&str> = snapshot
        .nodeclaims
        .iter()
        .filter(|c| c.nodepool == pool.name && !c.deleting)
        .filter_map(|c| c.requirements.get(INSTANCE_TYPE))
        .filter(|r| !r.is_complement())
        .flat_map(|r| r.values().iter().map(String::as_str))
        .collect();
    if named.is_empty() {
        return Vec::new();
    }
    for t in types {
        named.remove(t.name.as_str());
    }
    all.iter()
        .filter(|t| named.contains(t.name.as_str()))
        .map(|t| {
            let mut usable = t.allocatable.clone();
            for d in daemons {
                if t.requirements
                    .intersects(&d.pod.strict_requirements())
                    .is_ok()
                {
                    usable = usable.minus(&d.pod.requests);
                }
            }
            (t.name.clone(), usable)
        })
        .collect()
}

/// Limits minus what the pool's nodes and in-flight claims already hold. A claim whose capacity
/// is not known yet (created or launched a moment ago, its node not joined) counts as the
/// largest instance it may become, as Karpenter counts it: a tick that cannot see the type a
/// launch got must not plan past the limit.
pub(crate) fn pool_remaining(
    snapshot: &Snapshot,
    pool: &NodePool,
    types: &[InstanceType],
    all: &[InstanceType],
) -> (Option<Resources>, Option<i64>) {
    let Some(limits) = &pool.limits else {
        return (None, None);
    };
    let mut used = Resources::default();
    let mut count = 0;
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    for node in snapshot
        .nodes
        .iter()
        .filter(|n| n.nodepool() == Some(&pool.name))
    {
        used.add(if node.capacity.is_zero() {
            &node.allocatable
        } else {
            &node.capacity
        });
        count += 1;
        seen.insert(&node.name);
    }
    for claim in snapshot
        .nodeclaims
        .iter()
        .filter(|c| c.nodepool == pool.name)
    {
        if claim.node_name.as_deref().is_some_and(|n| seen.contains(n)) {
            continue;
        }
        match claim.capacity.as_ref().or(claim.allocatable.as_ref()) {
            Some(c) if !c.is_zero() => used.add(c),
            _ => used.add(&largest_option(claim, types, all)),
        }
        count += 1;
    }
    let nodes_limit = limits.extended.get("nodes").copied();
    // Unlimited fields stay near i64::MAX so comparisons only bind on the limited ones.
    let mut out = Resources {
        cpu: i64::MAX / 4,
        memory: i64::MAX / 4,
        ephemeral: i64::MAX / 4,
        pods: i64::MAX / 4,
        extended: BTreeMap::new(),
    };
    for name in limits
        .names()
        .filter(|n| *n != "nodes" && limited_name(limits, n))
    {
        out.set(name, limits.get(name) - used.get(name));
    }
    (Some(out), nodes_limit.map(|n| n - count))
}

/// The most of each resource an in-flight claim may hold: its launched type's capacity when its
/// labels name one, else the largest of the pool's types its requirements allow and of the
/// types it names, offered or not (a full reservation's, in a pool that allows only
/// `reserved`); else of all the pool's types: never less than it may be.
fn largest_option(claim: &NodeClaim, types: &[InstanceType], all: &[InstanceType]) -> Resources {
    let launched = claim.labels.get(crate::labels::INSTANCE_TYPE);
    let known = |name: &String| types.iter().chain(all).find(|t| &t.name == name);
    if let Some(t) = launched.and_then(known) {
        return t.capacity.clone();
    }
    let mut options: Vec<&InstanceType> = types
        .iter()
        .filter(|t| t.requirements.intersects(&claim.requirements).is_ok())
        .collect();
    // Every type it names counts too, offered or not: one may have launched into a reservation
    // that its own launch filled.
    let named = claim.requirements.get(crate::labels::INSTANCE_TYPE);
    if let Some(r) = named.filter(|r| !r.is_complement()) {
        options.extend(all.iter().filter(|t| r.has(&t.name)));
    }
    if options.is_empty() {
        options = types.iter().collect();
    }
    let mut out = Resources::default();
    for t in options {
        out.max_with(&t.capacity);
    }
    out
}

/// Whether a NodePool's limits bound resource `name`: a base resource (CPU, memory, ephemeral
/// storage, pods) when not zero (zero is unset there; a written zero arrives as the smallest
/// unit), any other resource whenever it is listed, zero included.
fn limited_name(limits: &Resources, name: &str) -> bool {
    use crate::labels::{RESOURCE_CPU, RESOURCE_EPHEMERAL, RESOURCE_MEMORY, RESOURCE_PODS};
    match name {
        RESOURCE_CPU | RESOURCE_MEMORY | RESOURCE_EPHEMERAL | RESOURCE_PODS => {
            limits.get(name) != 0
        }
        _ => true,
    }
}

/// Whether `capacity` fits the remaining limits (only limited fields are finite).
pub(crate) fn within_limits(capacity: &Resources, remaining: &Resources) -> bool {
    capacity.cpu <= remaining.cpu
        && capacity.memory <= remaining.memory
        && capacity.ephemeral <= remaining.ephemeral
        && capacity.pods <= remaining.pods
        && remaining
            .extended
            .iter()
            .all(|(k, v)| capacity.get(k) <= *v)
}

impl PoolCtx {
    pub fn label_values(&self, key: &str) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        if let Some(r) = self.base.get(key) {
            if !r.is_complement() {
                out.extend(r.values().iter().cloned());
                return out;
            }
        }
        for t in &self.types {
            match key {
                ZONE | CAPACITY_TYPE => {
                    for o in t
                        .offerings
                        .iter()
                        .filter(|o| o.available && offering_allowed(o, &self.base))
                    {
                        out.insert(if key == ZONE {
                            o.zone.clone()
                        } else {
                            o.capacity_type.clone()
                        });
                    }
                }
                _ => {
                    if let Some(r) = t.requirements.get(key) {
                        out.extend(
                            r.values()
                                .iter()
                                .filter(|v| self.base.get(key).is_none_or(|b| b.has(v)))
                                .cloned(),
                        );
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
#[path = "../../tests/unit/scheduler/pools.rs"]
mod tests;
