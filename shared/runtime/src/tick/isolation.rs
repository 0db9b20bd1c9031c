//! Objects a tick could not read or convert, and pools that cannot launch: each rejected object
//! is left out and reported (a warning every tick, a Warning Event once per error, and the
//! condition its kind has), and every other object goes on. A NodePool whose EC2NodeClass is
//! missing or not ready is left out of planning, so its pods are not planned onto NodeClaims
//! that could never launch.

use std::collections::BTreeMap;

use fleetwright_core::model::NodePool;
use fleetwright_core::Snapshot;
use fleetwright_kube::convert::Rejected;

use super::action::Action;
use fleetwright_crds::conditions;

/// The state ConfigMap key of the rejected objects already evented, with their errors.
pub const REJECTED_KEY: &str = "rejectedObjects";

/// The most Events one tick records for rejected objects: a rollout of a thousand pods that do
/// not convert must not spend the tick posting Events (the rest are evented by later ticks).
pub const EVENTS_PER_TICK: usize = 20;
/// The most rejected objects the state ConfigMap remembers as evented.
pub const REMEMBERED: usize = 500;

/// A warning for each rejected object, an Event for each whose error was not evented yet (at
/// most [`EVENTS_PER_TICK`]), and the record of what was evented when it changed.
pub fn report(rejected: &[Rejected], said: &BTreeMap<String, String>) -> Vec<Action> {
    let mut budget = EVENTS_PER_TICK;
    let mut current = BTreeMap::new();
    let mut actions = Vec::new();
    for r in rejected {
        let known = said.get(&r.object()) == Some(&r.error);
        let event = !known && budget > 0 && current.len() < REMEMBERED;
        if event {
            budget -= 1;
        }
        if (known || event) && current.len() < REMEMBERED {
            current.insert(r.object(), r.error.clone());
        }
        actions.push(Action::Rejected {
            event,
            object: r.clone(),
        });
    }
    if &current != said {
        actions.push(Action::SaveRejected { said: current });
    }
    actions
}

/// The API version of a kind an Event can name.
pub fn api_version(kind: &str) -> &'static str {
    match kind {
        "NodePool" | "NodeClaim" => "karpenter.sh/v1",
        "EC2NodeClass" => "karpenter.k8s.aws/v1",
        "NodeOverlay" => "karpenter.sh/v1alpha1",
        "DaemonSet" => "apps/v1",
        "PodDisruptionBudget" => "policy/v1",
        _ => "v1",
    }
}

/// The errors of the rejected objects of one kind that were left out, by name (one still read,
/// with a part that fails closed, is not).
pub fn errors_of(rejected: &[Rejected], kind: &str) -> BTreeMap<String, String> {
    rejected
        .iter()
        .filter(|r| r.kind == kind && !r.kept)
        .map(|r| (r.name.clone(), r.error.clone()))
        .collect()
}

/// Takes the NodePools whose EC2NodeClass is not ready (missing, unresolved or invalid) out of
/// the snapshot, for planning without them; [`restore`] puts them back.
pub fn park_unready(snapshot: &mut Snapshot, classes: &BTreeMap<String, bool>) -> Vec<NodePool> {
    let (ready, parked): (Vec<NodePool>, Vec<NodePool>) = std::mem::take(&mut snapshot.nodepools)
        .into_iter()
        .partition(|p| classes.get(&p.node_class).copied().unwrap_or(false));
    snapshot.nodepools = ready;
    for p in &parked {
        tracing::warn!(nodepool = %p.name, nodeclass = %p.node_class, "not planning with the nodepool: its ec2nodeclass is missing or not ready");
    }
    parked
}

/// Whether each EC2NodeClass of a dump can launch, as far as a dump tells (no cloud to resolve
/// it): present, and not said not to be by its own `Ready` condition; a NodePool naming a class
/// the dump lacks is parked. None for a dump that holds no EC2NodeClass at all (NodePools
/// written alone, to plan): nothing is parked then.
pub fn classes_of_dump(
    dump: &fleetwright_kube::dump::ClusterDump,
) -> Option<BTreeMap<String, bool>> {
    if dump.nodeclasses.is_empty() {
        return None;
    }
    let classes = dump
        .nodeclasses
        .iter()
        .map(|c| {
            let not_ready = c.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|x| x.type_ == conditions::READY && x.status == "False")
            });
            (c.metadata.name.clone().unwrap_or_default(), !not_ready)
        })
        .collect();
    Some(classes)
}

/// [`park_unready`] when the readiness of the classes is known.
pub fn park_known(
    snapshot: &mut Snapshot,
    classes: Option<&BTreeMap<String, bool>>,
) -> Vec<NodePool> {
    match classes {
        Some(classes) => park_unready(snapshot, classes),
        None => Vec::new(),
    }
}

/// Puts parked NodePools back.
pub fn restore(snapshot: &mut Snapshot, parked: Vec<NodePool>) {
    snapshot.nodepools.extend(parked);
}

#[cfg(test)]
#[path = "../../tests/unit/tick/isolation.rs"]
mod tests;
