//! The tick Lambda function: every minute (EventBridge schedule), on each nudge (`Pending Pod`,
//! `Node Joined`, `Capacity Needed`), and on its own follow-ups (delayed messages from its follow-up queue),
//! one reconcile of the cluster. The logic is `fleetwright_runtime::tick`.

// The handler's future holds every await of a whole tick, cloud calls included; laying it out
// takes more than the compiler's default 128 query levels.
#![recursion_limit = "256"]

use std::sync::Arc;

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use aws_lambda_events::event::sqs::SqsEvent;
use chrono::{DateTime, Utc};
use fleetwright_aws::follow_up::SqsFollowUp;
use fleetwright_connect::Clients;
use fleetwright_runtime::deadline::Deadline;
use fleetwright_runtime::metrics;
use fleetwright_runtime::tick::{Tick, TickSummary};
use lambda_runtime::{service_fn, Error, LambdaEvent};
use serde_json::Value;

// One thread: a tick is one sequential reconcile, and a single allocator arena keeps the peak
// memory of a large cluster's tick down (see docs/benchmarks.md).
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    fleetwright_connect::init_tracing();
    let clients = Arc::new(Clients::from_env().await?);
    let cloud = Arc::new(clients.cloud());
    let follow_up = Arc::new(clients.follow_up());
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| {
        let (clients, cloud, follow_up) = (clients.clone(), cloud.clone(), follow_up.clone());
        async move { handle(&clients, cloud, follow_up.as_ref().as_ref(), event).await }
    }))
    .await
}

/// What started this invocation.
#[derive(Debug, PartialEq)]
enum Trigger {
    /// The schedule (or anything else that asks for a plain tick).
    Scheduled,
    /// A nudge sent at this time: a tick that started after it has read what it was about.
    Nudged(DateTime<Utc>),
    /// A follow-up asked for by the tick that started at this time: a later tick supersedes it.
    FollowUp(DateTime<Utc>),
}

/// Reads the event: an SQS batch of follow-ups (the latest requester's counts: an older one's is
/// superseded by it), or an EventBridge event (a nudge, or the schedule). Anything else is a
/// plain tick.
fn trigger(payload: &Value) -> Trigger {
    if payload.get("Records").is_some() {
        let Ok(batch) = serde_json::from_value::<SqsEvent>(payload.clone()) else {
            return Trigger::Scheduled;
        };
        let latest = batch
            .records
            .iter()
            .filter_map(|r| r.body.as_deref())
            .filter_map(fleetwright_aws::follow_up::requested_by)
            .max();
        return latest.map_or(Trigger::Scheduled, Trigger::FollowUp);
    }
    let Ok(event) = serde_json::from_value::<EventBridgeEvent<Value>>(payload.clone()) else {
        return Trigger::Scheduled;
    };
    let nudge = fleetwright_runtime::nudge::is_nudge(&event.detail_type);
    match event.time.filter(|_| nudge) {
        Some(sent) => Trigger::Nudged(sent),
        None => Trigger::Scheduled,
    }
}

async fn handle(
    clients: &Clients,
    cloud: Arc<fleetwright_aws::Ec2Cloud>,
    follow_up: Option<&SqsFollowUp>,
    event: LambdaEvent<Value>,
) -> Result<TickSummary, Error> {
    let trigger = trigger(&event.payload);
    tracing::info!(trigger = ?trigger, "tick");
    let kube = clients.kube().await?;
    let deadline =
        Deadline::from_epoch_millis(event.context.deadline, std::time::SystemTime::now());
    let tick = Tick::new(cloud, kube, clients.settings.clone()).with_deadline(deadline);
    let now = Utc::now();
    let started = std::time::Instant::now();
    let holder = &event.context.request_id;
    let mut summary = match trigger {
        Trigger::Nudged(sent) => tick.run_nudged(now, holder, sent).await?,
        Trigger::FollowUp(requested_by) => tick.run_follow_up(now, holder, requested_by).await?,
        Trigger::Scheduled => tick.run(now, holder).await?,
    };
    if let (Some(after), Some(queue)) = (summary.follow_up_seconds, follow_up) {
        // A lost follow-up only waits for the schedule.
        if let Err(e) = queue.send(now, Utc::now(), after).await {
            tracing::warn!(error = %e, "could not send the follow-up; the schedule carries on");
        }
    }
    summary.metrics.add(metrics::TICKS, 1.0);
    let elapsed = started.elapsed().as_secs_f64();
    summary
        .metrics
        .set(metrics::TICK_DURATION, elapsed, metrics::Unit::Seconds);
    summary.metrics.emit(
        &clients.settings.cluster_name,
        now.timestamp_millis(),
        &mut std::io::stdout().lock(),
    )?;
    Ok(summary)
}

#[cfg(test)]
#[path = "../tests/unit/bin.rs"]
mod tests;
