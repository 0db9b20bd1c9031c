//! Disruption decisions, as data: which nodes to remove or replace now, and why the others are
//! left alone. One method at a time, in Karpenter's order: drift, emptiness, then consolidation
//! (multi-node first, then single nodes). Expiration is no method here: as in Karpenter v1 it is
//! forceful, held by no budget, and the tick deletes an expired NodeClaim outright. Every command
//! stays within the NodePools' budgets, never touches a node marked `karpenter.sh/do-not-disrupt`
//! nor, except drift bounded by a `terminationGracePeriod`, a node whose pods a do-not-disrupt
//! annotation or an exhausted PodDisruptionBudget holds; and every command is checked by re-running the scheduler over the cluster without the
//! candidates: every pod they hold must fit on the remaining nodes plus the replacements planned
//! (one strictly cheaper, as Karpenter's; or several, N→M, at least [`MIN_SPLIT_SAVINGS`]
//! cheaper). Decisions come in sequences ([`plan_sequence`]) and are validated before they are
//! carried out ([`validate`]). Pure: time is an argument.

use serde::Serialize;

use self::balanced::Scoring;
pub use self::balanced::{Score, BALANCED_K};
use self::budget::Budgets;
pub use self::budget::Reason;
use self::candidates::{candidates, settled, Applies, Candidate, Prices};
use self::consolidation::{consolidate, delete_all};
use self::drift::drifted;
pub use self::drift::{drift, INSTANCE_TYPE_CHECK_AFTER};
pub use self::replace::STATIC_AT_LIMIT;
use self::replace::{replace_each, replace_within};
use crate::catalog::Catalog;
use crate::model::{ConsolidationPolicy, Snapshot};
use crate::plan::NewNodeClaim;
use crate::resources::Resources;

/// The NodeClaim annotation holding the NodePool template hash it was created from.
pub const NODEPOOL_HASH: &str = "karpenter.sh/nodepool-hash";
/// The annotation naming how that hash was computed.
pub const NODEPOOL_HASH_VERSION: &str = "karpenter.sh/nodepool-hash-version";
/// The NodeClaim annotation holding the EC2NodeClass static hash it was launched from.
pub const NODECLASS_HASH: &str = "karpenter.k8s.aws/ec2nodeclass-hash";
pub const NODECLASS_HASH_VERSION: &str = "karpenter.k8s.aws/ec2nodeclass-hash-version";
/// The NodePool hash version Fleetwright writes and compares: Karpenter v1's, whose hash it
/// computes exactly (`fleetwright_crds::hash`). Hashes of another version are not compared, so
/// they never look drifted: the tick re-stamps them with the current hash, as Karpenter's hash
/// controllers do when their version changes (keeping the old hash of a NodeClaim already
/// drifted, so that it stays drifted), and drift is found from then on.
pub const POOL_HASH_VERSION: &str = "v3";
/// The EC2NodeClass hash version Fleetwright writes and compares: Karpenter v1.15's.
pub const CLASS_HASH_VERSION: &str = "v6";
/// The version earlier Fleetwright releases wrote into both annotations (its own hashes).
pub const LEGACY_HASH_VERSION: &str = "fleetwright-v2";
/// The subnet a NodeClaim's instance was launched into.
pub const SUBNET_ID: &str = "fleetwright.io/subnet-id";
/// The security groups of a NodeClaim's instance, sorted and comma-separated.
pub const SECURITY_GROUP_IDS: &str = "fleetwright.io/security-group-ids";
/// Spot-to-spot replacement needs at least this many cheaper spot types (for diversity).
pub const MIN_SPOT_OPTIONS: usize = 15;
/// Multi-node consolidation looks at no more than this many candidates.
pub const MAX_MULTI_NODE: usize = 100;
/// How many commands one decision holds (see [`plan_sequence`]). Each costs a disruption plan
/// of its own; three cover the common case of emptiness, then consolidation, then what the
/// consolidation freed.
pub const MAX_COMMANDS: usize = 3;

/// An N→M consolidation (M ≥ 2 new nodes) must save at least this fraction of the replaced
/// nodes' hourly price. A 1→1 or N→1 replacement keeps Karpenter's rule (strictly cheaper), but
/// a split launches several nodes, restarts every pod it moves and spreads them over more
/// kubelets, and a set of spot prices moves by a few percent from hour to hour: 5 % keeps
/// splits for real savings (the scale-down trace's is 7.9 %) and off the pennies that the
/// next price change takes back.
pub const MIN_SPLIT_SAVINGS: f64 = 0.05;

