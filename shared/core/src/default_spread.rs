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
mod tests {
    use super::*;
    use crate::resources::Resources;

    fn pod(name: &str, labels: &[(&str, &str)], owner: Option<(&str, &str)>) -> Pod {
        let mut p = Pod::new("web", name, Resources::new(100, 0));
        p.labels = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        p.owner_kind = owner.map(|(k, _)| k.to_string());
        p.owner_name = owner.map(|(_, n)| n.to_string());
        p
    }

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn zone_default() -> Vec<DefaultSpread> {
        vec![DefaultSpread::new(1, "topology.kubernetes.io/zone", false)]
    }

    fn selectors() -> Selectors {
        let mut s = Selectors::default();
        s.add_service("web", map(&[("app", "web")]));
        s.add_service("other", map(&[("tier", "x")]));
        let mut rs = Requirements::new();
        rs.add(Requirement::single("pod-template-hash", "abc"));
        s.sets
            .insert(("web".into(), "ReplicaSet".into(), "web-abc".into()), rs);
        s.replication_controllers
            .insert(("web".into(), "legacy".into()), map(&[("rc", "legacy")]));
        s
    }

    #[test]
    fn a_pod_of_a_service_and_a_replicaset_is_spread_over_both_their_selectors() {
        let mut pods = vec![pod(
            "web-1",
            &[("app", "web"), ("pod-template-hash", "abc"), ("tier", "x")],
            Some(("ReplicaSet", "web-abc")),
        )];
        apply(&mut pods, &zone_default(), &selectors());
        let spread = &pods[0].spread;
        assert_eq!(spread.len(), 1);
        assert!(!spread[0].hard);
        let mut want = Requirements::new();
        want.add(Requirement::single("pod-template-hash", "abc"));
        want.add(Requirement::single("app", "web"));
        assert_eq!(
            spread[0].selector, want,
            "the other namespace's Service is not counted"
        );
    }

    #[test]
    fn a_replication_controller_selector_merges_as_labels() {
        let mut pods = vec![pod(
            "rc-1",
            &[("rc", "legacy")],
            Some(("ReplicationController", "legacy")),
        )];
        apply(&mut pods, &zone_default(), &selectors());
        assert_eq!(
            pods[0].spread[0].selector,
            Requirements::from_labels(&map(&[("rc", "legacy")]))
        );
    }

    #[test]
    fn pods_with_their_own_spread_or_nothing_to_deduce_from_are_left_alone() {
        let mut own = pod("own", &[("app", "web")], None);
        own.spread.push(constraint(
            &DefaultSpread::new(3, "kubernetes.io/hostname", true),
            Requirements::new(),
        ));
        let job = pod("job-1", &[("batch", "x")], Some(("Job", "nightly")));
        let gone = pod("gone", &[], Some(("ReplicaSet", "deleted")));
        let mut pods = vec![own.clone(), job, gone];
        apply(&mut pods, &zone_default(), &selectors());
        assert_eq!(
            pods[0].spread, own.spread,
            "a pod's own spread wins, all or nothing"
        );
        assert!(pods[1].spread.is_empty(), "a Job's pod no Service selects");
        assert!(
            pods[2].spread.is_empty(),
            "an owner that cannot be read adds nothing"
        );
    }

    #[test]
    fn no_defaults_change_nothing() {
        let mut pods = vec![pod("web-1", &[("app", "web")], None)];
        apply(&mut pods, &[], &selectors());
        assert!(pods[0].spread.is_empty());
    }
}
