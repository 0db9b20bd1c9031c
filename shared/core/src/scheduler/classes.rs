//! Turning the snapshot into scheduling inputs: bins for existing nodes and in-flight
//! NodeClaims, pending pods grouped into classes with their relaxation ladder, topology groups,
//! and the pods already bound.

use super::*;

pub(crate) fn inverse_key(term: &PodAffinityTerm) -> GroupKey {
    GroupKey {
        key: term.topology_key.clone(),
        kind: Kind::Anti,
        inverse: true,
        namespaces: term.namespaces.clone(),
        selector: term.selector.clone(),
        owner_reqs: Requirements::new(),
        node_filter: Vec::new(),
        tolerations: None,
    }
}

/// The groups of a pod's spread: its node requirements (`reqs`, this rung of the relaxation
/// ladder) bound the eligible domains when the spread honours node affinity, and only the
/// spread's own key otherwise; its nodeSelector with each required node-affinity term filters
/// the nodes that count, and its tolerations too when the spread honours taints.
fn spread_key(pod: &Pod, s: &SpreadConstraint, reqs: &Requirements) -> GroupKey {
    let honour_affinity = s.node_affinity_policy == InclusionPolicy::Honor;
    let owner_reqs = if honour_affinity {
        reqs.clone()
    } else {
        let mut only_key = Requirements::new();
        if let Some(r) = reqs.get(&s.topology_key) {
            only_key.add(r.clone());
        }
        only_key
    };
    let node_filter = if !honour_affinity {
        Vec::new()
    } else if pod.required_terms.is_empty() {
        let selector = Requirements::from_labels(&pod.node_selector);
        if selector.is_empty() {
            Vec::new()
        } else {
            vec![selector]
        }
    } else {
        pod.required_terms
            .iter()
            .map(|term| {
                let mut r = Requirements::from_labels(&pod.node_selector);
                r.add_all(term);
                r
            })
            .collect()
    };
    GroupKey {
        key: s.topology_key.clone(),
        kind: Kind::Spread {
            max_skew: s.max_skew,
            min_domains: s.min_domains,
        },
        inverse: false,
        namespaces: Namespaces::Listed(BTreeSet::from([pod.namespace.clone()])),
        selector: s.selector.clone(),
        owner_reqs,
        node_filter,
        tolerations: (s.node_taints_policy == InclusionPolicy::Honor)
            .then(|| pod.tolerations.clone()),
    }
}

/// Which groups count a pod, and which inverse groups repel it.
pub(crate) fn memberships(topo: &Topology, pod: &Pod) -> (Vec<usize>, Vec<usize>) {
    let mut member_of = Vec::new();
    let mut repelled_by = Vec::new();
    for (g, group) in topo.groups.iter().enumerate() {
        if !group.id.namespaces.contains(&pod.namespace)
            || !group.id.selector.matches_labels(&pod.labels)
        {
            continue;
        }
        if group.id.inverse {
            repelled_by.push(g);
        } else {
            member_of.push(g);
        }
    }
    (member_of, repelled_by)
}

/// How long after its Node registered a NodeClaim may take to initialize (Ready, startup taints
/// gone, extended resources reported) while pods are still planned onto it. Past this the node
/// is taken for what it shows: its not-ready taints count, pending pods get other capacity, and
/// a node that never initializes cannot hold them pending for good. Karpenter waits on such a
/// node until node repair (if enabled) replaces it, 30 minutes on.
pub const INITIALIZATION_GRACE: i64 = 5 * 60;

/// The nodes (by name and by provider id) whose NodeClaim is not initialized yet, and registered
/// less than [`INITIALIZATION_GRACE`] before `now`. A node is initialized, as Karpenter counts it,
/// when its NodeClaim says so or no NodeClaim manages it. A starting node's ephemeral taints
/// (not-ready, unreachable, uninitialized, unregistered) are expected to go and are ignored; on
/// any other node they mean it is unhealthy, and pods are not counted as fitting there.
pub(crate) fn uninitialized_nodes(snapshot: &Snapshot, now: i64) -> BTreeSet<&str> {
    let overdue = overdue_nodes(snapshot, now);
    (snapshot.nodeclaims.iter())
        .filter(|c| !c.initialized)
        .flat_map(NodeClaim::node_keys)
        .filter(|k| !overdue.contains(k))
        .collect()
}