/// Delete nodes, or replace them with new NodeClaims.
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
    /// The replacement when there is exactly one (as before N→M consolidation; kept for
    /// readers of the JSON).
    pub replacement: Option<Replacement>,
    /// Every replacement, launched (and initialized) before the nodes drain.
    pub replacements: Vec<Replacement>,
    /// Hourly savings in USD (negative when expiration or drift replaces with something dearer).
    pub savings: f64,
    /// The pods that move onto nodes that stay, and those nodes (`(pod key, node)`); the others
    /// go to the replacements.
    #[serde(skip)]
    pub moves: Vec<(String, String)>,
    /// Karpenter's terminate-first reason ([`STATIC_AT_LIMIT`]) for a delete-only command whose
    /// node goes before anything replaces it, its static pool's refill taking the slot it
    /// frees; None for every other command.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub terminate_first: Option<&'static str>,
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
    /// Every consolidation move of a `Balanced` pool scored while deciding, approved or not.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub scores: Vec<Score>,
    /// The soonest time after `now` at which an empty node waits out its pool's
    /// `consolidateAfter`: when a tick should look again, rather than at its next schedule.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub empty_settles_at: Option<i64>,
    /// The same for a node whose pods request less than half of both its CPU and its memory,
    /// in a pool that consolidates underutilized nodes: a node a load drop left behind.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub underused_settles_at: Option<i64>,
}

mod balanced;
pub mod budget;
mod candidates;
mod consolidation;
mod drift;
mod fleet;
mod narrow;
mod repair;
mod replace;
mod static_drift;
pub use fleet::{fleet_cost, FleetCost};
pub use repair::{repair_command, RepairPlan};
#[cfg(test)]
#[path = "../../tests/unit/disruption.rs"]
mod tests;

/// The commands to take, in order, up to [`MAX_COMMANDS`]: the first as [`plan`] decides it,
/// and, after an emptiness, each next one decided as if those before it had moved their pods:
/// their nodes tainted `karpenter.sh/disrupted` (so they count against the budgets, as a started
/// command's do) and their pods where their plan puts them (so no later command takes a node
/// they move onto for empty, and none counts on their replacements: Karpenter's rule, no
/// consolidation relies on a node not yet initialized). Karpenter decides its methods one after
/// another within seconds; a tick a minute decides an emptiness and what follows it together, so
/// they do not take a minute each to confirm. Only an emptiness is followed: it is cheap to
/// decide, while a consolidation over thousands of nodes takes seconds, and deciding three of
/// them would take the tick past its time. `snapshot` is left as those commands leave it. The
/// blocked reasons are the first plan's.
pub fn plan_sequence(snapshot: &mut Snapshot, catalog: &Catalog, now: i64) -> DisruptionPlan {
    let mut out = plan(snapshot, catalog, now);
    out.disruptions.truncate(1);
    while out.disruptions.len() < MAX_COMMANDS {
        let Some(last) = out.disruptions.last() else {
            break;
        };
        as_started(snapshot, last);
        if last.reason != Reason::Empty {
            break;
        }
        let Some(next) = plan(snapshot, catalog, now).disruptions.into_iter().next() else {
            break;
        };
        out.disruptions.push(next);
    }
    out
}

