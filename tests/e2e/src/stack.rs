//! The local stack: the Kubernetes API fake (in this process), moto seeded for one cluster, the
//! three function binaries attached to `cargo lambda watch`'s runtime API, and `cargo lambda
//! invoke` to call them.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context};
use aws_sdk_eks::types::VpcConfigRequest;
use aws_sdk_eventbridge::types::Target;
use fleetwright_aws::AwsClients;
use serde_json::{json, Value};
use tokio::process::{Child, Command};

use crate::fake_api::FakeApi;
use crate::support::{clients, moto_endpoint, Fixture, PARAMETER_ROOT};

pub const NODEPOOLS: &str = "/apis/karpenter.sh/v1/nodepools";
pub const NODECLASSES: &str = "/apis/karpenter.k8s.aws/v1/ec2nodeclasses";
pub const NODECLAIMS: &str = "/apis/karpenter.sh/v1/nodeclaims";
pub const PODS: &str = "/api/v1/pods";
pub const NODES: &str = "/api/v1/nodes";

/// How long one invocation may take.
const INVOKE_TIMEOUT: Duration = Duration::from_secs(60);

/// The functions, by their binary (and emulator) names.
pub const FUNCTIONS: [&str; 3] = ["tick", "interruption", "webhook"];

/// Everything the scenarios use.
pub struct Stack {
    pub cluster: String,
    pub fake: FakeApi,
    pub aws: AwsClients,
    /// The queue the EventBridge rule delivers Fleetwright's nudges to (standing in for tick's
    /// Lambda target).
    pub nudges: String,
    lambda_port: u16,
    children: Vec<Child>,
}

fn env(name: &str) -> anyhow::Result<String> {
    std::env::var(name).with_context(|| format!("{name} is not set (run scripts/e2e.sh)"))
}

/// A 2-vCPU spot NodePool, so every 1.5-CPU pod needs a node of its own.
pub fn nodepool() -> Value {
    json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default", "uid": "np-e2e"},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large", "c5.large"]},
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a", "us-east-1b"]}]}}}})
}

impl Stack {
    pub async fn start() -> anyhow::Result<Stack> {
        let lambda_port: u16 = env("FLEETWRIGHT_LAMBDA_PORT")?
            .parse()
            .context("FLEETWRIGHT_LAMBDA_PORT is not a port")?;
        moto_endpoint();
        let cluster = format!("e2e-{}", std::process::id());
        let aws = clients();
        let fixture = Fixture::new(&aws, &cluster).await;
        let nodeclass = serde_json::to_value(fixture.nodeclass("default"))?;
        let objects: BTreeMap<String, Vec<Value>> = [
            (NODEPOOLS.to_string(), vec![nodepool()]),
            (NODECLASSES.to_string(), vec![nodeclass]),
        ]
        .into_iter()
        .collect();
        let fake = FakeApi::start(objects).await;
        let nudges = seed_aws(&aws, &fixture, &cluster).await?;
        let mut stack = Stack {
            cluster,
            fake,
            aws,
            nudges,
            lambda_port,
            children: Vec::new(),
        };
        for name in FUNCTIONS {
            let child = stack.spawn(name)?;
            stack.children.push(child);
        }
        Ok(stack)
    }

