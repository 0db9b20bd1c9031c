//! Disruption candidates: every node of a NodePool with a NodeClaim that may be disrupted, with
//! its pods, price and disruption cost, and the reasons others are left alone (do-not-disrupt,
//! PodDisruptionBudgets, nodes already being disrupted); and when a candidate is settled.

use std::collections::{BTreeMap, HashMap};

use crate::catalog::{reserved_price, Catalog, NodeClassSettings};
use crate::labels::{
    CAPACITY_ON_DEMAND, CAPACITY_RESERVED, CAPACITY_SPOT, CAPACITY_TYPE, DISRUPTION_COMMAND,
    DO_NOT_DISRUPT, INSTANCE_TYPE, TAINT_DISRUPTED, TAINT_REBOOTING, ZONE,
};
use crate::model::{Node, NodeClaim, NodePool, Pod, Protection, Snapshot};

use super::Blocked;

/// A node that may be disrupted.
#[derive(Clone, Debug)]
pub(crate) struct Candidate<'a> {
    pub(crate) node: &'a Node,
    pub(crate) claim: &'a NodeClaim,
    pub(crate) pool: &'a NodePool,
    pub(crate) pods: Vec<&'a Pod>,
    /// Its offering's hourly price; 0 when the catalog has none (see `priced`).
    pub(crate) price: f64,
    /// Whether its offering has a known price: a node without one can still drift (its type
    /// withdrawn, say), but is no candidate for emptiness or consolidation, which weigh prices.
    pub(crate) priced: bool,
    pub(crate) spot: bool,
    /// Karpenter's disruption cost: one per pod, nudged by deletion cost and priority.
    pub(crate) cost: f64,
    /// Why its pods cannot be evicted now, if they cannot (a pod marked do-not-disrupt, or a
    /// PodDisruptionBudget that allows no disruption). Such a node is left alone, except by
    /// drift when its NodeClaim has a `terminationGracePeriod`: that bounds the drain, which
    /// waits on the pods until their time before the deadline comes.
    pub(crate) held: Option<String>,
}

impl Candidate<'_> {
    /// Whether a method of this reason may take the candidate: always when nothing holds its
    /// pods; when something does, only drift, and only with a `terminationGracePeriod`
    /// (Karpenter's eventual disruption).
    pub(crate) fn movable_for(&self, reason: super::Reason) -> bool {
        self.held.is_none()
            || (reason == super::Reason::Drifted && self.claim.termination_grace_period.is_some())
    }
}

/// Whether a method applies to a candidate.
pub(crate) type Applies<'f> = dyn Fn(&Candidate) -> bool + 'f;

/// Hourly prices of the offerings, by (type, zone, capacity type).
pub(crate) struct Prices {
    pub(crate) offerings: BTreeMap<(String, String, String), f64>,
}

