//! The chaos run's invariants and its simulated SQS queue: what is remembered between simulated
//! seconds, and the checks that need no simulator (instances and NodeClaims paired within the
//! tick's own graces plus a minute, one instance per NodeClaim, no replacement consolidated
//! again at once, every message handled or dead-lettered). The driver in the parent module feeds
//! them the cluster and the cloud each second; [`super::checks`] holds the rest.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use fleetwright_runtime::tick::DISRUPTION_ANNOTATION;

/// The tick's schedule: what the pairing limits add to the tick's own graces, once for the tick
/// that acts and once more for each tick that failed or was cut off meanwhile.
pub(super) const TICK_PERIOD: i64 = 60;

/// At most this many periods are added for ticks that did not finish, so an action that fails
/// for good still breaks the check.
pub(super) const MAX_EXTRA_PERIODS: i64 = 4;

/// How long an instance may run without a NodeClaim: the garbage collector's grace.
pub(super) fn unclaimed_grace() -> i64 {
    fleetwright_cloud::instances::ORPHAN_GRACE.num_seconds()
}

/// How long a NodeClaim may have no instance: while its launch has not been recorded, the
/// window in which an unknown launch is looked for; once it records an instance, the listing's
/// grace.
pub(super) fn unbacked_grace(recorded: bool) -> i64 {
    use fleetwright_runtime::tick::finish::INSTANCE_GRACE;
    use fleetwright_runtime::tick::provision::UNKNOWN_LAUNCH_WINDOW;
    if recorded {
        INSTANCE_GRACE.num_seconds()
    } else {
        UNKNOWN_LAUNCH_WINDOW.num_seconds()
    }
}

/// A message in the simulated SQS queue.
#[derive(Clone, Debug)]
pub(super) struct Message {
    pub(super) id: String,
    pub(super) body: String,
    pub(super) receives: u32,
    pub(super) due: i64,
}

/// The interruption queue: deliveries in flight, acknowledged, and dead-lettered.
#[derive(Debug, Default)]
pub(super) struct Queue {
    pub(super) waiting: Vec<Message>,
    pub(super) acked: BTreeSet<String>,
    pub(super) dead: BTreeSet<String>,
    pub(super) sent: BTreeSet<String>,
}

/// What the invariants remember between seconds.
#[derive(Debug, Default)]
pub(super) struct Invariants {
    /// Instance → the second it was first seen without a NodeClaim.
    pub(super) unclaimed: BTreeMap<String, i64>,
    /// NodeClaim → the second it was first seen without a live instance, and whether it had
    /// recorded one.
    pub(super) unbacked: BTreeMap<String, (i64, bool)>,
    /// NodeClaim (its tag) → every instance ever launched for it.
    pub(super) launched_for: BTreeMap<String, BTreeSet<String>>,
    /// Node → the second it was cordoned or last made progress, and its pods then.
    pub(super) cordoned: BTreeMap<String, (i64, usize)>,
    /// Seconds at which no tick ran to its end (failed, cut off, skipped, stopped early, or
    /// with an action that failed).
    pub(super) failed_ticks: Vec<i64>,
    /// Of those, the ticks that failed for a reason other than a malformed object.
    pub(super) failed_elsewhere: Vec<i64>,
    /// Nodes deleted by hand.
    pub(super) by_hand: BTreeSet<String>,
    /// When the first malformed object was applied, if one was.
    pub(super) broken_since: Option<i64>,
    /// Replacement NodeClaims already considered for never initializing.
    pub(super) replacements_decided: BTreeSet<String>,
    /// Pod (`namespace/name`) → its node, as last seen bound and not being deleted.
    pub(super) placed: BTreeMap<String, String>,
    /// The pod events `consolidateAfter` counts from ([`super::settled`]).
    pub(super) settled: super::settled::Settled,

    /// Instances warned, reclaimed or killed: their pods may be evicted whatever they say.
    pub(super) interrupted: BTreeSet<String>,
    /// Every instance ever seen live.
    pub(super) ever: BTreeSet<String>,
    /// The CPU the workload asked for (millicores), every 10 s.
    pub(super) needed: Vec<(i64, i64)>,
    /// How much of the API server's request log has been checked.
    pub(super) requests_read: usize,
    /// NodeClaims that disruption commands launched, for the no-churn check.
    pub(super) replacements: BTreeMap<String, Replacement>,
}

