//! The cluster snapshot the core reasons about: pods, nodes, NodeClaims, NodePools, node classes,
//! DaemonSets and PodDisruptionBudgets, as plain data with no Kubernetes client types.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::catalog::NodeClassSettings;
// NodeOverlays come with the snapshot, but what they mean is the catalog's (they change its
// types' prices and capacity): they are defined there, so the catalog needs nothing of the
// model, and named here beside the snapshot's other objects.
pub use crate::catalog::{NodeOverlay, PriceChange};
use crate::labels::{RESOURCE_PODS, ZONE};
use crate::requirements::{Requirement, Requirements};
use crate::resources::Resources;

/// A taint's effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

impl TaintEffect {
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "NoSchedule" => TaintEffect::NoSchedule,
            "PreferNoSchedule" => TaintEffect::PreferNoSchedule,
            "NoExecute" => TaintEffect::NoExecute,
            _ => return None,
        })
    }
}

/// A node taint.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Taint {
    pub key: String,
    pub value: String,
    pub effect: TaintEffect,
}

impl std::fmt::Display for Taint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.value.is_empty() {
            write!(f, "{}:{:?}", self.key, self.effect)
        } else {
            write!(f, "{}={}:{:?}", self.key, self.value, self.effect)
        }
    }
}

/// A pod toleration. `key: None` with `exists: true` tolerates everything.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Toleration {
    pub key: Option<String>,
    pub exists: bool,
    pub value: String,
    pub effect: Option<TaintEffect>,
}

impl Toleration {
    pub fn tolerates(&self, taint: &Taint) -> bool {
        if self.effect.is_some_and(|e| e != taint.effect) {
            return false;
        }
        match &self.key {
            None => self.exists,
            Some(key) if key != &taint.key => false,
            Some(_) => self.exists || self.value == taint.value,
        }
    }
}

/// True when every NoSchedule/NoExecute taint is tolerated (PreferNoSchedule is a preference).
pub fn tolerates_all<'a>(
    tolerations: &[Toleration],
    taints: impl IntoIterator<Item = &'a Taint>,
) -> Option<&'a Taint> {
    taints
        .into_iter()
        .filter(|t| t.effect != TaintEffect::PreferNoSchedule)
        .find(|t| !tolerations.iter().any(|tol| tol.tolerates(t)))
}

/// Which namespaces a pod affinity term or selector looks at.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Namespaces {
    /// The listed namespaces (by default the pod's own).
    Listed(BTreeSet<String>),
    /// Every namespace (`namespaceSelector: {}`).
    All,
}

impl Namespaces {
    pub fn contains(&self, ns: &str) -> bool {
        match self {
            Namespaces::All => true,
            Namespaces::Listed(set) => set.contains(ns),
        }
    }
}

/// A required pod (anti-)affinity term.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PodAffinityTerm {
    pub selector: Requirements,
    pub namespaces: Namespaces,
    pub topology_key: String,
}

impl PodAffinityTerm {
    pub fn selects(&self, pod_ns: &str, labels: &BTreeMap<String, String>) -> bool {
        self.namespaces.contains(pod_ns) && self.selector.matches_labels(labels)
    }
}

/// A topology spread constraint.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SpreadConstraint {
    pub max_skew: i32,
    pub topology_key: String,
    /// `DoNotSchedule` when true; `ScheduleAnyway` when false.
    pub hard: bool,
    pub selector: Requirements,
    pub min_domains: Option<i32>,
    /// `nodeAffinityPolicy` (default Honor): only nodes the pod's nodeSelector and required
    /// node affinity allow take part in the spread, their domains and the pods on them.
    pub node_affinity_policy: InclusionPolicy,
    /// `nodeTaintsPolicy` (default Ignore): with Honor, only nodes (and NodePools) whose taints
    /// the pod tolerates take part.
    pub node_taints_policy: InclusionPolicy,
}

/// Whether a topology spread takes a node's affinity or taints into account
/// (`NodeInclusionPolicy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InclusionPolicy {
    Honor,
    Ignore,
}

