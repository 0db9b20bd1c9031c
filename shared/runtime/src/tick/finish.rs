//! The end of a NodeClaim's life, decided: deleting NodeClaims drained and terminated, Nodes
//! deleted by hand, instances no NodeClaim accounts for collected, and NodeClaims whose instance
//! is gone forgotten.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Duration, Utc};
use fleetwright_cloud::instances::{self, Instance};
use fleetwright_crds::NodeClaim;
use fleetwright_kube::dump::ClusterDump;
use fleetwright_kube::interruption::instance_id;
use fleetwright_kube::objects;
use k8s_openapi::api::core::v1::{Node, Pod};

use super::action::Action;
pub(crate) use super::claims::pods_to_move;
use super::claims::{
    awaits_partition, launched_at, name_of, node_for, node_provider_id, provider_id,
};

/// How long after its launch a NodeClaim's instance may be missing from the cloud's listing
/// (DescribeInstances is eventually consistent) before the NodeClaim counts as stranded.
pub const INSTANCE_GRACE: Duration = Duration::minutes(1);

/// NodeClaims being deleted: once the pods a drain moves are off the node (or its
/// `terminationGracePeriod` since the deletion is over, when they are deleted), the instance is
/// terminated and the NodeClaim and node let go. Until then the pods are evicted again
/// (evictions are idempotent, and a NodeClaim deleted by hand is drained here first).
pub fn deletions(
    dump: &ClusterDump,
    claims: &[NodeClaim],
    gone: &BTreeSet<String>,
    now: DateTime<Utc>,
) -> Vec<Action> {
    let mut out = Vec::new();
    for claim in claims
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_some())
    {
        // By provider id too: a NodeClaim registered by this tick has no node name in the read.
        let node = node_for(dump, claim).and_then(|n| n.metadata.name.clone());
        // Pods on an instance that is gone run nowhere: nothing is left to wait for.
        let instance_gone = provider_id(claim)
            .and_then(instance_id)
            .is_some_and(|id| gone.contains(id));
        let pods = node
            .as_deref()
            .filter(|_| !instance_gone)
            .map(|n| pods_to_move(dump, n, now))
            .unwrap_or_default();
        // Cordoned first: else the pods evicted come back to the same node.
        out.extend(super::in_progress::untainted(dump, &[claim]));
        if let (Some(node), false) = (&node, pods.is_empty()) {
            let (actions, finished) = deletion_drain(dump, claim, node, pods, now);
            out.extend(actions);
            if !finished {
                continue;
            }
        }
        out.push(Action::FinishDeletion {
            nodeclaim: name_of(claim),
            instance_id: provider_id(claim).and_then(instance_id).map(str::to_string),
            node,
            reason: super::in_progress::reason_of(claim)
                .unwrap_or("deleted")
                .to_string(),
        });
    }
    out
}

/// One pass of a deleting NodeClaim's drain over the pods still on its node, and whether the
/// instance may go after it. At its deadline (`terminationGracePeriod`, or a repair's) every pod
/// left is deleted. Before, the pods are evicted, and those whose own grace would run past the
/// deadline deleted early. A pod whose own eviction has kept failing with an error for
/// [`EVICTION_FAILING`] (a webhook's 403, say) is given up on: it is deleted, with its own
/// grace, when its eviction fails so again in this pass, and the instance waits for it to go.
/// A pod a PodDisruptionBudget covers is not, nor is a `do-not-disrupt` pod (see
/// [`given_up_evictions`]).
fn deletion_drain(
    dump: &ClusterDump,
    claim: &NodeClaim,
    node: &str,
    pods: Vec<Pod>,
    now: DateTime<Utc>,
) -> (Vec<Action>, bool) {
    let deadline = termination_time(claim, now);
    if deadline.is_some_and(|t| now >= t) {
        let delete = Action::DeletePods {
            node: node.to_string(),
            pods,
            grace_seconds: None,
        };
        return (vec![delete], true);
    }
    let mut out = Vec::new();
    // Evictions first: a pod the API refuses to delete early does not hold them up.
    let (due, rest) = super::shutdown::due_before(pods, deadline, now);
    if !rest.is_empty() {
        let next_due = super::shutdown::next_due(&rest, deadline, now);
        let (pods, held) = super::claims::split_held(rest, now);
        let given_up = given_up_evictions(dump, claim, &pods, now);
        out.push(Action::EvictForDeletion {
            node: node.to_string(),
            nodeclaim: name_of(claim),
            next_due,
            pods,
            held,
            given_up,
        });
    }
    out.extend(due.map(|d| d.into_action(node)));
    (out, false)
}

