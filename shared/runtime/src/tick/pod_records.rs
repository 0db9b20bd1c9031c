//! Which NodeClaims' records of their nodes' pods ([`fleetwright_kube::convert::pod_events`])
//! no longer say what the nodes hold, and what to write instead: the pure decision behind
//! `consolidateAfter` counting from the last pod that came or went, as Karpenter's does.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use fleetwright_crds::NodeClaim;
use fleetwright_kube::convert::pod_events::{departure, pods_by_node, record_due};
use fleetwright_kube::dump::ClusterDump;

use super::action::{Action, PodRecord};
use super::claims::{label, name_of};

/// At most this many records are written in one tick (two small patches each, sixteen at a
/// time): those where a pod went first. The rest wait for the next tick, whose read then dates
/// the departures it finds, later than they were: never earlier.
pub const MAX_RECORDS_PER_TICK: usize = 500;

/// The records to write after a read at `observed_at`, as one action (none when every record
/// holds). Only NodeClaims of the NodePools read, not being deleted, with a node.
pub fn pod_records(dump: &ClusterDump, claims: &[NodeClaim], observed_at: i64) -> Vec<Action> {
    let pods = pods_by_node(dump);
    let pools: BTreeSet<&str> = dump
        .nodepools
        .iter()
        .filter_map(|p| p.metadata.name.as_deref())
        .collect();
    let mut due: Vec<(bool, PodRecord)> = claims
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .filter(|c| label(c, fleetwright_core::labels::NODEPOOL).is_some_and(|p| pools.contains(p)))
        .filter_map(|claim| {
            let node = claim.status.as_ref()?.node_name.as_deref()?;
            let on_node = pods.get(node);
            let record = record_due(claim, on_node, observed_at)?;
            let last = record
                .last
                .and_then(|t| DateTime::<Utc>::from_timestamp(t, 0));
            // The status copy is written only when it changes.
            let copied = claim
                .status
                .as_ref()
                .and_then(|s| s.last_pod_event_time.as_deref());
            let copied = copied.and_then(|t| t.parse::<DateTime<Utc>>().ok());
            let last = last.filter(|t| Some(*t) != copied);
            let entry = PodRecord {
                nodeclaim: name_of(claim),
                record: record.text(),
                last_pod_event: last,
            };
            Some((departure(claim, on_node), entry))
        })
        .collect();
    if due.is_empty() {
        return Vec::new();
    }
    // Departures first; the sort is stable, so the NodeClaims' order stands within each.
    due.sort_by_key(|(left, _)| !left);
    let records = due
        .into_iter()
        .take(MAX_RECORDS_PER_TICK)
        .map(|(_, r)| r)
        .collect();
    vec![Action::PodRecords { records }]
}