    fn spawn(&self, name: &str) -> anyhow::Result<Child> {
        let bin = PathBuf::from(env("FLEETWRIGHT_BIN_DIR")?).join(name);
        let log_dir = PathBuf::from(env("FLEETWRIGHT_E2E_LOGS")?);
        let log = std::fs::File::create(log_dir.join(format!("{name}.log")))?;
        let runtime_api = format!("http://127.0.0.1:{}/.rt/{name}", self.lambda_port);
        Command::new(&bin)
            .env("AWS_LAMBDA_RUNTIME_API", runtime_api)
            .env("AWS_LAMBDA_FUNCTION_NAME", name)
            .env("AWS_LAMBDA_FUNCTION_VERSION", "1")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512")
            .env("FLEETWRIGHT_CLUSTER_NAME", &self.cluster)
            .env(
                "FLEETWRIGHT_KUBE_API_URL",
                format!("http://{}", self.fake.addr),
            )
            .env("FLEETWRIGHT_SSM_PARAMETER_ROOT", PARAMETER_ROOT)
            // The sample admission events call `/admit`, with no token.
            .env("FLEETWRIGHT_WEBHOOK_UNAUTHENTICATED", "true")
            .env("RUST_LOG", "info")
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))
    }

    pub async fn stop(mut self) {
        for child in &mut self.children {
            let _ = child.kill().await;
        }
    }

    /// `cargo lambda invoke NAME --data-ascii PAYLOAD`, answering the function's JSON response.
    pub async fn invoke(&self, name: &str, payload: &Value) -> anyhow::Result<Value> {
        let run = Command::new("cargo")
            .args(["lambda", "invoke", name, "--invoke-address", "127.0.0.1"])
            .args(["--invoke-port", &self.lambda_port.to_string()])
            .args(["--data-ascii", &payload.to_string()])
            .args(["--output-format", "json"])
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output();
        let out = tokio::time::timeout(INVOKE_TIMEOUT, run)
            .await
            .with_context(|| {
                format!("{name} did not answer within {INVOKE_TIMEOUT:?}; see its log")
            })?
            .context("running cargo lambda invoke")?;
        if !out.status.success() {
            bail!(
                "cargo lambda invoke {name} failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        serde_json::from_slice(&out.stdout).with_context(|| {
            format!(
                "{name} answered non-JSON: {}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
    }

    /// The nudges delivered to the queue within `wait`, deleted once read.
    pub async fn take_nudges(&self, wait: Duration) -> anyhow::Result<Vec<Value>> {
        let deadline = tokio::time::Instant::now() + wait;
        let mut bodies = Vec::new();
        while tokio::time::Instant::now() < deadline {
            let out = self
                .aws
                .sqs
                .receive_message()
                .queue_url(&self.nudges)
                .max_number_of_messages(10)
                .wait_time_seconds(1)
                .send()
                .await?;
            for m in out.messages.unwrap_or_default() {
                if let Some(receipt) = &m.receipt_handle {
                    self.aws
                        .sqs
                        .delete_message()
                        .queue_url(&self.nudges)
                        .receipt_handle(receipt)
                        .send()
                        .await?;
                }
                bodies.push(serde_json::from_str(m.body.as_deref().unwrap_or("null"))?);
            }
            if !bodies.is_empty() {
                break;
            }
        }
        Ok(bodies)
    }

    /// The objects of one list path, as the API serves them.
    pub fn stored(&self, path: &str) -> Vec<Value> {
        let state = self.fake.state.lock().unwrap_or_else(|p| p.into_inner());
        state.objects.get(path).cloned().unwrap_or_default()
    }

    /// Adds or replaces (by name and namespace) an object, as another writer (the kubelet, the
    /// scheduler, a ReplicaSet) would.
    pub fn put(&self, path: &str, object: Value) {
        let mut state = self.fake.state.lock().unwrap_or_else(|p| p.into_inner());
        let key = |o: &Value| {
            (
                o["metadata"]["namespace"].clone(),
                o["metadata"]["name"].clone(),
            )
        };
        let list = state.objects.entry(path.to_string()).or_default();
        list.retain(|o| key(o) != key(&object));
        list.push(object);
    }

    /// Removes the evicted pods, as their kubelet does once they have shut down.
    pub fn shut_down_evicted(&self) {
        let mut state = self.fake.state.lock().unwrap_or_else(|p| p.into_inner());
        let evicted = state.evicted.clone();
        if let Some(pods) = state.objects.get_mut("/api/v1/pods") {
            pods.retain(|p| {
                let key = format!(
                    "{}/{}",
                    p["metadata"]["namespace"].as_str().unwrap_or("default"),
                    p["metadata"]["name"].as_str().unwrap_or_default()
                );
                !evicted.contains(&key)
            });
        }
    }

    /// Pods whose eviction the API accepted (`namespace/name`, once per eviction).
    pub fn evicted(&self) -> Vec<String> {
        let state = self.fake.state.lock().unwrap_or_else(|p| p.into_inner());
        state.evicted.clone()
    }
}

/// moto for one cluster: the fixture's network and AMI parameters, the EKS cluster the
/// functions describe, and an EventBridge rule sending `source: fleetwright` to a queue.
async fn seed_aws(aws: &AwsClients, fx: &Fixture, cluster: &str) -> anyhow::Result<String> {
    let config = crate::support::sdk_config(None);
    let eks = aws_sdk_eks::Client::new(&config);
    eks.create_cluster()
        .name(cluster)
        .version(&fx.k8s)
        .role_arn("arn:aws:iam::123456789012:role/eks")
        .resources_vpc_config(
            VpcConfigRequest::builder()
                .set_subnet_ids(Some(fx.subnets.values().cloned().collect()))
                .build(),
        )
        .send()
        .await
        .context("eks:CreateCluster")?;
    let queue = aws
        .sqs
        .create_queue()
        .queue_name(format!("{cluster}-nudges"))
        .send()
        .await?
        .queue_url
        .context("CreateQueue answered no URL")?;
    let arn = aws
        .sqs
        .get_queue_attributes()
        .queue_url(&queue)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
        .send()
        .await?
        .attributes
        .and_then(|a| {
            a.get(&aws_sdk_sqs::types::QueueAttributeName::QueueArn)
                .cloned()
        })
        .context("GetQueueAttributes answered no QueueArn")?;
    let events = aws_sdk_eventbridge::Client::new(&config);
    let rule = format!("{cluster}-nudges");
    events
        .put_rule()
        .name(&rule)
        // The pattern of the tick's Nudge rule in infra/template.yaml.
        .event_pattern(
            json!({"source": ["fleetwright"],
                   "detail-type": ["Pending Pod", "Node Joined", "Capacity Needed"],
                   "detail": {"cluster": [cluster]}})
            .to_string(),
        )
        .send()
        .await
        .context("events:PutRule")?;
    events
        .put_targets()
        .rule(&rule)
        .targets(Target::builder().id("tick").arn(arn).build()?)
        .send()
        .await
        .context("events:PutTargets")?;
    Ok(queue)
}
