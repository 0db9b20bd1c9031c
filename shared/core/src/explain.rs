//! `fleetwright explain` for one pod: every NodePool's verdict (from the scheduler's
//! [`crate::scheduler::verdict`]), the cheapest types that would hold the pod, and where the
//! scheduler puts it.

use serde::Serialize;

use crate::catalog::Catalog;
use crate::model::{Pod, Snapshot};
use crate::requirements::Requirements;
use crate::resources::Resources;
use crate::scheduler::verdict::{attempt, COMPATIBLE};
use crate::scheduler::{schedule, Ctx, PoolCtx, ScheduleOptions};

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
    #[serde(serialize_with = "to_micro_dollars")]
    pub price: f64,
}

/// A price to six decimals: a price computed from others carries float noise
/// (0.014559999999999998) that nobody should have to read.
fn to_micro_dollars<S: serde::Serializer>(price: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64((price * 1e6).round() / 1e6)
}

/// Explains pod `key` (`namespace/name`) of the snapshot at `now` (seconds since the Unix
/// epoch); None when there is no such pod.
pub fn explain_pod(
    snapshot: &Snapshot,
    catalog: &Catalog,
    key: &str,
    now: i64,
) -> Option<PodExplanation> {
    let index = snapshot.pods.iter().position(|p| p.key() == key)?;
    let pod = &snapshot.pods[index];
    let ctx = Ctx::new(snapshot, catalog, now);
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
