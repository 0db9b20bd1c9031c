//! fleetwright-bound: a lower bound on the hourly cost of any plan that places a snapshot's
//! pending pods on new nodes, which respects which pods may use which nodes. It owns the bound
//! the benchmarks and the cost tests compare plans with; it shares no code with the scheduler
//! (node labels and pod matching are the independent checker's, `fleetwright_core::check`).
//!
//! The bound is a linear program over *columns* (a NodePool, an instance type, a zone and a
//! capacity type, priced at that offering) and *groups* (pending pods that have the same
//! requests and the same constraints). A group may use a column when the checker says its pods
//! may run on such a node: taints tolerated, nodeSelector and required node affinity holding,
//! under the pool's own requirements. The program buys fractional nodes of each column and
//! assigns fractional pods to them:
//!
//! ```text
//! min Σⱼ pⱼ·xⱼ   s.t.   Σ_g d_{g,r}·n_{g,j} ≤ c_{j,r}·xⱼ   (every column j, resource r)
//!                       Σⱼ n_{g,j} = n_g                   (every group g)
//!                       n_{g,j} ≤ xⱼ                       (g avoids sharing a host with itself)
//! ```
//!
//! where c is the type's allocatable less the DaemonSets that would run there. Pods are placed as Karpenter places them: a pod's heaviest
//! preferred node-affinity term counts as required while some column meets it, and a pod uses
//! only the highest-weight NodePools it fits. Every plan with those semantics that places the
//! pods on whole nodes is a feasible point, so the optimum is a lower bound on its cost. What it
//! relaxes (and so never overstates): whole nodes and whole pods, pod affinity, anti-affinity
//! between different groups, topology spread, and NodePool limits. Pods that fit no column
//! are left out: a plan cannot place them either.

mod columns;
mod groups;
mod program;
mod prune;

use std::collections::BTreeMap;

use fleetwright_core::labels::{CAPACITY_TYPE, INSTANCE_TYPE};
use fleetwright_core::{Catalog, Snapshot};

/// Why no bound could be computed.
#[derive(Debug, thiserror::Error)]
pub enum BoundError {
    #[error("the bound's linear program failed: {0}")]
    Solver(String),
}

/// The bound and the size of the program that gave it.
#[derive(Clone, Debug, PartialEq)]
pub struct Bound {
    /// USD per hour.
    pub hourly: f64,
    /// Pods the bound places (pending pods that fit some column).
    pub pods: usize,
    /// Groups of pods with the same requests and constraints.
    pub groups: usize,
    /// Columns left after removing dominated ones.
    pub columns: usize,
    /// What the bound spends, by `pool/capacity-type`, USD per hour.
    pub spend: BTreeMap<String, f64>,
    /// The (fractional) nodes the bound buys, by `pool/capacity-type/instance-type`.
    pub nodes: BTreeMap<String, f64>,
}

/// The constraint-aware LP lower bound for placing `snapshot`'s pending pods on new nodes from
/// its NodePools, priced from `catalog`.
pub fn lower_bound(snapshot: &Snapshot, catalog: &Catalog) -> Result<Bound, BoundError> {
    let columns = columns::all(snapshot, catalog);
    let groups = groups::of(snapshot, &columns);
    let columns = prune::pruned(columns, &groups);
    let groups = groups::of(snapshot, &columns);
    let (hourly, counts) = program::solve(&columns, &groups)?;
    let mut spend: BTreeMap<String, f64> = BTreeMap::new();
    let mut nodes: BTreeMap<String, f64> = BTreeMap::new();
    for (c, x) in columns.iter().zip(counts) {
        if x > 1e-9 {
            let capacity = c.labels[CAPACITY_TYPE]
                .iter()
                .next()
                .cloned()
                .unwrap_or_default();
            let key = format!("{}/{capacity}", snapshot.nodepools[c.pool].name);
            let instance_type = c.labels[INSTANCE_TYPE]
                .iter()
                .next()
                .cloned()
                .unwrap_or_default();
            *nodes.entry(format!("{key}/{instance_type}")).or_default() += x;
            *spend.entry(key).or_default() += x * c.price;
        }
    }
    Ok(Bound {
        spend,
        nodes,
        hourly,
        pods: groups.iter().map(|g| g.count).sum(),
        groups: groups.len(),
        columns: columns.len(),
    })
}