/// The nodes (by name and by provider id) whose NodeClaim is not initialized
/// [`INITIALIZATION_GRACE`] or more after the node registered. One that is not Ready either takes
/// no pods (the node lifecycle controller's not-ready taint may not be there yet).
pub(crate) fn overdue_nodes(snapshot: &Snapshot, now: i64) -> BTreeSet<&str> {
    // A Node whose creation time is not known (0) is never taken as overdue.
    let registered_at: BTreeMap<&str, i64> = snapshot
        .nodes
        .iter()
        .filter(|n| n.created > 0)
        .flat_map(|n| {
            [Some(n.name.as_str()), n.provider_id.as_deref()]
                .into_iter()
                .flatten()
                .map(move |k| (k, n.created))
        })
        .collect();
    let overdue = |c: &&NodeClaim| {
        c.node_keys()
            .filter_map(|k| registered_at.get(k))
            .any(|&at| now - at >= INITIALIZATION_GRACE)
    };
    (snapshot.nodeclaims.iter())
        .filter(|c| !c.initialized)
        .filter(overdue)
        .flat_map(NodeClaim::node_keys)
        .collect()
}

/// Taints a node carries while it starts, or when it stops answering: Karpenter's known
/// ephemeral taints, whatever their effect, and its own `unregistered`.
pub(crate) fn is_ephemeral_taint(key: &str) -> bool {
    key == TAINT_UNREGISTERED || crate::labels::is_known_ephemeral_key(key)
}

/// Pods with no node, not terminal, and not DaemonSet pods, largest first.
pub(crate) fn pending_pods(snapshot: &Snapshot) -> Vec<usize> {
    let mut pending: Vec<usize> = snapshot
        .pods
        .iter()
        .enumerate()
        .filter(|(_, p)| p.node_name.is_none() && !p.terminal && !p.is_daemonset())
        .map(|(i, _)| i)
        .collect();
    pending.sort_by(|&a, &b| {
        let (pa, pb) = (&snapshot.pods[a], &snapshot.pods[b]);
        pb.priority
            .cmp(&pa.priority)
            .then(pb.requests.cpu.cmp(&pa.requests.cpu))
            .then(pb.requests.memory.cmp(&pa.requests.memory))
            .then(pa.namespace.cmp(&pb.namespace))
            .then(pa.name.cmp(&pb.name))
    });
    pending
}

/// Everything about a pod that scheduling reads, except its name.
pub(crate) fn shape_key(pod: &Pod) -> String {
    format!(
        "{}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}",
        pod.namespace,
        pod.labels,
        pod.requests,
        pod.node_selector,
        pod.required_terms,
        pod.preferred_terms,
        pod.tolerations,
        pod.affinity,
        pod.anti_affinity,
        pod.preferred_affinity,
        pod.preferred_anti_affinity,
        pod.spread,
        pod.host_ports,
        pod.volume_zones,
    )
}

pub(crate) type Level = (
    Requirements,
    Vec<SpreadConstraint>,
    Vec<PodAffinityTerm>,
    Vec<PodAffinityTerm>,
);

