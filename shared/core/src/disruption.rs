//! Disruption decisions, as data: which nodes to remove or replace now, and why the others are
//! left alone. One method at a time, in Karpenter's order: expiration, drift, emptiness, then
//! consolidation (multi-node first, then single nodes). Every command stays within the NodePools'
//! budgets, never touches a node or pod marked `karpenter.sh/do-not-disrupt`, never evicts past a
//! PodDisruptionBudget, and is checked by re-running the scheduler over the cluster without the
//! candidates: every pod they hold must fit on the remaining nodes plus at most one replacement,
//! which must be strictly cheaper for consolidation. Pure: time is an argument.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::budget::{self, Reason};
use crate::catalog::{Catalog, NodeClassSettings};
use crate::labels::{
    CAPACITY_SPOT, CAPACITY_TYPE, DO_NOT_DISRUPT, INSTANCE_TYPE, TAINT_DISRUPTED, ZONE,
};
use crate::model::{ConsolidationPolicy, Node, NodeClaim, NodePool, Pod, Snapshot};
use crate::plan::NewNodeClaim;
use crate::scheduler::{schedule, ScheduleOptions};

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

/// A node that may be disrupted.
#[derive(Clone, Debug)]
struct Candidate<'a> {
    node: &'a Node,
    claim: &'a NodeClaim,
    pool: &'a NodePool,
    pods: Vec<&'a Pod>,
    price: f64,
    spot: bool,
    /// Karpenter's disruption cost: one per pod, nudged by deletion cost and priority.
    cost: f64,
}

/// Whether a method applies to a candidate.
type Applies<'f> = dyn Fn(&Candidate) -> bool + 'f;

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

/// Hourly prices of the offerings, by (type, zone, capacity type).
struct Prices {
    offerings: BTreeMap<(String, String, String), f64>,
}

impl Prices {
    fn new(catalog: &Catalog) -> Prices {
        let offerings = catalog
            .instance_types(&NodeClassSettings::default())
            .into_iter()
            .flat_map(|t| {
                t.offerings
                    .into_iter()
                    .map(move |o| ((t.name.clone(), o.zone, o.capacity_type), o.price))
            })
            .collect();
        Prices { offerings }
    }

    fn of(&self, labels: &BTreeMap<String, String>) -> Option<f64> {
        let key = |k: &str| labels.get(k).cloned().unwrap_or_default();
        self.offerings
            .get(&(key(INSTANCE_TYPE), key(ZONE), key(CAPACITY_TYPE)))
            .copied()
    }
}

/// Whether a command already in progress is disrupting the node (it carries the
/// `karpenter.sh/disrupted` taint). Such a node is no candidate, counts against its budget,
/// and its pods are treated as moving when another command is checked.
fn disrupting(node: &Node) -> bool {
    node.taints.iter().any(|t| t.key == TAINT_DISRUPTED)
}

fn is_set(annotations: &BTreeMap<String, String>) -> bool {
    annotations.get(DO_NOT_DISRUPT).is_some_and(|v| v == "true")
}

/// Initialized, ready, managed nodes, each with its NodeClaim and pool; the rest are blocked
/// (when they are managed) or ignored.
fn candidates<'a>(
    snapshot: &'a Snapshot,
    prices: &Prices,
    blocked: &mut Vec<Blocked>,
) -> Vec<Candidate<'a>> {
    let mut out = Vec::new();
    for node in &snapshot.nodes {
        let Some(claim) = snapshot
            .nodeclaims
            .iter()
            .find(|c| c.node_name.as_deref() == Some(node.name.as_str()))
        else {
            continue;
        };
        let Some(pool) = snapshot.nodepools.iter().find(|p| p.name == claim.nodepool) else {
            continue;
        };
        let pods: Vec<&Pod> = snapshot
            .pods
            .iter()
            .filter(|p| p.node_name.as_deref() == Some(node.name.as_str()))
            .filter(|p| !p.terminal && !p.is_daemonset())
            .collect();
        let block = |reason: String| Blocked {
            node: node.name.clone(),
            reason,
        };
        if node.deleting || claim.deleting || !node.ready || !claim.initialized || disrupting(node)
        {
            continue;
        }
        if is_set(&node.annotations) || is_set(&claim.annotations) {
            blocked.push(block(format!("node has {DO_NOT_DISRUPT}")));
            continue;
        }
        if let Some(pod) = pods.iter().find(|p| p.do_not_disrupt) {
            blocked.push(block(format!("pod {} has {DO_NOT_DISRUPT}", pod.key())));
            continue;
        }
        if let Some(reason) = pdb_blocks(snapshot, &pods) {
            blocked.push(block(reason));
            continue;
        }
        let Some(price) = prices.of(&node.labels) else {
            blocked.push(block("its offering has no known price".into()));
            continue;
        };
        let cost = pods.iter().map(|p| pod_cost(p)).sum::<f64>();
        out.push(Candidate {
            node,
            claim,
            pool,
            spot: node.labels.get(CAPACITY_TYPE).map(String::as_str) == Some(CAPACITY_SPOT),
            pods,
            price,
            cost,
        });
    }
    out
}

