//! The provisioning decisions: the pods waiting for capacity, a NodeClaim for each node the plan
//! or a static NodePool needs, and a launch for each NodeClaim without an instance.

use chrono::{DateTime, Duration, Utc};
use fleetwright_core::labels::{CAPACITY_TYPE, INSTANCE_TYPE, ZONE};
use fleetwright_core::plan::NewNodeClaim;
use fleetwright_core::replicas::ReplicaPlan;
use fleetwright_core::{Plan, Snapshot};
use fleetwright_crds::NodeClaim;
use fleetwright_kube::dump::ClusterDump;
use fleetwright_kube::objects;

use super::action::Action;
use super::claims::{label, name_of, provider_id};

/// How long a NodeClaim whose launch ended in an unknown outcome (a timeout, a 5xx) is kept for
/// the next tick's launch to find its instance by tag, before it is deleted and planned again.
pub const UNKNOWN_LAUNCH_WINDOW: Duration = Duration::minutes(3);

/// Whether a NodeClaim whose launch failed with `error` is kept for another launch: the launch
/// may have happened, and the NodeClaim is young enough for its instance to be found.
pub fn keep_after_failed_launch(
    claim: &NodeClaim,
    error: &crate::RuntimeError,
    now: DateTime<Utc>,
) -> bool {
    let unknown = matches!(error, crate::RuntimeError::Cloud(e) if e.outcome_unknown());
    let young =
        claim.metadata.creation_timestamp.as_ref().is_none_or(|t| {
            now.timestamp() - t.0.as_second() < UNKNOWN_LAUNCH_WINDOW.num_seconds()
        });
    unknown && young
}

/// Karpenter's batch window, for bursts only: while pending pods keep being created (at least
/// two of them less than [`BATCH_IDLE`] old), launches wait, up to [`BATCH_MAX`] after the
/// oldest pending pod, so that a Deployment's pods, which its ReplicaSet creates in growing
/// batches, are planned together onto fewer, fuller nodes instead of in slices. A lone new pod
/// is planned at once (Karpenter holds it for its one-second idle window too).
pub const BATCH_IDLE: Duration = Duration::seconds(1);
pub const BATCH_MAX: Duration = Duration::seconds(10);

/// How long to wait before planning the pending pods of `dump` (their creation times, to the
/// second), when the batch is still open: None when it has closed.
pub fn batch_wait(dump: &ClusterDump, now: DateTime<Utc>) -> Option<Duration> {
    let unbound = |node: Option<&String>| node.is_none_or(|n| n.is_empty());
    let created = dump
        .slim_pods
        .iter()
        .filter(|p| unbound(p.node_name.as_ref()) && p.phase.as_deref() != Some("Succeeded"))
        .map(|p| &p.metadata)
        .chain(
            (dump.pods.iter())
                .filter(|p| unbound(p.spec.as_ref().and_then(|s| s.node_name.as_ref())))
                .map(|p| &p.metadata),
        )
        .filter_map(|m| m.creation_timestamp.as_ref().map(|t| t.0.as_second()));
    let now = now.timestamp();
    let (oldest, recent) = created.fold((None, 0), |(oldest, recent): (Option<i64>, usize), c| {
        let new = usize::from(now - c < BATCH_IDLE.num_seconds());
        (Some(oldest.map_or(c, |o: i64| o.min(c))), recent + new)
    });
    let full = now - oldest? >= BATCH_MAX.num_seconds();
    (recent >= 2 && !full).then_some(BATCH_IDLE)
}

/// The pods waiting for a node.
pub fn pending_pods(snapshot: &Snapshot) -> usize {
    snapshot
        .pods
        .iter()
        .filter(|p| p.node_name.is_none())
        .count()
}

/// A NodeClaim for each node the plan needs.
pub fn provision(dump: &ClusterDump, plan: &Plan) -> Vec<Action> {
    plan.nodeclaims
        .iter()
        .filter_map(|planned| create(dump, planned))
        .collect()
}

/// Creating the NodeClaim for a planned node, or None when its NodePool is gone from the dump.
pub fn create(dump: &ClusterDump, planned: &NewNodeClaim) -> Option<Action> {
    let claim = objects::nodeclaim_in(dump, planned)?;
    Some(Action::CreateNodeClaim {
        nodepool: planned.nodepool.clone(),
        requests: serde_json::to_value(planned.requests.to_map()).unwrap_or_default(),
        instance_types: planned.instance_types.clone(),
        claim: Box::new(claim),
    })
}

/// What the static NodePools need: a NodeClaim for each missing replica, the deletion of each
/// one above them, and why a pool falls short.
pub fn replicas(dump: &ClusterDump, plan: &ReplicaPlan) -> Vec<Action> {
    let nodepool_of = |name: &str| {
        dump.nodeclaims
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(name))
            .and_then(|c| label(c, fleetwright_core::labels::NODEPOOL))
            .unwrap_or_default()
            .to_string()
    };
    let create = plan
        .create
        .iter()
        .filter_map(|planned| create(dump, planned));
    let delete = plan.delete.iter().map(|name| Action::ScaleDown {
        nodepool: nodepool_of(name),
        nodeclaim: name.clone(),
    });
    let short = plan
        .short
        .iter()
        .map(|(pool, why)| Action::ShortOfReplicas {
            nodepool: pool.clone(),
            reason: why.clone(),
        });
    create.chain(delete).chain(short).collect()
}

/// Every NodeClaim with no instance yet that is not being deleted, launched; a replacement
/// whose command never started is deleted instead
/// ([`super::in_progress::orphaned_replacements`]).
pub fn unlaunched(claims: &[NodeClaim]) -> Vec<Action> {
    let orphans = super::in_progress::orphaned_replacements(claims);
    let orphan = |c: &NodeClaim| {
        orphans.iter().any(|o| {
            matches!(o, Action::DropReplacement { nodeclaim, .. } if Some(nodeclaim.as_str()) == c.metadata.name.as_deref())
        })
    };
    let launches: Vec<Action> = claims
        .iter()
        .filter(|c| provider_id(c).is_none() && c.metadata.deletion_timestamp.is_none())
        .filter(|c| !orphan(c))
        .map(|c| Action::Launch {
            nodeclaim: name_of(c),
            instance_types: allowed(c, INSTANCE_TYPE),
            zones: allowed(c, ZONE),
            capacity_types: allowed(c, CAPACITY_TYPE),
            claim: Box::new(c.clone()),
        })
        .collect();
    orphans.into_iter().chain(launches).collect()
}

/// The values a NodeClaim's `In` requirements on `key` allow (empty: any).
fn allowed(claim: &NodeClaim, key: &str) -> Vec<String> {
    claim
        .spec
        .requirements
        .iter()
        .filter(|r| r.key == key && r.operator == "In")
        .flat_map(|r| r.values.iter().cloned())
        .collect()
}

#[cfg(test)]
#[path = "../../tests/unit/tick/provision_batch_tests.rs"]
mod batch_tests;
