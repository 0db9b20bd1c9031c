//! The invariants checked after every simulated second, each violation named with its object
//! and what was seen (the driver adds the seed and the second):
//!
//! * the foreign instance is never terminated; instances and NodeClaims are paired within the
//!   tick's graces plus a minute; no NodeClaim gets two instances ([`super::invariants`]);
//! * no pod leaves a node that was not interrupted (spot, Health, reservation, killed, failed or
//!   deleted by hand) other than by an accepted eviction, its own controller, or a deletion past
//!   its NodeClaim's `terminationGracePeriod`; no `karpenter.sh/do-not-disrupt` pod is evicted
//!   from such a node;
//! * no node stays cordoned 10 minutes without a pod leaving it, whatever its NodeClaim's state;
//!   no Node stays Terminating 15 minutes (a node whose pods left are all do-not-disrupt, or
//!   covered by two PodDisruptionBudgets, which the Eviction API refuses for good, is left out of
//!   both while they are: Karpenter waits for them);
//! * no pool disrupts more nodes at once than its budgets allow (a static pool's nodes above its
//!   replicas aside: scaling down bypasses budgets, as Karpenter's does), nor runs more CPU or memory
//!   than its limits, counting NodeClaims launched and not yet listed;
//! * no NodeClaim is planned into a zone where the simulated VPC has no subnet; no node is
//!   consolidated before `consolidateAfter` has passed since its last pod event ([`super::settled`]);
//! * pending time is bounded: 10 minutes during the faults, 4 minutes while a malformed object
//!   is applied (the healthy pools must go on provisioning; a minute more for each tick that
//!   failed for another reason, a refused launch among them, and for each instance killed), 3 minutes once the faults have
//!   stopped; pods the last tick reported unschedulable are left out, a workload's other waiting
//!   replicas count from when it last had none waiting beyond those named (which replica waits
//!   is the kube-scheduler's choice), and while a node that never initializes is in the cluster,
//!   pending time counts from the end of the product's initialization grace for it;
//! * on chaos.yaml, no runaway scale-up and no churn of a disruption's own replacements.

use std::collections::{BTreeMap, BTreeSet};

use fleetwright_core::labels::{DO_NOT_DISRUPT, NODEPOOL, TAINT_DISRUPTED, ZONE};
use fleetwright_sim::cluster::{NODECLAIMS, NODES, PODS};
use fleetwright_sim::SimInstance;
use serde_json::Value;

use super::{Chaos, CHURN_WINDOW, FOREIGN};
#[cfg(test)]
use crate::simulate::Simulation;

/// The invariants' limits, in seconds.
const CORDON_LIMIT: i64 = 600;
const TERMINATING_LIMIT: i64 = 900;
pub(super) const PENDING_LIMIT: i64 = 180;
pub(super) const FAULT_PENDING_LIMIT: i64 = 600;
pub(super) const BROKEN_PENDING_LIMIT: i64 = 240;
/// Room for the commands in flight in the runaway check: two 2xlarge nodes' CPU.
const IN_FLIGHT_CPU: i64 = 16_000;
const NODEPOOLS: &str = "/apis/karpenter.sh/v1/nodepools";
const BUDGETS: &str = "/apis/policy/v1/poddisruptionbudgets";

type Owned<'a> = BTreeMap<&'a String, &'a SimInstance>;

pub(super) fn name(o: &Value) -> &str {
    o["metadata"]["name"].as_str().unwrap_or_default()
}

/// A pod key's workload: `namespace/name` without the replica's suffix.
pub(super) fn workload(key: &str) -> String {
    let (namespace, pod) = key.split_once('/').unwrap_or(("", key));
    let owner = pod.rsplit_once('-').map_or(pod, |(o, _)| o);
    format!("{namespace}/{owner}")
}

pub(super) fn pod_key(p: &Value) -> String {
    format!(
        "{}/{}",
        p["metadata"]["namespace"].as_str().unwrap_or("default"),
        name(p)
    )
}

