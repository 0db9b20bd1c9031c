//! A catalog written as the instance-types file of Karpenter's KWOK cloud provider
//! (`INSTANCE_TYPES_FILE_PATH`), so that Karpenter's whole controller plans on the types, zones,
//! capacity types, prices and allocatable resources Fleetwright plans on.
//!
//! The file has no field for labels or overhead, so two things are carried another way:
//! - **Labels.** Each offering's requirements hold the type's own labels
//!   (`karpenter.k8s.aws/instance-family` and the rest) beside its zone and capacity type. The
//!   provider registers every offering key as a well-known label, filters offerings by them, and
//!   copies the single values to the Node, so NodePool and pod requirements on them hold.
//! - **Overhead.** The provider reserves a fixed 100m CPU and 10Mi of memory on every type, so
//!   the capacity written is Fleetwright's allocatable plus that: Karpenter's allocatable is then
//!   Fleetwright's to the millicore.
//!
//! Reserved offerings are left out: the provider has no capacity reservations.

use std::collections::BTreeMap;

use fleetwright_core::catalog::InstanceType;
use fleetwright_core::labels::{ARCH, CAPACITY_TYPE, INSTANCE_TYPE, OS, ZONE};
use fleetwright_core::requirements::Operator;
use fleetwright_core::resources::Resources;
use serde_json::{json, Value};

/// What the KWOK provider reserves on every instance type (its `KubeReserved`).
const KWOK_OVERHEAD: [(&str, &str); 2] = [("cpu", "100m"), ("memory", "10Mi")];

/// The instance-types file for `types`.
pub fn instance_types(types: &[InstanceType]) -> anyhow::Result<Value> {
    let overhead = overhead()?;
    Ok(Value::Array(
        types
            .iter()
            .filter(|t| t.offerings.iter().any(|o| o.reservation.is_none()))
            .map(|t| instance_type(t, &overhead))
            .collect(),
    ))
}

fn overhead() -> anyhow::Result<Resources> {
    Resources::parse(KWOK_OVERHEAD).map_err(|e| anyhow::anyhow!("the KWOK overhead: {e}"))
}

fn instance_type(t: &InstanceType, overhead: &Resources) -> Value {
    let single = |key: &str| {
        t.requirements
            .get(key)
            .filter(|r| r.operator() == Operator::In)
            .map(|r| r.values().iter().cloned().collect::<Vec<_>>())
            .unwrap_or_default()
    };
    let architecture = single(ARCH)
        .first()
        .cloned()
        .unwrap_or_else(|| "amd64".into());
    let mut systems = single(OS);
    if systems.is_empty() {
        systems.push("linux".into());
    }
    let labels = own_labels(t);
    let offerings: Vec<Value> = t
        .offerings
        .iter()
        .filter(|o| o.reservation.is_none())
        .map(|o| {
            let mut requirements = vec![
                json!({"key": CAPACITY_TYPE, "operator": "In", "values": [o.capacity_type]}),
                json!({"key": ZONE, "operator": "In", "values": [o.zone]}),
            ];
            requirements.extend(
                labels
                    .iter()
                    .map(|(key, value)| json!({"key": key, "operator": "In", "values": [value]})),
            );
            json!({"Price": o.price, "Available": o.available, "Requirements": requirements})
        })
        .collect();
    let mut capacity = t.allocatable.clone();
    capacity.add(overhead);
    json!({
        "name": t.name,
        "architecture": architecture,
        "operatingSystems": systems,
        "resources": capacity.to_map(),
        "offerings": offerings,
    })
}

/// The type's single-valued labels other than those the provider sets itself.
fn own_labels(t: &InstanceType) -> BTreeMap<String, String> {
    t.requirements
        .iter()
        .filter(|r| r.operator() == Operator::In && r.values().len() == 1)
        .filter(|r| ![ZONE, CAPACITY_TYPE, INSTANCE_TYPE, ARCH, OS].contains(&r.key.as_str()))
        .filter_map(|r| Some((r.key.clone(), r.any()?.to_string())))
        .collect()
}

#[cfg(test)]
#[path = "../../tests/unit/peer/kwok.rs"]
mod tests;
