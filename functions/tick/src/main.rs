//! The tick Lambda function: every minute (EventBridge schedule) and on each nudge (`Pending
//! Pod`, `Capacity Needed`), one reconcile of the cluster. The logic is `fleetwright_runtime::tick`.

use std::sync::Arc;

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
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
    lambda_runtime::run(service_fn(
        move |event: LambdaEvent<EventBridgeEvent<Value>>| {
            let (clients, cloud) = (clients.clone(), cloud.clone());
            async move { handle(&clients, cloud, event).await }
        },
    ))
    .await
}

async fn handle(
    clients: &Clients,
    cloud: Arc<fleetwright_aws::Ec2Cloud>,
    event: LambdaEvent<EventBridgeEvent<Value>>,
) -> Result<TickSummary, Error> {
    tracing::info!(trigger = %event.payload.detail_type, source = %event.payload.source, "tick");
    let kube = clients.kube().await?;
    let deadline =
        Deadline::from_epoch_millis(event.context.deadline, std::time::SystemTime::now());
    let tick = Tick::new(cloud, kube, clients.settings.clone()).with_deadline(deadline);
    let now = chrono::Utc::now();
    let started = std::time::Instant::now();
    let holder = &event.context.request_id;
    let nudge = matches!(
        event.payload.detail_type.as_str(),
        fleetwright_runtime::nudge::PENDING_POD | fleetwright_runtime::nudge::CAPACITY_NEEDED
    );
    let mut summary = match event.payload.time.filter(|_| nudge) {
        Some(sent) => tick.run_nudged(now, holder, sent).await?,
        None => tick.run(now, holder).await?,
    };
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
