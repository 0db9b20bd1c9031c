//! Resource lists (cpu, memory, ephemeral-storage, pods and extended resources) with the
//! arithmetic the scheduler needs: add, subtract, fit, and max.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::CoreError;
use crate::labels::{RESOURCE_CPU, RESOURCE_EPHEMERAL, RESOURCE_MEMORY, RESOURCE_PODS};
use crate::quantity::{format_bytes, format_cpu, parse_cpu_millis, parse_units};

/// A list of resource amounts. CPU is in millicores, memory and storage in bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Resources {
    pub cpu: i64,
    pub memory: i64,
    pub ephemeral: i64,
    pub pods: i64,
    /// Extended resources such as `nvidia.com/gpu` or `vpc.amazonaws.com/pod-eni`, sorted by name.
    pub extended: BTreeMap<String, i64>,
}

impl Resources {
    pub fn new(cpu: i64, memory: i64) -> Self {
        Resources {
            cpu,
            memory,
            ..Default::default()
        }
    }

    /// Parses a Kubernetes resource list (`{"cpu": "100m", "memory": "1Gi"}`).
    pub fn parse<'a>(
        entries: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, CoreError> {
        let mut out = Resources::default();
        for (name, value) in entries {
            out.set_quantity(name, value)?;
        }
        Ok(out)
    }

    /// Sets one named resource from its quantity text.
    pub fn set_quantity(&mut self, name: &str, value: &str) -> Result<(), CoreError> {
        let amount = if name == RESOURCE_CPU {
            parse_cpu_millis(value)?
        } else {
            parse_units(value)?
        };
        self.set(name, amount);
        Ok(())
    }

    pub fn get(&self, name: &str) -> i64 {
        match name {
            RESOURCE_CPU => self.cpu,
            RESOURCE_MEMORY => self.memory,
            RESOURCE_EPHEMERAL => self.ephemeral,
            RESOURCE_PODS => self.pods,
            other => self.extended.get(other).copied().unwrap_or(0),
        }
    }

    pub fn set(&mut self, name: &str, amount: i64) {
        match name {
            RESOURCE_CPU => self.cpu = amount,
            RESOURCE_MEMORY => self.memory = amount,
            RESOURCE_EPHEMERAL => self.ephemeral = amount,
            RESOURCE_PODS => self.pods = amount,
            other => {
                if amount == 0 {
                    self.extended.remove(other);
                } else {
                    self.extended.insert(other.to_string(), amount);
                }
            }
        }
    }

    pub fn add(&mut self, other: &Resources) {
        self.cpu += other.cpu;
        self.memory += other.memory;
        self.ephemeral += other.ephemeral;
        self.pods += other.pods;
        for (name, amount) in &other.extended {
            *self.extended.entry(name.clone()).or_insert(0) += amount;
        }
    }

    pub fn sub(&mut self, other: &Resources) {
        self.cpu -= other.cpu;
        self.memory -= other.memory;
        self.ephemeral -= other.ephemeral;
        self.pods -= other.pods;
        for (name, amount) in &other.extended {
            *self.extended.entry(name.clone()).or_insert(0) -= amount;
        }
    }

    pub fn plus(&self, other: &Resources) -> Resources {
        let mut out = self.clone();
        out.add(other);
        out
    }

    pub fn minus(&self, other: &Resources) -> Resources {
        let mut out = self.clone();
        out.sub(other);
        out
    }

    /// Element-wise maximum.
    pub fn max_with(&mut self, other: &Resources) {
        self.cpu = self.cpu.max(other.cpu);
        self.memory = self.memory.max(other.memory);
        self.ephemeral = self.ephemeral.max(other.ephemeral);
        self.pods = self.pods.max(other.pods);
        for (name, amount) in &other.extended {
            let entry = self.extended.entry(name.clone()).or_insert(0);
            *entry = (*entry).max(*amount);
        }
    }

    /// True when every amount in `self` (a request) fits within `capacity`.
    pub fn fits_in(&self, capacity: &Resources) -> bool {
        self.cpu <= capacity.cpu
            && self.memory <= capacity.memory
            && self.ephemeral <= capacity.ephemeral
            && self.pods <= capacity.pods
            && self
                .extended
                .iter()
                .all(|(name, amount)| *amount <= 0 || *amount <= capacity.get(name))
    }

    /// The first resource (in a fixed order) that does not fit, if any.
    pub fn first_exceeding(&self, capacity: &Resources) -> Option<&str> {
        self.names()
            .find(|name| self.get(name) > 0 && self.get(name) > capacity.get(name))
    }

    /// Names of all resources that are set, in a stable order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        [
            RESOURCE_CPU,
            RESOURCE_MEMORY,
            RESOURCE_EPHEMERAL,
            RESOURCE_PODS,
        ]
        .into_iter()
        .chain(self.extended.keys().map(String::as_str))
    }

    /// A resource amount formatted as Kubernetes would print it.
    pub fn format_one(&self, name: &str) -> String {
        let amount = self.get(name);
        match name {
            RESOURCE_CPU => format_cpu(amount),
            RESOURCE_MEMORY | RESOURCE_EPHEMERAL => format_bytes(amount),
            _ => amount.to_string(),
        }
    }

    /// The non-zero amounts as a Kubernetes resource list.
    pub fn to_map(&self) -> BTreeMap<String, String> {
        self.names()
            .filter(|name| self.get(name) != 0)
            .map(|name| (name.to_string(), self.format_one(name)))
            .collect()
    }

    pub fn is_zero(&self) -> bool {
        self.cpu == 0
            && self.memory == 0
            && self.ephemeral == 0
            && self.pods == 0
            && self.extended.values().all(|v| *v == 0)
    }
}

impl fmt::Display for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .to_map()
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        f.write_str(&parts.join(", "))
    }
}

impl Serialize for Resources {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_map().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Resources {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = BTreeMap::<String, serde_json::Value>::deserialize(deserializer)?;
        let mut out = Resources::default();
        for (name, value) in &map {
            let text = match value {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            out.set_quantity(name, &text)
                .map_err(serde::de::Error::custom)?;
        }
        Ok(out)
    }
}

#[cfg(test)]
#[path = "../tests/unit/resources.rs"]
mod tests;