/// Karpenter's eviction cost of a pod: 1, plus its deletion cost and priority scaled down.
fn pod_cost(pod: &Pod) -> f64 {
    let cost =
        1.0 + pod.deletion_cost as f64 / 2f64.powi(27) + f64::from(pod.priority) / 2f64.powi(25);
    cost.clamp(-10.0, 10.0)
}

/// Why a PodDisruptionBudget stops these pods from being evicted now, if one does.
fn pdb_blocks(snapshot: &Snapshot, pods: &[&Pod]) -> Option<String> {
    for pdb in &snapshot.pdbs {
        let covered: Vec<&&Pod> = pods
            .iter()
            .filter(|p| p.namespace == pdb.namespace && pdb.selector.matches_labels(&p.labels))
            .collect();
        if covered.len() as i64 > i64::from(pdb.disruptions_allowed.max(0)) {
            return Some(format!(
                "pod {} has PDB {} ({} disruptions allowed)",
                covered[0].key(),
                pdb.name,
                pdb.disruptions_allowed.max(0)
            ));
        }
    }
    None
}

/// Whether the node outlived `expireAfter` (a node of unknown age never expires).
fn expired(c: &Candidate, now: i64) -> bool {
    let born = c.claim.created.max(c.node.created);
    born > 0 && c.pool.expire_after.is_some_and(|ttl| now - born >= ttl)
}

/// Why a node has drifted from its NodePool or EC2NodeClass, if it has (Karpenter's drift
/// reasons). Unknown facts (no annotation, nothing resolved) never count as drift.
pub fn drift(claim: &NodeClaim, pool: &NodePool, snapshot: &Snapshot) -> Option<&'static str> {
    let ours = |version_key: &str| {
        claim.annotations.get(version_key).map(String::as_str) == Some(HASH_VERSION)
    };
    let differs = |stamped: Option<&String>, current: Option<&String>| matches!((stamped, current), (Some(a), Some(b)) if a != b);
    if ours(NODEPOOL_HASH_VERSION)
        && differs(
            claim.annotations.get(NODEPOOL_HASH),
            pool.template_hash.as_ref(),
        )
    {
        return Some("NodePoolDrifted");
    }
    let state = snapshot.node_class_state.get(&pool.node_class)?;
    if ours(NODECLASS_HASH_VERSION)
        && differs(claim.annotations.get(NODECLASS_HASH), state.hash.as_ref())
    {
        return Some("NodeClassDrifted");
    }
    if let Some(image) = &claim.image_id {
        if !state.images.is_empty() && !state.images.contains(image) {
            return Some("AMIDrift");
        }
    }
    if let Some(subnet) = claim.annotations.get(SUBNET_ID) {
        if !state.subnets.is_empty() && !state.subnets.contains(subnet) {
            return Some("SubnetDrift");
        }
    }
    if let Some(groups) = claim.annotations.get(SECURITY_GROUP_IDS) {
        let groups: BTreeSet<String> = groups.split(',').map(str::to_string).collect();
        if !state.security_groups.is_empty() && groups != state.security_groups {
            return Some("SecurityGroupDrift");
        }
    }
    None
}

fn drifted(c: &Candidate, snapshot: &Snapshot) -> bool {
    drift(c.claim, c.pool, snapshot).is_some()
}

/// Whether `consolidateAfter` has passed since the node's last pod event.
fn settled(c: &Candidate, now: i64) -> bool {
    c.pool
        .consolidate_after
        .is_some_and(|after| now - c.node.last_pod_event.max(c.node.created) >= after)
}

/// Per-pool allowances for one reason, handed out in order.
struct Budgets<'a> {
    snapshot: &'a Snapshot,
    now: i64,
}