/// A host port a pod binds.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostPort {
    pub port: i32,
    pub protocol: String,
    pub ip: String,
}

impl HostPort {
    /// Two host ports conflict on the same port and protocol unless bound to distinct specific IPs.
    pub fn conflicts(&self, other: &HostPort) -> bool {
        let any = |ip: &str| ip.is_empty() || ip == "0.0.0.0" || ip == "::";
        self.port == other.port
            && self.protocol == other.protocol
            && (any(&self.ip) || any(&other.ip) || self.ip == other.ip)
    }
}

/// What `karpenter.sh/do-not-disrupt` on a pod, node or NodeClaim protects: nothing, for good
/// (`"true"`), or until a time (a duration such as `"5m"`, counted from when the pod or node
/// started; Karpenter v1.12).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Protection {
    #[default]
    None,
    Always,
    /// Until this second (Unix time).
    Until(i64),
}

impl Protection {
    /// The protection an annotation value gives an object that started at `started` (Unix
    /// seconds). `"true"` protects for good and `"false"` not at all; a duration protects until
    /// `started` plus it. Any other value protects for good, so that a typo never lets a pod be
    /// evicted.
    pub fn from_annotation(value: Option<&str>, started: i64) -> Protection {
        match value.map(str::trim) {
            None | Some("false") => Protection::None,
            Some("true") => Protection::Always,
            Some(text) => match crate::quantity::parse_duration_seconds(text) {
                Some(seconds) => Protection::Until(started.saturating_add(seconds)),
                None => Protection::Always,
            },
        }
    }

    /// Whether it protects at `now` (Unix seconds).
    pub fn holds(self, now: i64) -> bool {
        match self {
            Protection::None => false,
            Protection::Always => true,
            Protection::Until(end) => now < end,
        }
    }
}

/// A pod, with the scheduling-relevant parts of its spec.
#[derive(Clone, Debug, Default)]
pub struct Pod {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub labels: BTreeMap<String, String>,
    /// Effective requests: max(sum of containers + restartable init containers, largest init
    /// container) + overhead, plus one `pods`.
    pub requests: Resources,
    pub node_selector: BTreeMap<String, String>,
    /// Required node affinity: OR of terms, each an AND of requirements.
    pub required_terms: Vec<Requirements>,
    pub preferred_terms: Vec<(i32, Requirements)>,
    pub tolerations: Vec<Toleration>,
    pub affinity: Vec<PodAffinityTerm>,
    pub anti_affinity: Vec<PodAffinityTerm>,
    pub preferred_affinity: Vec<(i32, PodAffinityTerm)>,
    pub preferred_anti_affinity: Vec<(i32, PodAffinityTerm)>,
    pub spread: Vec<SpreadConstraint>,
    pub host_ports: Vec<HostPort>,
    /// Zones of bound persistent volumes the pod mounts.
    pub volume_zones: Option<BTreeSet<String>>,
    /// The persistent volume claims it mounts that count against a node's attach limit: (CSI
    /// driver, `namespace/claim`).
    pub volumes: Vec<(String, String)>,
    pub priority: i32,
    pub node_name: Option<String>,
    pub owner_kind: Option<String>,
    pub owner_name: Option<String>,
    /// `karpenter.sh/do-not-disrupt`, with its duration counted from the pod's start.
    pub do_not_disrupt: Protection,
    /// `karpenter.sh/disruption-cost`, else `controller.kubernetes.io/pod-deletion-cost`.
    pub deletion_cost: i64,
    pub terminal: bool,
    /// Being deleted (a deletion timestamp): its replacement, if any, is already a pod of its own.
    pub deleting: bool,
    /// A stand-in for a bound pod whose object does not read (its error is reported): what it
    /// needs is unknown, so it holds its node (always protected) and is named as unread.
    pub unread: bool,
}

/// Per-container requests, used to compute a pod's effective requests.
#[derive(Clone, Debug, Default)]
pub struct ContainerRequests {
    pub containers: Vec<Resources>,
    /// Init containers with `restartPolicy: Always` (sidecars) are flagged `true`.
    pub init_containers: Vec<(Resources, bool)>,
    pub overhead: Option<Resources>,
}

