//! Shadow mode: a dry run beside the autoscaler the cluster has (Karpenter, Cluster Autoscaler).
//! Each tick records what Fleetwright would have launched, disrupted and terminated beside what
//! the other autoscaler did in the same window (the NodeClaims and Nodes created and deleted),
//! and the fleet's hourly cost against Fleetwright's plan of the same workload. The records are
//! pure data, kept (the last [`RECORDS_KEPT`]) in the state ConfigMap, and read back by
//! `fleetwright shadow`.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use fleetwright_core::disruption::FleetCost;
use fleetwright_kube::dump::ClusterDump;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::metrics::{self, Metrics};

/// The state ConfigMap key of the shadow records.
pub const SHADOW_KEY: &str = "shadow";
/// How many ticks' records are kept: an hour at one tick a minute.
pub const RECORDS_KEPT: usize = 60;
/// The most names remembered of each kind (NodeClaims, Nodes), to tell what was deleted since:
/// in a larger cluster only deletions among the first this-many (by name) are told.
pub const NAMES_KEPT: usize = 2_000;
/// The most entries a record keeps in each list (the rest counted in a last entry).
pub const ENTRIES_KEPT: usize = 50;
/// The most bytes the shadow state takes in the state ConfigMap (whose whole limit is 1 MiB,
/// shared with the state the live tick keeps): the oldest records go first.
pub const BYTES_KEPT: usize = 256 * 1024;

/// What one shadow tick saw.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Record {
    pub at: DateTime<Utc>,
    /// NodeClaims Fleetwright would have created (`<nodepool>: <cheapest types>`).
    pub would_create: Vec<String>,
    /// Nodes Fleetwright would have disrupted (`<reason>/<command>: <node>`).
    pub would_disrupt: Vec<String>,
    /// NodeClaims or instances Fleetwright would have terminated.
    pub would_terminate: Vec<String>,
    /// NodeClaims and Nodes the other autoscaler created since the last record
    /// (`NodeClaim <name>`, `Node <name>`).
    pub other_created: Vec<String>,
    /// NodeClaims and Nodes gone since the last record.
    pub other_deleted: Vec<String>,
    /// The fleet's hourly cost now, when measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fleet_hourly: Option<f64>,
    /// What Fleetwright's plan of the same workload from scratch costs an hour.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub planned_hourly: Option<f64>,
}

/// The shadow records, and the names seen last (to tell what changed since).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Shadow {
    pub seen: BTreeSet<String>,
    pub records: Vec<Record>,
}

impl Shadow {
    /// This tick's record from the dry run's actions, the cluster read, and the fleet's cost;
    /// the record is appended (the oldest dropped past [`RECORDS_KEPT`]) and returned.
    pub fn observe(
        &mut self,
        dump: &ClusterDump,
        actions: &[Value],
        fleet: Option<FleetCost>,
        now: DateTime<Utc>,
    ) -> Record {
        let seen = names(dump);
        let first = self.records.is_empty() && self.seen.is_empty();
        let (created, deleted) = if first {
            (Vec::new(), Vec::new())
        } else {
            (
                seen.difference(&self.seen).cloned().collect(),
                self.seen.difference(&seen).cloned().collect(),
            )
        };
        let record = Record {
            at: now,
            would_create: kept(would_create(actions)),
            would_disrupt: kept(would_disrupt(actions)),
            would_terminate: kept(would_terminate(actions)),
            other_created: kept(created),
            other_deleted: kept(deleted),
            fleet_hourly: fleet.map(|f| cents(f.hourly)),
            planned_hourly: fleet.map(|f| cents(f.planned)),
        };
        self.seen = seen;
        self.records.push(record.clone());
        let over = self.records.len().saturating_sub(RECORDS_KEPT);
        self.records.drain(..over);
        while self.records.len() > 1 && self.bytes() > BYTES_KEPT {
            self.records.remove(0);
        }
        record
    }

    fn bytes(&self) -> usize {
        serde_json::to_vec(self)
            .map(|b| b.len())
            .unwrap_or(usize::MAX)
    }
}

/// A list cut to [`ENTRIES_KEPT`], its last entry counting the rest (`… and 12 more`).
fn kept(mut list: Vec<String>) -> Vec<String> {
    if list.len() > ENTRIES_KEPT {
        let more = list.len() - (ENTRIES_KEPT - 1);
        list.truncate(ENTRIES_KEPT - 1);
        list.push(format!("… and {more} more"));
    }
    list
}

/// A cost in dollars an hour, to the hundredth of a cent (the sum of prices leaves float dust).
fn cents(dollars: f64) -> f64 {
    (dollars * 10_000.0).round() / 10_000.0 + 0.0
}

/// The record's EMF metrics.
pub fn metrics(record: &Record, into: &mut Metrics) {
    let count = |v: &[String]| v.len() as f64;
    into.set(
        metrics::SHADOW_WOULD_CREATE,
        count(&record.would_create),
        metrics::Unit::Count,
    );
    into.set(
        metrics::SHADOW_WOULD_DISRUPT,
        count(&record.would_disrupt),
        metrics::Unit::Count,
    );
    into.set(
        metrics::SHADOW_WOULD_TERMINATE,
        count(&record.would_terminate),
        metrics::Unit::Count,
    );
    into.set(
        metrics::SHADOW_OTHER_CREATED,
        count(&record.other_created),
        metrics::Unit::Count,
    );
    into.set(
        metrics::SHADOW_OTHER_DELETED,
        count(&record.other_deleted),
        metrics::Unit::Count,
    );
    if let Some(planned) = record.planned_hourly {
        into.set(metrics::SHADOW_PLANNED_HOURLY, planned, metrics::Unit::None);
    }
}

