//! The `consolidateAfter` invariant, on the world's own record of pod events: no node is
//! consolidated (an `empty/` or `underutilized/` command on its NodeClaim) before its NodePool's
//! `consolidateAfter` has passed since the last pod came to it or began to leave it (Karpenter's
//! `lastPodEventTime`), and a pool that says `Never` is never consolidated.
//!
//! A tick can only know of a pod some read of it saw, so the pods that came and went between two
//! reads are left out; and a NodeClaim that carries no record of its pods yet (its first record
//! was lost to a fault) is left out, as the product documents.

use std::collections::{BTreeMap, BTreeSet};

use fleetwright_core::labels::{DISRUPTION_COMMAND, NODEPOOL};
use fleetwright_kube::convert::duration_seconds;
use fleetwright_kube::convert::pod_events::PODS_ANNOTATION;
use serde_json::Value;

/// What the invariant remembers between seconds.
#[derive(Debug, Default)]
pub(super) struct Settled {
    /// Node → the pods staying on it (bound, neither leaving nor finished, no DaemonSet's), as
    /// of the last second checked.
    staying: BTreeMap<String, BTreeSet<String>>,
    /// Node → pod → the last second the pod came to or left the node.
    events: BTreeMap<String, BTreeMap<String, i64>>,
    /// Pods a tick's read saw on a node.
    read: BTreeSet<String>,
    /// NodeClaims whose consolidation was checked.
    checked: BTreeSet<String>,
}

impl Settled {
    /// A tick reads the cluster: the pods staying now are known to it.
    pub(super) fn sample(&mut self, pods: &[Value]) {
        for (_, pods) in staying(pods) {
            self.read.extend(pods);
        }
    }

    /// Checks each consolidation command seen for the first time against the pod events up to
    /// the second before (the command's own drain may have begun in this one), then notes the
    /// pods' comings and goings of second `t`.
    pub(super) fn check(
        &mut self,
        t: i64,
        pods: &[Value],
        claims: &[Value],
        pools: &[Value],
    ) -> Option<String> {
        let broken = self.commands(t, claims, pools);
        self.observe(t, pods);
        broken
    }

    fn commands(&mut self, t: i64, claims: &[Value], pools: &[Value]) -> Option<String> {
        for claim in claims {
            let name = claim["metadata"]["name"].as_str().unwrap_or_default();
            let command = claim["metadata"]["annotations"][DISRUPTION_COMMAND]
                .as_str()
                .unwrap_or_default();
            let consolidation =
                command.starts_with("empty/") || command.starts_with("underutilized/");
            if !consolidation || !self.checked.insert(name.to_string()) {
                continue;
            }
            if claim["metadata"]["annotations"][PODS_ANNOTATION].is_null() {
                continue;
            }
            if let Some(v) = self.too_soon(t, claim, pools) {
                return Some(v);
            }
        }
        None
    }

    fn too_soon(&self, t: i64, claim: &Value, pools: &[Value]) -> Option<String> {
        let name = claim["metadata"]["name"].as_str().unwrap_or_default();
        let node = claim["status"]["nodeName"].as_str()?;
        let pool_name = claim["metadata"]["labels"][NODEPOOL].as_str()?;
        let pool = pools.iter().find(|p| p["metadata"]["name"] == pool_name)?;
        let after = pool["spec"]["disruption"]["consolidateAfter"]
            .as_str()
            .unwrap_or("0s");
        let Ok(after) = duration_seconds(after) else {
            return None;
        };
        let Some(after) = after else {
            return Some(format!(
                "NodeClaim {name} of NodePool {pool_name} was consolidated, though its consolidateAfter is Never"
            ));
        };
        let known = self.events.get(node)?.iter();
        let last = known
            .filter(|(pod, _)| self.read.contains(*pod))
            .map(|(_, at)| *at)
            .max()?;
        // A second's slack: the tick that decided started in the second it was applied.
        (t - last + 1 < after).then(|| {
            format!(
                "NodeClaim {name} (node {node}) was consolidated at {t} s, {} s after its last pod event at {last} s; NodePool {pool_name}'s consolidateAfter is {after} s",
                t - last
            )
        })
    }

    fn observe(&mut self, t: i64, pods: &[Value]) {
        let now = staying(pods);
        let nodes: BTreeSet<&String> = now.keys().chain(self.staying.keys()).collect();
        let none = BTreeSet::new();
        for node in nodes {
            let before = self.staying.get(node).unwrap_or(&none);
            let after = now.get(node).unwrap_or(&none);
            let changed = before.symmetric_difference(after);
            let events = self.events.entry(node.clone()).or_default();
            for pod in changed {
                events.insert(pod.clone(), t);
            }
        }
        self.staying = now;
    }
}

/// The pods staying on each node.
fn staying(pods: &[Value]) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for pod in pods {
        let Some(node) = pod["spec"]["nodeName"].as_str() else {
            continue;
        };
        let daemon = pod["metadata"]["ownerReferences"]
            .as_array()
            .is_some_and(|o| o.iter().any(|r| r["kind"] == "DaemonSet"));
        let leaving = !pod["metadata"]["deletionTimestamp"].is_null();
        let finished = matches!(
            pod["status"]["phase"].as_str(),
            Some("Succeeded" | "Failed")
        );
        if daemon || leaving || finished {
            continue;
        }
        let key = format!(
            "{}/{}",
            pod["metadata"]["namespace"].as_str().unwrap_or_default(),
            pod["metadata"]["name"].as_str().unwrap_or_default()
        );
        out.entry(node.to_string()).or_default().insert(key);
    }
    out
}
