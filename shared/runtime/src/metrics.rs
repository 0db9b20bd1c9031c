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

/// Counts and gauges of one invocation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Metrics {
    values: BTreeMap<&'static str, f64>,
}

impl Metrics {
    pub fn add(&mut self, name: &'static str, value: f64) {
        *self.values.entry(name).or_insert(0.0) += value;
    }

    pub fn get(&self, name: &str) -> f64 {
        self.values.get(name).copied().unwrap_or(0.0)
    }

    /// The EMF document, with `cluster` as the one dimension.
    pub fn to_emf(&self, cluster: &str, timestamp_ms: i64) -> Value {
        let names: Vec<Value> = self
            .values
            .keys()
            .map(|n| json!({"Name": n, "Unit": "Count"}))
            .collect();
        let mut doc = Map::new();
        doc.insert(
            "_aws".into(),
            json!({"Timestamp": timestamp_ms, "CloudWatchMetrics": [{
                "Namespace": NAMESPACE, "Dimensions": [["cluster"]], "Metrics": names}]}),
        );
        doc.insert("cluster".into(), json!(cluster));
        for (name, value) in &self.values {
            doc.insert((*name).into(), json!(value));
        }
        Value::Object(doc)
    }

    /// Writes the EMF line (nothing when there are no metrics).
    pub fn emit(
        &self,
        cluster: &str,
        timestamp_ms: i64,
        out: &mut impl Write,
    ) -> std::io::Result<()> {
        if self.values.is_empty() {
            return Ok(());
        }
        writeln!(out, "{}", self.to_emf(cluster, timestamp_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_emf_document_declares_every_metric_it_carries() {
        let mut m = Metrics::default();
        m.add(NODECLAIMS_CREATED, 2.0);
        m.add(LAUNCH_FAILURES, 1.0);
        let doc = m.to_emf("dev", 1_700_000_000_000);
        assert_eq!(doc["karpenter_nodeclaims_created_total"], 2.0);
        assert_eq!(doc["cluster"], "dev");
        let declared = doc["_aws"]["CloudWatchMetrics"][0]["Metrics"]
            .as_array()
            .unwrap();
        assert_eq!(declared.len(), 2);
        let mut out = Vec::new();
        m.emit("dev", 1, &mut out).unwrap();
        assert!(String::from_utf8(out).unwrap().ends_with("}\n"));
        let mut empty = Vec::new();
        Metrics::default().emit("dev", 1, &mut empty).unwrap();
        assert!(empty.is_empty());
    }
}
