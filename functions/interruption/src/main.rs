//! The interruption Lambda function: EC2 and AWS Health events, directly from EventBridge or as an
//! SQS batch (answered with `batchItemFailures`). The logic is `fleetwright_runtime::interruption`.

use std::sync::Arc;

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use aws_lambda_events::event::sqs::SqsEvent;
use fleetwright_connect::Clients;
use fleetwright_runtime::deadline::Deadline;
use fleetwright_runtime::interruption::Interruption;
use fleetwright_runtime::metrics::Metrics;
use lambda_runtime::{service_fn, Error, LambdaEvent};
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), Error> {
    fleetwright_connect::init_tracing();
    let clients = Arc::new(Clients::from_env().await?);
    let cloud = Arc::new(clients.cloud());
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| {
        let (clients, cloud) = (clients.clone(), cloud.clone());
        async move {
            let deadline =
                Deadline::from_epoch_millis(event.context.deadline, std::time::SystemTime::now());
            handle(&clients, cloud, event.payload, deadline).await
        }
    }))
    .await
}

async fn handle(
    clients: &Clients,
    cloud: Arc<fleetwright_aws::Ec2Cloud>,
    payload: Value,
    deadline: Deadline,
) -> Result<Value, Error> {
    let use_case = Interruption::new(
        cloud,
        clients.kube().await?,
        clients.nudge(),
        clients.settings.clone(),
    )
    .with_deadline(deadline);
    let now = chrono::Utc::now();
    let mut metrics = Metrics::default();
    let answer = if payload.get("Records").is_some() {
        let batch: SqsEvent = serde_json::from_value(payload)?;
        serde_json::to_value(use_case.handle_sqs(batch, now, &mut metrics).await)?
    } else {
        let event: EventBridgeEvent<Value> = serde_json::from_value(payload)?;
        let outcomes = use_case.handle_event(&event, now, &mut metrics).await?;
        serde_json::to_value(outcomes)?
    };
    metrics.emit(
        &clients.settings.cluster_name,
        now.timestamp_millis(),
        &mut std::io::stdout().lock(),
    )?;
    Ok(answer)
}
