//! Explanations for pods that cannot be placed: one line naming the first unmet constraint of
//! the NodePool that came closest, in plain words; and, for `fleetwright explain`, the same
//! verdict for every NodePool, the cheapest types that would hold the pod, and where the
//! scheduler puts it.

use serde::Serialize;

use crate::catalog::Catalog;
use crate::labels::{RESOURCE_CPU, RESOURCE_MEMORY};
use crate::model::{tolerates_all, Pod, Snapshot};
use crate::requirements::Requirements;
use crate::resources::Resources;
use crate::scheduler::{schedule, within_limits, Ctx, PoolCtx, ScheduleOptions};

/// Why one pod goes where it goes, or nowhere.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodExplanation {
    /// `namespace/name`.
    pub pod: String,
    pub requests: Resources,
    /// Every NodePool, in weight order.
    pub nodepools: Vec<PoolVerdict>,
    /// The three cheapest offerings, over all compatible pools, of types that would hold the pod.
    pub cheapest: Vec<Quote>,
    /// The scheduler's answer: the node it is bound to or would go to, the NodeClaim it would
    /// launch, or the reason line of an unschedulable pod.
    pub placement: String,
}

/// One NodePool's verdict on the pod.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolVerdict {
    pub nodepool: String,
    /// Whether a new node of this pool could hold the pod, as far as the pod alone decides
    /// (topology with other pods is the scheduler's part).
    pub compatible: bool,
    /// The first unmet constraint when not compatible.
    pub reason: Option<String>,
    /// Its three cheapest offerings that would hold the pod.
    pub cheapest: Vec<Quote>,
}

/// An instance type offering with its hourly price.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Quote {
    pub instance_type: String,
    pub capacity_type: String,
    pub zone: String,
    /// USD per hour.
    pub price: f64,
}

/// Explains pod `key` (`namespace/name`) of the snapshot; None when there is no such pod.
pub fn explain_pod(snapshot: &Snapshot, catalog: &Catalog, key: &str) -> Option<PodExplanation> {
    let index = snapshot.pods.iter().position(|p| p.key() == key)?;
    let pod = &snapshot.pods[index];
    let ctx = Ctx::new(snapshot, catalog);
    let reqs = pod.strict_requirements();
    let nodepools: Vec<PoolVerdict> = ctx
        .pools
        .iter()
        .map(|pool| {
            let a = attempt(pool, pod, &reqs);
            let compatible = a.stage >= COMPATIBLE;
            PoolVerdict {
                nodepool: pool.pool.name.clone(),
                compatible,
                reason: (!compatible).then_some(a.reason),
                cheapest: if compatible {
                    quotes(pool, pod, &reqs)
                } else {
                    Vec::new()
                },
            }
        })
        .collect();
    let mut cheapest: Vec<Quote> = nodepools.iter().flat_map(|v| v.cheapest.clone()).collect();
    cheapest.sort_by(|a, b| {
        a.price
            .total_cmp(&b.price)
            .then_with(|| a.instance_type.cmp(&b.instance_type))
    });
    cheapest.dedup_by(|a, b| a.instance_type == b.instance_type);
    cheapest.truncate(3);
    Some(PodExplanation {
        pod: key.to_string(),
        requests: pod.requests.clone(),
        nodepools,
        cheapest,
        placement: placement(snapshot, catalog, pod),
    })
}

/// Where the scheduler puts the pod, in one line.
fn placement(snapshot: &Snapshot, catalog: &Catalog, pod: &Pod) -> String {
    if let Some(node) = &pod.node_name {
        return format!("bound to node {node}");
    }
    let key = pod.key();
    let plan = schedule(snapshot, catalog, &ScheduleOptions::default());
    if let Some(e) = plan.existing.iter().find(|e| e.pod == key) {
        return format!("fits on existing node or NodeClaim {}", e.node);
    }
    if let Some(c) = plan.nodeclaims.iter().find(|c| c.pods.contains(&key)) {
        let shown: Vec<&str> = c
            .instance_types
            .iter()
            .take(5)
            .map(String::as_str)
            .collect();
        return format!(
            "a new NodeClaim of nodepool {:?} with {} other pod(s): {} option(s) from ${:.4}/h [{}]",
            c.nodepool,
            c.pods.len() - 1,
            c.instance_types.len(),
            c.price,
            shown.join(" ")
        );
    }
    match plan.unschedulable.iter().find(|u| u.pod == key) {
        Some(u) => format!("unschedulable: {}", u.reason),
        None => "not pending: the scheduler leaves it where it is".to_string(),
    }
}

/// The pool's three cheapest offerings whose type holds the pod.
fn quotes(pool: &PoolCtx, pod: &Pod, reqs: &Requirements) -> Vec<Quote> {
    let joint = pool.base.intersection(reqs);
    let mut out: Vec<Quote> = (0..pool.types.len())
        .filter(|&t| pod.requests.fits_in(&pool.usable[t]))
        .filter(|&t| pool.types[t].requirements.intersects(reqs).is_ok())
        .filter_map(|t| {
            let o = pool.types[t].cheapest_offering(&joint)?;
            Some(Quote {
                instance_type: pool.types[t].name.clone(),
                capacity_type: o.capacity_type.clone(),
                zone: o.zone.clone(),
                price: o.price,
            })
        })
        .collect();
    out.sort_by(|a, b| {
        a.price
            .total_cmp(&b.price)
            .then_with(|| a.instance_type.cmp(&b.instance_type))
    });
    out.truncate(3);
    out
}