/// A NodeClaim a disruption command launched.
#[derive(Debug, Default)]
pub(super) struct Replacement {
    /// The command's annotation on the nodes it disrupts (`<reason>/<command>/<names>`).
    command: String,
    /// When the command's own nodes were all gone, and the pods on the replacement's node then.
    settled: Option<(i64, BTreeSet<String>)>,
}

/// The pods on each node (`namespace/name`), terminal pods left out.
fn pods_by_node(pods: &[Value]) -> BTreeMap<&str, BTreeSet<String>> {
    let mut out: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for p in pods {
        let phase = p["status"]["phase"].as_str().unwrap_or("");
        let Some(node) = p["spec"]["nodeName"].as_str() else {
            continue;
        };
        if phase == "Succeeded" || phase == "Failed" {
            continue;
        }
        let key = format!(
            "{}/{}",
            p["metadata"]["namespace"].as_str().unwrap_or(""),
            p["metadata"]["name"].as_str().unwrap_or("")
        );
        out.entry(node).or_default().insert(key);
    }
    out
}

fn disruption_annotation(node: &Value) -> Option<&str> {
    node["metadata"]["annotations"][DISRUPTION_ANNOTATION].as_str()
}

impl Invariants {
    /// Instances without NodeClaims and NodeClaims without instances, for no longer than the
    /// tick's own grace for each plus [`TICK_PERIOD`] (and a period more for each tick that did
    /// not finish meanwhile). An instance and a NodeClaim are paired when the NodeClaim's `status.providerID` names the
    /// instance, or, while it names none yet (the launch is being recorded), when the instance's
    /// `karpenter.sh/nodeclaim` tag names the NodeClaim. A NodeClaim that never gets an instance
    /// counts from its creation.
    pub(super) fn pairs(
        &mut self,
        t: i64,
        owned: &BTreeMap<&String, &fleetwright_sim::SimInstance>,
        claims: &[Value],
    ) -> Option<String> {
        let by_tag: BTreeMap<&str, &String> = owned
            .iter()
            .filter_map(|(id, i)| Some((i.instance.nodeclaim()?, *id)))
            .collect();
        let mut paired: BTreeSet<String> = BTreeSet::new();
        let mut unbacked: BTreeMap<String, bool> = BTreeMap::new();
        for claim in claims {
            let name = claim["metadata"]["name"].as_str().unwrap_or_default();
            let recorded = claim["status"]["providerID"]
                .as_str()
                .and_then(|p| p.rsplit('/').next())
                .filter(|id| !id.is_empty());
            let instance = match recorded {
                Some(id) => owned.contains_key(&id.to_string()).then(|| id.to_string()),
                None => by_tag.get(name).map(|id| (*id).clone()),
            };
            match instance {
                Some(id) => {
                    paired.insert(id);
                }
                None => {
                    unbacked.insert(name.to_string(), recorded.is_some());
                }
            }
        }
        self.unclaimed
            .retain(|id, _| owned.contains_key(id) && !paired.contains(id));
        for id in owned.keys().filter(|id| !paired.contains(**id)) {
            let since = *self.unclaimed.entry((*id).clone()).or_insert(t);
            let limit = self.allowance(since, t, unclaimed_grace());
            if t - since > limit {
                return Some(format!(
                    "instance {id} has run {} s without a NodeClaim (allowed {limit} s)",
                    t - since
                ));
            }
        }
        self.unbacked.retain(|c, _| unbacked.contains_key(c));
        for (claim, recorded) in unbacked {
            let (since, _) = *self.unbacked.entry(claim.clone()).or_insert((t, recorded));
            let limit = self.allowance(since, t, unbacked_grace(recorded));
            if t - since > limit {
                let what = if recorded {
                    "its recorded instance is gone"
                } else {
                    "no instance was recorded"
                };
                return Some(format!(
                    "NodeClaim {claim} has had no instance for {} s ({what}; allowed {limit} s)",
                    t - since
                ));
            }
        }
        None
    }

