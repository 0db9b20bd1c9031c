//! The two runs of the harness: the acceptance scenario (`check`) and the latency benchmark.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};
use base64::Engine;
use serde_json::{json, Value};

use crate::stack::{Stack, NODECLAIMS, NODES, PODS};

fn repo_file(path: &str) -> anyhow::Result<Value> {
    let full = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path);
    let text =
        std::fs::read_to_string(&full).with_context(|| format!("reading {}", full.display()))?;
    Ok(serde_json::from_str(&text)?)
}

/// The sample with its instance id swapped for a real one.
fn event_for(name: &str, instance: &str) -> anyhow::Result<Value> {
    let text = repo_file(name)?
        .to_string()
        .replace("i-0abcdef1234567890", instance);
    Ok(serde_json::from_str(&text)?)
}

/// A pending pod as the API server stores it after admission.
fn pending_pod(name: &str, uid: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": uid,
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "inflate-5db4558c8", "uid": "rs-1", "controller": true}]},
        "spec": {"containers": [{"name": "inflate", "image": "public.ecr.aws/eks-distro/kubernetes/pause:3.7",
            "resources": {"requests": {"cpu": "1500m"}}}]},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}})
}

/// The Function URL sample, carrying a review of `pod` instead of the sample's.
fn webhook_request_for(pod: &Value) -> anyhow::Result<Value> {
    let mut request = repo_file("events/webhook-admission.json")?;
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut review: Value = serde_json::from_slice(
        &b64.decode(request["body"].as_str().context("sample has no body")?)?,
    )?;
    let meta = &pod["metadata"];
    review["request"]["uid"] = json!(format!("review-{}", meta["uid"].as_str().unwrap_or("")));
    review["request"]["name"] = meta["name"].clone();
    review["request"]["object"] = pod.clone();
    request["body"] = json!(b64.encode(serde_json::to_vec(&review)?));
    Ok(request)
}

fn names(values: &[Value]) -> Vec<String> {
    values
        .iter()
        .filter_map(|v| v["metadata"]["name"].as_str().map(str::to_string))
        .collect()
}

/// The webhook's Function URL answer, decoded.
fn admission_answer(response: &Value) -> anyhow::Result<(u64, Value)> {
    let status = response["statusCode"].as_u64().context("no statusCode")?;
    let body = match &response["body"] {
        Value::String(s) if response["isBase64Encoded"] == true => {
            serde_json::from_slice(&base64::engine::general_purpose::STANDARD.decode(s)?)?
        }
        Value::String(s) => serde_json::from_str(s)?,
        other => other.clone(),
    };
    Ok((status, body))
}

async fn instance_state(
    stack: &Stack,
    id: &str,
) -> anyhow::Result<(String, Vec<(String, String)>)> {
    let out = stack
        .aws
        .ec2
        .describe_instances()
        .instance_ids(id)
        .send()
        .await?;
    let instance = out
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .next()
        .with_context(|| format!("{id} is not in moto"))?;
    let state = instance
        .state()
        .and_then(|s| s.name())
        .map(|n| n.as_str().to_string())
        .unwrap_or_default();
    let tags = instance
        .tags()
        .iter()
        .map(|t| {
            (
                t.key().unwrap_or_default().to_string(),
                t.value().unwrap_or_default().to_string(),
            )
        })
        .collect();
    Ok((state, tags))
}

fn step(text: &str) {
    eprintln!("== e2e: {text}");
}