/// `NodeClaim <name>` and `Node <name>` for every NodeClaim and Node the cluster holds (at most
/// [`NAMES_KEPT`] of each).
fn names(dump: &ClusterDump) -> BTreeSet<String> {
    let claims = dump
        .nodeclaims
        .iter()
        .filter_map(|c| c.metadata.name.as_ref())
        .map(|n| format!("NodeClaim {n}"))
        .collect::<BTreeSet<_>>();
    let nodes = dump
        .nodes
        .iter()
        .filter_map(|n| n.metadata.name.as_ref())
        .map(|n| format!("Node {n}"))
        .collect::<BTreeSet<_>>();
    let first = |set: BTreeSet<String>| set.into_iter().take(NAMES_KEPT);
    first(claims).chain(first(nodes)).collect()
}

fn kind(action: &Value) -> &str {
    action["action"].as_str().unwrap_or_default()
}

fn text(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_string()
}

fn would_create(actions: &[Value]) -> Vec<String> {
    let created = |a: &Value| {
        let types: Vec<String> = a["instanceTypes"]
            .as_array()
            .map(|t| t.iter().take(3).map(text).collect())
            .unwrap_or_default();
        format!("{}: {}", text(&a["nodepool"]), types.join(","))
    };
    let mut out = Vec::new();
    for a in actions {
        match kind(a) {
            "createNodeClaim" => out.push(created(a)),
            "startDisruption" => {
                let replacements = a["replacements"].as_array().into_iter().flatten();
                out.extend(replacements.map(created));
            }
            _ => {}
        }
    }
    out
}

fn would_disrupt(actions: &[Value]) -> Vec<String> {
    let mut out = Vec::new();
    for a in actions {
        // `<reason>/<command>:<nodes>` when decided; once confirmed, the reason, the command
        // and the nodes apart.
        let (name, nodes) = match kind(a) {
            "confirmLater" => match text(&a["command"]).split_once(':') {
                Some((name, nodes)) => (name.to_string(), nodes.to_string()),
                None => continue,
            },
            "disrupting" => {
                let nodes: Vec<String> = a["nodes"]
                    .as_array()
                    .map(|n| n.iter().map(text).collect())
                    .unwrap_or_default();
                let name = format!("{}/{}", text(&a["reason"]), text(&a["command"]));
                (name, nodes.join(","))
            }
            // Expiration disrupts with no decision to confirm (Karpenter's `Expired`).
            "expire" => {
                let node = a["node"].as_str().map(str::to_string);
                (
                    "expired/delete".to_string(),
                    node.unwrap_or_else(|| text(&a["nodeclaim"])),
                )
            }
            _ => continue,
        };
        out.extend(
            nodes
                .split(',')
                .filter(|n| !n.is_empty())
                .map(|n| format!("{name}: {n}")),
        );
    }
    out.sort();
    out.dedup();
    out
}

fn would_terminate(actions: &[Value]) -> Vec<String> {
    actions
        .iter()
        .filter_map(|a| match kind(a) {
            "finishDeletion" | "giveUp" | "repair" | "forgetNodeClaim" => {
                Some(format!("NodeClaim {}", text(&a["nodeclaim"])))
            }
            "collectGarbage" => Some(format!("instance {}", text(&a["instanceId"]))),
            _ => None,
        })
        .collect()
}

/// How a window of records compares: what both did, what only one did, and the cost.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Comparison {
    pub ticks: usize,
    pub since: Option<DateTime<Utc>>,
    /// The most NodeClaims Fleetwright would have created in one tick (a dry run creates none,
    /// so the same pods ask again each tick), and the NodeClaims the other autoscaler created.
    pub would_create: usize,
    pub other_created_nodeclaims: usize,
    /// Nodes both would disrupt (Fleetwright decided it; the other deleted it).
    pub disrupted_by_both: Vec<String>,
    /// Nodes only Fleetwright would have disrupted.
    pub only_fleetwright: Vec<String>,
    /// Nodes the other autoscaler deleted that Fleetwright would have kept.
    pub only_other: Vec<String>,
    /// The latest measured fleet cost, and Fleetwright's plan of the same workload.
    pub fleet_hourly: Option<f64>,
    pub planned_hourly: Option<f64>,
}

/// Compares the records of a window.
pub fn compare(records: &[Record]) -> Comparison {
    let mut fleetwright = BTreeSet::new();
    let mut other = BTreeSet::new();
    let mut out = Comparison {
        ticks: records.len(),
        since: records.first().map(|r| r.at),
        ..Default::default()
    };
    for r in records {
        out.would_create = out.would_create.max(r.would_create.len());
        out.other_created_nodeclaims += r
            .other_created
            .iter()
            .filter(|n| n.starts_with("NodeClaim "))
            .count();
        for d in r.would_disrupt.iter().filter(|d| !d.starts_with('…')) {
            if let Some((_, node)) = d.split_once(": ") {
                fleetwright.insert(node.to_string());
            }
        }
        for d in &r.other_deleted {
            if let Some(node) = d.strip_prefix("Node ") {
                other.insert(node.to_string());
            }
        }
        if r.fleet_hourly.is_some() {
            out.fleet_hourly = r.fleet_hourly;
            out.planned_hourly = r.planned_hourly;
        }
    }
    out.disrupted_by_both = fleetwright.intersection(&other).cloned().collect();
    out.only_fleetwright = fleetwright.difference(&other).cloned().collect();
    out.only_other = other.difference(&fleetwright).cloned().collect();
    out
}

#[cfg(test)]
#[path = "../tests/unit/shadow.rs"]
mod tests;
