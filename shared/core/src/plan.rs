//! The plan: the core's decisions as data. New NodeClaims with their instance-type options,
//! placements on existing capacity, unschedulable pods with one-line reasons, and cost.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::Taint;
use crate::requirements::{Operator, Requirement};
use crate::resources::Resources;

/// A NodeClaim to create.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NewNodeClaim {
    pub nodepool: String,
    /// Cheapest first; at most 60 unless `minValues` needs more.
    pub instance_types: Vec<String>,
    pub capacity_types: Vec<String>,
    pub zones: Vec<String>,
    /// `namespace/name` of the pods it is for.
    pub pods: Vec<String>,
    /// Pod requests plus DaemonSet overhead.
    pub requests: Resources,
    /// Hourly price of the cheapest option, USD.
    pub price: f64,
    pub requirements: Vec<RequirementOut>,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub startup_taints: Vec<Taint>,
    pub node_class: String,
    /// For a pool with `minValues`: whether they were lowered to launch it (`BestEffort`);
    /// written as `karpenter.sh/nodeclaim-min-values-relaxed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_values_relaxed: Option<bool>,
    /// The capacity reservation its cheapest option launches into, when one does (each
    /// reservation taken by at most as many NodeClaims as it has instances left).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<String>,
}

/// A node selector requirement as Kubernetes writes it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RequirementOut {
    pub key: String,
    pub operator: String,
    pub values: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_values: Option<usize>,
}

impl RequirementOut {
    /// The requirements a node selector needs to express `r`: one, or two for a `Gt`/`Lt` range.
    pub fn from_requirement(r: &Requirement) -> Vec<RequirementOut> {
        let out = |operator: &str, values: Vec<String>| RequirementOut {
            key: r.key.clone(),
            operator: operator.to_string(),
            values,
            min_values: r.min_values,
        };
        match (r.operator(), r.greater_than(), r.less_than()) {
            (Operator::Exists, None, None)
            | (Operator::NotIn, None, None)
            | (Operator::In, _, _)
            | (Operator::DoesNotExist, _, _) => {
                vec![out(
                    &format!("{:?}", r.operator()),
                    r.values().iter().cloned().collect(),
                )]
            }
            (_, gt, lt) => {
                let mut reqs: Vec<RequirementOut> = Vec::new();
                if let Some(g) = gt {
                    reqs.push(out("Gt", vec![g.to_string()]));
                }
                if let Some(l) = lt {
                    reqs.push(out("Lt", vec![l.to_string()]));
                }
                if !r.values().is_empty() {
                    reqs.push(out("NotIn", r.values().iter().cloned().collect()));
                }
                reqs
            }
        }
    }
}

/// A pod that fits on an existing node or in-flight NodeClaim.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ExistingPlacement {
    pub pod: String,
    pub node: String,
}

/// A pod that cannot be placed, and why.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Unschedulable {
    pub pod: String,
    pub reason: String,
}

/// The plan's hourly price and the LP lower bound for the same pods.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Cost {
    pub hourly: f64,
    pub lower_bound: f64,
}

/// The scheduling decisions of one pass.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Plan {
    pub nodeclaims: Vec<NewNodeClaim>,
    pub existing: Vec<ExistingPlacement>,
    pub unschedulable: Vec<Unschedulable>,
    pub cost: Cost,
    /// Set when the packing counted on more reservation instances than were left, so some
    /// NodeClaims lost their reserved offering: the scheduler plans those pods again.
    #[serde(skip)]
    pub reservations_short: bool,
}

impl Plan {
    /// Karpenter's log line: `computed packing of N node(s) for M pod(s) with instance type option(s) [...]`.
    pub fn packing_line(&self) -> String {
        let pods: usize = self.nodeclaims.iter().map(|n| n.pods.len()).sum();
        let mut types: Vec<&str> = Vec::new();
        for n in &self.nodeclaims {
            for t in n.instance_types.iter().take(5) {
                if !types.contains(&t.as_str()) {
                    types.push(t);
                }
            }
        }
        format!(
            "computed packing of {} node(s) for {} pod(s) with instance type option(s) [{}]",
            self.nodeclaims.len(),
            pods,
            types.join(" ")
        )
    }
}