impl Prices {
    pub(crate) fn new(catalog: &Catalog) -> Prices {
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

    /// A node's hourly price from its labels. A reserved node is priced as Karpenter prices a
    /// reserved offering (its type's on-demand price, all but free): the reservation is paid
    /// for whether the node runs or not.
    pub(crate) fn of(&self, labels: &BTreeMap<String, String>) -> Option<f64> {
        let key = |k: &str| labels.get(k).cloned().unwrap_or_default();
        if key(CAPACITY_TYPE) == CAPACITY_RESERVED {
            let on_demand = (
                key(INSTANCE_TYPE),
                key(ZONE),
                CAPACITY_ON_DEMAND.to_string(),
            );
            return self.offerings.get(&on_demand).copied().map(reserved_price);
        }
        self.offerings
            .get(&(key(INSTANCE_TYPE), key(ZONE), key(CAPACITY_TYPE)))
            .copied()
    }
}

/// Whether a command already in progress is disrupting the node (it carries the
/// `karpenter.sh/disrupted` taint), or a reboot for repair is (`karpenter.sh/rebooting`). Such
/// a node is no candidate and counts against its budget, for every reason.
pub(crate) fn disrupting(node: &Node) -> bool {
    leaving(node) || rebooting(node)
}

/// Whether a reboot for repair holds the node (`karpenter.sh/rebooting`).
pub(crate) fn rebooting(node: &Node) -> bool {
    node.taints.iter().any(|t| t.key == TAINT_REBOOTING)
}

/// Whether a command in progress is taking the node away (`karpenter.sh/disrupted`): its pods
/// are treated as moving when another command is checked. A rebooting node's pods come back to
/// it, so they are not.
pub(crate) fn leaving(node: &Node) -> bool {
    node.taints.iter().any(|t| t.key == TAINT_DISRUPTED)
}

/// Whether `karpenter.sh/do-not-disrupt` in these annotations protects, at `now`, an object
/// that started at `started` (a duration counts from then).
pub(crate) fn protects(annotations: &BTreeMap<String, String>, started: i64, now: i64) -> bool {
    Protection::from_annotation(annotations.get(DO_NOT_DISRUPT).map(String::as_str), started)
        .holds(now)
}

/// Initialized, managed nodes (ready ones, and those not Ready with nothing left to move),
/// each with its NodeClaim and pool; the rest are blocked (when they are managed) or ignored.
pub(crate) fn candidates<'a>(
    snapshot: &'a Snapshot,
    prices: &Prices,
    now: i64,
    blocked: &mut Vec<Blocked>,
) -> Vec<Candidate<'a>> {
    // Indexed once: looking each node's NodeClaim and pods up by scanning was quadratic (1.8 s
    // of a 5,000-node, 50,000-pod tick).
    let mut claims: HashMap<&str, &NodeClaim> = HashMap::new();
    for c in &snapshot.nodeclaims {
        if let Some(n) = c.node_name.as_deref() {
            claims.entry(n).or_insert(c);
        }
    }
    let mut pods_on: HashMap<&str, Vec<&Pod>> = HashMap::new();
    let mut pinned_on: HashMap<&str, &Pod> = HashMap::new();
    for p in &snapshot.pods {
        let Some(n) = p.node_name.as_deref() else {
            continue;
        };
        if p.needs_place() {
            pods_on.entry(n).or_default().push(p);
        } else if p.is_active() && p.do_not_disrupt.holds(now) {
            pinned_on.entry(n).or_insert(p);
        }
    }
    let mut out = Vec::new();
    for node in &snapshot.nodes {
        let Some(&claim) = claims.get(node.name.as_str()) else {
            continue;
        };
        let Some(pool) = snapshot.nodepools.iter().find(|p| p.name == claim.nodepool) else {
            continue;
        };
        let pods: Vec<&Pod> = pods_on.get(node.name.as_str()).cloned().unwrap_or_default();
        let block = |reason: String| Blocked {
            node: node.name.clone(),
            reason,
        };
        let commanded = claim.annotations.contains_key(DISRUPTION_COMMAND);
        // An expired NodeClaim is the tick's to delete outright this minute, not a method's.
        if expires(claim, now)
            || node.deleting
            || claim.deleting
            || !claim.initialized
            || disrupting(node)
            || commanded
        {
            continue;
        }
        // A node that is not Ready is a candidate only once nothing on it needs a place (its
        // pods evicted by the node lifecycle controller, say): emptiness then deletes it within
        // its budget, which the node itself takes a slot of, as Karpenter's does. One that still
        // holds pods is repair's, which knows to wait.
        if !node.ready && !pods.is_empty() {
            continue;
        }
        if protects(&node.annotations, node.created, now)
            || protects(&claim.annotations, node.created, now)
        {
            blocked.push(block(format!("node has {DO_NOT_DISRUPT}")));
            continue;
        }
        let held = (pods.iter().find(|p| p.do_not_disrupt.holds(now)))
            .or_else(|| pinned_on.get(node.name.as_str()))
            .map(|pod| match pod.unread {
                true => format!(
                    "pod {} could not be read, so what it needs is unknown (its error is reported)",
                    pod.key()
                ),
                false => format!("pod {} has {DO_NOT_DISRUPT}", pod.key()),
            })
            .or_else(|| pdb_blocks(snapshot, &pods));
        if let Some(reason) = &held {
            blocked.push(block(reason.clone()));
        }
        let price = prices.of(&node.labels);
        if price.is_none() {
            blocked.push(block("its offering has no known price".into()));
        }
        let cost = pods.iter().map(|p| pod_cost(p)).sum::<f64>();
        out.push(Candidate {
            node,
            claim,
            pool,
            spot: node.labels.get(CAPACITY_TYPE).map(String::as_str) == Some(CAPACITY_SPOT),
            pods,
            price: price.unwrap_or(0.0),
            priced: price.is_some(),
            cost,
            held,
        });
    }
    out
}

/// Karpenter's eviction cost of a pod: 1, plus its deletion cost and priority scaled down.
pub(crate) fn pod_cost(pod: &Pod) -> f64 {
    let cost =
        1.0 + pod.deletion_cost as f64 / 2f64.powi(27) + f64::from(pod.priority) / 2f64.powi(25);
    cost.clamp(-10.0, 10.0)
}

/// Why a PodDisruptionBudget stops these pods from being evicted now, if one does: a covering
/// PDB allows no disruption at all. A PDB that allows one lets the drain start, and the
/// Eviction API paces the rest (it refuses with 429 until the moved pods are ready again), as
/// Karpenter decides. A pod that more than one PDB covers can never be evicted (the Eviction
/// API answers 500), so its node is no candidate either.
pub(crate) fn pdb_blocks(snapshot: &Snapshot, pods: &[&Pod]) -> Option<String> {
    for pod in pods {
        let covering: Vec<&str> = snapshot
            .pdbs
            .iter()
            .filter(|b| b.namespace == pod.namespace && b.selector.matches_labels(&pod.labels))
            .map(|b| b.name.as_str())
            .collect();
        if covering.len() > 1 {
            return Some(format!(
                "pod {} is covered by more than one PDB ({}), which the Eviction API refuses",
                pod.key(),
                covering.join(", ")
            ));
        }
    }
    for pdb in snapshot.pdbs.iter().filter(|b| b.disruptions_allowed <= 0) {
        if let Some(pod) = pods
            .iter()
            .find(|p| p.namespace == pdb.namespace && pdb.selector.matches_labels(&p.labels))
        {
            return Some(format!(
                "pod {} has PDB {} (0 disruptions allowed)",
                pod.key(),
                pdb.name
            ));
        }
    }
    None
}

/// Whether `consolidateAfter` has passed since the node's last pod event.
pub(crate) fn settled(c: &Candidate, now: i64) -> bool {
    c.pool
        .consolidate_after
        .is_some_and(|after| now - c.node.last_pod_event.max(c.node.created) >= after)
}

/// Whether the NodeClaim has outlived its own `expireAfter` at `now`.
pub(crate) fn expires(claim: &crate::model::NodeClaim, now: i64) -> bool {
    claim
        .expire_after
        .is_some_and(|ttl| claim.created > 0 && now - claim.created >= ttl)
}
