//! What Karpenter's disruption metrics say of each NodeClaim a disruption takes
//! (`karpenter_nodeclaims_disrupted_total` and `karpenter_pods_disruption_initiated_total`, by
//! `reason`, `nodepool`, `capacity_type`, `consolidation_policy` and `termination_mode`, as
//! Karpenter v1.15 labels them), decided with the disruption so the executor only counts.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use fleetwright_core::labels::{CAPACITY_TYPE, NODEPOOL};
use fleetwright_crds::NodeClaim;
use fleetwright_kube::dump::ClusterDump;
use fleetwright_kube::objects;

use crate::metrics::{self, Metrics};

/// Karpenter's `termination_mode` values: no `terminationGracePeriod` (the drain waits on the
/// pods for good), a zero one (forceful), or one that bounds the drain (eventual).
pub const GRACEFUL: &str = "graceful";
pub const EVENTUAL: &str = "eventual";
pub const FORCEFUL: &str = "forceful";

/// The labels of one disrupted NodeClaim, and how many of its pods must move.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Disrupted {
    pub nodepool: String,
    pub capacity_type: String,
    /// The pool's policy in snake case for a consolidation (empty or underutilized), else empty.
    pub consolidation_policy: String,
    pub termination_mode: &'static str,
    /// Its pods that must find a place elsewhere: not DaemonSet or mirror pods, not finished.
    pub pods: usize,
    /// The image it runs (`status.imageID`), a label of the repair metric.
    pub image_id: String,
}

/// The labels of `claim` disrupted by `reason` (`underutilized`, `drifted`, `expired`, ...).
pub fn of(dump: &ClusterDump, claim: &NodeClaim, reason: &str) -> Disrupted {
    let node = claim.status.as_ref().and_then(|s| s.node_name.as_deref());
    let mut pods = HashMap::new();
    if let Some(n) = node {
        let on = dump.pods_on(n);
        let moving = on.iter().filter(|p| !objects::skipped_by_drain(p)).count();
        pods.insert(n.to_string(), moving);
    }
    labels(dump, claim, reason, &pods)
}

/// How many pods on each node must move when it goes (DaemonSet, mirror and finished pods
/// aside), over every pod once; nothing when `skip`.
pub fn pods_by_node(dump: &ClusterDump, skip: bool) -> HashMap<String, usize> {
    let mut out = HashMap::new();
    if skip {
        return out;
    }
    let full = dump.pods.iter().filter(|p| !objects::skipped_by_drain(p));
    for p in full {
        if let Some(n) = p.spec.as_ref().and_then(|s| s.node_name.clone()) {
            *out.entry(n).or_default() += 1;
        }
    }
    for p in &dump.slim_pods {
        if !objects::skipped_by_drain(&p.to_pod()) {
            *out.entry(p.node_name.clone().unwrap_or_default())
                .or_default() += 1;
        }
    }
    out
}

/// The labels of `claim` disrupted by `reason`, its pods counted in `pods` by node.
pub fn labels(
    dump: &ClusterDump,
    claim: &NodeClaim,
    reason: &str,
    pods: &HashMap<String, usize>,
) -> Disrupted {
    let label = |key: &str| {
        (claim.metadata.labels.as_ref())
            .and_then(|l| l.get(key))
            .cloned()
            .unwrap_or_default()
    };
    let nodepool = label(NODEPOOL);
    let consolidation = matches!(reason, "underutilized" | "empty");
    let policy = || {
        let pool = dump.pool_and_class(&nodepool).map(|(p, _)| p);
        let disruption = pool.and_then(|p| p.spec.disruption.as_ref());
        let written = disruption.and_then(|d| d.consolidation_policy.clone());
        snake_case(written.as_deref().unwrap_or("WhenEmptyOrUnderutilized"))
    };
    let node = claim.status.as_ref().and_then(|s| s.node_name.as_deref());
    let pods = node.and_then(|n| pods.get(n)).copied().unwrap_or(0);
    Disrupted {
        capacity_type: label(CAPACITY_TYPE),
        consolidation_policy: if consolidation {
            policy()
        } else {
            String::new()
        },
        termination_mode: termination_mode(claim),
        pods,
        image_id: (claim.status.as_ref())
            .and_then(|s| s.image_id.clone())
            .unwrap_or_default(),
        nodepool,
    }
}

/// Karpenter's `termination_mode` of a NodeClaim, from its `terminationGracePeriod`.
pub fn termination_mode(claim: &NodeClaim) -> &'static str {
    let grace = claim.spec.termination_grace_period.as_deref();
    match grace.map(fleetwright_kube::convert::duration_seconds) {
        None | Some(Ok(None)) | Some(Err(_)) => GRACEFUL,
        Some(Ok(Some(s))) if s <= 0 => FORCEFUL,
        Some(Ok(Some(_))) => EVENTUAL,
    }
}

/// The mode of a repair, whose policy bounds the drain whatever the NodeClaim says: at once is
/// forceful, later eventual; no bound leaves the NodeClaim's own.
pub fn repair_mode(
    claim: &NodeClaim,
    terminate_at: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> &'static str {
    match terminate_at {
        Some(at) if at <= now => FORCEFUL,
        Some(_) => EVENTUAL,
        None => termination_mode(claim),
    }
}

/// Counts one disrupted NodeClaim and its pods, by Karpenter's labels.
pub fn record(m: &mut Metrics, reason: &str, d: &Disrupted) {
    let labels = [
        (metrics::REASON, reason),
        (metrics::NODEPOOL, d.nodepool.as_str()),
        (metrics::CAPACITY_TYPE, d.capacity_type.as_str()),
        (
            metrics::CONSOLIDATION_POLICY,
            d.consolidation_policy.as_str(),
        ),
        (metrics::TERMINATION_MODE, d.termination_mode),
    ];
    m.add_labeled(metrics::NODECLAIMS_DISRUPTED, &labels, 1.0);
    m.add_labeled(metrics::PODS_DISRUPTION_INITIATED, &labels, d.pods as f64);
}

/// `WhenEmptyOrUnderutilized` → `when_empty_or_underutilized`, `StorageReady` → `storage_ready`,
/// as Karpenter writes label values.
pub(crate) fn snake_case(text: &str) -> String {
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

#[cfg(test)]
#[path = "../../tests/unit/tick/disrupted.rs"]
mod tests;