/// Karpenter's relaxation ladder: the strictest reading first (preferences as requirements), then
/// the next required node-affinity term, then dropping preferred pod affinity, preferred
/// anti-affinity, preferred node affinity, and ScheduleAnyway spreads one at a time.
pub(crate) fn relaxations(pod: &Pod) -> Vec<Level> {
    let mut levels = Vec::new();
    let terms: Vec<Option<&Requirements>> = if pod.required_terms.is_empty() {
        vec![None]
    } else {
        pod.required_terms.iter().map(Some).collect()
    };
    let sorted = |v: &[(i32, PodAffinityTerm)]| {
        let mut v = v.to_vec();
        v.sort_by_key(|t| std::cmp::Reverse(t.0));
        v.into_iter().map(|(_, t)| t).collect::<Vec<_>>()
    };
    let mut pref_aff = sorted(&pod.preferred_affinity);
    let mut pref_anti = sorted(&pod.preferred_anti_affinity);
    let mut pref_node: Vec<(i32, Requirements)> = pod.preferred_terms.clone();
    pref_node.sort_by_key(|t| std::cmp::Reverse(t.0));
    let mut soft: Vec<SpreadConstraint> = pod.spread.iter().filter(|s| !s.hard).cloned().collect();
    let hard: Vec<SpreadConstraint> = pod.spread.iter().filter(|s| s.hard).cloned().collect();
    let mut term_index = 0;
    loop {
        let mut reqs = pod.base_requirements();
        if let Some(term) = terms[term_index] {
            reqs.add_all(term);
        }
        if let Some((_, pref)) = pref_node.first() {
            reqs.add_all(pref);
        }
        let spreads: Vec<SpreadConstraint> = hard.iter().chain(soft.iter()).cloned().collect();
        let aff: Vec<PodAffinityTerm> = pod
            .affinity
            .iter()
            .chain(pref_aff.iter())
            .cloned()
            .collect();
        let anti: Vec<PodAffinityTerm> = pod
            .anti_affinity
            .iter()
            .chain(pref_anti.iter())
            .cloned()
            .collect();
        levels.push((reqs, spreads, aff, anti));
        if term_index + 1 < terms.len() {
            term_index += 1;
        } else if pref_aff.pop().is_some() || pref_anti.pop().is_some() {
        } else if !pref_node.is_empty() {
            pref_node.remove(0);
        } else if soft.pop().is_none() {
            break;
        }
        if levels.len() > 32 {
            break;
        }
    }
    levels
}

impl<'a> Ctx<'a> {
    pub(crate) fn build_bins(&mut self) {
        let snap = self.snapshot;
        let mut names: BTreeSet<&str> = BTreeSet::new();
        let starting = uninitialized_nodes(snap, self.now);
        let overdue = overdue_nodes(snap, self.now);
        let starting_claims: HashMap<&str, &NodeClaim> = snap
            .nodeclaims
            .iter()
            .filter(|c| !c.initialized)
            .flat_map(|c| {
                [c.node_name.as_deref(), c.provider_id.as_deref()]
                    .into_iter()
                    .flatten()
                    .map(move |k| (k, c))
            })
            .collect();
        let leaving = super::moving::leaving_nodes(snap);
        for node in &snap.nodes {
            names.insert(&node.name);
            if let Some(provider) = node.provider_id.as_deref() {
                names.insert(provider);
            }
            // A node rebooting for repair is capacity that comes back, as Karpenter takes it:
            // its fence and its reboot's not-ready spell neither stall nor taint it here.
            let rebooting = node.taints.iter().any(|t| t.key == TAINT_REBOOTING);
            let stalled = !node.ready
                && !rebooting
                && (overdue.contains(node.name.as_str())
                    || node
                        .provider_id
                        .as_deref()
                        .is_some_and(|p| overdue.contains(p)));
            if node.unschedulable || stalled || leaving.contains(node.name.as_str()) {
                continue;
            }
            let mut labels = node.labels.clone();
            labels
                .entry(HOSTNAME.to_string())
                .or_insert_with(|| node.name.clone());
            self.base_bins.push(Bin {
                name: node.name.clone(),
                pool: None,
                inflight: false,
                reqs: Requirements::from_labels(&labels),
                taints: node
                    .taints
                    .iter()
                    .filter(|t| t.key != TAINT_REBOOTING)
                    .filter(|t| {
                        let initialized = !rebooting
                            && !starting.contains(node.name.as_str())
                            && !node
                                .provider_id
                                .as_deref()
                                .is_some_and(|p| starting.contains(p));
                        initialized || !is_ephemeral_taint(&t.key)
                    })
                    .cloned()
                    .collect(),
                used: Resources::default(),
                max_usable: self.node_allocatable(node, &starting_claims),
                options: Vec::new(),
                ports: Vec::new(),
                volumes: Vec::new(),
                volume_limits: node.volume_limits.clone(),
                pods: Vec::new(),
                reserved: Resources::default(),
                limit: None,
            });
        }
        for claim in &snap.nodeclaims {
            // A node that joined before its claim was registered is found by provider id: it is
            // the claim's capacity, already counted above.
            let has_node = [claim.node_name.as_deref(), claim.provider_id.as_deref()]
                .into_iter()
                .flatten()
                .any(|n| names.contains(n));
            if has_node || claim.deleting {
                continue;
            }
            let Some(allocatable) = self.claim_allocatable(claim) else {
                continue;
            };
            let mut reqs = claim.requirements.clone();
            for (k, v) in &claim.labels {
                reqs.add(Requirement::single(k, v));
            }
            reqs.add(Requirement::single(HOSTNAME, &claim.name));
            self.base_bins.push(Bin {
                name: claim.name.clone(),
                pool: None,
                inflight: true,
                reqs,
                taints: claim.taints.clone(),
                used: Resources::default(),
                max_usable: allocatable,
                options: Vec::new(),
                ports: Vec::new(),
                volumes: Vec::new(),
                volume_limits: Default::default(),
                pods: Vec::new(),
                reserved: Resources::default(),
                limit: None,
            });
        }
    }

