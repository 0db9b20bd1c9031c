//! CloudWatch Embedded Metric Format: one JSON line per invocation with Karpenter's metric names,
//! which CloudWatch Logs turns into metrics. Built here; the function binaries write it to stdout.

use std::collections::BTreeMap;
use std::io::Write;

use serde_json::{json, Map, Value};

/// The CloudWatch namespace of every metric.
pub const NAMESPACE: &str = "Fleetwright";

pub const NODECLAIMS_CREATED: &str = "karpenter_nodeclaims_created_total";
pub const NODECLAIMS_LAUNCHED: &str = "karpenter_nodeclaims_launched_total";
pub const NODECLAIMS_REGISTERED: &str = "karpenter_nodeclaims_registered_total";
pub const NODECLAIMS_TERMINATED: &str = "karpenter_nodeclaims_terminated_total";
pub const LAUNCH_FAILURES: &str = "karpenter_cloudprovider_instance_launch_failures_total";
pub const PODS_PENDING: &str = "karpenter_pods_state";
pub const INSTANCES_GARBAGE_COLLECTED: &str = "karpenter_nodeclaims_garbage_collected_total";
/// NodeClaims deleted because their instance was gone.
pub const NODECLAIMS_STRANDED: &str = "fleetwright_nodeclaims_stranded_total";
/// Terminations that failed and are left for a later tick.
pub const TERMINATION_FAILURES: &str = "fleetwright_termination_failures_total";
pub const INTERRUPTION_RECEIVED: &str = "karpenter_interruption_received_messages_total";
pub const INTERRUPTION_ACTIONS: &str = "karpenter_interruption_actions_performed_total";
/// One per tick that ran to its end (skipped or not): the missed-ticks alarm watches it.
pub const TICKS: &str = "fleetwright_ticks_total";
/// Wall-clock seconds of one tick invocation.
pub const TICK_DURATION: &str = "fleetwright_tick_duration_seconds";
/// Seconds of one tick by phase (`list`, `convert`, `cloud`, `decide`, `write`).
pub const TICK_PHASE: &str = "fleetwright_tick_phase_seconds";
/// The dimension of [`TICK_PHASE`].
pub const PHASE: &str = "phase";
/// The owned fleet's hourly cost, and the LP lower bound on its workload (every 5 minutes).
pub const FLEET_HOURLY_COST: &str = "fleetwright_fleet_hourly_cost";
pub const FLEET_LOWER_BOUND: &str = "fleetwright_fleet_hourly_lower_bound";
/// Shadow mode: what Fleetwright would have done this tick, and what the other autoscaler did.
pub const SHADOW_WOULD_CREATE: &str = "fleetwright_shadow_would_create";
pub const SHADOW_WOULD_DISRUPT: &str = "fleetwright_shadow_would_disrupt";
pub const SHADOW_WOULD_TERMINATE: &str = "fleetwright_shadow_would_terminate";
pub const SHADOW_OTHER_CREATED: &str = "fleetwright_shadow_other_created";
pub const SHADOW_OTHER_DELETED: &str = "fleetwright_shadow_other_deleted";
/// Shadow mode: the hourly cost of Fleetwright's plan of the fleet's workload from scratch.
pub const SHADOW_PLANNED_HOURLY: &str = "fleetwright_shadow_planned_hourly_cost";

/// Balanced consolidation: moves scored, by decision (approved or rejected), and the sum of
/// their scores by decision (divide by the moves for the mean; EMF carries no histogram here).
pub const CONSOLIDATION_MOVES: &str = "karpenter_consolidation_moves_total";
pub const CONSOLIDATION_SCORE: &str = "karpenter_consolidation_score";
/// NodeClaims deleted by node repair, by the condition that was unhealthy (`ready`,
/// `storage_ready`, ...), as Karpenter's node health controller counts them.
pub const NODECLAIMS_UNHEALTHY_DISRUPTED: &str = "karpenter_nodeclaims_unhealthy_disrupted_total";
/// NodeClaims a disruption took (a command started on them, their repair or their expiration),
/// by reason (`underutilized`, `empty`, `drifted`, `unhealthy`, `expired`), nodepool, capacity
/// type, consolidation policy and termination mode together, as Karpenter v1.15 counts them.
pub const NODECLAIMS_DISRUPTED: &str = "karpenter_nodeclaims_disrupted_total";
/// Pods on the NodeClaims a disruption took (DaemonSet, mirror and finished pods aside), by the
/// labels of [`NODECLAIMS_DISRUPTED`], as Karpenter v1.15 counts them.
pub const PODS_DISRUPTION_INITIATED: &str = "karpenter_pods_disruption_initiated_total";
/// Karpenter's labels of a disruption, besides [`REASON`].
pub const NODEPOOL: &str = "nodepool";
pub const CAPACITY_TYPE: &str = "capacity_type";
pub const CONSOLIDATION_POLICY: &str = "consolidation_policy";
pub const TERMINATION_MODE: &str = "termination_mode";
pub const IMAGE_ID: &str = "image_id";
/// The dimension of [`NODECLAIMS_UNHEALTHY_DISRUPTED`].
pub const CONDITION: &str = "condition";
/// The dimension of the Balanced consolidation metrics.
pub const DECISION: &str = "decision";

/// The dimension of NodeClaims created and terminated, and of interruption messages.
pub const REASON: &str = "reason";
pub const KIND: &str = "kind";

/// CloudWatch units.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Count,
    Seconds,
    None,
}

impl Unit {
    fn as_str(self) -> &'static str {
        match self {
            Unit::Count => "Count",
            Unit::Seconds => "Seconds",
            Unit::None => "None",
        }
    }
}