/// Webhook → nudge on the bus → queue → tick → NodeClaims and tagged instances.
async fn admit_and_launch(stack: &Stack) -> anyhow::Result<Vec<Value>> {
    let sample = repo_file("events/webhook-admission.json")?;
    let review_b64 = sample["body"].as_str().context("sample body")?;
    let review: Value =
        serde_json::from_slice(&base64::engine::general_purpose::STANDARD.decode(review_b64)?)?;
    let (name, uid) = (
        review["request"]["name"].as_str().unwrap_or_default(),
        review["request"]["uid"].as_str().unwrap_or_default(),
    );
    stack.put(PODS, pending_pod(name, uid));
    stack.put(PODS, pending_pod("inflate-5db4558c8-00001", "uid-1"));

    step("webhook admits the pod from events/webhook-admission.json and nudges once");
    let answer = stack.invoke("webhook", &sample).await?;
    let (status, body) = admission_answer(&answer)?;
    ensure!(status == 200, "webhook answered {status}: {body}");
    ensure!(body["response"]["allowed"] == true, "not allowed: {body}");
    ensure!(body["response"]["uid"] == uid, "uid not echoed: {body}");
    let nudges = stack.take_nudges(Duration::from_secs(10)).await?;
    ensure!(nudges.len() == 1, "expected one nudge, got {nudges:?}");
    ensure!(nudges[0]["detail-type"] == "Pending Pod", "{}", nudges[0]);
    ensure!(nudges[0]["detail"]["name"] == name, "{}", nudges[0]);
    let more = stack.take_nudges(Duration::from_secs(2)).await?;
    ensure!(more.is_empty(), "a second nudge arrived: {more:?}");

    step("tick, triggered by the delivered Pending Pod event, launches");
    let summary = stack.invoke("tick", &nudges[0]).await?;
    let launched = summary["launched"].as_array().cloned().unwrap_or_default();
    ensure!(
        launched.len() == 2,
        "two 1.5-CPU pods need two nodes: {summary}"
    );
    let claims = stack.stored(NODECLAIMS);
    ensure!(claims.len() == 2, "NodeClaims: {:?}", names(&claims));
    for l in &launched {
        let id = l["instanceId"].as_str().unwrap_or_default();
        let (state, tags) = instance_state(stack, id).await?;
        ensure!(state == "running" || state == "pending", "{id} is {state}");
        let owned = (
            format!("kubernetes.io/cluster/{}", stack.cluster),
            "owned".to_string(),
        );
        ensure!(
            tags.contains(&owned),
            "{id} lacks the cluster tag: {tags:?}"
        );
        let claim = (
            "karpenter.sh/nodeclaim".to_string(),
            l["nodeclaim"].as_str().unwrap_or_default().to_string(),
        );
        ensure!(
            tags.contains(&claim),
            "{id} lacks its NodeClaim tag: {tags:?}"
        );
    }
    Ok(launched)
}

/// Plays the kubelet and the scheduler: a Ready node per launch, one pending pod bound to each.
fn join(stack: &Stack, launched: &[Value]) -> Vec<(String, String, String)> {
    let pods = stack.stored(PODS);
    let mut joined = Vec::new();
    for (l, pod) in launched.iter().zip(pods) {
        let id = l["instanceId"].as_str().unwrap_or_default();
        let zone = l["zone"].as_str().unwrap_or_default();
        let node = format!("ip-{}.ec2.internal", id.trim_start_matches("i-"));
        let claim = stack
            .stored(NODECLAIMS)
            .into_iter()
            .find(|c| c["metadata"]["name"] == l["nodeclaim"])
            .unwrap_or_default();
        let mut labels = claim["metadata"]["labels"].clone();
        labels["kubernetes.io/hostname"] = json!(node);
        stack.put(
            NODES,
            json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": node, "uid": format!("uid-{node}"), "labels": labels},
            "spec": {"providerID": format!("aws:///{zone}/{id}")},
            "status": {"capacity": {"cpu": "2", "memory": "7934Mi", "pods": "29"},
                "allocatable": {"cpu": "1930m", "memory": "7244Mi", "pods": "29"},
                "conditions": [{"type": "Ready", "status": "True"}]}}),
        );
        let mut bound = pod.clone();
        bound["spec"]["nodeName"] = json!(node);
        bound["status"] = json!({"phase": "Running"});
        stack.put(PODS, bound.clone());
        let pod_key = format!(
            "{}/{}",
            bound["metadata"]["namespace"].as_str().unwrap_or_default(),
            bound["metadata"]["name"].as_str().unwrap_or_default()
        );
        joined.push((id.to_string(), node, pod_key));
    }
    joined
}

fn tainted(stack: &Stack, node: &str) -> bool {
    stack.stored(NODES).iter().any(|n| {
        n["metadata"]["name"] == node
            && n["spec"]["taints"]
                .as_array()
                .is_some_and(|t| t.iter().any(|t| t["key"] == "karpenter.sh/disrupted"))
    })
}

async fn ensure_terminated(stack: &Stack, id: &str) -> anyhow::Result<()> {
    let (state, _) = instance_state(stack, id).await?;
    ensure!(
        state == "shutting-down" || state == "terminated",
        "{id} is still {state}"
    );
    Ok(())
}

/// The interrupted instance keeps running while its evicted pods shut down (their graceful
/// shutdown); once the kubelet has removed them, a tick terminates it.
async fn ensure_running_until_drained(stack: &Stack, id: &str) -> anyhow::Result<()> {
    let (state, _) = instance_state(stack, id).await?;
    ensure!(
        state == "running",
        "{id} is {state} before its pods shut down"
    );
    stack.shut_down_evicted();
    let summary = stack
        .invoke("tick", &repo_file("events/tick-scheduled.json")?)
        .await?;
    ensure_terminated(stack, id)
        .await
        .with_context(|| format!("the tick after the drain: {summary}"))
}

/// A record of the SQS sample with another id and body.
fn record(template: &Value, id: &str, body: &str) -> Value {
    let mut r = template.clone();
    r["messageId"] = json!(id);
    r["body"] = json!(body);
    r
}