/// Whether a command decided earlier (`reason`, on `nodes`) still holds now: Karpenter's
/// validation before it acts. The nodes are all still candidates, their budgets still allow
/// them all, and the method still applies: still empty, still expired or drifted, or (for
/// consolidation) their pods still move elsewhere for less. Returns the command as it is now,
/// with replacements planned afresh, or why it no longer holds.
pub fn validate(
    snapshot: &Snapshot,
    catalog: &Catalog,
    now: i64,
    reason: budget::Reason,
    nodes: &[String],
) -> Result<Disruption, String> {
    let prices = Prices::new(catalog);
    let mut blocked = Vec::new();
    let all = candidates(snapshot, &prices, now, &mut blocked);
    let mut chosen = Vec::new();
    for node in nodes {
        match all.iter().find(|c| &c.node.name == node) {
            Some(c) if c.movable_for(reason) => chosen.push(c),
            Some(c) => {
                let why = c.held.as_deref().unwrap_or("its pods cannot be evicted");
                return Err(format!("node {node}: {why}"));
            }
            None => {
                let why = blocked
                    .iter()
                    .find(|b| &b.node == node)
                    .map_or("it is no longer a candidate", |b| b.reason.as_str());
                return Err(format!("node {node}: {why}"));
            }
        }
    }
    let mut refused = Vec::new();
    if Budgets::new(snapshot, now)
        .take(&chosen, reason, &mut refused)
        .len()
        < chosen.len()
    {
        return Err("the budgets no longer allow all of its nodes".into());
    }
    let first = |mut commands: Vec<Disruption>| {
        commands
            .drain(..)
            .next()
            .ok_or_else(|| "it no longer applies".to_string())
    };
    match reason {
        Reason::Empty
            if chosen.iter().all(|c| {
                c.priced && c.pods.is_empty() && settled(c, now) && c.pool.replicas.is_none()
            }) =>
        {
            first(delete_empty(snapshot, catalog, &chosen, now, &mut blocked))
        }
        Reason::Drifted if chosen.iter().all(|c| drifted(c, snapshot, catalog, now)) => first(
            replace_each(snapshot, catalog, &chosen, reason, now, &mut blocked),
        ),
        Reason::Underutilized
            if chosen.iter().all(|c| {
                c.priced && !c.pods.is_empty() && underutilized_applies(c) && settled(c, now)
            }) =>
        {
            consolidation::consolidation(snapshot, catalog, &chosen, now, &Scoring::new(&all))
        }
        _ => Err("it no longer applies".into()),
    }
}

/// Deletes empty nodes, unless a command in progress is moving pods that need their room (its
/// replacements aside): then they stay until those pods have landed.
fn delete_empty(
    snapshot: &Snapshot,
    catalog: &Catalog,
    empty: &[&Candidate],
    now: i64,
    blocked: &mut Vec<Blocked>,
) -> Vec<Disruption> {
    let moving = snapshot.pods.iter().any(|p| {
        !p.terminal
            && !p.is_daemonset()
            && p.node_name.as_ref().is_some_and(|n| {
                snapshot
                    .nodes
                    .iter()
                    .any(|node| &node.name == n && candidates::leaving(node))
            })
    });
    if moving && !empty.is_empty() {
        let needs_room = consolidation::simulate(snapshot, catalog, empty, now)
            .map_or(true, |moved| !moved.claims.is_empty());
        if needs_room {
            blocked.extend(empty.iter().map(|c| Blocked {
                node: c.node.name.clone(),
                reason: "empty, but the pods of a disruption in progress need its room".into(),
            }));
            return Vec::new();
        }
    }
    delete_all(empty, Reason::Empty)
}

/// `snapshot` as it is once `command` has moved its pods: its nodes tainted
/// `karpenter.sh/disrupted`, the pods it moves onto nodes that stay bound there (so no later
/// command takes those nodes for empty), the others gone (to the command's own replacements).
pub fn as_started(snapshot: &mut Snapshot, command: &Disruption) {
    for node in snapshot
        .nodes
        .iter_mut()
        .filter(|n| command.nodes.contains(&n.name))
    {
        node.taints.push(crate::model::Taint {
            key: crate::labels::TAINT_DISRUPTED.into(),
            value: String::new(),
            effect: crate::model::TaintEffect::NoSchedule,
        });
    }
    let moves: std::collections::HashMap<&str, &str> = command
        .moves
        .iter()
        .map(|(pod, node)| (pod.as_str(), node.as_str()))
        .collect();
    snapshot.pods.retain_mut(|p| {
        if !p
            .node_name
            .as_ref()
            .is_some_and(|n| command.nodes.contains(n))
        {
            return true;
        }
        match moves.get(p.key().as_str()) {
            Some(node) => {
                p.node_name = Some(node.to_string());
                true
            }
            None => false,
        }
    });
}

