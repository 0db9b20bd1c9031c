//! How the chaos run invokes the tick: sometimes cut off at a random await point, sometimes two
//! at once, sometimes with a real deadline that runs out part-way, and sometimes slowly: every
//! API request of a slow tick yields, and the simulated seconds go on between its requests (the
//! kubelets, the controllers, the scheduler, and the interruption function handling the queue),
//! with the invariants checked each second, as when a real tick takes its time against a busy
//! API server.

use std::cell::Cell;
use std::time::Instant;

use fleetwright_runtime::deadline::{Deadline, MARGIN};
use fleetwright_runtime::tick::{Tick, TickSummary};
use fleetwright_runtime::RuntimeError;
use fleetwright_sim::cluster::PODS;
use fleetwright_sim::memory::Fault;
use tracing::warn;

use super::additions::BROKEN_PREFIX;
use super::{stamp, Chaos, CHAOS_END, CUT, FOREIGN};

/// A slow tick lets at most this many simulated seconds pass.
const SLOW_TICK_SECONDS: i64 = 40;

impl Chaos {
    /// The tick that starts at second `t`. Returns the last second it reached (a slow tick ends
    /// later than it started), or the first invariant broken while it ran, with its second.
    pub(super) async fn tick(&mut self, t: i64) -> Result<i64, (i64, String)> {
        let chaos = t < CHAOS_END;
        let now = stamp(self.sim.start, t);
        let cut = chaos && self.chance(0.08);
        if cut {
            let fault = Fault {
                method: "WRITE".into(),
                path: "/".into(),
                status: 503,
                skip: self.rng.below(12),
                times: CUT,
            };
            self.sim.cluster.api.lock().faults.push(fault);
            self.count("ticks cut off");
        }
        self.sim.watch.ticks += 1;
        if let Some(pods) = self.sim.cluster.api.lock().objects.get(PODS) {
            self.seen.settled.sample(pods);
        }
        let mut last = Ok(t);
        let finished = if chaos && self.chance(0.1) {
            self.count("concurrent ticks");
            let tick = &self.sim.tick;
            let other = Tick::new(tick.cloud.clone(), tick.kube.clone(), tick.settings.clone());
            let (first, second) = (format!("chaos-{t}-a"), format!("chaos-{t}-b"));
            let (a, b) = tokio::join!(tick.run(now, &first), other.run(now, &second));
            let a = self.tick_done(a, t);
            self.tick_done(b, t) || a
        } else if chaos && self.chance(0.15) {
            let (ok, reached) = self.slow_tick(t).await;
            last = reached;
            ok
        } else if chaos && self.chance(0.05) {
            self.count("ticks with a deadline running out");
            let left = MARGIN + std::time::Duration::from_micros(self.rng.below(3000) as u64);
            let tick = &self.sim.tick;
            let short = Tick::new(tick.cloud.clone(), tick.kube.clone(), tick.settings.clone())
                .with_deadline(Deadline::at(Instant::now() + left));
            let result = short.run(now, &format!("chaos-{t}-deadline")).await;
            self.tick_done(result, t)
        } else {
            let result = self.sim.tick.run(now, &format!("chaos-{t}")).await;
            self.tick_done(result, t)
        };
        if !finished {
            self.seen.failed_ticks.push(t);
            if !self.failed_on_broken && self.seen.failed_elsewhere.last() != Some(&t) {
                self.seen.failed_elsewhere.push(t);
            }
        }
        self.failed_on_broken = false;
        if cut {
            self.sim
                .cluster
                .api
                .lock()
                .faults
                .retain(|f| f.times > 0 && f.times < CUT / 2);
        }
        last
    }

    /// A tick whose requests each let the world go on: a simulated second passes every few
    /// requests (drawn per tick), up to [`SLOW_TICK_SECONDS`]. Returns whether the tick
    /// finished, and the last second reached or the violation seen.
    async fn slow_tick(&mut self, t: i64) -> (bool, Result<i64, (i64, String)>) {
        self.count("slow ticks beside the world");
        let per_second = 3 + self.rng.below(20);
        let now = stamp(self.sim.start, t);
        let tick = &self.sim.tick;
        let slow = Tick::new(tick.cloud.clone(), tick.kube.clone(), tick.settings.clone());
        let api = self.sim.cluster.api.clone();
        api.lock().yield_requests = true;
        let done = Cell::new(false);
        let id = format!("chaos-{t}-slow");
        let duration = self.sim.scenario.duration;
        let (result, reached) = tokio::join!(
            async {
                let result = slow.run(now, &id).await;
                done.set(true);
                result
            },
            async {
                let mut s = t;
                let mut seen = api.lock().requests.len();
                while !done.get() {
                    tokio::task::yield_now().await;
                    let n = api.lock().requests.len();
                    if n - seen < per_second || s - t >= SLOW_TICK_SECONDS || s >= duration {
                        continue;
                    }
                    seen = n;
                    s += 1;
                    if let Some(v) = self.second(s).await {
                        return Err((s, v));
                    }
                    if let Some(v) = self.check(s) {
                        return Err((s, v));
                    }
                }
                Ok(s)
            }
        );
        api.lock().yield_requests = false;
        (self.tick_done(result, t), reached)
    }

    /// Notes a tick's outcome; returns whether it ran to its end.
    pub(super) fn tick_done(&mut self, result: Result<TickSummary, RuntimeError>, t: i64) -> bool {
        match result {
            Ok(summary) => {
                self.sim.watch.note_tick(&summary, t);
                self.cadence.ran(t, t, Some(&summary));
                if summary.skipped.is_some() || summary.stopped_early.is_some() {
                    return false;
                }
                // Its own actions failed (a TerminateInstances fault, say): the tick ran, but
                // the work the pairing waits for was not done.
                let acted = summary.failures.is_empty()
                    && summary
                        .termination_failures
                        .iter()
                        .all(|f| f.contains(FOREIGN));
                if !acted {
                    self.seen.failed_ticks.push(t);
                }
                // A launch or termination the faults refused is not the malformed object's
                // doing: the healthy pools' pending time allows for it.
                let refused = !acted
                    || summary
                        .launch_failures
                        .iter()
                        .any(|f| !f.starts_with(BROKEN_PREFIX));
                if refused && self.seen.failed_elsewhere.last() != Some(&t) {
                    self.seen.failed_elsewhere.push(t);
                }
                self.unschedulable = summary
                    .unschedulable
                    .iter()
                    .filter_map(|u| u.split(": ").next())
                    .map(str::to_string)
                    .collect();
                true
            }
            Err(e) => {
                warn!(target: "simulate::tick", error = %e, "tick failed; the next one retries");
                if e.to_string().contains(BROKEN_PREFIX) {
                    self.failed_on_broken = true;
                }
                false
            }
        }
    }
}
