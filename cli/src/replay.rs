//! `fleetwright replay-event`: a dry run that prints, as JSON, what the interruption or webhook
//! function would do with an event against a cluster dump, without touching the cluster. It is
//! for debugging dead-lettered messages: with `--from-queue` it reads the messages waiting in a
//! queue (they stay there) and replays each one.

use std::path::{Path, PathBuf};

use anyhow::Context;
use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use aws_lambda_events::event::lambda_function_urls::LambdaFunctionUrlRequest;
use aws_lambda_events::event::sqs::SqsEvent;
use base64::Engine;
use clap::{Args, ValueEnum};
use fleetwright_kube::dump::ClusterDump;
use fleetwright_kube::interruption::{self, Envelope, RebalanceAction};
use fleetwright_kube::{admission, dump};
use serde_json::{json, Value};

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Rebalance {
    Event,
    Drain,
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The event: an EventBridge event (as delivered directly or as an SQS message body), an SQS
    /// batch, a Lambda Function URL request, or an AdmissionReview.
    #[arg(long, value_name = "FILE", required_unless_present = "from_queue")]
    pub event: Option<PathBuf>,
    /// The cluster dump to decide against (`kubectl get ... -A -o yaml`, as for `plan`).
    #[arg(long, value_name = "DUMP")]
    pub cluster: PathBuf,
    /// Replay every message waiting in this SQS queue (the interruption DLQ) instead; the
    /// messages are not deleted.
    #[arg(long, value_name = "URL", conflicts_with = "event")]
    pub from_queue: Option<String>,
    /// What rebalance recommendations do, as `FLEETWRIGHT_REBALANCE` sets it for the function.
    #[arg(long, value_enum, default_value = "event")]
    pub rebalance: Rebalance,
    /// Decide at this instant (RFC 3339) instead of the event's own `time` (a do-not-disrupt
    /// duration ends when it says); an event without a time is decided now.
    #[arg(long, value_name = "RFC3339")]
    pub now: Option<String>,
}

/// The decision for one event, or why it could not be read.
type Replayed = Result<Value, String>;

pub fn run(args: ReplayArgs) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&args.cluster)
        .with_context(|| format!("reading {}", args.cluster.display()))?;
    let source = args.cluster.display().to_string();
    let cluster = dump::parse(&text, &source)?;
    // As the function reads the cluster: an object that does not read is left out, named, and
    // the event is still decided over the others (the command exits non-zero after).
    for r in &cluster.rejected {
        eprintln!(
            "error: {source}: {}; left out, as the interruption function leaves it out",
            r.error
        );
        crate::input::set_aside();
    }
    crate::input::check(&cluster.warnings)?;
    let rebalance = match args.rebalance {
        Rebalance::Event => RebalanceAction::Event,
        Rebalance::Drain => RebalanceAction::Drain,
    };
    let now = match &args.now {
        Some(t) => Some(crate::plan::instant(Some(t))?),
        None => None,
    };
    let replay = Replay {
        cluster,
        rebalance,
        now,
    };
    match (&args.event, &args.from_queue) {
        (Some(path), _) => replay.file(path),
        (None, Some(url)) => replay.queue(url),
        (None, None) => anyhow::bail!("give --event FILE or --from-queue URL"),
    }
}

struct Replay {
    cluster: ClusterDump,
    rebalance: RebalanceAction,
    /// `--now`, over each event's own time.
    now: Option<chrono::DateTime<chrono::Utc>>,
}

fn print(value: &Value) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, value)?;
    writeln!(out)?;
    Ok(())
}

/// Prints a batch's results and fails (after printing) when any message could not be read.
fn print_batch(results: Vec<(String, Replayed)>) -> anyhow::Result<()> {
    let failed: Vec<String> = results
        .iter()
        .filter(|(_, r)| r.is_err())
        .map(|(id, _)| id.clone())
        .collect();
    let items: Vec<Value> = results
        .into_iter()
        .map(|(id, r)| match r {
            Ok(mut v) => {
                v["messageId"] = json!(id);
                v
            }
            Err(error) => json!({"messageId": id, "error": error}),
        })
        .collect();
    print(&Value::Array(items))?;
    anyhow::ensure!(
        failed.is_empty(),
        "{} message(s) could not be read (they would be batch item failures): {}",
        failed.len(),
        failed.join(", ")
    );
    Ok(())
}