/// The stage an attempt reaches when nothing about the pod alone rules the pool out.
const COMPATIBLE: u8 = 6;

/// How far a pod got with one pool, and what stopped it.
struct Attempt {
    stage: u8,
    reason: String,
}

/// The reason line for pending pod `pod_index`.
pub(crate) fn reason(ctx: &Ctx<'_>, pod_index: usize) -> String {
    let pod = &ctx.snapshot.pods[pod_index];
    if ctx.pools.is_empty() {
        return "no nodepool can launch nodes (none exist or all are being deleted)".to_string();
    }
    let reqs = pod.strict_requirements();
    let best = ctx
        .pools
        .iter()
        .map(|pool| attempt(pool, pod, &reqs))
        .enumerate()
        .max_by(|(ia, a), (ib, b)| a.stage.cmp(&b.stage).then(ib.cmp(ia)))
        .map(|(_, a)| a);
    match best {
        Some(a) => a.reason,
        None => "no nodepool matched".to_string(),
    }
}

fn attempt(pool: &PoolCtx, pod: &Pod, reqs: &Requirements) -> Attempt {
    let name = &pool.pool.name;
    if let Some(taint) = tolerates_all(&pod.tolerations, &pool.pool.taints) {
        return Attempt {
            stage: 0,
            reason: format!("nodepool {name:?} has taint {taint} that the pod does not tolerate"),
        };
    }
    if let Err(e) = pool.base.compatible(reqs) {
        return Attempt {
            stage: 1,
            reason: format!("nodepool {name:?}: pod {e}"),
        };
    }
    let joint = pool.base.intersection(reqs);
    let allowed: Vec<usize> = (0..pool.types.len())
        .filter(|&t| {
            pool.types[t].requirements.intersects(reqs).is_ok()
                && pool.types[t].cheapest_offering(&joint).is_some()
        })
        .collect();
    if allowed.is_empty() {
        return Attempt {
            stage: 2,
            reason: format!(
                "nodepool {name:?}: none of its {} instance types matches [{reqs}]",
                pool.types.len()
            ),
        };
    }
    if let Some(line) = resource_gap(pool, &allowed, &pod.requests) {
        return Attempt {
            stage: 3,
            reason: format!("{line} (nodepool {name:?})"),
        };
    }
    if let Some(remaining) = &pool.remaining {
        let fits_limit = allowed.iter().any(|&t| {
            pod.requests.fits_in(&pool.usable[t])
                && within_limits(&pool.types[t].capacity, remaining)
        });
        if !fits_limit || pool.nodes_left.is_some_and(|n| n <= 0) {
            let limits = pool.pool.limits.clone().unwrap_or_default();
            return Attempt {
                stage: 4,
                reason: format!("nodepool {name:?} would exceed its limits ({limits})"),
            };
        }
    }
    if let Some(port) = pod
        .host_ports
        .iter()
        .find(|hp| pool.ds_ports.iter().any(|d| d.conflicts(hp)))
    {
        return Attempt {
            stage: 5,
            reason: format!(
                "hostPort {}/{} is taken by a DaemonSet on every node of nodepool {name:?}",
                port.port, port.protocol
            ),
        };
    }
    let constraint = if !pod.anti_affinity.is_empty() {
        "pod anti-affinity"
    } else if !pod.affinity.is_empty() {
        "pod affinity"
    } else if !pod.spread.is_empty() {
        "topology spread"
    } else if !pod.host_ports.is_empty() {
        "host ports"
    } else {
        "limits or capacity"
    };
    Attempt {
        stage: 6,
        reason: format!(
            "{constraint} cannot be satisfied by existing nodes or new nodes of nodepool {name:?}"
        ),
    }
}

/// Names the first requested resource that no allowed type provides enough of.
fn resource_gap(pool: &PoolCtx, allowed: &[usize], requests: &Resources) -> Option<String> {
    if allowed.iter().any(|&t| requests.fits_in(&pool.usable[t])) {
        return None;
    }
    let mut names: Vec<&str> = requests.extended.keys().map(String::as_str).collect();
    names.extend([RESOURCE_CPU, RESOURCE_MEMORY, "ephemeral-storage", "pods"]);
    for name in names {
        let want = requests.get(name);
        if want <= 0 {
            continue;
        }
        let best = allowed
            .iter()
            .max_by_key(|&&t| pool.usable[t].get(name))
            .copied()?;
        let have = pool.usable[best].get(name);
        if have >= want {
            continue;
        }
        let list = type_list(pool, allowed);
        let provide = if have <= 0 {
            "provide none".to_string()
        } else {
            format!(
                "provide at most {} ({})",
                pool.usable[best].format_one(name),
                pool.types[best].name
            )
        };
        let what = if allowed.len() == 1 { "type" } else { "types" };
        return Some(format!(
            "requests {name}={}; the {} allowed {what} ({list}) {provide}",
            requests.format_one(name),
            allowed.len()
        ));
    }
    Some(format!(
        "requests {requests} together; no single allowed type fits them all"
    ))
}

fn type_list(pool: &PoolCtx, allowed: &[usize]) -> String {
    let mut names: Vec<&str> = allowed
        .iter()
        .map(|&t| pool.types[t].name.as_str())
        .collect();
    names.sort();
    if names.len() > 6 {
        let more = names.len() - 5;
        names.truncate(5);
        return format!("{}, … {more} more", names.join(", "));
    }
    names.join(", ")
}