pub(super) fn deleting(o: &Value) -> bool {
    !o["metadata"]["deletionTimestamp"].is_null()
}

pub(super) fn is_daemon(p: &Value) -> bool {
    p["metadata"]["ownerReferences"]
        .as_array()
        .is_some_and(|o| o.iter().any(|o| o["kind"] == "DaemonSet"))
}

pub(super) fn bound_to(p: &Value) -> Option<&str> {
    p["spec"]["nodeName"].as_str().filter(|n| !n.is_empty())
}

pub(super) fn instance_of(node: &Value) -> Option<&str> {
    node["spec"]["providerID"]
        .as_str()
        .and_then(|p| p.rsplit('/').next())
}

pub(super) fn cordoned(node: &Value) -> bool {
    node["spec"]["unschedulable"] == true
        || node["spec"]["taints"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["key"] == TAINT_DISRUPTED))
}

impl Chaos {
    /// A do-not-disrupt pod evicted from a node whose instance was not interrupted.
    pub(super) fn evicted_do_not_disrupt(&self) -> Option<String> {
        let state = self.sim.cluster.api.lock();
        let pods = state.objects.get(PODS)?;
        let nodes = state.objects.get(NODES)?;
        for key in &state.evicted {
            let Some(pod) = pods.iter().find(|p| pod_key(p) == *key) else {
                continue;
            };
            if pod["metadata"]["annotations"][DO_NOT_DISRUPT] != "true" {
                continue;
            }
            let Some(node) = bound_to(pod) else {
                continue;
            };
            let instance = nodes
                .iter()
                .find(|n| name(n) == node)
                .and_then(instance_of)
                .unwrap_or_default();
            if !self.seen.interrupted.contains(instance) {
                return Some(format!(
                    "do-not-disrupt pod {key} was evicted from {node}, whose instance {instance} was not interrupted"
                ));
            }
        }
        None
    }

    /// Every invariant that can be checked at second `t`; the first one broken.
    pub(super) fn check(&mut self, t: i64) -> Option<String> {
        let live = self.sim.cloud.live();
        if !live.contains_key(FOREIGN) {
            return Some(format!("the foreign instance {FOREIGN} was terminated"));
        }
        let owned: Owned = live.iter().filter(|(id, _)| *id != FOREIGN).collect();
        self.seen.ever.extend(owned.keys().map(|id| (*id).clone()));
        let api = self.sim.cluster.api.clone();
        let state = api.lock();
        let none = Vec::new();
        let get = |p: &str| state.objects.get(p).unwrap_or(&none);
        let (claims, nodes, pods, pools) = (get(NODECLAIMS), get(NODES), get(PODS), get(NODEPOOLS));
        let waiting = waiting_for_protected(pods, get(BUDGETS), claims);
        for n in nodes {
            if let Some(id) = instance_of(n) {
                self.node_instance
                    .insert(name(n).to_string(), id.to_string());
            }
        }
        self.note_excess(t, pods);
        let broken = self
            .seen
            .pairs(t, &owned, claims)
            .or_else(|| self.departures(pods, claims, &state.requests, &state.evicted))
            .or_else(|| self.seen.launches(&owned))
            .or_else(|| self.cordons(t, nodes, pods, &waiting))
            .or_else(|| self.terminating(t, nodes, &waiting))
            .or_else(|| {
                self.base
                    .then(|| self.seen.churn(t, nodes, claims, pods, *CHURN_WINDOW))
                    .flatten()
            })
            .or_else(|| self.budgets(nodes, claims, pools))
            .or_else(|| self.limits(&owned, claims, pools))
            .or_else(|| self.zones(claims))
            .or_else(|| self.seen.settled.check(t, pods, claims, pools))
            .or_else(|| self.pending(t, pods, nodes));
        drop(state);
        if broken.is_some() || !self.base {
            return broken;
        }
        let capacity = owned
            .values()
            .map(|i| self.cpu(&i.instance.instance_type))
            .sum();
        self.check_runaway(t, capacity)
    }

