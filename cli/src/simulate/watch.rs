//! What a simulation watches while it runs, for its report: the timeline steps and what followed
//! them, launches, interruptions, disruption commands, and the fleet second by second. Shared by
//! the in-memory simulation and the run against a real API server (`--kubeconfig`), which feed
//! it the same observations from their own clusters.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Duration, Utc};
use fleetwright_runtime::tick::TickSummary;
use fleetwright_sim::SimInstance;

use super::report::{
    DisruptionEvent, InterruptionOutcome, Latency, Launch, Report, Sample, StepOutcome,
};
use super::scenario::Scenario;

#[derive(Debug, Default)]
pub struct Watch {
    pub samples: Vec<Sample>,
    /// Per second: nodes and hourly cost.
    pub series: Vec<(usize, f64)>,
    pub steps: Vec<StepOutcome>,
    /// Index into `steps` of a scale step still waiting for all its replicas, with its target.
    pub scaling: Vec<(usize, String, u32)>,
    pub interruptions: Vec<InterruptionOutcome>,
    /// Instances seen: id → (first second seen, NodePool).
    pub seen: BTreeMap<String, (i64, String)>,
    pub launches: Vec<Launch>,
    pub disruptions: BTreeSet<String>,
    pub disruption_events: Vec<DisruptionEvent>,
    pub ticks: usize,
}

impl Watch {
    /// A timeline step starts at `t`; returns its index.
    pub fn step(&mut self, t: i64, action: String, nodes: usize, cost: f64) -> usize {
        self.steps.push(StepOutcome {
            at: t,
            action,
            nodes_before: nodes,
            cost_before: cost,
            ..Default::default()
        });
        self.steps.len() - 1
    }

    /// The disruption commands a tick carried out, each counted once (a decision the cluster
    /// overtook before its confirmation disrupted nothing).
    pub fn note_tick(&mut self, summary: &TickSummary, t: i64) {
        let repairs = summary
            .repaired
            .iter()
            .map(|c| format!("unhealthy/delete:{c}"));
        // A node may reboot more than once: each commitment is its own event.
        let reboots = (summary.rebooted.iter()).map(|c| format!("unhealthy/reboot:{c}@{t}"));
        let reservations = (summary.reservation_expired.iter())
            .map(|c| format!("reservation-expiring/delete:{c}"));
        let expired = (summary.expired.iter()).map(|c| format!("expired/delete:{c}"));
        let commands = (summary.disruptions_started.iter().cloned())
            .chain(repairs)
            .chain(reboots)
            .chain(reservations)
            .chain(expired);
        self.note_disruptions(commands.collect::<Vec<_>>(), t);
    }

    /// Disruption commands seen at second `t` (`Reason/command:nodes`), each counted once.
    pub fn note_disruptions(&mut self, commands: impl IntoIterator<Item = String>, t: i64) {
        for command in commands {
            if self.disruptions.insert(command.clone()) {
                self.disruption_events
                    .push(DisruptionEvent { at: t, command });
            }
        }
    }

    /// The fleet at second `t`: the node count, the live instances and their cost; new
    /// instances are launches, and interrupted instances no longer live are gone.
    pub fn note_fleet(&mut self, t: i64, nodes: usize, live: &BTreeMap<String, SimInstance>) {
        let cost = live.values().fold(0.0, |sum, i| sum + i.price);
        self.series.push((nodes, cost));
        for (id, i) in live {
            if self.seen.contains_key(id) {
                continue;
            }
            self.seen.insert(id.clone(), (t, i.nodepool().to_string()));
            self.launches.push(Launch {
                at: t,
                instance_id: id.clone(),
                instance_type: i.instance.instance_type.clone(),
                zone: i.instance.zone.clone(),
                capacity_type: i.instance.capacity_type.clone(),
                nodepool: i.nodepool().to_string(),
                partition: i.instance.partition,
            });
        }
        for i in self
            .interruptions
            .iter_mut()
            .filter(|i| i.gone_at.is_none())
        {
            if !live.contains_key(&i.instance_id) {
                i.gone_at = Some(t);
            }
        }
    }

    /// Closes the scale steps whose deployment `all_running(deployment, replicas)` says has
    /// every replica running.
    pub fn note_scaling(&mut self, t: i64, mut all_running: impl FnMut(&str, u32) -> bool) {
        let done: Vec<(usize, i64)> = self
            .scaling
            .iter()
            .filter(|(_, d, replicas)| all_running(d, *replicas))
            .map(|(i, _, _)| (*i, t - self.steps[*i].at))
            .collect();
        for (index, after) in done {
            self.steps[index].all_running_after = Some(after);
            self.scaling.retain(|(i, _, _)| *i != index);
        }
    }