    pub(crate) fn build_classes(&mut self) {
        let snap = self.snapshot;
        let mut by_shape: HashMap<String, usize> = HashMap::new();
        let mut compat_cache: HashMap<(Requirements, usize), Option<std::rc::Rc<Bits>>> =
            HashMap::new();
        let mut topo = Topology::default();
        // Inverse groups from bound pods' anti-affinity terms.
        for pod in snap
            .pods
            .iter()
            .filter(|p| p.node_name.is_some() && !p.terminal)
        {
            for term in &pod.anti_affinity {
                topo.intern(inverse_key(term), |k| self.universe(k));
            }
        }
        let pending = self.pending.clone();
        for &i in &pending {
            let pod = &snap.pods[i];
            let shape = shape_key(pod);
            if let Some(c) = by_shape.get(&shape) {
                self.class_of.insert(i, *c);
                continue;
            }
            let variants = relaxations(pod)
                .into_iter()
                .map(|(reqs, spreads, aff, anti)| {
                    let pools = (0..self.pools.len())
                        .map(|p| {
                            // A static pool launches for its replicas, never for pods.
                            if self.pools[p].pool.replicas.is_some()
                                || tolerates_all(&pod.tolerations, &self.pools[p].pool.taints)
                                    .is_some()
                            {
                                return None;
                            }
                            compat_cache
                                .entry((reqs.clone(), p))
                                .or_insert_with(|| self.pool_compat(p, &reqs).map(std::rc::Rc::new))
                                .clone()
                        })
                        .collect();
                    let mut owned = Vec::new();
                    let mut owner_of = Vec::new();
                    for s in &spreads {
                        let g = topo.intern(spread_key(pod, s, &reqs), |k| self.universe(k));
                        owned.push((g, s.selector.matches_labels(&pod.labels)));
                    }
                    for (term, kind) in aff
                        .iter()
                        .map(|t| (t, Kind::Affinity))
                        .chain(anti.iter().map(|t| (t, Kind::Anti)))
                    {
                        let self_match = term.selects(&pod.namespace, &pod.labels);
                        let is_anti = kind == Kind::Anti;
                        let key = GroupKey {
                            key: term.topology_key.clone(),
                            kind,
                            inverse: false,
                            namespaces: term.namespaces.clone(),
                            selector: term.selector.clone(),
                            owner_reqs: Requirements::new(),
                            node_filter: Vec::new(),
                            tolerations: None,
                        };
                        owned.push((topo.intern(key, |k| self.universe(k)), self_match));
                        // Only a required term keeps other pods away once this one is placed: a
                        // preferred one, read as required on the strictest rung, binds this pod
                        // alone, as kube-scheduler and Karpenter hold it.
                        if is_anti && pod.anti_affinity.contains(term) {
                            owner_of.push(topo.intern(inverse_key(term), |k| self.universe(k)));
                        }
                    }
                    Variant {
                        reqs,
                        owned,
                        owner_of,
                        pools,
                    }
                })
                .collect();
            let c = self.classes.len();
            self.classes.push(Class {
                variants,
                member_of: Vec::new(),
                repelled_by: Vec::new(),
            });
            by_shape.insert(shape, c);
            self.class_of.insert(i, c);
        }
        // Membership needs every group to exist first.
        let mut first_pod: BTreeMap<usize, usize> = BTreeMap::new();
        for &i in &pending {
            first_pod.entry(self.class_of[&i]).or_insert(i);
        }
        for (c, i) in first_pod {
            let pod = &snap.pods[i];
            let (member_of, repelled_by) = memberships(&topo, pod);
            self.classes[c].member_of = member_of;
            self.classes[c].repelled_by = repelled_by;
        }
        self.base_topology = topo;
    }

