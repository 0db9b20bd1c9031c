//! `fleetwright replay-event` through the built binary: the interruption decisions for each
//! event shape against a cluster dump, the webhook's answer, a batch with a poison message, and
//! `--from-queue` against a moto SQS queue whose messages must still be there afterwards.

mod common;

use std::process::{Command, Output};

use common::{repo, write_temp};
use serde_json::{json, Value};

const CLUSTER: &str = "cli/tests/fixtures/interrupted-cluster.yaml";

fn replay(args: &[&str]) -> Output {
    let cluster = repo(CLUSTER);
    Command::new(env!("CARGO_BIN_EXE_fleetwright"))
        .arg("replay-event")
        .args(["--cluster", &cluster])
        .args(args)
        .output()
        .expect("run fleetwright")
}

fn stdout_json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}); stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn action_names(decision: &Value) -> Vec<String> {
    decision["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["action"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_spot_warning_replays_as_cordon_drain_delete_against_the_dump() {
    let out = replay(&["--event", &repo("events/spot-interruption.json")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let decision = stdout_json(&out);
    assert_eq!(decision["kind"], "spotInterruption");
    assert_eq!(decision["instances"], json!(["i-0abcdef1234567890"]));
    assert_eq!(decision["nodes"], json!(["ip-10-0-1-23.ec2.internal"]));
    assert_eq!(
        action_names(&decision),
        [
            "recordEvent",
            "cordon",
            "drain",
            "markUnavailable",
            "deleteNodeClaim"
        ]
    );
    let drain = &decision["actions"][2];
    assert_eq!(
        drain["pods"],
        json!(["shop/web-5d8f7c9b4-abcde"]),
        "DaemonSet pods stay"
    );
    assert_eq!(decision["actions"][4]["nodeclaim"], "default-x7k2p");
}

/// One object of the dump that does not read is named and left out, as the function leaves
/// it out: the event is still decided over the others, and the command exits non-zero after.
#[test]
fn a_bad_object_in_the_dump_is_named_and_the_event_still_decided() {
    let text = std::fs::read_to_string(repo(CLUSTER)).unwrap();
    let broken = "---\napiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: noname}\nspec: {template: {spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass}, requirements: []}}}\n";
    let path = write_temp("interrupted-broken.yaml", &format!("{text}\n{broken}"));
    let out = Command::new(env!("CARGO_BIN_EXE_fleetwright"))
        .args(["replay-event", "--cluster", &path])
        .args(["--event", &repo("events/spot-interruption.json")])
        .output()
        .expect("run fleetwright");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("NodePool noname"), "{stderr}");
    let decision = stdout_json(&out);
    assert!(
        action_names(&decision).contains(&"drain".to_string()),
        "{decision}"
    );
    assert_eq!(decision["leftOut"][0]["kind"], "NodePool", "{decision}");
    assert!(
        decision["leftOut"][0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("nodeClassRef")),
        "{decision}"
    );
}

#[test]
fn a_rebalance_recommendation_only_records_unless_drain_is_chosen() {
    let event = repo("events/rebalance-recommendation.json");
    let default = stdout_json(&replay(&["--event", &event]));
    assert_eq!(action_names(&default), ["recordEvent"]);
    let drain = stdout_json(&replay(&["--event", &event, "--rebalance", "drain"]));
    assert_eq!(
        action_names(&drain),
        ["recordEvent", "cordon", "drain", "deleteNodeClaim"],
        "a drained node is replaced, not left cordoned for good"
    );
}

#[test]
fn the_webhook_request_replays_as_admit_and_one_nudge() {
    let out = replay(&["--event", &repo("events/webhook-admission.json")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let decision = stdout_json(&out);
    assert_eq!(decision["function"], "webhook");
    assert_eq!(action_names(&decision), ["admit", "nudge"]);
    assert_eq!(
        decision["actions"][0]["uid"],
        "705ab4f5-6393-11e8-b7cc-42010a800002"
    );
    assert_eq!(
        decision["actions"][1]["detail"]["name"],
        "inflate-5db4558c8-00000"
    );
}

fn batch(bodies: &[(&str, String)]) -> String {
    let records: Vec<Value> = bodies
        .iter()
        .map(|(id, body)| json!({"messageId": id, "receiptHandle": format!("r-{id}"), "body": body,
            "attributes": {}, "messageAttributes": {}, "eventSource": "aws:sqs",
            "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:fleetwright-interruption-dlq", "awsRegion": "us-east-1"}))
        .collect();
    json!({"Records": records}).to_string()
}

#[test]
fn a_batch_with_a_poison_message_prints_every_result_and_exits_non_zero() {
    let spot = std::fs::read_to_string(repo("events/spot-interruption.json")).unwrap();
    let path = write_temp(
        "batch.json",
        &batch(&[("m-good", spot), ("m-poison", "{not json".to_string())]),
    );
    let out = replay(&["--event", &path]);
    assert!(!out.status.success(), "a poison message fails the replay");
    let items = stdout_json(&out);
    assert_eq!(items[0]["messageId"], "m-good");
    assert_eq!(items[0]["kind"], "spotInterruption");
    assert_eq!(items[1]["messageId"], "m-poison");
    assert!(items[1]["error"].as_str().unwrap().contains("not JSON"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("m-poison"));
}

#[test]
fn unreadable_events_name_the_file_and_exit_non_zero() {
    let path = write_temp("odd.json", r#"{"hello": "world"}"#);
    let out = replay(&["--event", &path]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("odd.json") && err.contains("not an EventBridge event"),
        "{err}"
    );
    let out = replay(&[
        "--event",
        &repo("events/spot-interruption.json"),
        "--from-queue",
        "x",
    ]);
    assert!(
        !out.status.success(),
        "--event and --from-queue exclude each other"
    );
}

#[cfg(feature = "aws")]
fn moto_endpoint() -> String {
    let endpoint = std::env::var("FLEETWRIGHT_MOTO_ENDPOINT").expect(
        "FLEETWRIGHT_MOTO_ENDPOINT must point at a local moto server (scripts/test.sh sets it)",
    );
    assert!(
        endpoint.starts_with("http://127.0.0.1:"),
        "tests only talk to a loopback moto, not {endpoint}"
    );
    endpoint
}

#[cfg(feature = "aws")]
#[tokio::test(flavor = "current_thread")]
async fn from_queue_replays_every_waiting_message_and_leaves_them_there() {
    let endpoint = moto_endpoint();
    let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .endpoint_url(&endpoint)
        .region(aws_config::Region::new("us-east-1"))
        .load()
        .await;
    let sqs = aws_sdk_sqs::Client::new(&config);
    let url = sqs
        .create_queue()
        .queue_name(format!("replay-dlq-{}", std::process::id()))
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    let spot = std::fs::read_to_string(repo("events/spot-interruption.json")).unwrap();
    let state = std::fs::read_to_string(repo("events/state-change.json")).unwrap();
    for body in [spot, state] {
        sqs.send_message()
            .queue_url(&url)
            .message_body(body)
            .send()
            .await
            .unwrap();
    }
    let cluster = repo(CLUSTER);
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_fleetwright"))
        .args(["replay-event", "--cluster", &cluster, "--from-queue", &url])
        .env("AWS_ENDPOINT_URL", &endpoint)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let items = stdout_json(&out);
    let mut kinds: Vec<&str> = items
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["kind"].as_str().unwrap())
        .collect();
    kinds.sort();
    assert_eq!(kinds, ["spotInterruption", "stateChange"]);
    let left = sqs
        .receive_message()
        .queue_url(&url)
        .max_number_of_messages(10)
        .send()
        .await
        .unwrap()
        .messages
        .unwrap_or_default();
    assert_eq!(left.len(), 2, "replay never consumes the queue");
}

#[cfg(not(feature = "aws"))]
#[test]
fn from_queue_without_the_aws_feature_says_how_to_get_it() {
    let out = replay(&["--from-queue", "http://127.0.0.1:1/q"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--features aws"), "{err}");
}
