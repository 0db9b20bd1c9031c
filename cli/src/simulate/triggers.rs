//! What starts a tick besides the schedule, as AWS delivers it: nudges (from the webhook and the
//! interruption function, through EventBridge, a second later), and the follow-ups the tick asks
//! for (a disruption to confirm, a command in flight), delayed messages the tick function sends
//! itself. A follow-up from a tick that a later tick has superseded is skipped when it arrives
//! (`Tick::run_follow_up`), so only the latest tick's is alive: the simulator keeps that one.

use std::sync::{Arc, Mutex};

use fleetwright_runtime::nudge::Nudge;
use fleetwright_runtime::tick::TickSummary;
use serde_json::Value;

/// Nudges are queued and start a tick a second later, as EventBridge delivers them.
#[derive(Clone, Debug, Default)]
pub(crate) struct QueuedNudges(Arc<Mutex<Vec<String>>>);

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
pub(crate) struct FollowUps(Option<i64>);

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
mod tests {
    use super::*;

    #[test]
    fn the_latest_ticks_follow_up_is_delivered_once_when_its_delay_is_up() {
        let mut follow_ups = FollowUps::default();
        let asking = |after| TickSummary {
            follow_up_seconds: Some(after),
            ..Default::default()
        };
        follow_ups.note(&asking(15), 60);
        follow_ups.note(&asking(10), 62);
        assert!(!follow_ups.due(71));
        assert!(follow_ups.due(72));
        assert!(!follow_ups.due(75));
        // A later tick that asks for nothing supersedes the earlier one's follow-up.
        follow_ups.note(&asking(15), 80);
        follow_ups.note(&TickSummary::default(), 81);
        assert!(!follow_ups.due(95));
        // A tick that was skipped leaves it.
        follow_ups.note(&asking(15), 100);
        let skipped = TickSummary {
            skipped: Some("another tick holds the lease".into()),
            ..Default::default()
        };
        follow_ups.note(&skipped, 101);
        assert!(follow_ups.due(115));
    }
}
