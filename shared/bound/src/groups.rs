//! The rows of the bound: pending pods grouped by their requests and by everything that decides
//! which columns they may use, with the columns each group may use.

use std::collections::BTreeMap;

use fleetwright_core::check::pod_fits_node;
use fleetwright_core::labels::HOSTNAME;
use fleetwright_core::model::Pod;
use fleetwright_core::{Resources, Snapshot};

use crate::columns::Column;

/// Pods with the same requests and constraints.
pub(crate) struct Group {
    pub requests: Resources,
    pub count: usize,
    /// The pods avoid sharing a host with each other (required anti-affinity on the hostname
    /// that selects themselves): at most one of them per node.
    pub alone: bool,
    /// Indices of the columns the pods may use.
    pub allowed: Vec<usize>,
}

/// The groups of the snapshot's pending pods that some column can take.
pub(crate) fn of(snapshot: &Snapshot, columns: &[Column]) -> Vec<Group> {
    let mut allowed: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    let mut groups: BTreeMap<(String, String, String), Group> = BTreeMap::new();
    for pod in snapshot.pods.iter().filter(|p| pending(p)) {
        let needs = constraints(pod);
        let cols = allowed
            .entry(needs.clone())
            .or_insert_with(|| usable(snapshot, columns, pod))
            .clone();
        if cols.is_empty() {
            continue;
        }
        let alone = alone_key(pod);
        let key = (needs, format!("{:?}", pod.requests), alone.clone());
        groups
            .entry(key)
            .or_insert_with(|| Group {
                requests: pod.requests.clone(),
                count: 0,
                alone: !alone.is_empty(),
                allowed: cols,
            })
            .count += 1;
    }
    groups.into_values().collect()
}

fn pending(pod: &Pod) -> bool {
    pod.node_name.is_none() && !pod.terminal && !pod.is_daemonset()
}

/// Everything about a pod that decides which nodes it may run on.
fn constraints(pod: &Pod) -> String {
    format!(
        "{:?}|{:?}|{:?}|{:?}|{:?}",
        pod.tolerations,
        pod.node_selector,
        pod.required_terms,
        pod.preferred_terms,
        pod.volume_zones
    )
}

/// The hostname anti-affinity term that selects the pod itself, if any.
fn alone_key(pod: &Pod) -> String {
    pod.anti_affinity
        .iter()
        .find(|t| t.topology_key == HOSTNAME && t.selects(&pod.namespace, &pod.labels))
        .map(|t| format!("{t:?}"))
        .unwrap_or_default()
}

/// The columns the pod may use as Karpenter schedules it: its heaviest preferred node-affinity
/// term counts as required while some column satisfies it, and of the NodePools it fits only
/// those of the highest weight are used.
fn usable(snapshot: &Snapshot, columns: &[Column], pod: &Pod) -> Vec<usize> {
    let fits = |pod: &Pod| -> Vec<usize> {
        columns
            .iter()
            .enumerate()
            .filter(|(_, c)| pod_fits_node(pod, &snapshot.nodepools[c.pool], &c.labels))
            .filter(|(_, c)| pod.requests.fits_in(&c.capacity))
            .map(|(j, _)| j)
            .collect()
    };
    let preferred = with_preference(pod).map(|p| fits(&p)).unwrap_or_default();
    let cols = if preferred.is_empty() {
        fits(pod)
    } else {
        preferred
    };
    let Some(top) = cols
        .iter()
        .map(|&j| snapshot.nodepools[columns[j].pool].weight)
        .max()
    else {
        return cols;
    };
    cols.into_iter()
        .filter(|&j| snapshot.nodepools[columns[j].pool].weight == top)
        .collect()
}

/// The pod with its heaviest preferred node-affinity term added to every required term.
fn with_preference(pod: &Pod) -> Option<Pod> {
    let (_, term) = pod.preferred_terms.iter().max_by_key(|(w, _)| *w)?;
    let mut strict = pod.clone();
    if strict.required_terms.is_empty() {
        strict.required_terms.push(term.clone());
    } else {
        for t in &mut strict.required_terms {
            t.add_all(term);
        }
    }
    Some(strict)
}

/// The resources any group asks for.
pub(crate) fn requested(groups: &[Group]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for g in groups {
        for n in g.requests.names() {
            if g.requests.get(n) > 0 && !names.iter().any(|m| m == n) {
                names.push(n.to_string());
            }
        }
    }
    names
}