impl ContainerRequests {
    /// Kubernetes' effective pod request, plus one `pods`.
    pub fn effective(&self) -> Resources {
        let mut sum = Resources::default();
        for c in &self.containers {
            sum.add(c);
        }
        let mut sidecars = Resources::default();
        let mut peak_init = Resources::default();
        for (init, restartable) in &self.init_containers {
            if *restartable {
                sidecars.add(init);
                peak_init.max_with(&sidecars);
            } else {
                peak_init.max_with(&init.plus(&sidecars));
            }
        }
        sum.add(&sidecars);
        sum.max_with(&peak_init);
        if let Some(o) = &self.overhead {
            sum.add(o);
        }
        sum.set(RESOURCE_PODS, 1);
        sum
    }
}

impl Pod {
    /// A pod with the given requests and nothing else.
    pub fn new(namespace: &str, name: &str, requests: Resources) -> Self {
        let mut requests = requests;
        requests.set(RESOURCE_PODS, 1);
        Pod {
            namespace: namespace.to_string(),
            name: name.to_string(),
            uid: format!("{namespace}/{name}"),
            requests,
            ..Default::default()
        }
    }

    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    pub fn is_daemonset(&self) -> bool {
        self.owner_kind.as_deref() == Some("DaemonSet")
    }

    /// Neither finished nor terminating.
    pub fn is_active(&self) -> bool {
        !self.terminal && !self.deleting
    }

    /// Whether the pod needs a place elsewhere when its node goes, as Karpenter's
    /// `IsReschedulable` reads it: active (or a terminating StatefulSet pod, whose successor
    /// waits for it), and neither a DaemonSet's nor a static (mirror) pod, which go with their
    /// node. Whatever protects it from eviction is the caller's question.
    pub fn needs_place(&self) -> bool {
        let owner = self.owner_kind.as_deref();
        let statefulset = owner == Some("StatefulSet");
        (self.is_active() || (statefulset && self.deleting))
            && !matches!(owner, Some("DaemonSet" | "Node"))
    }

    /// The node requirements from nodeSelector and bound volumes (affinity terms are separate).
    pub fn base_requirements(&self) -> Requirements {
        let mut reqs = Requirements::new();
        for (k, v) in &self.node_selector {
            reqs.add(Requirement::single(k, v));
        }
        if let Some(zones) = &self.volume_zones {
            reqs.add(Requirement::in_values(ZONE, zones.iter().cloned()));
        }
        reqs
    }

    /// Node requirements of the strictest form: base, first required term, heaviest preferred term.
    pub fn strict_requirements(&self) -> Requirements {
        let mut reqs = self.base_requirements();
        if let Some(term) = self.required_terms.first() {
            reqs.add_all(term);
        }
        reqs
    }
}

/// An existing node.
#[derive(Clone, Debug, Default)]
pub struct Node {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub allocatable: Resources,
    pub capacity: Resources,
    pub unschedulable: bool,
    pub ready: bool,
    pub deleting: bool,
    pub provider_id: Option<String>,
    pub annotations: BTreeMap<String, String>,
    /// Creation time, seconds since the Unix epoch.
    pub created: i64,
    /// The last time a pod was bound to or left the node, as far as is known (seconds);
    /// `consolidateAfter` counts from here.
    pub last_pod_event: i64,
    /// How many volumes each CSI driver can attach to the node (its CSINode); a driver not
    /// named has no limit.
    pub volume_limits: BTreeMap<String, u32>,
}

impl Node {
    pub fn nodepool(&self) -> Option<&str> {
        self.labels.get(crate::labels::NODEPOOL).map(String::as_str)
    }

    /// Whether a set of node keys ([`NodeClaim::node_keys`]) holds this node, by its name or
    /// its provider ID.
    pub fn is_in(&self, keys: &BTreeSet<&str>) -> bool {
        keys.contains(self.name.as_str())
            || (self.provider_id.as_deref()).is_some_and(|p| keys.contains(p))
    }
}