impl<'a> Budgets<'a> {
    fn new(snapshot: &'a Snapshot, now: i64) -> Self {
        Budgets { snapshot, now }
    }

    /// How many more nodes of `pool` may be disrupted for `reason`.
    fn allowance(&self, pool: &NodePool, reason: Reason) -> usize {
        let nodes: Vec<&Node> = self
            .snapshot
            .nodes
            .iter()
            .filter(|n| n.nodepool() == Some(pool.name.as_str()))
            .collect();
        let disrupting = nodes
            .iter()
            .filter(|n| n.deleting || !n.ready || disrupting(n))
            .count();
        budget::allowed(pool, reason, nodes.len(), disrupting, self.now)
    }

    /// The candidates, in order, that fit in their pools' allowances; the others are blocked.
    fn take<'c>(
        &self,
        candidates: &[&'c Candidate<'a>],
        reason: Reason,
        blocked: &mut Vec<Blocked>,
    ) -> Vec<&'c Candidate<'a>> {
        let mut left: BTreeMap<&str, usize> = BTreeMap::new();
        let mut out = Vec::new();
        for c in candidates {
            let n = left
                .entry(c.pool.name.as_str())
                .or_insert_with(|| self.allowance(c.pool, reason));
            if *n == 0 {
                blocked.push(Blocked {
                    node: c.node.name.clone(),
                    reason: format!(
                        "{} disruption budget of NodePool {} allows no more nodes now",
                        reason.as_str(),
                        c.pool.name
                    ),
                });
                continue;
            }
            *n -= 1;
            out.push(*c);
        }
        out
    }
}

fn delete_all(candidates: &[&Candidate], reason: Reason) -> Vec<Disruption> {
    if candidates.is_empty() {
        return Vec::new();
    }
    vec![Disruption {
        command: Command::Delete,
        reason,
        nodes: candidates.iter().map(|c| c.node.name.clone()).collect(),
        replacement: None,
        savings: round4(candidates.iter().map(|c| c.price).sum()),
    }]
}

fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

/// What scheduling the candidates' pods elsewhere gives: the new NodeClaims needed, or why the
/// pods cannot move.
fn simulate(
    snapshot: &Snapshot,
    catalog: &Catalog,
    candidates: &[&Candidate],
    now: i64,
) -> Result<Vec<NewNodeClaim>, String> {
    // The candidates go, and so do the nodes of commands already in progress: their pods need a
    // place too, so a new command never takes the room they are moving into.
    let removed: BTreeSet<&str> = candidates
        .iter()
        .map(|c| c.node.name.as_str())
        .chain(
            snapshot
                .nodes
                .iter()
                .filter(|n| disrupting(n))
                .map(|n| n.name.as_str()),
        )
        .collect();
    let mut sim = snapshot.clone();
    sim.nodes.retain(|n| !removed.contains(n.name.as_str()));
    sim.nodeclaims
        .retain(|c| !c.node_name.as_deref().is_some_and(|n| removed.contains(n)));
    sim.pods.retain(|p| p.node_name.is_some() || p.terminal);
    for pod in &mut sim.pods {
        if pod
            .node_name
            .as_deref()
            .is_some_and(|n| removed.contains(n))
        {
            if pod.is_daemonset() {
                pod.terminal = true;
            } else {
                pod.node_name = None;
            }
        }
    }
    let plan = schedule(
        &sim,
        catalog,
        &ScheduleOptions {
            now,
            ..Default::default()
        },
    );
    match plan.unschedulable.first() {
        Some(u) => Err(format!(
            "pod {} would not fit elsewhere: {}",
            u.pod, u.reason
        )),
        None => Ok(plan.nodeclaims),
    }
}

/// Expired and drifted nodes, one command each (budgets already applied).
fn replace_each(
    snapshot: &Snapshot,
    catalog: &Catalog,
    candidates: &[&Candidate],
    reason: Reason,
    now: i64,
    blocked: &mut Vec<Blocked>,
) -> Vec<Disruption> {
    let mut out = Vec::new();
    for c in candidates {
        match simulate(snapshot, catalog, &[c], now) {
            Ok(claims) if claims.len() <= 1 => {
                let replacement = claims.into_iter().next().map(replacement_of);
                let cost = replacement.as_ref().map_or(0.0, |r| r.price);
                out.push(Disruption {
                    command: if replacement.is_some() {
                        Command::Replace
                    } else {
                        Command::Delete
                    },
                    reason,
                    nodes: vec![c.node.name.clone()],
                    replacement,
                    savings: round4(c.price - cost),
                });
            }
            Ok(claims) => blocked.push(Blocked {
                node: c.node.name.clone(),
                reason: format!(
                    "{}: its pods need {} new nodes",
                    reason.as_str(),
                    claims.len()
                ),
            }),
            Err(why) => blocked.push(Blocked {
                node: c.node.name.clone(),
                reason: format!("{}: {why}", reason.as_str()),
            }),
        }
    }
    out
}

