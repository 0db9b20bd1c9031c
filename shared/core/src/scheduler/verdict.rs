//! Why a pod cannot be placed: how far it gets with each NodePool (taints, requirements,
//! instance types, resources, limits, host ports, then the scheduling constraints), and the one
//! line naming the first unmet constraint of the NodePool that came closest. The scheduler's
//! output and `fleetwright explain` both read it.

use crate::labels::{RESOURCE_CPU, RESOURCE_MEMORY};
use crate::model::{tolerates_all, Pod};
use crate::requirements::Requirements;
use crate::resources::Resources;
use crate::scheduler::{within_limits, Ctx, PoolCtx};

/// The stage an attempt reaches when nothing about the pod alone rules the pool out.
pub(crate) const COMPATIBLE: u8 = 6;

/// How far a pod got with one pool, and what stopped it.
pub(crate) struct Attempt {
    pub(crate) stage: u8,
    pub(crate) reason: String,
}

/// What a plan's own NodeClaims left of each pool's limits: resources and nodes.
pub(crate) type LimitsLeft<'r> = (&'r [Option<Resources>], &'r [Option<i64>]);

/// The reason line for pending pod `pod_index`, given what the plan left of the limits.
pub(crate) fn reason(ctx: &Ctx<'_>, pod_index: usize, left: LimitsLeft<'_>) -> String {
    let pod = &ctx.snapshot.pods[pod_index];
    if ctx.pools.is_empty() {
        return "no nodepool can launch nodes (none exists, none could be read, or all are being deleted)".to_string();
    }
    let reqs = pod.strict_requirements();
    let best = ctx
        .pools
        .iter()
        .enumerate()
        .map(|(p, pool)| {
            let a = attempt(pool, pod, &reqs);
            match (a.stage, left.0.get(p), left.1.get(p)) {
                (6, Some(remaining), Some(nodes)) => {
                    limited(pool, pod, &reqs, remaining, *nodes).unwrap_or(a)
                }
                _ => a,
            }
        })
        .enumerate()
        .max_by(|(ia, a), (ib, b)| a.stage.cmp(&b.stage).then(ib.cmp(ia)))
        .map(|(_, a)| a);
    match best {
        Some(a) => a.reason,
        None => "no nodepool matched".to_string(),
    }
}

/// The hostnames a pod's node selection names, when it names some (`kubernetes.io/hostname`
/// `In`, or `DoesNotExist`, which no node meets): no new node can take such a pod, since a
/// node's hostname is known only once it has launched, as Karpenter gives each new NodeClaim a
/// placeholder hostname. Only existing nodes can.
pub(crate) fn names_a_host(reqs: &Requirements) -> Option<String> {
    let r = reqs.get(crate::labels::HOSTNAME)?;
    (!r.is_complement()).then(|| {
        let names: Vec<&str> = r.values().iter().map(String::as_str).collect();
        names.join(", ")
    })
}

pub(crate) fn attempt(pool: &PoolCtx, pod: &Pod, reqs: &Requirements) -> Attempt {
    let name = &pool.pool.name;
    if let Some(hosts) = names_a_host(reqs) {
        return Attempt {
            stage: 1,
            reason: format!(
                "nodepool {name:?}: pod requires kubernetes.io/hostname In [{hosts}], and a new node's hostname is not known before it launches"
            ),
        };
    }
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
    if let Some(empty) = &pool.empty {
        return Attempt {
            stage: 2,
            reason: format!("nodepool {name:?}: {empty}"),
        };
    }
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
    if let Some(key) = spread_without_domains(pool, pod) {
        return Attempt {
            stage: 5,
            reason: format!(
                "topology spread over {key}: no node of nodepool {name:?} would carry that label"
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

/// The limits as the plan's own NodeClaims left them, when they stop the pod: each NodeClaim
/// counts as the largest type it may launch as, so a plan can use a pool's limits up well
/// before its nodes are full.
fn limited(
    pool: &PoolCtx,
    pod: &Pod,
    reqs: &Requirements,
    remaining: &Option<Resources>,
    nodes_left: Option<i64>,
) -> Option<Attempt> {
    let joint = pool.base.intersection(reqs);
    let fits = (0..pool.types.len()).any(|t| {
        pool.types[t].requirements.intersects(reqs).is_ok()
            && pool.types[t].cheapest_offering(&joint).is_some()
            && pod.requests.fits_in(&pool.usable[t])
            && remaining
                .as_ref()
                .is_none_or(|r| within_limits(&pool.types[t].capacity, r))
    });
    if fits && nodes_left.is_none_or(|n| n > 0) {
        return None;
    }
    let limits = pool.pool.limits.clone().unwrap_or_default();
    Some(Attempt {
        stage: 6,
        reason: format!(
            "nodepool {:?} would exceed its limits ({limits}) with the NodeClaims this plan makes (each counted as the largest instance type it may launch as)",
            pool.pool.name
        ),
    })
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

/// The key of a hard topology spread that no node of the pool would be labelled with: the pool
/// neither sets nor requires it and none of its instance types has it (a spread over placement
/// group partitions in a class with no partition group). kube-scheduler counts only nodes with
/// every key a pod spreads over, so the pool can never take the pod.
fn spread_without_domains<'a>(pool: &PoolCtx, pod: &'a Pod) -> Option<&'a str> {
    pod.spread
        .iter()
        .filter(|s| s.hard && s.topology_key != crate::labels::HOSTNAME)
        .map(|s| s.topology_key.as_str())
        .find(|key| pool.base.get(key).is_none() && pool.label_values(key).is_empty())
}