    fn cpu(&self, instance_type: &str) -> i64 {
        self.cpu_of.get(instance_type).copied().unwrap_or(0)
    }

    /// No pod leaves a node that was not interrupted but by an accepted eviction, its own
    /// controller, or a deletion past its NodeClaim's `terminationGracePeriod`.
    fn departures(
        &mut self,
        pods: &[Value],
        claims: &[Value],
        requests: &[String],
        fresh_evictions: &[String],
    ) -> Option<String> {
        let new = requests.get(self.seen.requests_read..).unwrap_or_default();
        self.seen.requests_read = requests.len();
        for r in new {
            let Some(path) = r.strip_prefix("DELETE /api/v1/namespaces/") else {
                continue;
            };
            let path = path.split('?').next().unwrap_or(path);
            if let Some((namespace, pod)) = path.split_once("/pods/") {
                self.deleted_directly.insert(format!("{namespace}/{pod}"));
            }
        }
        let evicted: BTreeSet<&str> = self
            .sim
            .cluster
            .evictions
            .iter()
            .chain(fresh_evictions)
            .map(String::as_str)
            .collect();
        let now: BTreeMap<String, String> = pods
            .iter()
            .filter(|p| !is_daemon(p) && !deleting(p))
            .filter_map(|p| Some((pod_key(p), bound_to(p)?.to_string())))
            .collect();
        let before = std::mem::replace(&mut self.seen.placed, now);
        for (pod, node) in &before {
            if self.seen.placed.get(pod) == Some(node) {
                continue;
            }
            let instance = self.node_instance.get(node).cloned().unwrap_or_default();
            let allowed = evicted.contains(pod.as_str())
                || self.sim.cluster.scaled_down.contains(pod)
                || self.seen.interrupted.contains(&instance)
                || self.seen.by_hand.contains(node)
                || (self.deleted_directly.contains(pod) && has_grace_period(claims, node));
            if allowed {
                continue;
            }
            let how = if self.deleted_directly.contains(pod) {
                "it was deleted outright, and its NodeClaim sets no terminationGracePeriod"
            } else {
                "it was removed with its node"
            };
            return Some(format!(
                "pod {pod} left node {node} (instance {instance}, not interrupted) without an eviction: {how}"
            ));
        }
        None
    }

    /// No node stays cordoned [`CORDON_LIMIT`] seconds without a pod leaving it; a node whose
    /// instance is gone is left to the Terminating check.
    /// A node whose workload pods left are all protected for good (`waiting`) is left out:
    /// without a `terminationGracePeriod`, Karpenter waits for them as long as they run.
    fn cordons(
        &mut self,
        t: i64,
        nodes: &[Value],
        pods: &[Value],
        waiting: &BTreeSet<&str>,
    ) -> Option<String> {
        let live = self.sim.cloud.live();
        let mut on: BTreeMap<&str, usize> = BTreeMap::new();
        for p in pods.iter().filter(|p| !is_daemon(p)) {
            if let Some(n) = bound_to(p) {
                *on.entry(n).or_default() += 1;
            }
        }
        let held: Vec<(String, usize)> = nodes
            .iter()
            .filter(|n| cordoned(n) && !waiting.contains(name(n)))
            .filter(|n| instance_of(n).is_some_and(|id| live.contains_key(id)))
            .map(|n| (name(n).to_string(), on.get(name(n)).copied().unwrap_or(0)))
            .collect();
        let names: BTreeSet<&String> = held.iter().map(|(n, _)| n).collect();
        self.seen.cordoned.retain(|n, _| names.contains(n));
        for (node, count) in &held {
            let entry = self
                .seen
                .cordoned
                .entry(node.clone())
                .or_insert((t, *count));
            if *count < entry.1 {
                *entry = (t, *count);
            }
            if t - entry.0 > CORDON_LIMIT {
                return Some(format!(
                    "node {node} has been cordoned {} s with no pod leaving it ({count} workload pod(s) on it)",
                    t - entry.0
                ));
            }
        }
        None
    }