/// The pods (`namespace/name`) whose own evictions have failed with errors for
/// [`EVICTION_FAILING`]: they will not start working, and the node is going away. A pod that a
/// PodDisruptionBudget covers (two of them answer 500 for good) or that `do-not-disrupt` holds
/// is never given up on: only a deadline ends those protections, as Karpenter's.
fn given_up_evictions(
    dump: &ClusterDump,
    claim: &NodeClaim,
    pods: &[Pod],
    now: DateTime<Utc>,
) -> Vec<String> {
    let failing = failing_evictions(claim);
    pods.iter()
        .filter(|p| !objects::do_not_disrupt_holds(p, now.timestamp()) && !covered_by_pdb(dump, p))
        .filter(|p| {
            failing
                .get(&failing_key(p))
                .is_some_and(|since| now - *since >= EVICTION_FAILING)
        })
        .map(objects::pod_key)
        .collect()
}

/// A pod's key in the record of failing evictions: `namespace/name`, and its UID when it has
/// one, so that a pod recreated under the same name starts a record of its own.
pub fn failing_key(pod: &Pod) -> String {
    let key = objects::pod_key(pod);
    match pod.metadata.uid.as_deref().filter(|u| !u.is_empty()) {
        Some(uid) => format!("{key}@{uid}"),
        None => key,
    }
}

/// Whether a PodDisruptionBudget of the pod's namespace selects it; one that does not read
/// counts as covering it.
fn covered_by_pdb(dump: &ClusterDump, pod: &Pod) -> bool {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    dump.pdbs
        .iter()
        .filter(|b| b.metadata.namespace.as_deref().unwrap_or("default") == namespace)
        .any(|b| {
            fleetwright_kube::convert::pdb(b).map_or(true, |b| b.selector.matches_labels(&labels))
        })
}

/// When a deleting NodeClaim's node must be gone: its `terminationGracePeriod` after its
/// deletion (counted from now when the read has no deletion time), or the termination
/// timestamp a repair wrote on it, whichever comes first.
pub(crate) fn termination_time(claim: &NodeClaim, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let repair = super::repair::termination_timestamp(claim);
    let deleted_at = claim
        .metadata
        .deletion_timestamp
        .as_ref()
        .map_or(now.timestamp(), |t| t.0.as_second());
    let grace = claim
        .spec
        .termination_grace_period
        .as_deref()
        .and_then(|g| {
            fleetwright_kube::convert::duration_seconds(g)
                .ok()
                .flatten()
        })
        .and_then(|g| DateTime::from_timestamp(deleted_at + g, 0));
    match (repair, grace) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// On a deleting NodeClaim: the pods ([`failing_key`]) whose evictions have been failing with
/// errors other than a PDB's 429, each with since when (RFC 3339), as a JSON object. Kept on the
/// NodeClaim, which Fleetwright owns, rather than on pods it does not.
pub const EVICTION_FAILING_ANNOTATION: &str = "fleetwright.io/eviction-failing";

/// How long a pod's evictions may keep failing before a deleting NodeClaim deletes the pod.
pub const EVICTION_FAILING: chrono::Duration = chrono::Duration::minutes(5);

/// The record of [`EVICTION_FAILING_ANNOTATION`]; empty when there is none or it does not read
/// (the record then starts again, which only delays a deletion).
pub fn failing_evictions(claim: &NodeClaim) -> BTreeMap<String, DateTime<Utc>> {
    let value = claim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(EVICTION_FAILING_ANNOTATION));
    let read: BTreeMap<String, String> = value
        .and_then(|v| serde_json::from_str(v).ok())
        .unwrap_or_default();
    read.into_iter()
        .filter_map(|(pod, since)| {
            let since = DateTime::parse_from_rfc3339(&since).ok()?;
            Some((pod, since.with_timezone(&Utc)))
        })
        .collect()
}

