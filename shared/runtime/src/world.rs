//! The one loop that drives a simulated world second by second, and what starts a tick in it,
//! as AWS delivers it: the schedule, nudges (from the webhook and the interruption function,
//! through EventBridge, a second later) and the follow-ups the tick asks for (delayed messages
//! the tick function sends itself). `fleetwright simulate` (in memory and on a real control
//! plane) and the trace benchmark are worlds this loop drives; each says what a second of the
//! rest of Kubernetes is, and the loop says when the tick runs.
//!
//! A follow-up from a tick that a later tick has superseded is skipped when it arrives
//! (`Tick::run_follow_up`), so only the latest tick's is alive: the loop keeps that one.

use std::future::Future;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::nudge::Nudge;
use crate::tick::TickSummary;

/// A simulated world: the cluster, its cloud and Fleetwright's functions in it.
pub trait World {
    /// What ends a run early.
    type Error;

    /// A tick every this many seconds.
    fn schedule(&self) -> i64;

    /// The next second to simulate, as seconds from the start and the time; None ends the run.
    fn next_second(
        &mut self,
    ) -> impl Future<Output = Result<Option<(i64, DateTime<Utc>)>, Self::Error>>;

    /// The scenario's steps due at `t` and one second of the rest of Kubernetes. Returns whether
    /// Fleetwright's tick plays in this world (false when another autoscaler does).
    fn second(&mut self, t: i64, now: DateTime<Utc>) -> impl Future<Output = bool>;

    /// Whether a nudge arrived since the last call (it starts a tick a second later).
    fn nudged(&mut self) -> bool;

    /// Runs the tick; None when it failed.
    fn tick(&mut self, t: i64, now: DateTime<Utc>) -> impl Future<Output = Option<TickSummary>>;

    /// What is measured at the end of second `t`, and the wait for the next one.
    fn end_second(&mut self, t: i64) -> impl Future<Output = ()>;
}

/// Runs the world until it ends.
pub async fn drive<W: World>(world: &mut W) -> Result<(), W::Error> {
    let mut cadence = Cadence::new(world.schedule());
    while let Some((t, now)) = world.next_second().await? {
        if world.second(t, now).await {
            if world.nudged() {
                cadence.nudge(t);
            }
            if cadence.due(t) {
                let summary = world.tick(t, now).await;
                cadence.ran(t, t, summary.as_ref());
                // A nudge sent during the tick waits for the next second.
                if world.nudged() {
                    cadence.nudge(t);
                }
            }
        }
        world.end_second(t).await;
    }
    Ok(())
}

/// When the tick runs: on the schedule, a second after a nudge, and when the latest tick's
/// follow-up is due. Seconds may be skipped (a world on a wall clock falls behind): a schedule
/// slot is kept once, whenever its first second comes.
#[derive(Clone, Debug)]
pub struct Cadence {
    schedule: i64,
    last_tick: Option<i64>,
    nudged_for: Option<i64>,
    follow_ups: FollowUps,
}

impl Cadence {
    pub fn new(schedule: i64) -> Cadence {
        Cadence {
            schedule: schedule.max(1),
            last_tick: None,
            nudged_for: None,
            follow_ups: FollowUps::default(),
        }
    }

    /// A nudge at second `t` asks for a tick at `t + 1` (an earlier one asked stands).
    pub fn nudge(&mut self, t: i64) {
        self.nudged_for.get_or_insert(t + 1);
    }

    /// Whether a tick starts at `t`; a due follow-up is taken. A tick that starts answers the
    /// nudges sent before `t`; one sent at `t` still starts its own tick at `t + 1`, as its
    /// EventBridge event invokes the function whatever the schedule did.
    pub fn due(&mut self, t: i64) -> bool {
        let scheduled = self
            .last_tick
            .is_none_or(|last| t.div_euclid(self.schedule) != last.div_euclid(self.schedule));
        let nudged = self.nudged_for.is_some_and(|n| n <= t);
        let followed_up = self.follow_ups.due(t);
        let due = scheduled || nudged || followed_up;
        if due {
            self.last_tick = Some(t);
            self.nudged_for = self.nudged_for.filter(|&n| n > t);
        }
        due
    }

    /// The tick that started at `t` ended at `until` (a slow one spans seconds, and the slots it
    /// spanned are its own) and asked for what `summary` says.
    pub fn ran(&mut self, t: i64, until: i64, summary: Option<&TickSummary>) {
        self.last_tick = Some(until.max(t));
        if let Some(summary) = summary {
            self.follow_ups.note(summary, t);
        }
    }
}

/// Nudges are queued and start a tick a second later, as EventBridge delivers them.
#[derive(Clone, Debug, Default)]
pub struct QueuedNudges(Arc<Mutex<Vec<String>>>);

impl QueuedNudges {
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

impl Nudge for QueuedNudges {
    async fn nudge(
        &self,
        detail_type: &str,
        _detail: Value,
    ) -> Result<(), fleetwright_cloud::CloudError> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(detail_type.to_string());
        Ok(())
    }
}

/// The latest tick's follow-up, as the second it is due.
#[derive(Clone, Debug, Default)]
pub struct FollowUps(Option<i64>);

impl FollowUps {
    /// Notes what a tick at second `t` asked for (a tick that did not run changes nothing).
    pub fn note(&mut self, summary: &TickSummary, t: i64) {
        if summary.skipped.is_none() {
            self.0 = summary.follow_up_seconds.map(|after| t + after.max(1));
        }
    }

    /// Whether the follow-up is due at `t`; a due one is delivered (taken).
    pub fn due(&mut self, t: i64) -> bool {
        let due = self.0.is_some_and(|at| at <= t);
        if due {
            self.0 = None;
        }
        due
    }
}

#[cfg(test)]
#[path = "../tests/unit/world.rs"]
mod tests;