    /// No Node stays Terminating (its deletion held by finalizers) [`TERMINATING_LIMIT`] seconds.
    /// Nodes waiting for protected pods alone are left out, as above.
    fn terminating(&mut self, t: i64, nodes: &[Value], waiting: &BTreeSet<&str>) -> Option<String> {
        let now: BTreeSet<&str> = nodes
            .iter()
            .filter(|n| deleting(n) && !waiting.contains(name(n)))
            .map(name)
            .collect();
        self.terminating_since
            .retain(|n, _| now.contains(n.as_str()));
        for node in nodes.iter().filter(|n| now.contains(name(n))) {
            let since = *self
                .terminating_since
                .entry(name(node).to_string())
                .or_insert(t);
            if t - since > TERMINATING_LIMIT {
                return Some(format!(
                    "node {} has been Terminating {} s (finalizers {})",
                    name(node),
                    t - since,
                    node["metadata"]["finalizers"]
                ));
            }
        }
        None
    }

    /// No pool has more nodes disrupted for voluntary reasons at once than its budgets allow
    /// (budgets with a schedule leave their pool out). Expiration is forceful, as in Karpenter
    /// v1: no budget holds it, so the nodes of expired NodeClaims are not counted.
    fn budgets(&self, nodes: &[Value], claims: &[Value], pools: &[Value]) -> Option<String> {
        let expired: std::collections::BTreeSet<&str> = claims
            .iter()
            .filter(|c| {
                c["metadata"]["annotations"][fleetwright_core::labels::DISRUPTION_COMMAND]
                    .as_str()
                    .is_some_and(|a| a.starts_with("expired/"))
            })
            .filter_map(|c| c["status"]["nodeName"].as_str())
            .collect();
        for pool in pools {
            let of_pool: Vec<&Value> = nodes
                .iter()
                .filter(|n| n["metadata"]["labels"][NODEPOOL] == name(pool))
                .collect();
            let Some(allowed) = allowed_disruptions(pool, of_pool.len()) else {
                continue;
            };
            // A static pool above its replicas scales down outside its budgets, as Karpenter's
            // static deprovisioning does: its excess nodes are not the budgets' to count.
            let excess = pool["spec"]["replicas"]
                .as_i64()
                .map_or(0, |r| (of_pool.len() as i64 - r).max(0) as usize);
            let allowed = allowed + excess;
            let voluntary = of_pool
                .iter()
                .filter(|n| cordoned(n) && !self.seen.by_hand.contains(name(n)))
                .filter(|n| !expired.contains(name(n)))
                .filter(|n| instance_of(n).is_some_and(|id| !self.seen.interrupted.contains(id)))
                .count();
            if voluntary > allowed {
                return Some(format!(
                    "NodePool {}: {voluntary} nodes disrupted at once; its budgets allow {allowed}",
                    name(pool)
                ));
            }
        }
        None
    }

