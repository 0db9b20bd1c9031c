//! Disruption decisions, as data: which nodes to remove or replace now, and why the others are
//! left alone. One method at a time, in Karpenter's order: expiration, drift, emptiness, then
//! consolidation (multi-node first, then single nodes). Every command stays within the NodePools'
//! budgets, never touches a node or pod marked `karpenter.sh/do-not-disrupt`, never evicts past a
//! PodDisruptionBudget, and is checked by re-running the scheduler over the cluster without the
//! candidates: every pod they hold must fit on the remaining nodes plus at most one replacement,
//! which must be strictly cheaper for consolidation. Pure: time is an argument.

use serde::Serialize;

use self::budget::{Budgets, Reason};
use self::candidates::{candidates, expired, settled, Applies, Candidate, Prices};
use self::consolidation::{consolidate, delete_all, replace_each};
pub use self::drift::drift;
use self::drift::drifted;
use crate::catalog::Catalog;
use crate::model::{ConsolidationPolicy, Snapshot};
use crate::plan::NewNodeClaim;

/// The NodeClaim annotation holding the NodePool template hash it was created from.
pub const NODEPOOL_HASH: &str = "karpenter.sh/nodepool-hash";
/// The annotation naming how that hash was computed.
pub const NODEPOOL_HASH_VERSION: &str = "karpenter.sh/nodepool-hash-version";
/// The NodeClaim annotation holding the EC2NodeClass static hash (everything but the selector
/// terms) it was launched from.
pub const NODECLASS_HASH: &str = "karpenter.k8s.aws/ec2nodeclass-hash";
pub const NODECLASS_HASH_VERSION: &str = "karpenter.k8s.aws/ec2nodeclass-hash-version";
/// The version Fleetwright writes into both hash-version annotations. Hashes written by another
/// version (Karpenter's own, after a migration) are not compared, so they never look drifted.
pub const HASH_VERSION: &str = "fleetwright-v1";
/// The subnet a NodeClaim's instance was launched into.
pub const SUBNET_ID: &str = "fleetwright.io/subnet-id";
/// The security groups of a NodeClaim's instance, sorted and comma-separated.
pub const SECURITY_GROUP_IDS: &str = "fleetwright.io/security-group-ids";
/// Spot-to-spot replacement needs at least this many cheaper spot types (for diversity).
pub const MIN_SPOT_OPTIONS: usize = 15;
/// Multi-node consolidation looks at no more than this many candidates.
pub const MAX_MULTI_NODE: usize = 100;

/// Delete nodes, or replace them with one new NodeClaim.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Command {
    Delete,
    Replace,
}

/// The NodeClaim a replace command launches first.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Replacement {
    pub instance_types: Vec<String>,
    pub capacity_types: Vec<String>,
    pub zones: Vec<String>,
    pub price: f64,
    #[serde(skip)]
    pub nodeclaim: NewNodeClaim,
}

/// One disruption command.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Disruption {
    pub command: Command,
    #[serde(serialize_with = "reason_name")]
    pub reason: Reason,
    pub nodes: Vec<String>,
    pub replacement: Option<Replacement>,
    /// Hourly savings in USD (negative when expiration or drift replaces with something dearer).
    pub savings: f64,
}

fn reason_name<S: serde::Serializer>(r: &Reason, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(r.as_str())
}

/// A node left alone, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Blocked {
    pub node: String,
    pub reason: String,
}

/// What disruption decided.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct DisruptionPlan {
    pub disruptions: Vec<Disruption>,
    pub blocked: Vec<Blocked>,
}

pub mod budget;
mod candidates;
mod consolidation;
mod drift;
mod fleet;
pub use fleet::{fleet_cost, FleetCost};
#[cfg(test)]
mod tests;

/// Decides the disruptions for the snapshot at `now`.
pub fn plan(snapshot: &Snapshot, catalog: &Catalog, now: i64) -> DisruptionPlan {
    let prices = Prices::new(catalog);
    let mut out = DisruptionPlan::default();
    let candidates = candidates(snapshot, &prices, &mut out.blocked);
    let budgets = Budgets::new(snapshot, now);
    let methods: [(Reason, &Applies); 3] = [
        (Reason::Expired, &|c| expired(c, now)),
        (Reason::Drifted, &|c| drifted(c, snapshot)),
        (Reason::Empty, &|c| c.pods.is_empty() && settled(c, now)),
    ];
    for (reason, applies) in methods {
        let chosen: Vec<&Candidate> = candidates.iter().filter(|c| applies(c)).collect();
        if chosen.is_empty() {
            continue;
        }
        let within = budgets.take(&chosen, reason, &mut out.blocked);
        out.disruptions = match reason {
            Reason::Empty => delete_all(&within, reason),
            _ => replace_each(snapshot, catalog, &within, reason, now, &mut out.blocked),
        };
        if !out.disruptions.is_empty() {
            return out;
        }
    }
    let movable: Vec<&Candidate> = candidates
        .iter()
        .filter(|c| c.pool.consolidation_policy == ConsolidationPolicy::WhenEmptyOrUnderutilized)
        .filter(|c| settled(c, now))
        .collect();
    out.disruptions = consolidate(snapshot, catalog, &movable, &budgets, now, &mut out.blocked);
    out
}
