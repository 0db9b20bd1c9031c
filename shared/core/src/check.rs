//! An independent checker of placement plans: given the cluster, the instance types and a plan
//! as NodeClaims (pool, pods, instance-type options, zones, capacity types), it lists every
//! constraint the plan breaks. It shares no code with the scheduler: label matching, resource
//! sums and topology counts are written here again from the Kubernetes rules, so that a bug in
//! one is not hidden by the same bug in the other. It checks any scheduler's plan (Fleetwright's
//! and Karpenter's, in `fleetwright bench --peer karpenter`).
//!
//! A claim is checked for every instance type it may launch as, and for every zone and capacity
//! type it leaves open: a constraint holds only if it holds whatever CreateFleet picks.

use std::collections::{BTreeMap, BTreeSet};

use crate::catalog::InstanceType;
use crate::labels::{
    CAPACITY_TYPE, HOSTNAME, NODEPOOL, RESERVATION_ID, RESERVATION_INTERRUPTIBLE, RESERVATION_TYPE,
    ZONE,
};
use crate::model::{
    InclusionPolicy, NodePool, Pod, PodAffinityTerm, Snapshot, SpreadConstraint, Taint, TaintEffect,
};
use crate::plan::Plan;
use crate::requirements::{Operator, Requirement, Requirements};
use crate::resources::Resources;

/// One planned NodeClaim, as any scheduler describes it.
#[derive(Clone, Debug, Default)]
pub struct Claim {
    pub nodepool: String,
    /// `namespace/name`.
    pub pods: Vec<String>,
    pub instance_types: Vec<String>,
    /// Empty: any zone the options are offered in.
    pub zones: Vec<String>,
    /// Empty: any capacity type the options are offered as.
    pub capacity_types: Vec<String>,
}

impl Claim {
    /// A plan's new NodeClaims, as claims to check.
    pub fn of_plan(plan: &Plan) -> Vec<Claim> {
        plan.nodeclaims
            .iter()
            .map(|n| Claim {
                nodepool: n.nodepool.clone(),
                pods: n.pods.clone(),
                instance_types: n.instance_types.clone(),
                zones: n.zones.clone(),
                capacity_types: n.capacity_types.clone(),
            })
            .collect()
    }
}

/// A label's possible values on a node: fixed, one of several (zone, capacity type), or absent.
pub type Labels = BTreeMap<String, BTreeSet<String>>;

/// The labels a node of type `t` from `pool` has when bought in `zone` as `capacity_type`, or
/// None when the pool's requirements do not hold for it. The same rules the checker applies to
/// every option of a claim, for other independent tools (the constraint-aware LP bound).
pub fn offering_labels(
    t: &InstanceType,
    pool: &NodePool,
    zone: &str,
    capacity_type: &str,
) -> Option<Labels> {
    let mut open = Labels::new();
    open.insert(ZONE.into(), BTreeSet::from([zone.to_string()]));
    open.insert(
        CAPACITY_TYPE.into(),
        BTreeSet::from([capacity_type.to_string()]),
    );
    let labels = node_labels(t, pool, &open);
    pool.requirements
        .iter()
        .all(|r| holds(r, &labels))
        .then_some(labels)
}

/// Whether `pod` may run on a node of `pool` with these labels: taints tolerated,
/// nodeSelector and required node affinity holding.
pub fn pod_fits_node(pod: &Pod, pool: &NodePool, labels: &Labels) -> bool {
    pod_mismatch(pod, pool, labels).is_none()
}

