//! The columns of the bound: every offering a NodePool may launch (type, zone, capacity type),
//! its price and its capacity after the DaemonSets that would run there, and the removal of
//! columns another column beats for every group that may use them.

use std::collections::BTreeMap;

use fleetwright_core::check::{offering_labels, pod_fits_node, Labels};
use fleetwright_core::{Catalog, InstanceType, Resources, Snapshot};

use crate::groups::Group;

/// One kind of node a plan could buy.
pub(crate) struct Column {
    /// Index into the snapshot's NodePools.
    pub pool: usize,
    pub labels: Labels,
    /// USD per hour.
    pub price: f64,
    /// Allocatable less the DaemonSet pods that would run on it.
    pub capacity: Resources,
}

/// Every available offering of every type each (not deleting) NodePool allows.
pub(crate) fn all(snapshot: &Snapshot, catalog: &Catalog) -> Vec<Column> {
    let mut types: BTreeMap<String, Vec<InstanceType>> = BTreeMap::new();
    let mut out = Vec::new();
    for (p, pool) in snapshot.nodepools.iter().enumerate() {
        if pool.deleting {
            continue;
        }
        let settings = snapshot
            .node_classes
            .get(&pool.node_class)
            .cloned()
            .unwrap_or_default();
        let key = format!("{settings:?}");
        let resolved = types
            .entry(key)
            .or_insert_with(|| catalog.instance_types(&settings));
        for t in resolved.iter() {
            out.extend(offerings(snapshot, p, t));
        }
    }
    out
}

fn offerings<'a>(
    snapshot: &'a Snapshot,
    p: usize,
    t: &'a InstanceType,
) -> impl Iterator<Item = Column> + 'a {
    let pool = &snapshot.nodepools[p];
    t.offerings
        .iter()
        .filter(|o| o.available)
        .filter_map(move |o| {
            let labels = offering_labels(t, pool, &o.zone, &o.capacity_type)?;
            let mut capacity = t.allocatable.clone();
            for ds in &snapshot.daemonsets {
                if pod_fits_node(&ds.pod, pool, &labels) {
                    capacity.sub(&ds.pod.requests);
                }
            }
            Some(Column {
                pool: p,
                labels,
                price: o.price,
                capacity,
            })
        })
}

/// The columns left after dropping each column that another column with the same users beats:
/// no dearer and at least as large (always safe), or, when no user must have a node to itself,
/// at least as much of every resource per dollar (fractional nodes of it then do the same work
/// for no more). Columns no group may use go too.
pub(crate) fn pruned(columns: Vec<Column>, groups: &[Group]) -> Vec<Column> {
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); columns.len()];
    for (g, group) in groups.iter().enumerate() {
        for &j in &group.allowed {
            users[j].push(g);
        }
    }
    let names = requested(groups);
    let mut by_users: BTreeMap<Vec<usize>, Vec<usize>> = BTreeMap::new();
    for (j, u) in users.iter().enumerate() {
        if !u.is_empty() {
            by_users.entry(u.clone()).or_default().push(j);
        }
    }
    let mut keep = vec![false; columns.len()];
    for (u, members) in by_users {
        let per_dollar = u.iter().all(|&g| !groups[g].alone);
        for j in frontier(&columns, members, &names, per_dollar) {
            keep[j] = true;
        }
    }
    columns
        .into_iter()
        .zip(keep)
        .filter_map(|(c, k)| k.then_some(c))
        .collect()
}

/// The resources any group asks for.
pub(crate) fn requested(groups: &[Group]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for g in groups {
        for n in g.requests.names() {
            if g.requests.get(n) > 0 && !names.iter().any(|m| m == n) {
                names.push(n.to_string());
            }
        }
    }
    names
}

/// The members no other member beats.
fn frontier(
    columns: &[Column],
    mut members: Vec<usize>,
    names: &[String],
    per_dollar: bool,
) -> Vec<usize> {
    members.sort_by(|&a, &b| {
        columns[a]
            .price
            .total_cmp(&columns[b].price)
            .then(a.cmp(&b))
    });
    let mut kept: Vec<usize> = Vec::new();
    for j in members {
        let c = &columns[j];
        let beaten = kept.iter().any(|&k| {
            let k = &columns[k];
            names.iter().all(|n| k.capacity.get(n) >= c.capacity.get(n))
        });
        if !beaten {
            kept.push(j);
        }
    }
    if !per_dollar {
        return kept;
    }
    let rate = |j: usize, n: &str| columns[j].capacity.get(n) as f64 / columns[j].price;
    let better = |k: usize, j: usize| {
        names.iter().all(|n| rate(k, n) >= rate(j, n))
            && names.iter().any(|n| rate(k, n) > rate(j, n))
    };
    kept.iter()
        .copied()
        .filter(|&j| {
            columns[j].price <= 0.0
                || !kept
                    .iter()
                    .any(|&k| k != j && columns[k].price > 0.0 && better(k, j))
        })
        .collect()
}
