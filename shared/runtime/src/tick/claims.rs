//! Reading a NodeClaim and its Node: the small questions every decision asks (its name, its
//! instance, its conditions, its node).

use chrono::{DateTime, Utc};
use fleetwright_core::labels::PLACEMENT_GROUP_PARTITION;
use fleetwright_crds::conditions;
use fleetwright_crds::NodeClaim;
use fleetwright_kube::dump::ClusterDump;
use fleetwright_kube::objects;
use k8s_openapi::api::core::v1::{Node, Pod};

pub(crate) fn name_of(claim: &NodeClaim) -> String {
    claim.metadata.name.clone().unwrap_or_default()
}

pub(crate) fn provider_id(claim: &NodeClaim) -> Option<&str> {
    claim.status.as_ref().and_then(|s| s.provider_id.as_deref())
}

pub(crate) fn has_condition(claim: &NodeClaim, type_: &str) -> bool {
    claim.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == type_ && c.status == "True")
    })
}

/// Whether the NodeClaim has a condition of `type_`, whatever its status.
pub(crate) fn has_any_condition(claim: &NodeClaim, type_: &str) -> bool {
    claim
        .status
        .as_ref()
        .is_some_and(|s| s.conditions.iter().any(|c| c.type_ == type_))
}

pub(crate) fn label<'a>(claim: &'a NodeClaim, key: &str) -> Option<&'a str> {
    claim.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// When a NodeClaim's instance was launched: its Launched condition, else its creation.
pub(crate) fn launched_at(claim: &NodeClaim) -> Option<DateTime<Utc>> {
    let condition = claim.status.as_ref().and_then(|s| {
        s.conditions
            .iter()
            .find(|c| c.type_ == conditions::LAUNCHED && c.status == "True")
            .and_then(|c| c.last_transition_time.as_deref())
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&Utc))
    });
    condition.or_else(|| {
        let created = claim.metadata.creation_timestamp.as_ref()?;
        DateTime::from_timestamp(created.0.as_second(), 0)
    })
}

/// The claim's node: by the name its status records or, for a claim registered by this tick
/// (whose status in the dump predates it), by provider id.
pub(crate) fn node_for<'a>(dump: &'a ClusterDump, claim: &NodeClaim) -> Option<&'a Node> {
    dump.node_of(claim).or_else(|| {
        let provider = provider_id(claim)?;
        dump.nodes
            .iter()
            .find(|n| node_provider_id(n) == Some(provider))
    })
}

pub(crate) fn node_provider_id(node: &Node) -> Option<&str> {
    node.spec.as_ref().and_then(|s| s.provider_id.as_deref())
}

/// Whether a NodeClaim launched into a partition group still has the empty partition label
/// its launch wrote when no partition was asked for.
pub(crate) fn awaits_partition(claim: &NodeClaim) -> bool {
    let labels = claim.metadata.labels.as_ref();
    labels
        .and_then(|l| l.get(PLACEMENT_GROUP_PARTITION))
        .is_some_and(String::is_empty)
}

/// The pods on `node`, fenced with `karpenter.sh/disrupted`, that hold its instance up: not
/// left by a drain, not finished, not stuck terminating.
pub(crate) fn pods_to_move(dump: &ClusterDump, node: &str, now: DateTime<Utc>) -> Vec<Pod> {
    pods_to_move_behind(dump, node, fleetwright_core::labels::TAINT_DISRUPTED, now)
}

/// [`pods_to_move`] for a node fenced with the taint `fence`.
pub(crate) fn pods_to_move_behind(
    dump: &ClusterDump,
    node: &str,
    fence: &str,
    now: DateTime<Utc>,
) -> Vec<Pod> {
    dump.pods_on(node)
        .into_iter()
        .filter(|p| !objects::left_by_drain(p, fence) && !finished(p) && !stuck(p, now))
        .collect()
}

/// Splits a drain's pods into those it sends to the Eviction API and those
/// `karpenter.sh/do-not-disrupt` holds at `now`: the latter are never evicted, and stay until
/// the node's `terminationGracePeriod` is over.
pub(crate) fn split_held(pods: Vec<Pod>, now: DateTime<Utc>) -> (Vec<Pod>, Vec<Pod>) {
    pods.into_iter()
        .partition(|p| !objects::do_not_disrupt_holds(p, now.timestamp()))
}

/// A pod still terminating a minute after its deletion deadline (the API server sets
/// `deletionTimestamp` to the request time plus the grace period): its kubelet is gone or
/// stuck, so waiting longer gives it nothing. Karpenter ignores such pods too.
pub(crate) fn stuck(pod: &Pod, now: DateTime<Utc>) -> bool {
    pod.metadata
        .deletion_timestamp
        .as_ref()
        .is_some_and(|t| t.0.as_second() + 60 < now.timestamp())
}

/// A pod that has run to completion (or failed) holds nothing up.
pub(crate) fn finished(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}