    pub(crate) fn record_bound_pods(&mut self) {
        let snap = self.snapshot;
        let bin_of: HashMap<String, usize> = self
            .base_bins
            .iter()
            .enumerate()
            .filter(|(_, b)| !b.inflight)
            .map(|(i, b)| (b.name.clone(), i))
            .collect();
        let nodes: HashMap<&str, (&BTreeMap<String, String>, &[Taint])> = snap
            .nodes
            .iter()
            .map(|n| (n.name.as_str(), (&n.labels, n.taints.as_slice())))
            .collect();
        let filtered = self
            .base_topology
            .groups
            .iter()
            .any(|g| !g.id.node_filter.is_empty() || g.id.tolerations.is_some());
        let mut node_reqs: HashMap<&str, Requirements> = HashMap::new();
        for pod in snap.pods.iter().filter(|p| !p.terminal) {
            let Some(node) = pod.node_name.as_deref() else {
                continue;
            };
            if let Some(&b) = bin_of.get(node) {
                self.base_bins[b].used.add(&pod.requests);
                self.base_bins[b]
                    .ports
                    .extend(pod.host_ports.iter().cloned());
                self.base_bins[b].mount(pod);
            }
            let (member_of, _) = memberships(&self.base_topology, pod);
            let mut owned: Vec<usize> = Vec::new();
            for term in &pod.anti_affinity {
                let key = inverse_key(term);
                if let Some(g) = self.base_topology.groups.iter().position(|g| g.id == key) {
                    owned.push(g);
                }
            }
            for g in member_of.into_iter().chain(owned) {
                let group = &mut self.base_topology.groups[g];
                if filtered {
                    let Some((labels, taints)) = nodes.get(node) else {
                        continue;
                    };
                    let reqs = node_reqs
                        .entry(node)
                        .or_insert_with(|| Requirements::from_labels(*labels));
                    if !group.id.counts_on(reqs, taints, true) {
                        continue;
                    }
                }
                if group.is_hostname() {
                    if let Some(&b) = bin_of.get(node) {
                        group.record_host(b);
                    }
                } else if let Some(v) = nodes.get(node).and_then(|(l, _)| l.get(&group.id.key)) {
                    group.record_value(v);
                }
            }
        }
    }

    /// Domains a spread may use: values new nodes of compatible pools can take, plus existing
    /// nodes'; with a spread honouring taints, only of pools and nodes whose taints the owner
    /// tolerates.
    pub(crate) fn universe(&self, group: &GroupKey) -> BTreeSet<String> {
        let (key, owner) = (group.key.as_str(), &group.owner_reqs);
        let mut out = BTreeSet::new();
        for pool in &self.pools {
            if pool.base.compatible(owner).is_err() || !group.tolerates(&pool.pool.taints) {
                continue;
            }
            out.extend(pool.label_values(key));
        }
        for node in &self.snapshot.nodes {
            if let Some(v) = node.labels.get(key) {
                if Requirements::from_labels(&node.labels)
                    .compatible(owner)
                    .is_ok()
                    && group.tolerates(&node.taints)
                {
                    out.insert(v.clone());
                }
            }
        }
        if let Some(r) = owner.get(key) {
            out.retain(|v| r.has(v));
        }
        out
    }

    /// The instance types of pool `p` that node requirements `reqs` allow, or None if the pool
    /// is out. Taints and resource fit are checked per pod elsewhere.
    pub(crate) fn pool_compat(&self, p: usize, reqs: &Requirements) -> Option<Bits> {
        let pool = &self.pools[p];
        pool.base.compatible(reqs).ok()?;
        if super::verdict::names_a_host(reqs).is_some() {
            return None;
        }
        let joint = pool.base.intersection(reqs);
        let mut bits = vec![0u64; pool.types.len().div_ceil(64)];
        let mut any = false;
        for (i, t) in pool.types.iter().enumerate() {
            if t.requirements.intersects(reqs).is_ok() && t.cheapest_offering(&joint).is_some() {
                bits[i / 64] |= 1 << (i % 64);
                any = true;
            }
        }
        any.then_some(bits)
    }
}