/// A NodeClaim: a launch request that may or may not have a node yet.
#[derive(Clone, Debug, Default)]
pub struct NodeClaim {
    pub name: String,
    pub nodepool: String,
    pub requirements: Requirements,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    /// Allocatable reported in status, once launched.
    pub allocatable: Option<Resources>,
    pub capacity: Option<Resources>,
    pub node_name: Option<String>,
    pub provider_id: Option<String>,
    pub image_id: Option<String>,
    pub launched: bool,
    pub registered: bool,
    pub initialized: bool,
    pub deleting: bool,
    pub annotations: BTreeMap<String, String>,
    pub created: i64,
    /// The NodeClaim's own `expireAfter` in seconds (None: `Never`, or not set). Expiration
    /// counts from the NodeClaim's creation, with the value it was launched with.
    pub expire_after: Option<i64>,
    /// The NodeClaim's `terminationGracePeriod` in seconds: how long its drain may take before
    /// the pods left are deleted.
    pub termination_grace_period: Option<i64>,
}

impl NodeClaim {
    /// The keys its node is known by: the node name its status records, and its provider ID (a
    /// node may be Ready before the NodeClaim's `nodeName` is written).
    pub fn node_keys(&self) -> impl Iterator<Item = &str> {
        [self.node_name.as_deref(), self.provider_id.as_deref()]
            .into_iter()
            .flatten()
    }
}

/// A disruption budget of a NodePool.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Budget {
    /// `"10%"` or `"3"`.
    pub nodes: String,
    pub schedule: Option<String>,
    /// Seconds.
    pub duration: Option<i64>,
    pub reasons: Vec<String>,
}

/// How a NodePool consolidates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ConsolidationPolicy {
    WhenEmpty,
    #[default]
    WhenEmptyOrUnderutilized,
    /// Karpenter v1.14: a consolidation move is made only when its savings, as a fraction of
    /// the pool's cost, are at least half its disruption, as a fraction of the pool's
    /// (`disruption::balanced`).
    Balanced,
}

/// Karpenter's `TerminateFirstDrift` and `TerminateFirstRepair` feature gates (alpha in v1.15,
/// off unless set): whether a static NodePool at its `limits.nodes`, which cannot stage a
/// replacement, deletes a drifted (`drift`) or unhealthy (`repair`) node first, for its refill
/// to take the freed slot. Off, such a node is kept and reported blocked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TerminateFirst {
    pub drift: bool,
    pub repair: bool,
}

/// How a NodePool's `minValues` hold when too few instance types are left to meet them
/// (Karpenter's `MIN_VALUES_POLICY` setting, v1.6).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MinValuesPolicy {
    /// A pod whose node could not keep `minValues` distinct values is not scheduled there.
    #[default]
    Strict,
    /// The node launches with what is left; its `minValues` are lowered to what it keeps, and
    /// its NodeClaim is annotated `karpenter.sh/nodeclaim-min-values-relaxed: "true"`.
    BestEffort,
}

impl MinValuesPolicy {
    pub fn parse(text: &str) -> Option<MinValuesPolicy> {
        match text {
            "Strict" => Some(MinValuesPolicy::Strict),
            "BestEffort" => Some(MinValuesPolicy::BestEffort),
            _ => None,
        }
    }
}

/// A NodePool (Karpenter v1), reduced to what scheduling and disruption read.
#[derive(Clone, Debug, Default)]
pub struct NodePool {
    pub name: String,
    pub weight: i32,
    /// Template requirements, including `minValues`.
    pub requirements: Requirements,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub startup_taints: Vec<Taint>,
    /// Resource limits; `nodes` may be set as an extended resource named "nodes".
    pub limits: Option<Resources>,
    pub node_class: String,
    pub consolidation_policy: ConsolidationPolicy,
    /// Seconds; None means `Never`.
    pub consolidate_after: Option<i64>,
    /// Seconds; None means `Never`.
    pub expire_after: Option<i64>,
    pub budgets: Vec<Budget>,
    pub deleting: bool,
    /// The hash of the template (labels, taints, requirements, nodeClassRef, kubelet) that
    /// NodeClaims record in `karpenter.sh/nodepool-hash`; a mismatch is drift.
    pub template_hash: Option<String>,
    /// The cluster's `minValues` policy (a setting, not a NodePool field; the same for all).
    pub min_values_policy: MinValuesPolicy,
    /// The cluster's terminate-first gates (settings, not NodePool fields; the same for all).
    pub terminate_first: TerminateFirst,
    /// The cluster's `SpotToSpotConsolidation` gate (a setting, the same for all; Karpenter's
    /// alpha gate, off unless set): whether consolidation may replace spot nodes with spot.
    pub spot_to_spot: bool,
    /// `spec.replicas`: a static NodePool keeps exactly this many nodes, whatever the pods;
    /// pending pods launch nothing in it and its nodes are never consolidated.
    pub replicas: Option<i64>,
}

