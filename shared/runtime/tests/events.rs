//! Every file in `events/` parses with the `aws_lambda_events` types, keeps every field through a
//! round trip, and means what its name says to the function it is for.

mod common;

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use aws_lambda_events::event::lambda_function_urls::LambdaFunctionUrlRequest;
use aws_lambda_events::event::sqs::SqsEvent;
use base64::Engine;
use chrono::Utc;
use common::*;
use fleetwright_runtime::interruption::{parse, Kind};
use fleetwright_runtime::webhook::Webhook;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

/// Every non-null field of `original` is in `copy` with the same value.
fn assert_kept(original: &Value, copy: &Value, at: &str) {
    match (original, copy) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in a.iter().filter(|(_, v)| !v.is_null()) {
                let other = b.get(k).unwrap_or_else(|| panic!("{at}.{k} was lost"));
                assert_kept(v, other, &format!("{at}.{k}"));
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            assert_eq!(a.len(), b.len(), "{at}");
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                assert_kept(x, y, &format!("{at}[{i}]"));
            }
        }
        _ => assert_eq!(original, copy, "{at}"),
    }
}

fn round_trip<T: DeserializeOwned + Serialize>(name: &str) -> T {
    let original: Value = serde_json::from_str(&event_text(name)).unwrap();
    let typed: T =
        serde_json::from_value(original.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_kept(&original, &serde_json::to_value(&typed).unwrap(), name);
    typed
}

#[test]
fn tick_events_are_eventbridge_events() {
    let scheduled: EventBridgeEvent<Value> = round_trip("tick-scheduled.json");
    assert_eq!(
        (scheduled.source.as_str(), scheduled.detail_type.as_str()),
        ("aws.events", "Scheduled Event")
    );
    let nudge: EventBridgeEvent<Value> = round_trip("tick-pending-pod.json");
    assert_eq!(
        (nudge.source.as_str(), nudge.detail_type.as_str()),
        ("fleetwright", "Pending Pod")
    );
}

#[test]
fn interruption_events_parse_to_their_kinds() {
    let cases = [
        ("spot-interruption.json", Kind::SpotInterruption),
        (
            "rebalance-recommendation.json",
            Kind::RebalanceRecommendation,
        ),
        ("state-change.json", Kind::StateChange("stopping".into())),
        ("health-scheduled-change.json", Kind::ScheduledChange),
        (
            "capacity-reservation-interruption.json",
            Kind::CapacityReservationInterruption,
        ),
    ];
    for (file, kind) in cases {
        let event: EventBridgeEvent<Value> = round_trip(file);
        let message = parse(&event).unwrap().unwrap();
        assert_eq!(message.kind, kind, "{file}");
        assert_eq!(message.instance_ids, vec!["i-0abcdef1234567890"], "{file}");
    }
}

#[test]
fn the_sqs_batch_carries_two_eventbridge_events() {
    let batch: SqsEvent = round_trip("sqs-batch.json");
    assert_eq!(batch.records.len(), 2);
    for record in &batch.records {
        let event: EventBridgeEvent<Value> =
            serde_json::from_str(record.body.as_deref().unwrap()).unwrap();
        assert!(parse(&event).unwrap().is_some());
    }
}

#[tokio::test]
async fn the_function_url_request_carries_an_admission_review_the_webhook_admits() {
    let request: LambdaFunctionUrlRequest = round_trip("webhook-admission.json");
    assert!(request.is_base64_encoded);
    let body = base64::engine::general_purpose::STANDARD
        .decode(request.body.unwrap())
        .unwrap();
    let nudges = Recorder::default();
    let webhook = Webhook::new(nudges.clone(), None);
    let answer = webhook
        .handle(request.raw_path.as_deref().unwrap(), &body, Utc::now())
        .await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.body["response"]["allowed"], true);
    assert_eq!(
        answer.body["response"]["uid"],
        "705ab4f5-6393-11e8-b7cc-42010a800002"
    );
    assert_eq!(nudges.count(), 1);
}