    /// The report, with every pod's wait (`(created, seconds pending)`) and the cloud's counts
    /// of instances launched, terminated and capacity errors.
    pub fn report(
        &mut self,
        scenario: &Scenario,
        catalog: &fleetwright_core::Catalog,
        start: DateTime<Utc>,
        waits: &[(DateTime<Utc>, i64)],
        counts: (usize, usize, usize),
    ) -> Report {
        let end = scenario.duration;
        self.close_steps(end);
        self.close_interruptions(start, waits);
        let mut disruptions: BTreeMap<String, usize> = BTreeMap::new();
        for d in &self.disruptions {
            let reason = d.split('/').next().unwrap_or(d).to_string();
            *disruptions.entry(reason).or_default() += 1;
        }
        let (launched, terminated, capacity_errors) = counts;
        let (final_nodes, final_cost) = self.series.last().copied().unwrap_or_default();
        let mut nodes_disrupted: BTreeMap<String, usize> = BTreeMap::new();
        for d in &self.disruptions {
            let (reason, command) = d.split_once('/').unwrap_or((d, ""));
            let nodes = command
                .split_once(':')
                .map_or(1, |(_, n)| n.split(',').count());
            *nodes_disrupted.entry(reason.to_string()).or_default() += nodes;
        }
        Report {
            scenario: scenario.name.clone(),
            region: catalog.region.clone(),
            prices: catalog.price_notes(),
            description: scenario.description.clone(),
            seed: scenario.seed,
            duration_seconds: end,
            samples: std::mem::take(&mut self.samples),
            steps: self.steps.clone(),
            pending_latency: Latency::of(waits.iter().map(|(_, s)| *s).collect()),
            interruptions: self.interruptions.clone(),
            launches: self.launches.clone(),
            disruptions,
            disruption_events: std::mem::take(&mut self.disruption_events),
            ticks: self.ticks,
            instances_launched: launched,
            instances_terminated: terminated,
            insufficient_capacity_errors: capacity_errors,
            final_nodes,
            final_hourly_cost: final_cost,
            cost_integral: self.series.iter().map(|(_, cost)| cost / 3600.0).sum(),
            node_hours: self.series.iter().map(|(n, _)| *n as f64 / 3600.0).sum(),
            peak_nodes: self.series.iter().map(|(n, _)| *n).max().unwrap_or(0),
            nodes_disrupted,
            autoscaler: None,
            shadow: None,
        }
    }

    /// Each step's window (to the next step, or the end) and the fleet at its close.
    fn close_steps(&mut self, end: i64) {
        let series = &self.series;
        let starts: Vec<i64> = self.steps.iter().map(|s| s.at).collect();
        for (k, step) in self.steps.iter_mut().enumerate() {
            let until = starts
                .iter()
                .skip(k + 1)
                .copied()
                .find(|&a| a > step.at)
                .unwrap_or(end);
            step.until = until;
            // A window closed by the next step ends the second before it.
            let closing = if until < end { until - 1 } else { until };
            let last = series.len().saturating_sub(1).min(closing.max(0) as usize);
            (step.nodes_after, step.cost_after) = series.get(last).copied().unwrap_or_default();
            step.no_nodes_after = (step.nodes_before > 0)
                .then_some(step.at..=until)
                .into_iter()
                .flatten()
                .find(|&t| series.get(t as usize).is_some_and(|(n, _)| *n == 0))
                .map(|t| t - step.at);
            step.settled_after = last_cost_change(series, step.at, closing).map(|t| t - step.at);
            // A change in the step's own second (a launch at once) settles at 0.
            let changed =
                step.settled_after.is_some() || (step.cost_after - step.cost_before).abs() > 1e-9;
            step.near_settled_after = changed.then(|| {
                last_far_from(series, step.at, closing, step.cost_after, 0.05)
                    .map_or(0, |t| t + 1 - step.at)
            });
        }
    }

    /// Each interruption's longest wait of a pod created within 3 minutes of it, and its
    /// replacement (the first launch for the same NodePool at or after it).
    fn close_interruptions(&mut self, start: DateTime<Utc>, waits: &[(DateTime<Utc>, i64)]) {
        for i in &mut self.interruptions {
            let from = start + Duration::seconds(i.at);
            let to = from + Duration::minutes(3);
            i.max_pending_seconds = waits
                .iter()
                .filter(|(c, _)| *c >= from && *c <= to)
                .map(|(_, s)| *s)
                .max()
                .unwrap_or(0);
            let replacement = self
                .seen
                .iter()
                .filter(|(_, (t, pool))| *t >= i.at && *pool == i.nodepool)
                .min_by_key(|(id, (t, _))| (*t, (*id).clone()));
            if let Some((id, (t, _))) = replacement {
                i.replacement = Some(id.clone());
                i.replacement_launched_at = Some(*t);
            }
        }
    }
}

/// The last second in `from..=to` at which the fleet's cost differs from the second before.
fn last_cost_change(series: &[(usize, f64)], from: i64, to: i64) -> Option<i64> {
    let cost = |t: i64| {
        usize::try_from(t)
            .ok()
            .and_then(|i| series.get(i))
            .map(|s| s.1)
    };
    (from.max(1)..=to)
        .rev()
        .find(|&t| match (cost(t - 1), cost(t)) {
            (Some(before), Some(now)) => (now - before).abs() > 1e-9,
            _ => false,
        })
}

/// The last second in `from..=to` at which the fleet's cost is further than `fraction` of
/// `target` from it.
fn last_far_from(
    series: &[(usize, f64)],
    from: i64,
    to: i64,
    target: f64,
    fraction: f64,
) -> Option<i64> {
    let cost = |t: i64| {
        usize::try_from(t)
            .ok()
            .and_then(|i| series.get(i))
            .map(|s| s.1)
    };
    (from.max(0)..=to)
        .rev()
        .find(|&t| cost(t).is_some_and(|c| (c - target).abs() > fraction * target.max(1e-9)))
}