/// Every broken constraint, one line each. Pods placed on no claim are not checked.
pub fn violations(
    snapshot: &Snapshot,
    types: &BTreeMap<String, InstanceType>,
    claims: &[Claim],
) -> Vec<String> {
    let pods: BTreeMap<String, &Pod> = snapshot.pods.iter().map(|p| (p.key(), p)).collect();
    let mut out = Vec::new();
    let mut placed: BTreeMap<String, usize> = BTreeMap::new();
    for (i, claim) in claims.iter().enumerate() {
        for key in &claim.pods {
            if placed.insert(key.clone(), i).is_some() {
                out.push(format!("pod {key} is placed twice"));
            }
        }
        let Some(pool) = snapshot.nodepools.iter().find(|p| p.name == claim.nodepool) else {
            out.push(format!("claim {i}: no NodePool {}", claim.nodepool));
            continue;
        };
        let on: Vec<&Pod> = claim
            .pods
            .iter()
            .filter_map(|k| pods.get(k).copied())
            .collect();
        check_claim(i, claim, pool, &on, snapshot, types, &mut out);
    }
    let nodes: Vec<Labels> = claims
        .iter()
        .enumerate()
        .map(|(i, c)| domains(i, c, types))
        .collect();
    check_topology(snapshot, types, &nodes, &placed, &pods, &mut out);
    out
}

/// What every option of the claim would be labelled: zone and capacity type as sets.
fn domains(i: usize, claim: &Claim, types: &BTreeMap<String, InstanceType>) -> Labels {
    let mut zones = BTreeSet::new();
    let mut capacity = BTreeSet::new();
    let mut reservations: Vec<&crate::catalog::Reservation> = Vec::new();
    let mut outside_reservations = false;
    for t in claim.instance_types.iter().filter_map(|n| types.get(n)) {
        for o in t.offerings.iter().filter(|o| o.available) {
            let zone_ok = claim.zones.is_empty() || claim.zones.contains(&o.zone);
            let ct_ok =
                claim.capacity_types.is_empty() || claim.capacity_types.contains(&o.capacity_type);
            if zone_ok && ct_ok {
                zones.insert(o.zone.clone());
                capacity.insert(o.capacity_type.clone());
                match &o.reservation {
                    Some(r) => reservations.push(r),
                    None => outside_reservations = true,
                }
            }
        }
    }
    let mut labels = Labels::new();
    labels.insert(ZONE.into(), zones);
    labels.insert(CAPACITY_TYPE.into(), capacity);
    // The reservation labels are certain only when every option is a reservation's.
    if !outside_reservations && !reservations.is_empty() {
        let set = |f: &dyn Fn(&crate::catalog::Reservation) -> String| {
            reservations.iter().map(|r| f(r)).collect::<BTreeSet<_>>()
        };
        labels.insert(RESERVATION_ID.into(), set(&|r| r.id.clone()));
        labels.insert(RESERVATION_TYPE.into(), set(&|r| r.kind.clone()));
        labels.insert(
            RESERVATION_INTERRUPTIBLE.into(),
            set(&|r| r.interruptible.to_string()),
        );
    }
    labels.insert(HOSTNAME.into(), BTreeSet::from([format!("claim-{i}")]));
    labels
}

fn check_claim(
    i: usize,
    claim: &Claim,
    pool: &NodePool,
    pods: &[&Pod],
    snapshot: &Snapshot,
    types: &BTreeMap<String, InstanceType>,
    out: &mut Vec<String>,
) {
    if claim.instance_types.is_empty() {
        out.push(format!("claim {i}: no instance type options"));
    }
    let open = domains(i, claim, types);
    if open[ZONE].is_empty() {
        out.push(format!(
            "claim {i}: no option is offered in an allowed zone and capacity type"
        ));
    }
    for name in &claim.instance_types {
        let Some(t) = types.get(name) else {
            out.push(format!("claim {i}: unknown instance type {name}"));
            continue;
        };
        let labels = node_labels(t, pool, &open);
        if let Some(r) = pool.requirements.iter().find(|r| !holds(r, &labels)) {
            out.push(format!(
                "claim {i} ({name}): breaks its NodePool's requirement on {}",
                r.key
            ));
        }
        let mut used = Resources::default();
        for p in pods {
            if let Some(why) = pod_mismatch(p, pool, &labels) {
                out.push(format!("claim {i} ({name}): pod {}: {why}", p.key()));
            }
            used.add(&p.requests);
        }
        for ds in &snapshot.daemonsets {
            if pod_mismatch(&ds.pod, pool, &labels).is_none() {
                used.add(&ds.pod.requests);
            }
        }
        if let Some(over) = exceeded(&used, &t.allocatable) {
            out.push(format!(
                "claim {i} ({name}): its pods and DaemonSets ask for more {over} than it has"
            ));
        }
    }
}

