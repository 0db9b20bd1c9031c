//! The pending-time invariant: how long a pod may wait, and which waits are excused (pods the
//! last tick named unschedulable, a workload's replicas beyond those, nodes that never
//! initialize, ticks that failed for other reasons).

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::checks::{
    bound_to, deleting, is_daemon, pod_key, workload, BROKEN_PENDING_LIMIT, FAULT_PENDING_LIMIT,
    PENDING_LIMIT,
};
use super::{stamp, Chaos, CHAOS_END, LEASE_SECONDS};

impl Chaos {
    /// The pending pods the last tick's report excuses: those it named unschedulable and, of a
    /// workload it named some pods of, as many others. Which replicas of a workload stay
    /// pending when a limit binds is the scheduler's choice, not the tick's.
    pub(super) fn excused(&self, waiting: &[&Value]) -> BTreeSet<String> {
        let mut left: BTreeMap<String, usize> = BTreeMap::new();
        for key in &self.unschedulable {
            *left.entry(workload(key)).or_default() += 1;
        }
        let mut out = BTreeSet::new();
        let keys: Vec<String> = waiting.iter().map(|p| pod_key(p)).collect();
        for key in keys.iter().filter(|k| self.unschedulable.contains(*k)) {
            if let Some(n) = left.get_mut(&workload(key)) {
                *n = n.saturating_sub(1);
            }
            out.insert(key.clone());
        }
        for key in keys.iter().filter(|k| !self.unschedulable.contains(*k)) {
            if let Some(n) = left.get_mut(&workload(key)).filter(|n| **n > 0) {
                *n -= 1;
                out.insert(key.clone());
            }
        }
        out
    }

    /// Per workload, since when more of its pods have been waiting than the last tick named
    /// unschedulable. The others have capacity planned for them; which replica the
    /// kube-scheduler binds to it is its own choice, so their pending time counts from when the
    /// workload last had none waiting beyond those named.
    pub(super) fn note_excess(&mut self, t: i64, pods: &[Value]) {
        let mut waiting: BTreeMap<String, usize> = BTreeMap::new();
        for p in pods
            .iter()
            .filter(|p| bound_to(p).is_none() && !deleting(p) && !is_daemon(p))
        {
            *waiting.entry(workload(&pod_key(p))).or_default() += 1;
        }
        let mut named: BTreeMap<String, usize> = BTreeMap::new();
        for key in &self.unschedulable {
            *named.entry(workload(key)).or_default() += 1;
        }
        let beyond = |w: &String, n: usize| n > named.get(w).copied().unwrap_or(0);
        self.excess_since
            .retain(|w, _| waiting.get(w).is_some_and(|&n| beyond(w, n)));
        for (w, n) in waiting {
            if beyond(&w, n) {
                self.excess_since.entry(w).or_insert(t);
            }
        }
    }

    /// Pending time is bounded during the faults, while a malformed object is applied, and
    /// after the faults (from when the Lease of a tick cut off at the last moment has expired).
    pub(super) fn pending(&self, t: i64, pods: &[Value], nodes: &[Value]) -> Option<String> {
        let now = stamp(self.sim.start, t);
        let stalled_until = self.stalled_until(nodes);
        let quiet_from = stamp(self.sim.start, CHAOS_END + LEASE_SECONDS);
        let broken_since = self
            .seen
            .broken_since
            .filter(|_| !self.broken.is_empty())
            .map(|s| stamp(self.sim.start, s));
        let waiting: Vec<&Value> = pods
            .iter()
            .filter(|p| bound_to(p).is_none() && !deleting(p) && !is_daemon(p))
            .collect();
        let excused = self.excused(&waiting);
        for p in waiting {
            let key = pod_key(p);
            if excused.contains(&key) {
                continue;
            }
            let created = p["metadata"]["creationTimestamp"]
                .as_str()
                .and_then(|c| DateTime::parse_from_rfc3339(c).ok())
                .map_or(now, |c| c.with_timezone(&Utc));
            let (since, limit, when) = match broken_since {
                Some(b) => (
                    created.max(b),
                    BROKEN_PENDING_LIMIT + self.failed_elsewhere(created.max(b), t),
                    "while a malformed object is applied (the healthy pools must go on provisioning)",
                ),
                None if t < CHAOS_END => (created, FAULT_PENDING_LIMIT, "during the faults"),
                None => (created.max(quiet_from), PENDING_LIMIT, "since the faults stopped"),
            };
            let since = stalled_until.map_or(since, |s| since.max(s));
            let since = self
                .excess_since
                .get(&workload(&key))
                .map_or(since, |&e| since.max(stamp(self.sim.start, e)));
            let waited = (now - since).num_seconds();
            if waited > limit {
                return Some(format!(
                    "pod {key} has been pending {waited} s {when}; the limit is {limit} s"
                ));
            }
        }
        None
    }

    /// While a node that registered and never initializes is in the cluster (an injected fault
    /// that outlives the faults), pods may be planned onto it until the product's own
    /// initialization grace has run out, and a tick later they get other capacity: pending time
    /// counts from then.
    pub(super) fn stalled_until(&self, nodes: &[Value]) -> Option<DateTime<Utc>> {
        let grace = chrono::Duration::seconds(
            fleetwright_core::scheduler::INITIALIZATION_GRACE + super::invariants::TICK_PERIOD,
        );
        nodes
            .iter()
            .filter(|n| !deleting(n))
            .filter(|n| {
                let provider = n["spec"]["providerID"].as_str().unwrap_or_default();
                provider
                    .rsplit('/')
                    .next()
                    .is_some_and(|id| self.sim.cluster.never_ready.contains(id))
            })
            .filter_map(|n| n["metadata"]["creationTimestamp"].as_str())
            .filter_map(|c| DateTime::parse_from_rfc3339(c).ok())
            .map(|c| c.with_timezone(&Utc) + grace)
            .max()
    }

    /// A tick period for each tick since `since` that failed for a reason other than a
    /// malformed object (the healthy pools cannot provision in a tick that did not run).
    pub(super) fn failed_elsewhere(&self, since: DateTime<Utc>, t: i64) -> i64 {
        let from = (since - self.sim.start).num_seconds();
        let failed = self
            .seen
            .failed_elsewhere
            .iter()
            .filter(|&&f| f >= from && f <= t)
            .count() as i64;
        super::invariants::TICK_PERIOD * failed
    }
}