/// Decides the disruptions for the snapshot at `now`.
pub fn plan(snapshot: &Snapshot, catalog: &Catalog, now: i64) -> DisruptionPlan {
    let prices = Prices::new(catalog);
    let mut out = DisruptionPlan::default();
    let candidates = candidates(snapshot, &prices, now, &mut out.blocked);
    let held_upto = out.blocked.len();
    out.empty_settles_at = settles_at(&candidates, now, |c| c.pods.is_empty());
    out.underused_settles_at = settles_at(&candidates, now, |c| {
        !c.pods.is_empty() && underutilized_applies(c) && half_empty(c)
    });
    let budgets = Budgets::new(snapshot, now);
    // Karpenter's order: emptiness, then drift, then consolidation.
    let methods: [(Reason, &Applies); 2] = [
        (Reason::Empty, &|c| {
            c.priced && c.pods.is_empty() && settled(c, now) && c.pool.replicas.is_none()
        }),
        (Reason::Drifted, &|c| drifted(c, snapshot, catalog, now)),
    ];
    for (reason, applies) in methods {
        let chosen: Vec<&Candidate> = candidates
            .iter()
            .filter(|c| c.movable_for(reason) && applies(c))
            .collect();
        if chosen.is_empty() {
            continue;
        }
        let from = out.blocked.len();
        out.disruptions = match reason {
            Reason::Empty => {
                let within = budgets.take(&chosen, reason, &mut out.blocked);
                delete_empty(snapshot, catalog, &within, now, &mut out.blocked)
            }
            _ => replace_within(snapshot, catalog, &chosen, &budgets, now, &mut out.blocked),
        };
        supersede(&mut out.blocked, held_upto, from);
        if !out.disruptions.is_empty() {
            unblock(&mut out);
            return out;
        }
    }
    // An empty node is emptiness's, under its `Empty` budget, never consolidation's.
    let movable: Vec<&Candidate> = candidates
        .iter()
        .filter(|c| c.priced && c.held.is_none() && underutilized_applies(c))
        .filter(|c| !c.pods.is_empty() && settled(c, now))
        .collect();
    let scoring = Scoring::new(&candidates);
    out.disruptions = consolidate(
        snapshot,
        catalog,
        &movable,
        &budgets,
        now,
        &scoring,
        &mut out.blocked,
    );
    out.scores = scoring.take();
    out
}

/// Drops the blocked reasons of the nodes a command takes: a drifted node whose pods a PDB
/// holds is both, and what happens to it is the command.
fn unblock(out: &mut DisruptionPlan) {
    let taken: std::collections::BTreeSet<&str> = out
        .disruptions
        .iter()
        .flat_map(|d| d.nodes.iter().map(String::as_str))
        .collect();
    out.blocked.retain(|b| !taken.contains(b.node.as_str()));
}

/// Drops a candidate's own blocked reason (its pods held) where a method that takes held pods
/// (drift under a `terminationGracePeriod`) blocked it later for another reason (`blocked[from..]`,
/// its budget, say): that is what holds it back.
fn supersede(blocked: &mut Vec<Blocked>, held_upto: usize, from: usize) {
    let later: std::collections::BTreeSet<String> =
        blocked[from..].iter().map(|b| b.node.clone()).collect();
    let mut i = 0;
    blocked.retain(|b| {
        i += 1;
        i > held_upto || !later.contains(&b.node)
    });
}

/// The soonest time after `now` at which a candidate that `which` picks has waited out its
/// pool's `consolidateAfter` (none: no such node is waiting for it). Static pools and nodes
/// whose pods cannot move are left out.
fn settles_at(
    candidates: &[Candidate],
    now: i64,
    which: impl Fn(&Candidate) -> bool,
) -> Option<i64> {
    candidates
        .iter()
        .filter(|c| c.held.is_none() && c.pool.replicas.is_none() && which(c))
        .filter_map(|c| Some(c.node.last_pod_event.max(c.node.created) + c.pool.consolidate_after?))
        .filter(|&at| at > now)
        .min()
}

/// Whether the candidate's pods request less than half of both its allocatable CPU and its
/// allocatable memory.
fn half_empty(c: &Candidate) -> bool {
    let mut requested = Resources::default();
    for pod in &c.pods {
        requested.add(&pod.requests);
    }
    ["cpu", "memory"]
        .iter()
        .all(|r| 2 * requested.get(r) < c.node.allocatable.get(r))
}

/// Whether a candidate's pool consolidates underutilized nodes (`WhenEmptyOrUnderutilized` or
/// `Balanced`; never a static pool).
fn underutilized_applies(c: &Candidate) -> bool {
    c.pool.replicas.is_none()
        && matches!(
            c.pool.consolidation_policy,
            ConsolidationPolicy::WhenEmptyOrUnderutilized | ConsolidationPolicy::Balanced
        )
}