impl NodePool {
    /// The requirements a node from this pool has before any pod narrows them: the template
    /// requirements, the template labels, and the pool's own name.
    pub fn node_requirements(&self) -> Requirements {
        let mut reqs = self.requirements.clone();
        for (k, v) in &self.labels {
            reqs.add(Requirement::single(k, v));
        }
        reqs.add(Requirement::single(crate::labels::NODEPOOL, &self.name));
        reqs.add(Requirement::single(
            crate::labels::NODECLASS,
            &self.node_class,
        ));
        reqs
    }
}

/// A DaemonSet, as the pod it would run on every matching node.
#[derive(Clone, Debug, Default)]
pub struct DaemonSet {
    pub namespace: String,
    pub name: String,
    pub pod: Pod,
}

/// A PodDisruptionBudget with its current allowance.
#[derive(Clone, Debug, Default)]
pub struct Pdb {
    pub namespace: String,
    pub name: String,
    pub selector: Requirements,
    pub disruptions_allowed: i32,
    /// The spec allows no eviction at all, whatever the pods' health: `maxUnavailable: 0` or
    /// `"0%"`, or `minAvailable: "100%"`.
    pub fully_blocking: bool,
}

/// Everything the core reads about a cluster at one instant.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub pods: Vec<Pod>,
    pub nodes: Vec<Node>,
    pub nodeclaims: Vec<NodeClaim>,
    pub nodepools: Vec<NodePool>,
    pub node_classes: BTreeMap<String, NodeClassSettings>,
    pub daemonsets: Vec<DaemonSet>,
    pub pdbs: Vec<Pdb>,
    /// What each EC2NodeClass is now, by name, for drift: its static hash and what it resolves
    /// to (AMIs, subnets, security groups).
    pub node_class_state: BTreeMap<String, NodeClassState>,
    /// NodeOverlays, applied to the catalog the core plans on ([`crate::Catalog::with_overlays`]).
    pub overlays: Vec<NodeOverlay>,
}

impl Snapshot {
    /// The settings of the node class `pool` launches with (the defaults when the snapshot has
    /// no such class).
    pub fn node_class_settings(&self, pool: &NodePool) -> crate::catalog::NodeClassSettings {
        self.node_classes
            .get(&pool.node_class)
            .cloned()
            .unwrap_or_default()
    }
}

/// An EC2NodeClass as drift detection compares NodeClaims with it. Each part is unknown (and
/// never causes drift) when None or empty.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeClassState {
    /// The hash of everything but the selector terms.
    pub hash: Option<String>,
    /// The AMIs it resolves to now; a NodeClaim on another image has drifted.
    pub images: BTreeSet<String>,
    /// The subnets it selects now; a NodeClaim in another subnet has drifted.
    pub subnets: BTreeSet<String>,
    /// The security groups it selects now; a NodeClaim with another set has drifted.
    pub security_groups: BTreeSet<String>,
    /// The capacity reservations it selects now, when known; a NodeClaim in another has
    /// drifted.
    pub reservations: Option<BTreeSet<String>>,
    /// The placement group it launches into now (its id; None for none), when known; a
    /// NodeClaim labelled with another, or with one when there is none, has drifted.
    pub placement_group: Option<Option<String>>,
}

#[cfg(test)]
#[path = "../tests/unit/model.rs"]
mod tests;