    /// A grace plus a tick period, and a period more for every tick since `since` that did not
    /// run to its end.
    pub(super) fn allowance(&self, since: i64, t: i64, grace: i64) -> i64 {
        let failed = self
            .failed_ticks
            .iter()
            .filter(|&&f| f >= since && f <= t)
            .count() as i64;
        grace + TICK_PERIOD * (1 + failed.min(MAX_EXTRA_PERIODS))
    }

    /// No NodeClaim ever has two instances.
    pub(super) fn launches(
        &mut self,
        owned: &BTreeMap<&String, &fleetwright_sim::SimInstance>,
    ) -> Option<String> {
        for (id, i) in owned {
            let Some(claim) = i.instance.nodeclaim() else {
                continue;
            };
            let ids = self.launched_for.entry(claim.to_string()).or_default();
            ids.insert((*id).clone());
            if ids.len() > 1 {
                return Some(format!("NodeClaim {claim} got two instances: {ids:?}"));
            }
        }
        None
    }
}

impl Invariants {
    /// No churn: a node that a disruption command launched is not itself disrupted as
    /// underutilized within `window` seconds (the pool's consolidateAfter plus five minutes) of
    /// the command finishing (its own nodes gone), unless its pods changed since then.
    pub(super) fn churn(
        &mut self,
        t: i64,
        nodes: &[Value],
        claims: &[Value],
        pods: &[Value],
        window: i64,
    ) -> Option<String> {
        let on = pods_by_node(pods);
        let annotations: BTreeSet<&str> = nodes.iter().filter_map(disruption_annotation).collect();
        for command in &annotations {
            let names = command.splitn(3, '/').nth(2).unwrap_or("");
            for name in names.split(',').filter(|n| !n.is_empty()) {
                self.replacements
                    .entry(name.to_string())
                    .or_insert_with(|| Replacement {
                        command: command.to_string(),
                        settled: None,
                    });
            }
        }
        let node_of = |claim: &str| {
            claims
                .iter()
                .find(|c| c["metadata"]["name"] == claim)
                .and_then(|c| c["status"]["nodeName"].as_str())
        };
        for (claim, r) in self.replacements.iter_mut() {
            if r.settled.is_some() || annotations.contains(r.command.as_str()) {
                continue;
            }
            if let Some(node) = node_of(claim) {
                r.settled = Some((t, on.get(node).cloned().unwrap_or_default()));
            }
        }
        for n in nodes {
            let Some(command) = disruption_annotation(n) else {
                continue;
            };
            if !command.starts_with("underutilized/") {
                continue;
            }
            let node = n["metadata"]["name"].as_str().unwrap_or("");
            let claim = claims
                .iter()
                .find(|c| c["status"]["nodeName"] == node)
                .and_then(|c| c["metadata"]["name"].as_str())
                .unwrap_or("");
            let Some((since, before)) = self
                .replacements
                .get(claim)
                .and_then(|r| r.settled.as_ref())
            else {
                continue;
            };
            let now = on.get(node).cloned().unwrap_or_default();
            if t - since < window && now == *before {
                return Some(format!(
                    "node {node} ({claim}), launched by a disruption command that finished at {since} s, \
                     is disrupted as underutilized {} s later with the same {} pod(s) ({command})",
                    t - since,
                    now.len()
                ));
            }
        }
        None
    }
}

impl Queue {
    /// At the run's `end`: every message was handled or dead-lettered, or is waiting out a
    /// visibility timeout that ends after the run (SQS would deliver it again then); none is
    /// lost, none was left undelivered when due, and no poison was acknowledged.
    pub(super) fn check(&self, end: i64) -> Option<String> {
        if let Some(m) = self.waiting.iter().find(|m| m.due <= end) {
            return Some(format!(
                "message {} was due at {} s and is still undelivered at the end",
                m.id, m.due
            ));
        }
        let waiting: BTreeSet<&str> = self.waiting.iter().map(|m| m.id.as_str()).collect();
        for id in &self.sent {
            if id.starts_with("poison-") && self.acked.contains(id) {
                return Some(format!("poison message {id} was acknowledged"));
            }
            let settled = self.acked.contains(id) || self.dead.contains(id);
            if !settled && !waiting.contains(id.as_str()) {
                return Some(format!(
                    "message {id} was neither handled nor dead-lettered"
                ));
            }
        }
        None
    }
}

#[cfg(test)]
#[path = "../../../tests/unit/simulate/chaos/invariants.rs"]
mod tests;