/// The labels a node of this type from this pool has (zone and capacity type as sets).
fn node_labels(t: &InstanceType, pool: &NodePool, open: &Labels) -> Labels {
    let mut labels = open.clone();
    for r in t.requirements.iter() {
        if r.operator() == Operator::In && r.values().len() == 1 && !labels.contains_key(&r.key) {
            labels.insert(r.key.clone(), r.values().clone());
        }
    }
    for (k, v) in &pool.labels {
        labels.insert(k.clone(), BTreeSet::from([v.clone()]));
    }
    for r in pool.requirements.iter() {
        if r.operator() == Operator::In && r.values().len() == 1 && !labels.contains_key(&r.key) {
            labels.insert(r.key.clone(), r.values().clone());
        }
    }
    labels.insert(NODEPOOL.into(), BTreeSet::from([pool.name.clone()]));
    labels
}

/// Why the pod may not run on such a node, if it may not.
fn pod_mismatch(p: &Pod, pool: &NodePool, labels: &Labels) -> Option<String> {
    for t in &pool.taints {
        let hard = matches!(t.effect, TaintEffect::NoSchedule | TaintEffect::NoExecute);
        if hard && !p.tolerations.iter().any(|tol| tolerates(tol, t)) {
            return Some(format!("does not tolerate the taint {}", t.key));
        }
    }
    for (k, v) in &p.node_selector {
        let ok = labels
            .get(k)
            .is_some_and(|s| !s.is_empty() && s.iter().all(|x| x == v));
        if !ok {
            return Some(format!("nodeSelector {k}={v} does not hold"));
        }
    }
    let term_holds = |term: &Requirements| term.iter().all(|r| holds(r, labels));
    if !p.required_terms.is_empty() && !p.required_terms.iter().any(term_holds) {
        return Some("no required node affinity term holds".into());
    }
    None
}

fn tolerates(tol: &crate::model::Toleration, taint: &crate::model::Taint) -> bool {
    let effect_ok = tol.effect.is_none_or(|e| e == taint.effect);
    let key_ok = match &tol.key {
        None => tol.exists,
        Some(k) => k == &taint.key && (tol.exists || tol.value == taint.value),
    };
    effect_ok && key_ok
}

/// Whether a requirement holds for every value the label may take on the node.
fn holds(r: &Requirement, labels: &Labels) -> bool {
    let values = labels.get(&r.key).filter(|s| !s.is_empty());
    let number = |v: &String| v.parse::<i64>().ok();
    if let Some(gt) = r.greater_than() {
        return values.is_some_and(|s| s.iter().all(|v| number(v).is_some_and(|n| n > gt)));
    }
    if let Some(lt) = r.less_than() {
        return values.is_some_and(|s| s.iter().all(|v| number(v).is_some_and(|n| n < lt)));
    }
    match r.operator() {
        Operator::In => values.is_some_and(|s| s.is_subset(r.values())),
        Operator::NotIn => values.is_none_or(|s| s.is_disjoint(r.values())),
        Operator::Exists => values.is_some(),
        Operator::DoesNotExist => values.is_none(),
        Operator::Gt | Operator::Lt | Operator::Gte | Operator::Lte => false,
    }
}

fn exceeded(used: &Resources, allocatable: &Resources) -> Option<String> {
    let names: BTreeSet<&str> = used.names().collect();
    names
        .into_iter()
        .find(|n| used.get(n) > allocatable.get(n))
        .map(str::to_string)
}

