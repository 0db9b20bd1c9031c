//! kube-scheduler's default topology spread (the PodTopologySpread plugin's
//! `defaultConstraints`), mirrored as Karpenter v1.15 mirrors it: the cluster's defaults are
//! given to every pod that declares no spread of its own, each with the selector kube-scheduler
//! deduces for that pod from the Services that select it and from its controller (a
//! ReplicationController, ReplicaSet or StatefulSet). A pod for which nothing can be deduced is
//! left as it is. Only the scheduling copies change; nothing is written back.

use std::collections::BTreeMap;

use crate::model::{InclusionPolicy, Pod, SpreadConstraint};
use crate::requirements::{Requirement, Requirements};

/// One default constraint: a `topologySpreadConstraints` entry without a selector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DefaultSpread {
    pub max_skew: i32,
    pub topology_key: String,
    /// `DoNotSchedule` when true; `ScheduleAnyway` when false.
    pub hard: bool,
    pub min_domains: Option<i32>,
    pub node_affinity_policy: InclusionPolicy,
    pub node_taints_policy: InclusionPolicy,
}

impl DefaultSpread {
    /// A default with kube-scheduler's defaults for the fields not given.
    pub fn new(max_skew: i32, topology_key: &str, hard: bool) -> Self {
        DefaultSpread {
            max_skew,
            topology_key: topology_key.to_string(),
            hard,
            min_domains: None,
            node_affinity_policy: InclusionPolicy::Honor,
            node_taints_policy: InclusionPolicy::Ignore,
        }
    }
}

/// What kube-scheduler deduces a pod's selector from, read from the cluster.
#[derive(Clone, Debug, Default)]
pub struct Selectors {
    /// The Services' selectors by namespace, in the order they were read. A Service without a
    /// selector selects nothing and is not listed.
    pub services: BTreeMap<String, Vec<BTreeMap<String, String>>>,
    /// ReplicationControllers' selectors by (namespace, name): equality only.
    pub replication_controllers: BTreeMap<(String, String), BTreeMap<String, String>>,
    /// ReplicaSets' and StatefulSets' selectors by (namespace, kind, name).
    pub sets: BTreeMap<(String, String, String), Requirements>,
}

impl Selectors {
    /// Takes in more selectors (another page, or another kind).
    pub fn merge(&mut self, more: Selectors) {
        for (namespace, selectors) in more.services {
            self.services
                .entry(namespace)
                .or_default()
                .extend(selectors);
        }
        self.replication_controllers
            .extend(more.replication_controllers);
        self.sets.extend(more.sets);
    }

    /// Adds a Service's selector.
    pub fn add_service(&mut self, namespace: &str, selector: BTreeMap<String, String>) {
        self.services
            .entry(namespace.to_string())
            .or_default()
            .push(selector);
    }
}

/// Gives every pod without spread constraints the defaults, with its deduced selector.
pub fn apply(pods: &mut [Pod], defaults: &[DefaultSpread], selectors: &Selectors) {
    if defaults.is_empty() {
        return;
    }
    for pod in pods.iter_mut().filter(|p| p.spread.is_empty()) {
        if let Some(selector) = deduce(pod, selectors) {
            pod.spread = defaults
                .iter()
                .map(|d| constraint(d, selector.clone()))
                .collect();
        }
    }
}

fn constraint(default: &DefaultSpread, selector: Requirements) -> SpreadConstraint {
    SpreadConstraint {
        max_skew: default.max_skew,
        topology_key: default.topology_key.clone(),
        hard: default.hard,
        selector,
        min_domains: default.min_domains,
        node_affinity_policy: default.node_affinity_policy,
        node_taints_policy: default.node_taints_policy,
    }
}

/// kube-scheduler's `DefaultSelector`: the matching Services' selectors merged as equality
/// matches (a later Service's value wins on a shared key), a ReplicationController's selector
/// merged over them, a ReplicaSet's or StatefulSet's selector added to them. None when that
/// is empty: an empty selector would count every pod of the namespace.
pub fn deduce(pod: &Pod, selectors: &Selectors) -> Option<Requirements> {
    let mut labels: BTreeMap<String, String> = BTreeMap::new();
    for selector in selectors.services.get(&pod.namespace).into_iter().flatten() {
        if selector.iter().all(|(k, v)| pod.labels.get(k) == Some(v)) {
            labels.extend(selector.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }
    let mut owner = Requirements::new();
    if let (Some(kind), Some(name)) = (&pod.owner_kind, &pod.owner_name) {
        let key = (pod.namespace.clone(), name.clone());
        match kind.as_str() {
            "ReplicationController" => {
                if let Some(selector) = selectors.replication_controllers.get(&key) {
                    labels.extend(selector.iter().map(|(k, v)| (k.clone(), v.clone())));
                }
            }
            "ReplicaSet" | "StatefulSet" => {
                let key = (pod.namespace.clone(), kind.clone(), name.clone());
                if let Some(selector) = selectors.sets.get(&key) {
                    owner = selector.clone();
                }
            }
            _ => {}
        }
    }
    if labels.is_empty() && owner.is_empty() {
        return None;
    }
    let mut selector = owner;
    for (k, v) in &labels {
        selector.add(Requirement::single(k, v));
    }
    Some(selector)
}

#[cfg(test)]
#[path = "../tests/unit/default_spread.rs"]
mod tests;