    /// No pool runs more CPU or memory than its limits: its live instances, and its NodeClaims
    /// launched (their capacity recorded) whose instance is not listed yet.
    fn limits(&self, owned: &Owned, claims: &[Value], pools: &[Value]) -> Option<String> {
        for pool in pools {
            let pool_name = name(pool);
            let limits = &pool["spec"]["limits"];
            let cpu_limit = limits["cpu"]
                .as_str()
                .map(str::to_string)
                .or_else(|| limits["cpu"].as_i64().map(|c| c.to_string()))
                .and_then(|c| fleetwright_core::quantity::parse_cpu_millis(&c).ok());
            let memory_limit = limits["memory"]
                .as_str()
                .and_then(|m| fleetwright_core::quantity::parse_units(m).ok());
            if cpu_limit.is_none() && memory_limit.is_none() {
                continue;
            }
            let mut cpu = 0;
            let mut memory = 0;
            for i in owned.values().filter(|i| i.nodepool() == pool_name) {
                cpu += self.cpu(&i.instance.instance_type);
                memory += self
                    .memory_of
                    .get(&i.instance.instance_type)
                    .copied()
                    .unwrap_or(0);
            }
            let tagged: BTreeSet<&str> = owned
                .values()
                .filter_map(|i| i.instance.nodeclaim())
                .collect();
            for c in claims
                .iter()
                .filter(|c| c["metadata"]["labels"][NODEPOOL] == pool_name && !deleting(c))
                .filter(|c| c["status"]["providerID"].is_null() && !tagged.contains(name(c)))
            {
                cpu += millicores(c["status"]["capacity"]["cpu"].as_str().unwrap_or("0"));
                memory += c["status"]["capacity"]["memory"]
                    .as_str()
                    .and_then(|m| fleetwright_core::quantity::parse_units(m).ok())
                    .unwrap_or(0);
            }
            if let Some(limit) = cpu_limit.filter(|l| cpu > *l) {
                return Some(format!(
                    "NodePool {pool_name} runs {cpu}m CPU; its limit is {limit}m"
                ));
            }
            if let Some(limit) = memory_limit.filter(|l| memory > *l) {
                return Some(format!(
                    "NodePool {pool_name} runs {memory} bytes of memory; its limit is {limit}"
                ));
            }
        }
        None
    }

