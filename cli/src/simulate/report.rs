//! What a simulation reports: samples of the fleet over time against the LP lower bound, each
//! timeline step's outcome, pod pending latency, interruptions handled and disruptions by reason;
//! as JSON (`--output json`) or as a summary table.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

/// The fleet at one moment (after that second's tick).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Sample {
    /// Seconds from the start.
    pub t: i64,
    pub nodes: usize,
    pub ready_nodes: usize,
    pub running_pods: usize,
    pub pending_pods: usize,
    pub hourly_cost: f64,
    /// The LP lower bound on the hourly cost of the workload pods at that moment.
    pub lower_bound: f64,
    /// The requests of the pods on the nodes over their allocatable CPU and memory (measured
    /// against a real API server only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_utilization: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_utilization: Option<f64>,
}

/// What followed one timeline step, up to the next step (or the end).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StepOutcome {
    pub at: i64,
    pub action: String,
    /// When the step's window closes (the next step, or the end).
    pub until: i64,
    pub nodes_before: usize,
    pub nodes_after: usize,
    pub cost_before: f64,
    pub cost_after: f64,
    /// For a scale: seconds until every replica was running (None: not within the window).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub all_running_after: Option<i64>,
    /// Seconds until no node was left, when that happened within the window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_nodes_after: Option<i64>,
    /// Seconds until the fleet's cost last changed within the window: when it settled (None:
    /// it did not change).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settled_after: Option<i64>,
    /// Seconds until the fleet's cost came within 5 % of its cost at the window's close, and
    /// stayed there (None: it did not change).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub near_settled_after: Option<i64>,
}

/// One spot interruption, from the warning to its replacement.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct InterruptionOutcome {
    pub at: i64,
    pub instance_id: String,
    pub instance_type: String,
    pub node: Option<String>,
    pub nodepool: String,
    /// Workload pods on the node at the warning.
    pub pods_displaced: usize,
    /// When the instance was gone (terminated after the drain, or reclaimed by EC2).
    pub gone_at: Option<i64>,
    /// The first instance launched for the same NodePool at or after the warning.
    pub replacement: Option<String>,
    pub replacement_launched_at: Option<i64>,
    /// The longest any pod created within 3 minutes of the warning waited to be bound.
    pub max_pending_seconds: i64,
}

/// One instance launch.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Launch {
    pub at: i64,
    pub instance_id: String,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
    pub nodepool: String,
    /// The partition of its partition placement group.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partition: Option<i32>,
}

/// One disruption command decided by a tick.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DisruptionEvent {
    pub at: i64,
    /// `<reason>/<NodeClaim>`, as the tick summary names it.
    pub command: String,
}

/// Pending-to-bound latency of workload pods (still-pending pods count with their age).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Latency {
    pub pods: usize,
    pub p50: i64,
    pub p99: i64,
    pub max: i64,
}

impl Latency {
    pub fn of(mut waits: Vec<i64>) -> Latency {
        waits.sort_unstable();
        let rank = |q: f64| -> i64 {
            if waits.is_empty() {
                return 0;
            }
            let i = ((q * waits.len() as f64).ceil() as usize).clamp(1, waits.len()) - 1;
            waits[i]
        };
        Latency {
            pods: waits.len(),
            p50: rank(0.50),
            p99: rank(0.99),
            max: waits.last().copied().unwrap_or(0),
        }
    }
}

/// The whole report.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub scenario: String,
    /// The region whose catalog the simulation ran on.
    pub region: String,
    /// Where the prices came from, estimates marked.
    #[serde(default)]
    pub prices: Vec<String>,
    pub description: String,
    pub seed: u64,
    pub duration_seconds: i64,
    pub samples: Vec<Sample>,
    pub steps: Vec<StepOutcome>,
    pub pending_latency: Latency,
    pub interruptions: Vec<InterruptionOutcome>,
    /// Every instance launched, in order.
    pub launches: Vec<Launch>,
    /// Disruption commands decided, by reason (`Empty`, `Underutilized`, `Drifted`, ...).
    pub disruptions: BTreeMap<String, usize>,
    /// Every disruption command, in order, with the second its tick decided it.
    pub disruption_events: Vec<DisruptionEvent>,
    pub ticks: usize,
    pub instances_launched: usize,
    pub instances_terminated: usize,
    /// Overrides CreateFleet refused for insufficient capacity.
    pub insufficient_capacity_errors: usize,
    pub final_nodes: usize,
    pub final_hourly_cost: f64,
    /// Dollars spent over the run: the hourly cost summed second by second.
    pub cost_integral: f64,
    pub node_hours: f64,
    pub peak_nodes: usize,
    /// Nodes whose disruption began, by reason (a command of several nodes counts each).
    pub nodes_disrupted: BTreeMap<String, usize>,
    /// The autoscaler of a run against a real cluster, and what it used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub autoscaler: Option<AutoscalerUsage>,
    /// Fleetwright's shadow beside another autoscaler: what it would have done, compared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shadow: Option<fleetwright_runtime::shadow::Comparison>,
}