/// Required pod (anti-)affinity and hard topology spread, over the whole plan.
fn check_topology(
    snapshot: &Snapshot,
    types: &BTreeMap<String, InstanceType>,
    nodes: &[Labels],
    placed: &BTreeMap<String, usize>,
    pods: &BTreeMap<String, &Pod>,
    out: &mut Vec<String>,
) {
    let placement = Placement { placed, pods };
    for (key, &c) in placed {
        let Some(p) = pods.get(key) else { continue };
        for term in &p.anti_affinity {
            let ns = |n: &str| term.namespaces.contains(n);
            for (other, oc) in placement.members(&ns, &term.selector) {
                if other != key && may_share(&nodes[c], &nodes[oc], &term.topology_key) {
                    out.push(format!(
                        "pods {key} and {other} may share a {} against anti-affinity",
                        term.topology_key
                    ));
                }
            }
        }
        for term in &p.affinity {
            if !affinity_met(key, c, term, nodes, &placement) {
                out.push(format!(
                    "pod {key}: no pod its affinity selects shares its {}",
                    term.topology_key
                ));
            }
        }
        for s in p.spread.iter().filter(|s| s.hard) {
            let group = placement.members(&|n: &str| n == p.namespace, &s.selector);
            if let Some(why) = skew(c, s, p, &group, pods, nodes, snapshot, types) {
                out.push(format!("pod {key}: spread over {}: {why}", s.topology_key));
            }
        }
    }
}

/// Where each placed pod is.
struct Placement<'a> {
    placed: &'a BTreeMap<String, usize>,
    pods: &'a BTreeMap<String, &'a Pod>,
}

impl<'a> Placement<'a> {
    /// The placed pods a term selects (in the namespaces it looks at), with their claims.
    fn members(
        &self,
        namespaces: &dyn Fn(&str) -> bool,
        selector: &Requirements,
    ) -> Vec<(&'a String, usize)> {
        self.placed
            .iter()
            .filter(|(k, _)| {
                self.pods
                    .get(*k)
                    .is_some_and(|q| namespaces(&q.namespace) && selects(selector, &q.labels))
            })
            .map(|(k, &c)| (k, c))
            .collect()
    }
}

fn selects(selector: &Requirements, labels: &BTreeMap<String, String>) -> bool {
    let as_sets: Labels = labels
        .iter()
        .map(|(k, v)| (k.clone(), BTreeSet::from([v.clone()])))
        .collect();
    selector.iter().all(|r| holds(r, &as_sets))
}

/// Whether two nodes may be in the same domain of `key`.
fn may_share(a: &Labels, b: &Labels, key: &str) -> bool {
    match (a.get(key), b.get(key)) {
        (Some(x), Some(y)) => !x.is_disjoint(y),
        _ => false,
    }
}

/// Whether the node is pinned to one domain of `key`, and which.
fn domain(node: &Labels, key: &str) -> Option<String> {
    node.get(key)
        .filter(|s| s.len() == 1)
        .and_then(|s| s.first().cloned())
}

fn affinity_met(
    key: &str,
    c: usize,
    term: &PodAffinityTerm,
    nodes: &[Labels],
    placement: &Placement,
) -> bool {
    let Some(mine) = domain(&nodes[c], &term.topology_key) else {
        return false;
    };
    let ns = |n: &str| term.namespaces.contains(n);
    let group = placement.members(&ns, &term.selector);
    // The first pod of a group that selects itself may start the domain.
    let selects_itself = group.iter().any(|(k, _)| k.as_str() == key);
    group.iter().any(|(k, oc)| {
        (k.as_str() != key || selects_itself)
            && domain(&nodes[*oc], &term.topology_key).as_deref() == Some(mine.as_str())
    })
}