/// The record after a drain pass whose failed evictions are `failed`: a pod keeps the time it
/// first failed while it goes on failing, a new one starts now, and one that did not fail this
/// pass is forgotten. None when the record is unchanged.
pub fn next_failing_evictions(
    claim: &NodeClaim,
    failed: &[String],
    now: DateTime<Utc>,
) -> Option<Option<String>> {
    let before = failing_evictions(claim);
    let after: BTreeMap<String, DateTime<Utc>> = failed
        .iter()
        .map(|pod| (pod.clone(), before.get(pod).copied().unwrap_or(now)))
        .collect();
    let unread = claim
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(EVICTION_FAILING_ANNOTATION))
        && before.is_empty();
    if after == before && !unread {
        return None;
    }
    if after.is_empty() {
        return Some(None);
    }
    let stamps: BTreeMap<&String, String> = after
        .iter()
        .map(|(pod, t)| (pod, t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)))
        .collect();
    Some(serde_json::to_string(&stamps).ok())
}

/// Owned instances that no NodeClaim (nor a launch of this tick) accounts for, past their grace.
pub fn garbage(
    claims: &[NodeClaim],
    launched: &[String],
    owned: &[Instance],
    now: DateTime<Utc>,
) -> Vec<Action> {
    let mut claimed: BTreeSet<String> = claims
        .iter()
        .filter_map(provider_id)
        .filter_map(instance_id)
        .map(str::to_string)
        .collect();
    claimed.extend(launched.iter().cloned());
    // An instance tagged for a NodeClaim that has not recorded it yet (the write after CreateFleet
    // failed) is that NodeClaim's: its next launch adopts it by tag.
    let recording: BTreeSet<&str> = claims
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none() && provider_id(c).is_none())
        .filter_map(|c| c.metadata.name.as_deref())
        .collect();
    instances::orphans(owned, &claimed, now)
        .into_iter()
        .filter(|orphan| !orphan.nodeclaim().is_some_and(|n| recording.contains(n)))
        .map(|orphan| Action::CollectGarbage {
            instance_id: orphan.id.clone(),
            nodeclaim: orphan.nodeclaim().map(str::to_string),
        })
        .collect()
}

/// NodeClaims awaiting their partition whose instance EC2 now lists in one: each is labelled
/// with it, as Karpenter's placement-group registration hook does from DescribeInstances.
pub fn partition_labels(claims: &[NodeClaim], owned: &[Instance]) -> Vec<Action> {
    claims
        .iter()
        .filter(|c| awaits_partition(c))
        .filter_map(|c| {
            let id = provider_id(c).and_then(instance_id)?;
            let partition = owned.iter().find(|i| i.id == id)?.partition?;
            Some(Action::LabelPartition {
                nodeclaim: name_of(c),
                partition: partition.to_string(),
            })
        })
        .collect()
}

/// The instances of launched NodeClaims that the owned listing misses (past
/// [`INSTANCE_GRACE`], and not launched by this tick): each must be confirmed gone by id
/// ([`stranded`]) before anything is deleted for it.
pub fn missing_instances(
    claims: &[NodeClaim],
    launched: &[String],
    owned: &[Instance],
    now: DateTime<Utc>,
) -> Vec<String> {
    let live: BTreeSet<&str> = owned.iter().map(|i| i.id.as_str()).collect();
    claims
        .iter()
        .filter(|c| launched_at(c).is_some_and(|t| now - t >= INSTANCE_GRACE))
        .filter_map(|c| provider_id(c).and_then(instance_id))
        .filter(|id| !live.contains(id) && !launched.iter().any(|l| l == id))
        .map(str::to_string)
        .collect()
}