impl Replay {
    fn file(&self, path: &Path) -> anyhow::Result<()> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let value: Value =
            serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))?;
        if value.get("Records").is_some() {
            let batch: SqsEvent = serde_json::from_value(value)
                .with_context(|| format!("{}: not an SQS event", path.display()))?;
            let results = batch
                .records
                .into_iter()
                .map(|r| {
                    let id = r.message_id.unwrap_or_default();
                    let body = self.message_body(r.body.as_deref().unwrap_or_default());
                    (id, body.map(|v| self.with_left_out(v)))
                })
                .collect();
            return print_batch(results);
        }
        let decided = self
            .value(value)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        print(&self.with_left_out(decided))
    }

    /// The decision with the dump's objects left out beside it (`leftOut`: kind, name and the
    /// error with its field), so a reader of the JSON alone knows what the event was not
    /// decided over, such as its own NodeClaim.
    fn with_left_out(&self, mut decided: Value) -> Value {
        if !self.cluster.rejected.is_empty() && decided.is_object() {
            decided["leftOut"] = json!(self.cluster.rejected);
        }
        decided
    }

    /// One SQS message body: an EventBridge event.
    fn message_body(&self, body: &str) -> Replayed {
        let value: Value =
            serde_json::from_str(body).map_err(|e| format!("body is not JSON: {e}"))?;
        self.eventbridge(value)
    }

    /// Any single event shape.
    fn value(&self, value: Value) -> Replayed {
        if value.get("detail-type").is_some() {
            self.eventbridge(value)
        } else if value.get("requestContext").is_some() {
            self.function_url(value)
        } else if value.get("kind").and_then(Value::as_str) == Some("AdmissionReview") {
            Ok(admission_decision(
                &serde_json::to_vec(&value).unwrap_or_default(),
            ))
        } else {
            Err(
                "not an EventBridge event, SQS batch, Function URL request or AdmissionReview"
                    .into(),
            )
        }
    }

    fn eventbridge(&self, value: Value) -> Replayed {
        let event: EventBridgeEvent<Value> = serde_json::from_value(value)
            .map_err(|e| format!("body is not an EventBridge event: {e}"))?;
        let parsed = interruption::parse(Envelope {
            id: event.id.as_deref().unwrap_or_default(),
            source: &event.source,
            detail_type: &event.detail_type,
            detail: &event.detail,
        })?;
        let Some(message) = parsed else {
            return Ok(
                json!({"function": "interruption", "kind": "none", "detailType": event.detail_type,
                "instances": [], "nodes": [], "actions": []}),
            );
        };
        // Decided at `--now`, else at the event's own time (the function decides when it
        // handles the message, which SQS may have delayed), else now.
        let at = match self.now.or(event.time) {
            Some(t) => t,
            None => {
                eprintln!("note: the event has no time, so it is decided now (give --now to choose the instant)");
                chrono::Utc::now()
            }
        }
        .timestamp();
        let now = k8s_openapi::jiff::Timestamp::from_second(at)
            .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        let outcomes = interruption::decide(&self.cluster, &message, self.rebalance, now);
        let nodes: Vec<&str> = outcomes.iter().filter_map(|o| o.node.as_deref()).collect();
        let actions: Vec<Value> = outcomes
            .iter()
            .flat_map(|o| {
                o.actions.iter().map(|a| {
                    let mut v = serde_json::to_value(a).unwrap_or(Value::Null);
                    v["instanceId"] = json!(o.instance_id);
                    v
                })
            })
            .collect();
        let mut out = json!({"function": "interruption", "kind": message.kind.name(),
            "instances": message.instance_ids, "nodes": nodes, "actions": actions});
        if let interruption::Kind::StateChange(state) = &message.kind {
            out["state"] = json!(state);
        }
        Ok(out)
    }

    fn function_url(&self, value: Value) -> Replayed {
        let request: LambdaFunctionUrlRequest = serde_json::from_value(value)
            .map_err(|e| format!("not a Function URL request: {e}"))?;
        let body = request.body.unwrap_or_default();
        let bytes = if request.is_base64_encoded {
            base64::engine::general_purpose::STANDARD
                .decode(body.as_bytes())
                .map_err(|e| format!("body is not base64: {e}"))?
        } else {
            body.into_bytes()
        };
        Ok(admission_decision(&bytes))
    }

    fn queue(&self, url: &str) -> anyhow::Result<()> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let messages = runtime.block_on(peek(url))?;
        tracing::info!(queue = %url, messages = messages.len(), "replaying queued messages");
        let results = messages
            .into_iter()
            .map(|(id, body)| {
                let replayed = self.message_body(&body);
                (id, replayed)
            })
            .collect();
        print_batch(results)
    }
}

/// What the webhook answers and whether it nudges tick.
fn admission_decision(body: &[u8]) -> Value {
    match admission::read_request(body) {
        Err(reason) => json!({"function": "webhook", "kind": "admissionReview",
            "instances": [], "nodes": [], "status": 400, "actions": [{"action": "refuse", "reason": reason}]}),
        Ok(request) => {
            let mut actions = vec![json!({"action": "admit", "uid": request.uid, "allowed": true})];
            if let Some(detail) = admission::pending_pod(&request) {
                actions.push(json!({"action": "nudge", "detailType": admission::PENDING_POD, "detail": detail}));
            }
            json!({"function": "webhook", "kind": "admissionReview", "instances": [], "nodes": [],
                "status": 200, "actions": actions})
        }
    }
}

#[cfg(feature = "aws")]
async fn peek(url: &str) -> anyhow::Result<Vec<(String, String)>> {
    crate::queue::peek(url).await
}

/// Without the `aws` feature the CLI has no AWS SDK; say how to get one.
#[cfg(not(feature = "aws"))]
async fn peek(url: &str) -> anyhow::Result<Vec<(String, String)>> {
    anyhow::bail!(
        "--from-queue {url}: this fleetwright was built without AWS support; \
         build it with `cargo install --path cli --features aws` (or `cargo run -p fleetwright-cli --features aws -- ...`)"
    )
}
