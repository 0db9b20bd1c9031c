//! What AWS sends the interruption function in a simulation: EC2's spot interruption warnings
//! and state changes as EventBridge events, delivered as one SQS batch the way the queue does.

use aws_lambda_events::event::sqs::SqsEvent;
use chrono::{DateTime, Utc};
use fleetwright_runtime::interruption::Interruption;
use fleetwright_runtime::metrics::Metrics;
use fleetwright_runtime::nudge::Nudge;
use fleetwright_sim::SimCloud;
use serde_json::{json, Value};
use tracing::{info, warn};

use super::report::InterruptionOutcome;
use super::{watch, ACCOUNT, CLUSTER};

/// Delivers EventBridge events to the interruption function as one SQS batch, as the queue
/// does; a message it fails is logged (SQS would redeliver it).
pub(super) async fn deliver<C, N>(
    interruption: &Interruption<C, N>,
    events: Vec<Value>,
    now: DateTime<Utc>,
) where
    C: fleetwright_cloud::Cloud,
    N: Nudge,
{
    if events.is_empty() {
        return;
    }
    let records: Vec<Value> = events
        .iter()
        .map(|e| {
            json!({"messageId": e["id"], "receiptHandle": format!("rh-{}", e["id"].as_str().unwrap_or_default()),
                "body": e.to_string(), "attributes": {}, "messageAttributes": {},
                "md5OfBody": "", "eventSource": "aws:sqs", "awsRegion": "us-east-1",
                "eventSourceARN": format!("arn:aws:sqs:us-east-1:{ACCOUNT}:fleetwright-{CLUSTER}-interruption")})
        })
        .collect();
    let batch: SqsEvent = match serde_json::from_value(json!({ "Records": records })) {
        Ok(b) => b,
        Err(e) => {
            warn!(target: "simulate::queue", error = %e, "could not build the SQS batch");
            return;
        }
    };
    let mut metrics = Metrics::default();
    let response = interruption.handle_sqs(batch, now, &mut metrics).await;
    for failure in response.batch_item_failures {
        warn!(target: "simulate::queue", message_id = %failure.item_identifier, "interruption message failed; SQS would redeliver it");
    }
}

/// The interruption warning for `instance` (whose node, if it has one, holds `displaced` workload
/// pods), noted for the report at `(t, now)`.
pub(super) fn spot_warning(
    watch: &mut watch::Watch,
    (t, now): (i64, DateTime<Utc>),
    nodepool: &str,
    instance: &fleetwright_cloud::Instance,
    node: Option<String>,
    displaced: usize,
) -> Value {
    watch.interruptions.push(InterruptionOutcome {
        at: t,
        instance_id: instance.id.clone(),
        instance_type: instance.instance_type.clone(),
        pods_displaced: displaced,
        node,
        nodepool: nodepool.to_string(),
        ..Default::default()
    });
    ec2_event(
        "EC2 Spot Instance Interruption Warning",
        &instance.id,
        json!({"instance-id": instance.id, "instance-action": "terminate"}),
        now,
    )
}

/// EC2 reclaims warned spot instances whose two minutes are up: their state-change events.
pub(super) fn reclaimed(cloud: &SimCloud, now: DateTime<Utc>) -> Vec<Value> {
    cloud
        .reclaim(now)
        .into_iter()
        .map(|instance| {
            info!(target: "simulate::cloud", instance_id = %instance.id, "spot instance reclaimed");
            ec2_event(
                "EC2 Instance State-change Notification",
                &instance.id,
                json!({"instance-id": instance.id, "state": "shutting-down"}),
                now,
            )
        })
        .collect()
}

/// An EC2 event as EventBridge delivers it.
pub(super) fn ec2_event(
    detail_type: &str,
    instance_id: &str,
    detail: Value,
    now: DateTime<Utc>,
) -> Value {
    let id = format!(
        "{:08x}-sim-{}",
        fleetwright_sim::cluster::fnv(&format!("{detail_type}{instance_id}")) & 0xffff_ffff,
        now.timestamp()
    );
    json!({"version": "0", "id": id, "detail-type": detail_type, "source": "aws.ec2",
        "account": ACCOUNT, "time": now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        "region": "us-east-1",
        "resources": [format!("arn:aws:ec2:us-east-1:{ACCOUNT}:instance/{instance_id}")],
        "detail": detail})
}