fn replacement_of(claim: NewNodeClaim) -> Replacement {
    Replacement {
        instance_types: claim.instance_types.clone(),
        capacity_types: claim.capacity_types.clone(),
        zones: claim.zones.clone(),
        price: claim.price,
        nodeclaim: claim,
    }
}

/// A consolidation of these candidates, if one is allowed and saves money.
fn consolidation(
    snapshot: &Snapshot,
    catalog: &Catalog,
    candidates: &[&Candidate],
    now: i64,
) -> Result<Disruption, String> {
    if let Some(reason) = pdb_blocks(
        snapshot,
        &candidates
            .iter()
            .flat_map(|c| c.pods.iter().copied())
            .collect::<Vec<_>>(),
    ) {
        return Err(reason);
    }
    let claims = simulate(snapshot, catalog, candidates, now)?;
    let total: f64 = candidates.iter().map(|c| c.price).sum();
    let nodes: Vec<String> = candidates.iter().map(|c| c.node.name.clone()).collect();
    let reason = if candidates.iter().all(|c| c.pods.is_empty()) {
        Reason::Empty
    } else {
        Reason::Underutilized
    };
    match claims.len() {
        0 => Ok(Disruption {
            command: Command::Delete,
            reason,
            nodes,
            replacement: None,
            savings: round4(total),
        }),
        1 => {
            let ceiling = candidates.iter().map(|c| c.price).fold(0.0, f64::max);
            let claim = claims
                .into_iter()
                .next()
                .ok_or("no replacement was planned")?;
            let replacement = cheaper(catalog, claim, ceiling, candidates)?;
            Ok(Disruption {
                command: Command::Replace,
                reason,
                nodes,
                savings: round4(total - replacement.price),
                replacement: Some(replacement),
            })
        }
        n => Err(format!("its pods would need {n} new nodes")),
    }
}

/// The replacement's options cut to those strictly cheaper than `ceiling` (the dearest
/// candidate), with Karpenter's spot-to-spot diversity rule.
fn cheaper(
    catalog: &Catalog,
    claim: NewNodeClaim,
    ceiling: f64,
    candidates: &[&Candidate],
) -> Result<Replacement, String> {
    let prices = Prices::new(catalog);
    let cheapest = |t: &str, capacity: &str| {
        claim
            .zones
            .iter()
            .filter_map(|z| {
                let labels: BTreeMap<String, String> = [
                    (INSTANCE_TYPE.to_string(), t.to_string()),
                    (ZONE.to_string(), z.clone()),
                    (CAPACITY_TYPE.to_string(), capacity.to_string()),
                ]
                .into();
                prices.of(&labels)
            })
            .fold(f64::INFINITY, f64::min)
    };
    let all_spot = candidates.iter().all(|c| c.spot);
    let capacity = if all_spot && claim.capacity_types.iter().any(|c| c == CAPACITY_SPOT) {
        CAPACITY_SPOT.to_string()
    } else {
        claim
            .capacity_types
            .first()
            .cloned()
            .unwrap_or_else(|| "on-demand".into())
    };
    let capacity = capacity.as_str();
    let options: Vec<(String, f64)> = claim
        .instance_types
        .iter()
        .map(|t| (t.clone(), cheapest(t, capacity)))
        .filter(|(_, p)| *p < ceiling - 1e-9)
        .collect();
    if options.is_empty() {
        return Err("no cheaper instance type fits its pods".into());
    }
    if all_spot && capacity == CAPACITY_SPOT && options.len() < MIN_SPOT_OPTIONS {
        return Err(format!(
            "spot-to-spot consolidation needs {MIN_SPOT_OPTIONS} cheaper spot types, found {}",
            options.len()
        ));
    }
    let price = options
        .iter()
        .map(|(_, p)| *p)
        .fold(f64::INFINITY, f64::min);
    let mut nodeclaim = claim;
    nodeclaim.instance_types = options.into_iter().map(|(t, _)| t).collect();
    nodeclaim.capacity_types = vec![capacity.to_string()];
    nodeclaim.price = price;
    Ok(replacement_of(nodeclaim))
}

