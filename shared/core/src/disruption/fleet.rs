//! What the fleet Fleetwright owns costs an hour, against the LP lower bound of its workload:
//! the figure of the dashboard's cost panel. The bound is planned from scratch, as if every pod
//! on an owned node were pending and no owned node existed.

use std::collections::BTreeSet;

use serde::Serialize;

use super::candidates::Prices;
use crate::model::Snapshot;
use crate::scheduler::{schedule, ScheduleOptions};
use crate::Catalog;

/// The owned fleet's hourly cost and the LP lower bound on its workload.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetCost {
    /// Owned nodes (those of a NodePool) with a known price.
    pub nodes: usize,
    pub hourly: f64,
    pub lower_bound: f64,
    /// What a plan of the same workload from scratch costs: the fleet as Fleetwright would
    /// launch it now.
    pub planned: f64,
}

/// The owned fleet's cost at `now`.
pub fn fleet_cost(snapshot: &Snapshot, catalog: &Catalog, now: i64) -> FleetCost {
    let prices = Prices::new(catalog);
    let pools: BTreeSet<&str> = snapshot.nodepools.iter().map(|p| p.name.as_str()).collect();
    let claimed: BTreeSet<&str> = (snapshot.nodeclaims.iter())
        .filter_map(|c| c.node_name.as_deref())
        .collect();
    // The fleet's nodes: labelled with one of its NodePools, or with a pool since deleted and
    // one of its NodeClaims. Another provider's nodes (EKS Auto Mode's, whose pools and claims the read
    // leaves out) carry a NodePool label too, but are not the fleet's cost.
    let owned: Vec<&crate::model::Node> = snapshot
        .nodes
        .iter()
        .filter(|n| {
            (n.nodepool()).is_some_and(|p| pools.contains(p) || claimed.contains(n.name.as_str()))
        })
        .collect();
    let priced: Vec<f64> = owned.iter().filter_map(|n| prices.of(&n.labels)).collect();
    let mut scratch = snapshot.clone();
    let owned_names: BTreeSet<&str> = owned.iter().map(|n| n.name.as_str()).collect();
    scratch.pods.retain(|p| !p.terminal && !p.is_daemonset());
    for pod in &mut scratch.pods {
        if pod
            .node_name
            .as_deref()
            .is_some_and(|n| owned_names.contains(n))
        {
            pod.node_name = None;
        }
    }
    scratch
        .nodes
        .retain(|n| !owned_names.contains(n.name.as_str()));
    scratch.nodeclaims.clear();
    let plan = schedule(
        &scratch,
        catalog,
        &ScheduleOptions {
            now,
            ..Default::default()
        },
    );
    FleetCost {
        nodes: priced.len(),
        // Folded from +0.0: an empty fleet costs $0, not -0.
        hourly: priced.iter().fold(0.0, |a, b| a + b),
        lower_bound: plan.cost.lower_bound,
        planned: plan.cost.hourly + 0.0,
    }
}