/// The spread's skew where the pod landed, if over `max_skew`, or why it cannot be known (a
/// claim open to several zones).
///
/// Kubernetes checks a spread when it binds each pod, so a final placement shows the constraint
/// only for a group whose every member carries it and matches it (a Deployment spread over its
/// own label): then no binding order can end with a skew over `max_skew`. Other groups are left
/// alone. Zones count over every zone the pod could run in (empty ones too, as Karpenter counts
/// them); a new node is always a possible host, so the least count per host is 0.
#[allow(clippy::too_many_arguments)]
fn skew(
    c: usize,
    spread: &SpreadConstraint,
    pod: &Pod,
    group: &[(&String, usize)],
    pods: &BTreeMap<String, &Pod>,
    nodes: &[Labels],
    snapshot: &Snapshot,
    types: &BTreeMap<String, InstanceType>,
) -> Option<String> {
    let same =
        |q: &&Pod| q.spread.iter().any(|t| t == spread) && selects(&spread.selector, &q.labels);
    if !group.iter().all(|(k, _)| pods.get(*k).is_some_and(same)) {
        return None;
    }
    let key = spread.topology_key.as_str();
    let mut counts: BTreeMap<String, i64> = BTreeMap::new();
    if key == ZONE {
        for z in possible_zones(pod, spread, snapshot, types) {
            counts.insert(z, 0);
        }
    } else if key != HOSTNAME {
        return None;
    }
    for (_, oc) in group {
        match domain(&nodes[*oc], key) {
            Some(d) => *counts.entry(d).or_insert(0) += 1,
            None => return Some(format!("claim {oc} is open to several zones")),
        }
    }
    let mine = domain(&nodes[c], key)?;
    let min = if key == HOSTNAME {
        0
    } else {
        counts.values().copied().min().unwrap_or(0)
    };
    let here = counts.get(&mine).copied().unwrap_or(0);
    (here - min > i64::from(spread.max_skew))
        .then(|| format!("{here} in {mine} against a minimum of {min}"))
}

/// The zones a spread counts: where a pool can launch (some instance type the pool allows is
/// offered there), and where a node stands, each where the pod's zone selector allows. A zone
/// where no pool can launch and no node stands never holds a node, so kube-scheduler never
/// sees it. (Karpenter counts the zones of every type its NodeClass offers, whatever the pool
/// allows, and so holds such a spread back.) Pools and nodes whose taints the pod does not
/// tolerate count only under `nodeTaintsPolicy: Ignore`, the default; nodes count under
/// `nodeAffinityPolicy: Honor` only where they carry the pod's nodeSelector.
fn possible_zones(
    pod: &Pod,
    spread: &SpreadConstraint,
    snapshot: &Snapshot,
    types: &BTreeMap<String, InstanceType>,
) -> BTreeSet<String> {
    let offered = |pool: &NodePool| -> BTreeSet<String> {
        types
            .values()
            .filter(|t| t.requirements.intersects(&pool.requirements).is_ok())
            .flat_map(|t| {
                t.offerings
                    .iter()
                    .filter(|o| o.available)
                    .map(|o| o.zone.clone())
            })
            .collect()
    };
    let tolerated = |taints: &[Taint]| {
        spread.node_taints_policy == InclusionPolicy::Ignore
            || taints.iter().all(|t| {
                t.effect == TaintEffect::PreferNoSchedule
                    || pod.tolerations.iter().any(|tol| tolerates(tol, t))
            })
    };
    let selected = |z: &String| pod.node_selector.get(ZONE).is_none_or(|want| want == z);
    let from_pools = snapshot
        .nodepools
        .iter()
        .filter(|pool| tolerated(&pool.taints))
        .flat_map(|pool| {
            offered(pool).into_iter().filter(move |z| {
                let labels = Labels::from([(ZONE.to_string(), BTreeSet::from([z.clone()]))]);
                pool.requirements
                    .get(ZONE)
                    .is_none_or(|r| holds(r, &labels))
            })
        });
    let from_nodes = snapshot
        .nodes
        .iter()
        .filter(|node| tolerated(&node.taints))
        .filter(|node| {
            spread.node_affinity_policy == InclusionPolicy::Ignore
                || pod
                    .node_selector
                    .iter()
                    .all(|(k, v)| node.labels.get(k) == Some(v))
        })
        .filter_map(|node| node.labels.get(ZONE).cloned());
    let honour = spread.node_affinity_policy == InclusionPolicy::Honor;
    from_pools
        .chain(from_nodes)
        .filter(|z| !honour || selected(z))
        .collect()
}