/// Consolidation: the largest multi-node command among the best-ranked candidates, else the
/// first single node that can go.
fn consolidate(
    snapshot: &Snapshot,
    catalog: &Catalog,
    movable: &[&Candidate],
    budgets: &Budgets,
    now: i64,
    blocked: &mut Vec<Blocked>,
) -> Vec<Disruption> {
    let mut ranked: Vec<&Candidate> = movable.to_vec();
    ranked.sort_by(|a, b| {
        let score = |c: &Candidate| c.price / c.cost.max(0.1);
        score(b)
            .total_cmp(&score(a))
            .then_with(|| a.cost.total_cmp(&b.cost))
            .then_with(|| a.node.name.cmp(&b.node.name))
    });
    let mut quiet = Vec::new();
    let within = budgets.take(&ranked, Reason::Underutilized, &mut quiet);
    let pool: Vec<&Candidate> = within.into_iter().take(MAX_MULTI_NODE).collect();
    if let Some(multi) = largest_multi(snapshot, catalog, &pool, now) {
        return vec![multi];
    }
    for c in &pool {
        match consolidation(snapshot, catalog, &[c], now) {
            Ok(d) => return vec![d],
            Err(why) => blocked.push(Blocked {
                node: c.node.name.clone(),
                reason: format!("not consolidating: {why}"),
            }),
        }
    }
    blocked.extend(quiet);
    Vec::new()
}

