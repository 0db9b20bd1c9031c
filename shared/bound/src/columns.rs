//! The columns of the bound: every offering a NodePool may launch (type, zone, capacity type),
//! its price and its capacity after the DaemonSets that would run there.

use std::collections::BTreeMap;

use fleetwright_core::check::{offering_labels, pod_fits_node, Labels};
use fleetwright_core::{Catalog, InstanceType, Resources, Snapshot};

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
