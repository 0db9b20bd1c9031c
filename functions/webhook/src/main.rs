//! The webhook Lambda function (Function URL): always admits pods, and nudges tick when one is
//! created without a node. The logic is `fleetwright_runtime::webhook`.

use std::sync::Arc;

use fleetwright_connect::Clients;
use fleetwright_runtime::webhook::Webhook;
use lambda_http::{service_fn, Body, Error, Request, Response};

#[tokio::main]
async fn main() -> Result<(), Error> {
    fleetwright_connect::init_tracing();
    let clients = Clients::from_env().await?;
    // Read once per container, before the first request.
    let token = clients.webhook_token().await?;
    let webhook = Arc::new(Webhook::new(clients.nudge(), token));
    lambda_http::run(service_fn(move |request: Request| {
        let webhook = webhook.clone();
        async move { handle(&webhook, request).await }
    }))
    .await
}

async fn handle(
    webhook: &Webhook<fleetwright_aws::nudge::EventBridgeNudge>,
    request: Request,
) -> Result<Response<Body>, Error> {
    let path = request.uri().path().to_string();
    let answer = webhook
        .handle(&path, request.body().as_ref(), chrono::Utc::now())
        .await;
    Ok(Response::builder()
        .status(answer.status)
        .header("content-type", "application/json")
        .body(Body::from(answer.body.to_string()))?)
}