/// Binary search for the longest prefix (at least two nodes) that consolidates.
fn largest_multi(
    snapshot: &Snapshot,
    catalog: &Catalog,
    ranked: &[&Candidate],
    now: i64,
) -> Option<Disruption> {
    let (mut lo, mut hi) = (2usize, ranked.len());
    let mut best = None;
    while lo <= hi {
        let mid = (lo + hi) / 2;
        match consolidation(snapshot, catalog, &ranked[..mid], now) {
            Ok(d) => {
                best = Some(d);
                lo = mid + 1;
            }
            Err(_) => hi = mid - 1,
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labels::{HOSTNAME, NODEPOOL};
    use crate::model::{Budget, Pdb};
    use crate::model::{NodeClassState, Taint};
    use crate::requirements::{Requirement, Requirements};
    use crate::resources::Resources;

    const NOW: i64 = 1_795_429_800;
    const ZONE_A: &str = "us-east-1a";

    fn pool(types: &[&str], capacity: &str, budget: &str) -> NodePool {
        let mut requirements = Requirements::new();
        requirements.add(Requirement::in_values(
            INSTANCE_TYPE,
            types.iter().map(|t| t.to_string()),
        ));
        requirements.add(Requirement::single(CAPACITY_TYPE, capacity));
        requirements.add(Requirement::single(ZONE, ZONE_A));
        NodePool {
            name: "default".into(),
            requirements,
            node_class: "default".into(),
            consolidate_after: Some(0),
            budgets: vec![Budget {
                nodes: budget.into(),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    /// A general pool: m5 and c5 sizes, on-demand.
    fn general(budget: &str) -> NodePool {
        pool(
            &[
                "m5.large",
                "m5.xlarge",
                "m5.2xlarge",
                "m5.4xlarge",
                "m5.8xlarge",
                "c5.large",
                "c5.xlarge",
                "c5.2xlarge",
            ],
            "on-demand",
            budget,
        )
    }

    struct Cluster {
        snapshot: Snapshot,
    }

    impl Cluster {
        fn new(pool: NodePool) -> Self {
            Cluster {
                snapshot: Snapshot {
                    nodepools: vec![pool],
                    ..Default::default()
                },
            }
        }

        /// A ready, initialized node of `instance_type` with its NodeClaim.
        fn node(&mut self, name: &str, instance_type: &str, capacity: &str) -> &mut Self {
            let catalog = Catalog::embedded();
            let t = catalog
                .instance_types(&NodeClassSettings::default())
                .into_iter()
                .find(|t| t.name == instance_type)
                .expect("a known type");
            let labels: BTreeMap<String, String> = [
                (INSTANCE_TYPE, instance_type),
                (ZONE, ZONE_A),
                (CAPACITY_TYPE, capacity),
                (NODEPOOL, "default"),
                (HOSTNAME, name),
                (crate::labels::ARCH, "amd64"),
                (crate::labels::OS, "linux"),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
            self.snapshot.nodes.push(Node {
                name: name.into(),
                labels: labels.clone(),
                allocatable: t.allocatable.clone(),
                capacity: t.capacity.clone(),
                ready: true,
                created: NOW - 3600,
                ..Default::default()
            });
            self.snapshot.nodeclaims.push(NodeClaim {
                name: format!("claim-{name}"),
                nodepool: "default".into(),
                labels,
                node_name: Some(name.into()),
                image_id: Some("ami-old".into()),
                launched: true,
                registered: true,
                initialized: true,
                created: NOW - 3600,
                ..Default::default()
            });
            self
        }

        fn pod(&mut self, name: &str, node: &str, cpu: i64) -> &mut Pod {
            let mut pod = Pod::new("shop", name, Resources::new(cpu, 128 << 20));
            pod.node_name = Some(node.into());
            pod.owner_kind = Some("ReplicaSet".into());
            pod.labels.insert("app".into(), "shop".into());
            self.snapshot.pods.push(pod);
            self.snapshot.pods.last_mut().expect("just pushed")
        }

        fn plan(&self) -> DisruptionPlan {
            plan(&self.snapshot, Catalog::embedded(), NOW)
        }
    }

    fn deleted(plan: &DisruptionPlan) -> usize {
        plan.disruptions.iter().map(|d| d.nodes.len()).sum()
    }

    #[test]
    fn empty_nodes_are_deleted_within_the_budget() {
        for (budget, expected) in [("30%", 3), ("0%", 0), ("100%", 10)] {
            let mut c = Cluster::new(general(budget));
            for i in 0..10 {
                c.node(&format!("n{i}"), "m5.large", "on-demand");
            }
            let plan = c.plan();
            assert_eq!(deleted(&plan), expected, "budget {budget}: {plan:?}");
            if expected > 0 {
                assert_eq!(plan.disruptions.len(), 1);
                assert_eq!(plan.disruptions[0].command, Command::Delete);
                assert_eq!(plan.disruptions[0].reason, Reason::Empty);
            }
        }
    }

    #[test]
    fn nodes_of_a_command_in_progress_are_no_candidates_and_use_up_the_budget() {
        let mut c = Cluster::new(general("3"));
        for i in 0..10 {
            c.node(&format!("n{i}"), "m5.large", "on-demand");
        }
        for node in &mut c.snapshot.nodes[..2] {
            node.taints.push(Taint {
                key: TAINT_DISRUPTED.into(),
                value: String::new(),
                effect: crate::model::TaintEffect::NoSchedule,
            });
        }
        let plan = c.plan();
        assert_eq!(deleted(&plan), 1, "3 allowed, 2 in progress: {plan:?}");
        assert!(!plan.disruptions[0]
            .nodes
            .iter()
            .any(|n| n == "n0" || n == "n1"));
    }

    #[test]
    fn a_new_command_leaves_room_for_the_pods_of_one_in_progress() {
        // "moving" is being drained; its 1.5-CPU pod needs the room "target" has. Deleting
        // "target" or "spare" would pack the other's pod there and leave it 1.3 CPU: the moving
        // pod would be stranded, so neither may simply go.
        let m5 = || pool(&["m5.large", "m5.xlarge"], "on-demand", "100%");
        let mut c = Cluster::new(m5());
        c.node("moving", "m5.xlarge", "on-demand")
            .node("target", "m5.xlarge", "on-demand")
            .node("spare", "m5.xlarge", "on-demand");
        c.pod("a", "moving", 1500);
        c.pod("b", "target", 100);
        c.pod("c", "spare", 2500);
        c.snapshot.nodes[0].taints.push(Taint {
            key: TAINT_DISRUPTED.into(),
            value: String::new(),
            effect: crate::model::TaintEffect::NoSchedule,
        });
        let plan = c.plan();
        assert!(
            plan.disruptions
                .iter()
                .all(|d| d.command != Command::Delete && !d.nodes.contains(&"moving".to_string())),
            "{plan:?}"
        );
    }

    #[test]
    fn lightly_used_nodes_go_in_one_multi_node_command_within_the_budget() {
        let mut c = Cluster::new(general("30%"));
        for i in 0..10 {
            c.node(&format!("n{i}"), "m5.large", "on-demand");
            c.pod(&format!("p{i}"), &format!("n{i}"), 100);
        }
        let plan = c.plan();
        assert_eq!(plan.disruptions.len(), 1, "{plan:?}");
        let d = &plan.disruptions[0];
        assert_eq!(
            (d.command, d.reason, d.nodes.len()),
            (Command::Delete, Reason::Underutilized, 3)
        );
        assert!(d.savings > 0.0);
    }

    #[test]
    fn the_lighter_of_two_nodes_is_deleted_unless_its_pod_is_pinned() {
        let m5 = || pool(&["m5.large", "m5.xlarge"], "on-demand", "100%");
        let two_nodes = |pin: bool| {
            let mut c = Cluster::new(m5());
            c.node("busy", "m5.xlarge", "on-demand")
                .node("light", "m5.large", "on-demand");
            c.pod("a", "busy", 1700);
            c.pod("b", "busy", 1700);
            let light = c.pod("c", "light", 300);
            if pin {
                light.node_selector.insert(HOSTNAME.into(), "light".into());
            }
            c.plan()
        };
        let plan = two_nodes(false);
        assert_eq!(plan.disruptions.len(), 1, "{plan:?}");
        assert_eq!(plan.disruptions[0].nodes, ["light"]);
        assert_eq!(plan.disruptions[0].command, Command::Delete);
        let plan = two_nodes(true);
        assert!(plan.disruptions.is_empty(), "{plan:?}");
    }

    #[test]
    fn an_oversized_node_is_replaced_by_a_cheaper_type_and_three_are_merged() {
        let mut c = Cluster::new(general("100%"));
        c.node("big", "m5.8xlarge", "on-demand");
        c.pod("small", "big", 250);
        let plan = c.plan();
        let d = &plan.disruptions[0];
        assert_eq!(
            (d.command, d.reason),
            (Command::Replace, Reason::Underutilized),
            "{plan:?}"
        );
        let r = d.replacement.as_ref().unwrap();
        assert!(
            !r.instance_types.iter().any(|t| t == "m5.8xlarge"),
            "{:?}",
            r.instance_types
        );
        assert!(r.price < 1.536 && d.savings > 0.0);

        let mut three = Cluster::new(general("100%"));
        for i in 0..3 {
            three.node(&format!("big{i}"), "m5.8xlarge", "on-demand");
            three.pod(&format!("small{i}"), &format!("big{i}"), 250);
        }
        let plan = three.plan();
        assert_eq!(plan.disruptions.len(), 1, "{plan:?}");
        let d = &plan.disruptions[0];
        assert_eq!((d.command, d.nodes.len()), (Command::Replace, 3));
    }

    #[test]
    fn two_nodes_of_the_cheapest_type_lose_one_without_a_same_type_replacement() {
        let mut c = Cluster::new(pool(&["m5.large", "m5.xlarge"], "on-demand", "100%"));
        c.node("x", "m5.large", "on-demand")
            .node("y", "m5.large", "on-demand");
        c.pod("a", "x", 500);
        c.pod("b", "y", 500);
        let plan = c.plan();
        assert_eq!(plan.disruptions.len(), 1, "{plan:?}");
        assert_eq!(plan.disruptions[0].command, Command::Delete);
        assert_eq!(plan.disruptions[0].nodes.len(), 1);
    }

    #[test]
    fn spot_to_spot_needs_fifteen_cheaper_spot_types() {
        let mut c = Cluster::new(pool(&["m5.xlarge", "m5.large", "c5.large"], "spot", "100%"));
        c.node("s", "m5.xlarge", "spot");
        c.pod("a", "s", 250);
        let plan = c.plan();
        assert!(plan.disruptions.is_empty(), "{plan:?}");
        assert!(
            plan.blocked
                .iter()
                .any(|b| b.node == "s" && b.reason.contains("15 cheaper spot types")),
            "{:?}",
            plan.blocked
        );
    }

    #[test]
    fn do_not_disrupt_pods_and_exhausted_pdbs_block_their_nodes() {
        let mut c = Cluster::new(general("100%"));
        c.node("keep", "m5.8xlarge", "on-demand");
        c.pod("precious", "keep", 100).do_not_disrupt = true;
        let plan = c.plan();
        assert!(plan.disruptions.is_empty());
        assert!(
            plan.blocked[0].reason.contains(DO_NOT_DISRUPT),
            "{:?}",
            plan.blocked
        );

        let mut p = Cluster::new(general("100%"));
        p.node("guarded", "m5.8xlarge", "on-demand");
        p.pod("checkout-1", "guarded", 100);
        p.snapshot.pdbs.push(Pdb {
            namespace: "shop".into(),
            name: "checkout".into(),
            selector: Requirements::from_labels(
                &[("app".to_string(), "shop".to_string())]
                    .into_iter()
                    .collect::<BTreeMap<_, _>>(),
            ),
            disruptions_allowed: 0,
        });
        let plan = p.plan();
        assert!(plan.disruptions.is_empty());
        assert_eq!(
            plan.blocked[0].reason,
            "pod shop/checkout-1 has PDB checkout (0 disruptions allowed)"
        );
    }

    #[test]
    fn an_expired_node_is_replaced_even_when_it_is_well_used() {
        let mut p = general("100%");
        p.expire_after = Some(1800);
        p.consolidate_after = None;
        let mut c = Cluster::new(p);
        c.node("old", "m5.large", "on-demand");
        c.pod("a", "old", 1500);
        let plan = c.plan();
        assert_eq!(plan.disruptions.len(), 1, "{plan:?}");
        let d = &plan.disruptions[0];
        assert_eq!((d.command, d.reason), (Command::Replace, Reason::Expired));
    }

    #[test]
    fn a_new_ami_drifts_nodes_one_budget_at_a_time() {
        let mut c = Cluster::new(general("1"));
        for i in 0..3 {
            c.node(&format!("n{i}"), "m5.large", "on-demand");
            c.pod(&format!("p{i}"), &format!("n{i}"), 1500);
        }
        c.snapshot.node_class_state.insert(
            "default".into(),
            NodeClassState {
                images: ["ami-new".to_string()].into(),
                ..Default::default()
            },
        );
        let plan = c.plan();
        assert_eq!(plan.disruptions.len(), 1, "{plan:?}");
        assert_eq!(plan.disruptions[0].reason, Reason::Drifted);
        assert_eq!(
            plan.blocked
                .iter()
                .filter(|b| b.reason.contains("budget"))
                .count(),
            2
        );
    }

    #[test]
    fn drift_is_found_for_each_changed_part_and_never_for_unknown_or_foreign_hashes() {
        let mut c = Cluster::new(general("1"));
        c.node("n", "m5.large", "on-demand");
        let pool = c.snapshot.nodepools[0].clone();
        let state = NodeClassState {
            hash: Some("class-2".into()),
            images: ["ami-old".to_string()].into(),
            subnets: ["subnet-a".to_string()].into(),
            security_groups: ["sg-1".to_string(), "sg-2".to_string()].into(),
        };
        c.snapshot
            .node_class_state
            .insert(pool.node_class.clone(), state);
        let base = c.snapshot.nodeclaims[0].clone();
        let with = |pairs: &[(&str, &str)]| {
            let mut claim = base.clone();
            for (k, v) in pairs {
                claim.annotations.insert(k.to_string(), v.to_string());
            }
            claim
        };
        let cases: Vec<(NodeClaim, Option<&str>)> = vec![
            (with(&[]), None),
            (
                with(&[(SUBNET_ID, "subnet-a"), (SECURITY_GROUP_IDS, "sg-1,sg-2")]),
                None,
            ),
            (with(&[(SUBNET_ID, "subnet-b")]), Some("SubnetDrift")),
            (
                with(&[(SECURITY_GROUP_IDS, "sg-1")]),
                Some("SecurityGroupDrift"),
            ),
            (
                with(&[
                    (NODECLASS_HASH, "class-1"),
                    (NODECLASS_HASH_VERSION, HASH_VERSION),
                ]),
                Some("NodeClassDrifted"),
            ),
            // Karpenter's own hash, from before a migration: another version, not compared.
            (
                with(&[(NODECLASS_HASH, "123"), (NODECLASS_HASH_VERSION, "v4")]),
                None,
            ),
            (
                with(&[(NODEPOOL_HASH, "456"), (NODEPOOL_HASH_VERSION, "v3")]),
                None,
            ),
        ];
        for (claim, expected) in cases {
            assert_eq!(
                drift(&claim, &pool, &c.snapshot),
                expected,
                "{:?}",
                claim.annotations
            );
        }
    }
}