/// The instances among `missing` that a lookup by id (`described`) did not find live: gone.
pub fn gone(missing: &[String], described: &[Instance]) -> BTreeSet<String> {
    let alive: BTreeSet<&str> = described
        .iter()
        .filter(|i| fleetwright_cloud::instances::LIVE_STATES.contains(&i.state.as_str()))
        .map(|i| i.id.as_str())
        .collect();
    missing
        .iter()
        .filter(|m| !alive.contains(m.as_str()))
        .cloned()
        .collect()
}

/// The most stranded NodeClaims one tick deletes: a tenth of them, and at least this many. A
/// cloud that answers wrongly cannot take the whole fleet in one tick.
pub const STRANDED_PER_TICK: usize = 10;

/// Launched NodeClaims whose instance is gone (terminated outside Fleetwright, reclaimed without
/// a warning, failed): their capacity does not exist, so the NodeClaim (and its node) go, and the
/// next plan provisions for the pods again. `gone` are the instances confirmed gone ([`gone`]):
/// a listing can be stale, come back empty, or miss an instance whose tags were removed, so only
/// a lookup by id that does not find one live counts. At most [`STRANDED_PER_TICK`] (or a tenth
/// of the NodeClaims) go in one tick.
pub fn stranded(dump: &ClusterDump, claims: &[NodeClaim], gone: &BTreeSet<String>) -> Vec<Action> {
    let cap = STRANDED_PER_TICK.max(claims.len() / 10);
    claims
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .filter_map(|c| {
            let id = provider_id(c).and_then(instance_id)?;
            gone.contains(id).then(|| Action::ForgetNodeClaim {
                nodeclaim: name_of(c),
                instance_id: id.to_string(),
                node: node_for(dump, c).and_then(|n| n.metadata.name.clone()),
            })
        })
        .take(cap)
        .collect()
}

/// Nodes being deleted that carry the termination finalizer and a NodePool label but that no
/// NodeClaim accounts for (by name or provider id): nothing else will let them go, so the
/// finalizer comes off. Their instances, if any are left, are garbage collected.
pub fn orphaned_nodes(dump: &ClusterDump, claims: &[NodeClaim]) -> Vec<Action> {
    let claimed = |node: &Node| {
        let name = node.metadata.name.as_deref();
        let provider = node_provider_id(node);
        claims.iter().any(|c| {
            let status = c.status.as_ref();
            status.and_then(|s| s.node_name.as_deref()) == name
                || (provider.is_some() && provider_id(c) == provider)
        })
    };
    dump.nodes
        .iter()
        .filter(|n| n.metadata.deletion_timestamp.is_some())
        .filter(|n| {
            let finalizers = n.metadata.finalizers.as_deref().unwrap_or_default();
            finalizers
                .iter()
                .any(|f| f == objects::TERMINATION_FINALIZER)
        })
        .filter(|n| {
            n.metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key(fleetwright_core::labels::NODEPOOL))
        })
        .filter(|n| !claimed(n) && !dump.foreign.has_node(n))
        .filter_map(|n| {
            Some(Action::ReleaseNode {
                node: n.metadata.name.clone()?,
            })
        })
        .collect()
}

/// Nodes being deleted (by hand, or by anything but Fleetwright) whose NodeClaim is not: the
/// NodeClaim is deleted, so the node is cordoned and drained, its instance terminated, and then
/// the node let go, as Karpenter's termination does.
pub fn deleted_nodes(dump: &ClusterDump, claims: &[NodeClaim]) -> Vec<Action> {
    claims
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .filter_map(|c| {
            let node = node_for(dump, c)?;
            node.metadata.deletion_timestamp.as_ref()?;
            Some(Action::NodeDeleted {
                node: node.metadata.name.clone()?,
                nodeclaim: name_of(c),
            })
        })
        .collect()
}

#[cfg(test)]
#[path = "../../tests/unit/tick/finish.rs"]
mod tests;