pub async fn check(stack: &Stack) -> anyhow::Result<()> {
    let launched = admit_and_launch(stack).await?;
    let joined = join(stack, &launched);

    step("tick registers the joined nodes (events/tick-scheduled.json)");
    let summary = stack
        .invoke("tick", &repo_file("events/tick-scheduled.json")?)
        .await?;
    ensure!(
        summary["registered"].as_array().map(Vec::len) == Some(2),
        "{summary}"
    );

    let (a_id, a_node, a_pod) = &joined[0];
    step("a spot warning (events/spot-interruption.json) cordons, drains and deletes the NodeClaim; tick terminates once the pods are gone");
    let answer = stack
        .invoke(
            "interruption",
            &event_for("events/spot-interruption.json", a_id)?,
        )
        .await?;
    ensure!(tainted(stack, a_node), "{a_node} not cordoned: {answer}");
    ensure!(stack.evicted().contains(a_pod), "{a_pod} not evicted");
    ensure_running_until_drained(stack, a_id).await?;
    let nudges = stack.take_nudges(Duration::from_secs(10)).await?;
    ensure!(
        nudges.iter().any(|n| n["detail-type"] == "Capacity Needed"),
        "the drain did not nudge tick: {nudges:?}"
    );

    let (b_id, b_node, b_pod) = &joined[1];
    step("an SQS batch [valid, poison, duplicate] fails only the poison message and drains once");
    let sample = repo_file("events/sqs-batch.json")?;
    let template = &sample["Records"][0];
    let warning = event_for("events/spot-interruption.json", b_id)?.to_string();
    let batch = json!({"Records": [
        record(template, "m-valid", &warning),
        record(template, "m-poison", "{\"detail-type\": 42"),
        record(template, "m-duplicate", &warning),
    ]});
    let answer = stack.invoke("interruption", &batch).await?;
    ensure!(
        answer["batchItemFailures"] == json!([{"itemIdentifier": "m-poison"}]),
        "{answer}"
    );
    ensure!(tainted(stack, b_node), "{b_node} not cordoned");
    let evictions = stack.evicted().iter().filter(|p| *p == b_pod).count();
    ensure!(evictions == 1, "{b_pod} evicted {evictions} times");
    ensure_running_until_drained(stack, b_id).await?;

    step("the webhook answers garbage with 400");
    let mut garbage = repo_file("events/webhook-admission.json")?;
    garbage["body"] = json!("garbage");
    garbage["isBase64Encoded"] = json!(false);
    let (status, body) = admission_answer(&stack.invoke("webhook", &garbage).await?)?;
    ensure!(status == 400, "garbage answered {status}: {body}");

    eprintln!("== e2e: all checks passed");
    Ok(())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Each run: a new pending pod, the webhook invocation, the nudge through EventBridge and the
/// queue, and the tick it triggers; timed from the webhook call to the tick's answer, which
/// comes after its CreateFleet returned.
pub async fn latency(stack: &Stack, runs: usize) -> anyhow::Result<()> {
    ensure!(runs > 0, "--runs must be at least 1");
    // The first tick of a cold container discovers the catalog and the cluster; warm it first,
    // since the target is for warm functions, and report the cold tick on its own.
    let cold = Instant::now();
    stack
        .invoke("tick", &repo_file("events/tick-scheduled.json")?)
        .await?;
    let cold = cold.elapsed();
    let mut samples = Vec::with_capacity(runs);
    for i in 0..runs {
        let pod = pending_pod(&format!("latency-{i}"), &format!("uid-latency-{i}"));
        stack.put(PODS, pod.clone());
        let request = webhook_request_for(&pod)?;
        // The webhook coalesces nudges to one per second per container.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let start = Instant::now();
        let (status, _) = admission_answer(&stack.invoke("webhook", &request).await?)?;
        ensure!(status == 200, "webhook answered {status}");
        let nudges = stack.take_nudges(Duration::from_secs(10)).await?;
        let Some(nudge) = nudges.first() else {
            bail!("run {i}: no nudge arrived");
        };
        let summary = stack.invoke("tick", nudge).await?;
        let elapsed = start.elapsed();
        let launched = summary["launched"].as_array().map(Vec::len).unwrap_or(0);
        ensure!(launched == 1, "run {i}: expected one launch, got {summary}");
        eprintln!("run {i:>2}: {:>5} ms", elapsed.as_millis());
        samples.push(elapsed);
    }
    samples.sort();
    let p50 = percentile(&samples, 50.0);
    let p99 = percentile(&samples, 99.0);
    use std::io::Write;
    writeln!(
        std::io::stdout(),
        "latency webhook -> CreateFleet (tick answered), warm, over {runs} runs: p50 {} ms, p99 {} ms, min {} ms, max {} ms (cold first tick: {} ms)",
        p50.as_millis(),
        p99.as_millis(),
        samples[0].as_millis(),
        samples[runs - 1].as_millis(),
        cold.as_millis()
    )?;
    Ok(())
}