fn clock(t: i64) -> String {
    format!("{}:{:02}", t / 60, t % 60)
}

fn seconds(s: Option<i64>) -> String {
    s.map_or("not within the run".to_string(), |s| format!("{s}s"))
}

impl Report {
    /// The summary table.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "\nSimulation {:?} (seed {}, {}): {} simulated, {} ticks",
            self.scenario,
            self.seed,
            self.region,
            clock(self.duration_seconds),
            self.ticks
        );
        if !self.description.is_empty() {
            let _ = writeln!(out, "{}", self.description);
        }
        for note in &self.prices {
            let _ = writeln!(out, "{note}");
        }
        let _ = writeln!(
            out,
            "\n{:>6}  {:>5}  {:>7}  {:>7}  {:>9}  {:>9}  {:>7}",
            "time", "nodes", "running", "pending", "$/hour", "LP $/hour", "cost/LP"
        );
        for s in &self.samples {
            let ratio = if s.lower_bound > 0.0 {
                format!("{:.2}", s.hourly_cost / s.lower_bound)
            } else {
                "-".into()
            };
            let _ = writeln!(
                out,
                "{:>6}  {:>5}  {:>7}  {:>7}  {:>9.4}  {:>9.4}  {:>7}",
                clock(s.t),
                s.nodes,
                s.running_pods,
                s.pending_pods,
                s.hourly_cost,
                s.lower_bound,
                ratio
            );
        }
        let _ = writeln!(out, "\nTimeline:");
        for s in &self.steps {
            let mut line = format!(
                "  {:>6}  {}: nodes {} -> {}, ${:.4}/h -> ${:.4}/h by {}",
                clock(s.at),
                s.action,
                s.nodes_before,
                s.nodes_after,
                s.cost_before,
                s.cost_after,
                clock(s.until)
            );
            if s.action.starts_with("scale") {
                let _ = write!(
                    line,
                    "; all replicas running after {}",
                    seconds(s.all_running_after)
                );
            }
            if let Some(z) = s.no_nodes_after {
                let _ = write!(line, "; no nodes left after {z}s");
            }
            let _ = writeln!(out, "{line}");
        }
        let l = &self.pending_latency;
        let _ = writeln!(
            out,
            "\nPod pending latency: p50 {}s, p99 {}s, max {}s (over {} pod(s))",
            l.p50, l.p99, l.max, l.pods
        );
        let _ = writeln!(out, "Interruptions handled: {}", self.interruptions.len());
        for i in &self.interruptions {
            let _ = writeln!(
                out,
                "  {} {} ({}) on {}: {} pod(s) displaced, replaced by {} at {}, longest pending {}s",
                clock(i.at),
                i.instance_id,
                i.instance_type,
                i.node.as_deref().unwrap_or("no node"),
                i.pods_displaced,
                i.replacement.as_deref().unwrap_or("nothing"),
                i.replacement_launched_at.map_or("-".into(), clock),
                i.max_pending_seconds
            );
        }
        let reasons: Vec<String> = self
            .disruptions
            .iter()
            .map(|(r, n)| format!("{r} {n}"))
            .collect();
        let _ = writeln!(
            out,
            "Disruptions by reason: {}",
            if reasons.is_empty() {
                "none".to_string()
            } else {
                reasons.join(", ")
            }
        );
        let _ = writeln!(
            out,
            "Instances: {} launched ({} insufficient-capacity errors), {} terminated; {} node(s) left at ${:.4}/h",
            self.instances_launched,
            self.insufficient_capacity_errors,
            self.instances_terminated,
            self.final_nodes,
            self.final_hourly_cost
        );
        out
    }
}

#[cfg(test)]
#[path = "../../tests/unit/simulate/report.rs"]
mod tests;

/// Karpenter's CPU time and peak memory over the run.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub cpu_seconds: f64,
    pub peak_rss_mib: f64,
}

/// Fleetwright's invocations of one function over the run.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Invocations {
    pub count: usize,
    /// Their summed wall time, what Lambda bills.
    pub seconds: f64,
}

/// What the run's autoscaler used.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AutoscalerUsage {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub karpenter: Option<Usage>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub invocations: BTreeMap<String, Invocations>,
}
