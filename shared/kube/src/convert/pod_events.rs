//! When each node last saw a pod come or go: Karpenter's `lastPodEventTime`, which a NodePool's
//! `consolidateAfter` counts from. A read sees when each pod was bound and when each one began
//! to leave, but a pod already gone leaves no trace; so each NodeClaim carries a record
//! ([`PODS_ANNOTATION`]) of the pods its node held at a read, the read's instant, and the last
//! pod event known then. A later read that finds a recorded pod missing takes its own instant (the
//! tick's) as the last pod event: at most one tick later than the pod left, and earlier only by
//! the seconds the tick took to read, for a pod that left while it read.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::crds::NodeClaim;
use crate::dump::ClusterDump;

/// The annotation holding a NodeClaim's record: `<count>-<hash>-<read>-<last>` (see
/// [`Record`]). One annotation, so that one write keeps it whole.
pub const PODS_ANNOTATION: &str = "fleetwright.io/pods";

/// The pods on one node, as a read sees them (DaemonSet pods aside, as Karpenter's pod events
/// leave them aside).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodePods {
    /// The pods staying (neither leaving nor finished), each with when it was bound.
    pub staying: Vec<(String, i64)>,
    /// The latest event of any of its pods, in seconds.
    pub latest: Option<i64>,
}

impl NodePods {
    /// The set of the pods staying.
    pub fn set(&self) -> PodSet {
        PodSet::of(self.staying.iter().map(|(k, _)| k.as_str()))
    }

    /// The set of the pods staying that were bound by `instant`: what a record made then would
    /// hold if no pod had gone since.
    fn set_by(&self, instant: i64) -> PodSet {
        let kept = self.staying.iter().filter(|(_, at)| *at <= instant);
        PodSet::of(kept.map(|(k, _)| k.as_str()))
    }
}

/// A set of pods, as a count and a hash of their keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PodSet {
    pub count: usize,
    pub hash: u64,
}

impl Default for PodSet {
    fn default() -> Self {
        PodSet::of(std::iter::empty::<&str>())
    }
}

impl PodSet {
    /// The set of these pod keys (in any order).
    pub fn of<'a>(keys: impl IntoIterator<Item = &'a str>) -> PodSet {
        let mut keys: Vec<&str> = keys.into_iter().collect();
        keys.sort_unstable();
        // FNV-1a: stable across builds and platforms, unlike the standard library's hasher.
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for key in &keys {
            for byte in key.bytes().chain(std::iter::once(b'\n')) {
                hash ^= u64::from(byte);
                hash = hash.wrapping_mul(0x0100_0000_01b3);
            }
        }
        PodSet {
            count: keys.len(),
            hash,
        }
    }
}

/// What a NodeClaim's record says: the pods its node held at the read made at `read` (seconds),
/// and its last pod event then (`last`, None when it had none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    pub set: PodSet,
    pub read: i64,
    pub last: Option<i64>,
}

impl Record {
    /// The annotation's value.
    pub fn text(&self) -> String {
        let s = self.set;
        let last = self.last.unwrap_or(0);
        format!("{}-{:016x}-{}-{last}", s.count, s.hash, self.read)
    }

    /// Parses the annotation's value; None when it is not one (a record then starts afresh).
    pub fn parse(text: &str) -> Option<Record> {
        let mut parts = text.split('-');
        let count = parts.next()?.parse().ok()?;
        let hash = u64::from_str_radix(parts.next()?, 16).ok()?;
        let read = parts.next()?.parse().ok()?;
        let last: i64 = parts.next()?.parse().ok()?;
        if parts.next().is_some() {
            return None;
        }
        Some(Record {
            set: PodSet { count, hash },
            read,
            last: (last > 0).then_some(last),
        })
    }
}