/// Counts and gauges of one invocation: totals with the `cluster` dimension, and breakdowns
/// with `cluster` and more (`reason`, `kind`; Karpenter's labels of a disruption together).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Metrics {
    values: BTreeMap<&'static str, f64>,
    units: BTreeMap<&'static str, Unit>,
    /// (dimension, its value) for each dimension → metric → value.
    by: BTreeMap<Vec<(&'static str, String)>, BTreeMap<&'static str, f64>>,
}

impl Metrics {
    /// Adds to a count.
    pub fn add(&mut self, name: &'static str, value: f64) {
        *self.values.entry(name).or_insert(0.0) += value;
    }

    /// Adds to a count, and to its breakdown by `dimension` = `value`.
    pub fn add_by(&mut self, name: &'static str, dimension: &'static str, key: &str, value: f64) {
        self.add_labeled(name, &[(dimension, key)], value);
    }

    /// Adds to a count, and to its breakdown by every one of `labels` together (one EMF
    /// dimension set, as a Prometheus series carries all its labels). A label with no value is
    /// left out, as Prometheus leaves an empty label out (CloudWatch takes no empty dimension).
    pub fn add_labeled(&mut self, name: &'static str, labels: &[(&'static str, &str)], value: f64) {
        self.add(name, value);
        let key = (labels.iter())
            .filter(|(_, v)| !v.is_empty())
            .map(|(d, v)| (*d, v.to_string()))
            .collect();
        *self.by.entry(key).or_default().entry(name).or_insert(0.0) += value;
    }

    /// Adds seconds to a time, and to its breakdown by `dimension` = `value`.
    pub fn time_by(
        &mut self,
        name: &'static str,
        dimension: &'static str,
        key: &str,
        seconds: f64,
    ) {
        self.add_by(name, dimension, key, seconds);
        self.units.insert(name, Unit::Seconds);
    }

    /// Takes in another invocation part's metrics: its counts added, its gauges set.
    pub fn merge(&mut self, other: Metrics) {
        for (name, value) in other.values {
            match other.units.get(name) {
                Some(unit) => self.set(name, value, *unit),
                None => self.add(name, value),
            }
        }
        for (key, values) in other.by {
            let mine = self.by.entry(key).or_default();
            for (name, value) in values {
                *mine.entry(name).or_insert(0.0) += value;
            }
        }
    }

    /// Sets a gauge.
    pub fn set(&mut self, name: &'static str, value: f64, unit: Unit) {
        self.values.insert(name, value);
        self.units.insert(name, unit);
    }

    pub fn get(&self, name: &str) -> f64 {
        self.values.get(name).copied().unwrap_or(0.0)
    }

    /// The breakdown of a count by one dimension.
    pub fn get_by(&self, name: &str, dimension: &str, key: &str) -> f64 {
        self.sum_by(name, &[(dimension, key)])
    }

    /// The sum of a count over every breakdown whose labels include all of `labels`.
    pub fn sum_by(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let has = |key: &Vec<(&'static str, String)>| {
            labels
                .iter()
                .all(|(d, v)| key.iter().any(|(kd, kv)| kd == d && kv == v))
        };
        self.by
            .iter()
            .filter(|(key, _)| has(key))
            .filter_map(|(_, m)| m.get(name))
            .sum()
    }

    fn unit(&self, name: &str) -> Unit {
        self.units.get(name).copied().unwrap_or(Unit::Count)
    }

    /// One EMF document: `values` under the dimensions `dims` (with their values).
    fn document(
        &self,
        dims: &[(&str, &str)],
        values: &BTreeMap<&'static str, f64>,
        timestamp_ms: i64,
    ) -> Value {
        let names: Vec<Value> = values
            .keys()
            .map(|n| json!({"Name": n, "Unit": self.unit(n).as_str()}))
            .collect();
        let keys: Vec<&str> = dims.iter().map(|(k, _)| *k).collect();
        let mut doc = Map::new();
        doc.insert(
            "_aws".into(),
            json!({"Timestamp": timestamp_ms, "CloudWatchMetrics": [{
                "Namespace": NAMESPACE, "Dimensions": [keys], "Metrics": names}]}),
        );
        for (k, v) in dims {
            doc.insert((*k).into(), json!(v));
        }
        for (name, value) in values {
            doc.insert((*name).into(), json!(value));
        }
        Value::Object(doc)
    }

    /// The EMF document of the totals, with `cluster` as the one dimension.
    pub fn to_emf(&self, cluster: &str, timestamp_ms: i64) -> Value {
        self.document(&[("cluster", cluster)], &self.values, timestamp_ms)
    }

    /// Every EMF document: the totals, then one per breakdown.
    pub fn to_emf_all(&self, cluster: &str, timestamp_ms: i64) -> Vec<Value> {
        let mut out = Vec::new();
        if !self.values.is_empty() {
            out.push(self.to_emf(cluster, timestamp_ms));
        }
        for (labels, values) in &self.by {
            let dims: Vec<(&str, &str)> = std::iter::once(("cluster", cluster))
                .chain(labels.iter().map(|(d, v)| (*d, v.as_str())))
                .collect();
            out.push(self.document(&dims, values, timestamp_ms));
        }
        out
    }

    /// Writes the EMF lines (nothing when there are no metrics).
    pub fn emit(
        &self,
        cluster: &str,
        timestamp_ms: i64,
        out: &mut impl Write,
    ) -> std::io::Result<()> {
        for doc in self.to_emf_all(cluster, timestamp_ms) {
            writeln!(out, "{doc}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "../tests/unit/metrics.rs"]
mod tests;
