use super::*;
use fleetwright_runtime::deadline::MARGIN;

/// Without a token the webhook refuses to start, naming the setting, unless serving every
/// caller was asked for in so many words.
#[test]
fn the_webhook_needs_a_token_or_an_explicit_opt_out() {
    let err = webhook_token_or_refusal(None, false)
        .unwrap_err()
        .to_string();
    assert!(err.contains("FLEETWRIGHT_WEBHOOK_TOKEN_PARAMETER"), "{err}");
    assert!(err.contains(WEBHOOK_UNAUTHENTICATED), "{err}");
    assert_eq!(webhook_token_or_refusal(None, true).unwrap(), None);
    let token = Some("0123456789abcdef".to_string());
    assert_eq!(
        webhook_token_or_refusal(token.clone(), false).unwrap(),
        token
    );

    let with =
        |v: &'static str| move |n: &str| (n == WEBHOOK_UNAUTHENTICATED).then(|| v.to_string());
    assert!(!unauthenticated_allowed(|_| None).unwrap());
    assert!(!unauthenticated_allowed(with("false")).unwrap());
    assert!(unauthenticated_allowed(with("true")).unwrap());
    let bad = unauthenticated_allowed(with("yes please")).unwrap_err();
    assert!(bad.to_string().contains(WEBHOOK_UNAUTHENTICATED), "{bad}");
}

/// Every AWS call has a connect, an attempt and an operation timeout, and the operation's
/// (every retry included) fits the deadline margin: without them a hung connection lasts
/// until Lambda cuts the invocation off.
#[tokio::test]
async fn aws_calls_are_bounded_within_the_deadline_margin() {
    let sdk = sdk_defaults()
        .region(aws_config::Region::new("us-east-1"))
        .load()
        .await;
    let timeouts = sdk.timeout_config().expect("timeouts are set");
    assert_eq!(timeouts.connect_timeout(), Some(CONNECT_TIMEOUT));
    assert_eq!(timeouts.operation_attempt_timeout(), Some(ATTEMPT_TIMEOUT));
    let operation = timeouts.operation_timeout().expect("an operation timeout");
    assert!(operation <= MARGIN, "{operation:?} > {MARGIN:?}");
    assert!(ATTEMPT_TIMEOUT < operation && CONNECT_TIMEOUT < ATTEMPT_TIMEOUT);
    let retries = sdk.retry_config().expect("a retry policy");
    assert!(retries.max_backoff() < ATTEMPT_TIMEOUT);
}

/// Against an endpoint that accepts and never answers, a call fails after the operation
/// timeout instead of hanging.
#[tokio::test]
async fn a_hung_aws_endpoint_fails_the_call_within_the_operation_timeout() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            open.push(stream);
        }
    });
    let sdk = sdk_defaults()
        .region(aws_config::Region::new("us-east-1"))
        .endpoint_url(url)
        .credentials_provider(aws_credential_types::Credentials::new(
            "testing", "testing", None, None, "tests",
        ))
        .load()
        .await;
    let started = std::time::Instant::now();
    let call = aws_sdk_eventbridge::Client::new(&sdk)
        .list_event_buses()
        .send();
    let outcome = tokio::time::timeout(OPERATION_TIMEOUT * 3, call).await;
    held.abort();
    assert!(matches!(outcome, Ok(Err(_))), "the call failed on its own");
    assert!(started.elapsed() < OPERATION_TIMEOUT + Duration::from_secs(2));
}