/// The pods of every node that has any, by node name.
pub fn pods_by_node(dump: &ClusterDump) -> BTreeMap<&str, NodePods> {
    let mut out: BTreeMap<&str, NodePods> = BTreeMap::new();
    for (node, meta, at, finished) in dump.pod_events() {
        if owned_by_daemonset(meta) {
            continue;
        }
        let pods = out.entry(node).or_default();
        pods.latest = Some(pods.latest.map_or(at, |l| l.max(at)));
        if meta.deletion_timestamp.is_none() && !finished {
            pods.staying.push((key(meta), at));
        }
    }
    out
}

/// A NodeClaim's node's last pod event, in seconds: the latest of its pods' own events, of what
/// its record and `status.lastPodEventTime` say, and of this read (`observed_at`) when a pod the
/// record holds is missing. None when nothing is known.
pub fn last_pod_event(
    claim: Option<&NodeClaim>,
    pods: Option<&NodePods>,
    observed_at: Option<i64>,
) -> Option<i64> {
    let record = claim.and_then(recorded);
    let empty = NodePods::default();
    let pods_now = pods.unwrap_or(&empty);
    let left = record.is_some_and(|r| pods_now.set_by(r.read) != r.set);
    let deduced = observed_at.filter(|_| left);
    let status = claim.and_then(status_time);
    [
        pods_now.latest,
        record.and_then(|r| r.last),
        status,
        deduced,
    ]
    .into_iter()
    .flatten()
    // A pod with no time of its own (a stand-in for one that did not read) dates nothing.
    .filter(|t| *t > 0)
    .max()
}

/// The record a NodeClaim should carry after a read at `observed_at`, when the one it carries
/// no longer says what its node holds. None: nothing to write (the record holds, or the node
/// never held a pod and has none).
pub fn record_due(claim: &NodeClaim, pods: Option<&NodePods>, observed_at: i64) -> Option<Record> {
    let set = pods.map(NodePods::set).unwrap_or_default();
    let empty = NodePods::default();
    // A pod of the same key bound anew after the record (recreated in place) is a departure
    // and an arrival: the record is made again, or it would find that departure every tick.
    let holds = match recorded(claim) {
        Some(r) => r.set == set && pods.unwrap_or(&empty).set_by(r.read) == r.set,
        None => set.count == 0,
    };
    if holds {
        return None;
    }
    // The record's instant is no earlier than the binding of any pod it holds (a pod bound
    // after the read began, or a clock ahead of the tick's): then none of them is ever taken
    // for a newcomer, and every later read compares them all.
    let bound = pods
        .iter()
        .flat_map(|p| p.staying.iter().map(|(_, at)| *at));
    Some(Record {
        set,
        read: bound.fold(observed_at, i64::max),
        last: last_pod_event(Some(claim), pods, Some(observed_at)),
    })
}

/// Whether a record is due because a pod went (rather than only came): such records are
/// written first when a tick cannot write them all.
pub fn departure(claim: &NodeClaim, pods: Option<&NodePods>) -> bool {
    let empty = NodePods::default();
    recorded(claim).is_some_and(|r| pods.unwrap_or(&empty).set_by(r.read) != r.set)
}

fn recorded(claim: &NodeClaim) -> Option<Record> {
    let annotations = claim.metadata.annotations.as_ref()?;
    Record::parse(annotations.get(PODS_ANNOTATION)?)
}

fn status_time(claim: &NodeClaim) -> Option<i64> {
    let text = claim.status.as_ref()?.last_pod_event_time.as_deref()?;
    text.parse::<k8s_openapi::jiff::Timestamp>()
        .ok()
        .map(|t| t.as_second())
}

fn owned_by_daemonset(meta: &ObjectMeta) -> bool {
    meta.owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "DaemonSet")
}

/// A pod's key: its uid, which a pod recreated under the same name does not share; its
/// namespace and name when it has none (a file written by hand).
fn key(meta: &ObjectMeta) -> String {
    if let Some(uid) = meta.uid.as_deref().filter(|u| !u.is_empty()) {
        return uid.to_string();
    }
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    )
}