    /// No NodeClaim is planned into zones where the simulated VPC (every EC2NodeClass's
    /// subnets) has no subnet.
    fn zones(&self, claims: &[Value]) -> Option<String> {
        let subnets = fleetwright_sim::subnet_zones(&self.sim.catalog);
        for c in claims.iter().filter(|c| !deleting(c)) {
            let Some(requirements) = c["spec"]["requirements"].as_array() else {
                continue;
            };
            for r in requirements
                .iter()
                .filter(|r| r["key"] == ZONE && r["operator"] == "In")
            {
                let zones: Vec<&str> = r["values"]
                    .as_array()
                    .map(|v| v.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                if !zones.iter().any(|z| subnets.iter().any(|s| s == z)) {
                    return Some(format!(
                        "NodeClaim {} is planned into zone(s) {zones:?}; the EC2NodeClass {} has subnets only in {subnets:?}",
                        name(c),
                        c["spec"]["nodeClassRef"]["name"].as_str().unwrap_or_default()
                    ));
                }
            }
        }
        None
    }

    /// No runaway scale-up: the fleet's CPU stays within twice the most CPU the workload asked
    /// for at any time in the last ten minutes, plus [`IN_FLIGHT_CPU`] for the commands in
    /// flight (a replacement launched before the node it replaces goes, say).
    fn check_runaway(&mut self, t: i64, capacity: i64) -> Option<String> {
        if t % 10 == 0 {
            let asked = self.requested_cpu();
            self.seen.needed.push((t, asked));
        }
        self.seen.needed.retain(|(at, _)| t - at <= 600);
        let most = |needed: &[(i64, i64)]| needed.iter().map(|(_, n)| *n).max().unwrap_or(0);
        if capacity > 2 * most(&self.seen.needed) + IN_FLIGHT_CPU {
            // The workload may have grown since the last sample: ask it now before judging.
            let asked = self.requested_cpu();
            self.seen.needed.push((t, asked));
        }
        let most = most(&self.seen.needed);
        (capacity > 2 * most + IN_FLIGHT_CPU).then(|| {
            format!("the fleet has {capacity}m CPU; the workload asked for at most {most}m in the last 10 minutes")
        })
    }

    /// The CPU the workload's pods ask for now, bound or pending, in millicores.
    fn requested_cpu(&self) -> i64 {
        self.sim
            .cluster
            .workload_as_pending()
            .iter()
            .flat_map(|p| {
                p["spec"]["containers"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .map(|c| millicores(c["resources"]["requests"]["cpu"].as_str().unwrap_or("0")))
            .sum()
    }
}

/// The nodes whose workload pods (not being deleted) are all `karpenter.sh/do-not-disrupt`.
/// Nodes whose workload pods left are all protected for as long as they run: `do-not-disrupt`
/// ones, and, on a node whose NodeClaim is being deleted with no `terminationGracePeriod`, those
/// two budgets cover (the Eviction API refuses them for good, and Karpenter waits).
fn waiting_for_protected<'a>(
    pods: &'a [Value],
    budgets: &[Value],
    claims: &[Value],
) -> BTreeSet<&'a str> {
    let mut all: BTreeMap<&str, bool> = BTreeMap::new();
    for p in pods.iter().filter(|p| !is_daemon(p) && !deleting(p)) {
        if let Some(node) = bound_to(p) {
            let pinned = p["metadata"]["annotations"][DO_NOT_DISRUPT] == "true";
            let refused = covering_budgets(p, budgets) > 1 && deleted_for_good(claims, node);
            *all.entry(node).or_insert(true) &= pinned || refused;
        }
    }
    all.into_iter()
        .filter(|(_, protected)| *protected)
        .map(|(n, _)| n)
        .collect()
}

/// Whether the NodeClaim of `node` is being deleted with no `terminationGracePeriod` to end
/// its drain.
fn deleted_for_good(claims: &[Value], node: &str) -> bool {
    claims
        .iter()
        .find(|c| c["status"]["nodeName"] == node)
        .is_some_and(|c| {
            !c["metadata"]["deletionTimestamp"].is_null()
                && c["spec"]["terminationGracePeriod"].is_null()
        })
}

/// How many of the budgets select the pod (by `matchLabels`, as the scenarios write them; one
/// with `matchExpressions` is not counted).
fn covering_budgets(pod: &Value, budgets: &[Value]) -> usize {
    let labels = &pod["metadata"]["labels"];
    budgets
        .iter()
        .filter(|b| b["metadata"]["namespace"] == pod["metadata"]["namespace"])
        .filter(|b| b["spec"]["selector"]["matchExpressions"].is_null())
        .filter(|b| {
            b["spec"]["selector"]["matchLabels"]
                .as_object()
                .is_some_and(|m| m.iter().all(|(k, v)| &labels[k] == v))
        })
        .count()
}

/// Whether the NodeClaim of `node` sets a `terminationGracePeriod` (its pods may then be
/// deleted outright once it has passed).
fn has_grace_period(claims: &[Value], node: &str) -> bool {
    claims
        .iter()
        .find(|c| c["status"]["nodeName"] == node)
        .is_some_and(|c| !c["spec"]["terminationGracePeriod"].is_null())
}

/// The fewest nodes a pool's budgets allow disrupted at once, from budgets without a schedule
/// (`nodes` a count or a percentage of the pool's nodes, rounded up); Karpenter's default
/// budget, 10%, when none is set. None when a budget has a schedule.
pub(super) fn allowed_disruptions(pool: &Value, nodes: usize) -> Option<usize> {
    let budgets = pool["spec"]["disruption"]["budgets"].as_array();
    let budgets: Vec<&Value> = budgets.map(|b| b.iter().collect()).unwrap_or_default();
    if budgets.iter().any(|b| !b["schedule"].is_null()) {
        return None;
    }
    let value = |text: &str| -> Option<usize> {
        match text.strip_suffix('%') {
            Some(p) => p.parse::<usize>().ok().map(|p| (p * nodes).div_ceil(100)),
            None => text.parse().ok(),
        }
    };
    if budgets.is_empty() {
        return value("10%");
    }
    budgets
        .iter()
        .filter_map(|b| b["nodes"].as_str().and_then(value))
        .min()
}

#[cfg(test)]
#[path = "../../../tests/unit/simulate/chaos/checks.rs"]
mod tests;

/// A CPU quantity in millicores (0 when it does not read).
fn millicores(q: &str) -> i64 {
    fleetwright_core::quantity::parse_cpu_millis(q).unwrap_or(0)
}
