//! Scale benchmark: one tick over a synthetic cluster served by the HTTP Kubernetes API fake,
//! which runs in a child process so the figures are the tick's own. Prints wall time and the
//! tick process's peak RSS. Two cases:
//!
//! * **provisioning**: 1,000 pending pods on a full cluster (a dry run: lease, read, plan);
//! * **consolidation**: no pending pod, every node a little under half used, and the tick runs
//!   with its writes: it plans consolidation over the whole fleet, decides a command within the
//!   disruption budget and applies it to the API (the simulated cloud holds the fleet's
//!   instances, so nothing looks stranded).
//!
//! `cargo bench -p fleetwright-runtime --bench scale` runs 5,000 nodes and 50,000 pods for each
//! (the target: under 5 s and 512 MB); `SCALE_LOG=fleetwright_runtime=debug` adds the tick's logs
//! with each phase's time. Under `cargo test` it runs small clusters as a check that
//! the benchmark works, that the tick plans the pending pods and that it decides to consolidate.
//!
//! `--real` runs the same cluster on a real kube-apiserver and etcd instead ([`real`]): only
//! under `scripts/scale-bench.sh`, which starts them on loopback and passes the sizes.

#[path = "../../kube/tests/fake_api/mod.rs"]
mod fake_api;
#[path = "scale/real.rs"]
mod real;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

use chrono::Utc;
use fleetwright_core::Catalog;
use fleetwright_runtime::settings::Settings;
use fleetwright_runtime::tick::Tick;
use fleetwright_sim::SimCloud;
use serde_json::{json, Value};

const ZONES: [&str; 3] = ["us-east-1a", "us-east-1b", "us-east-1c"];

/// The cluster's shape. With no pending pods the app pods are small (400m, 1Gi), so the fleet
/// can be consolidated; with pending pods they fill the nodes (900m, 3Gi).
#[derive(Clone, Copy)]
struct Shape {
    nodes: usize,
    pods: usize,
    pending: usize,
}

impl Shape {
    fn app_pod(&self) -> (&'static str, &'static str) {
        if self.pending == 0 {
            ("400m", "1Gi")
        } else {
            ("900m", "3Gi")
        }
    }
}

fn nodepool() -> Value {
    json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default", "uid": "np-1"},
        "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [{"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]},
                {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["4"]}]}}}})
}

/// The NodePool hash every NodeClaim of the fleet carries, as its launch stamped it (the fake
/// serves no `kube-root-ca.crt`, so EC2NodeClass hashes are neither compared nor stamped).
fn pool_hash() -> &'static str {
    static HASH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HASH.get_or_init(|| {
        let pool: fleetwright_crds::NodePool = serde_json::from_value(nodepool()).unwrap();
        fleetwright_crds::hash::nodepool_hash(&pool.spec.template).unwrap()
    })
}

fn node(i: usize) -> (Value, Value) {
    let name = format!(
        "ip-10-{}-{}-{}.ec2.internal",
        i / 65536,
        (i / 256) % 256,
        i % 256
    );
    let zone = ZONES[i % ZONES.len()];
    let id = format!("i-{i:017x}");
    let claim_name = format!("default-{i:06}");
    let labels = json!({"karpenter.sh/nodepool": "default", "karpenter.sh/capacity-type": "on-demand",
        "node.kubernetes.io/instance-type": "m5.2xlarge", "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
        "topology.kubernetes.io/zone": zone, "kubernetes.io/hostname": name, "karpenter.sh/registered": "true",
        "karpenter.sh/initialized": "true"});
    let node = json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": format!("node-{i}"), "labels": labels},
        "spec": {"providerID": format!("aws:///{zone}/{id}")},
        "status": {"capacity": {"cpu": "8", "memory": "32386524Ki", "pods": "58"},
            "allocatable": {"cpu": "7910m", "memory": "31482844Ki", "pods": "58"},
            "conditions": [{"type": "Ready", "status": "True"}]}});
    let condition = |t: &str| json!({"type": t, "status": "True", "reason": t, "message": "", "lastTransitionTime": "2026-11-22T09:00:00Z"});
    let claim = json!({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": claim_name, "uid": format!("claim-{i}"), "labels": labels,
            "annotations": {"karpenter.sh/nodepool-hash": pool_hash(), "karpenter.sh/nodepool-hash-version": "v3"},
            "finalizers": ["karpenter.sh/termination"], "creationTimestamp": "2026-11-22T09:00:00Z"},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.2xlarge"]}]},
        "status": {"providerID": format!("aws:///{zone}/{id}"), "nodeName": name,
            "capacity": {"cpu": "8", "memory": "32386524Ki", "pods": "58"},
            "allocatable": {"cpu": "7910m", "memory": "31482844Ki", "pods": "58"},
            "conditions": [condition("Launched"), condition("Registered"), condition("Initialized"), condition("Ready")]}});
    (node, claim)
}

fn pod(name: &str, owner: (&str, &str), node: Option<&str>, cpu: &str, memory: &str) -> Value {
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "apps", "uid": format!("uid-{name}"),
            "labels": {"app": owner.1, "pod-template-hash": "5db4558c8"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": owner.0, "name": owner.1, "uid": format!("uid-{}", owner.1), "controller": true}]},
        "spec": {"containers": [{"name": "app", "image": "public.ecr.aws/docker/library/nginx:1.27",
            "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}});
    if let Some(node) = node {
        pod["spec"]["nodeName"] = json!(node);
        pod["status"] =
            json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]});
    }
    pod
}

/// Per node: two DaemonSet pods and 900m/3Gi app pods until the pod count is reached; then the
/// pending pods (2 CPU, 4Gi), which no node has room for.
fn cluster(shape: Shape) -> BTreeMap<String, Vec<Value>> {
    let mut nodes = Vec::with_capacity(shape.nodes);
    let mut claims = Vec::with_capacity(shape.nodes);
    let mut pods = Vec::with_capacity(shape.pods);
    let bound = shape.pods - shape.pending;
    for i in 0..shape.nodes {
        let (n, c) = node(i);
        let name = n["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        for ds in ["aws-node", "kube-proxy"] {
            pods.push(pod(
                &format!("{ds}-{i}"),
                ("DaemonSet", ds),
                Some(&name),
                "50m",
                "64Mi",
            ));
        }
        nodes.push(n);
        claims.push(c);
    }
    let mut i = 0;
    let (cpu, memory) = shape.app_pod();
    while pods.len() < bound {
        let node = nodes[i % shape.nodes]["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        pods.push(pod(
            &format!("web-{i}"),
            ("ReplicaSet", "web-5db4558c8"),
            Some(&node),
            cpu,
            memory,
        ));
        i += 1;
    }
    for p in 0..shape.pending {
        pods.push(pod(
            &format!("batch-{p}"),
            ("ReplicaSet", "batch-7c9f8d6b5"),
            None,
            "2",
            "4Gi",
        ));
    }
    let daemonsets = ["aws-node", "kube-proxy"].map(|ds| json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": ds, "namespace": "kube-system", "uid": format!("uid-{ds}")},
        "spec": {"selector": {"matchLabels": {"app": ds}}, "template": {"metadata": {"labels": {"app": ds}},
            "spec": {"containers": [{"name": ds, "image": ds, "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}}}]}}}}));
    let nodepool = nodepool();
    let nodeclass = json!({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
        "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}], "role": "KarpenterNodeRole-scale",
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "scale"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "scale"}}]}});
    [
        ("/api/v1/nodes", nodes),
        ("/apis/karpenter.sh/v1/nodeclaims", claims),
        ("/api/v1/pods", pods),
        ("/apis/apps/v1/daemonsets", daemonsets.to_vec()),
        ("/apis/karpenter.sh/v1/nodepools", vec![nodepool]),
        ("/apis/karpenter.k8s.aws/v1/ec2nodeclasses", vec![nodeclass]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// The child process: serves the cluster and prints its address; stops when stdin closes.
fn serve(shape: Shape) {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(async {
        let fake = fake_api::FakeApi::start(cluster(shape)).await;
        let mut out = std::io::stdout();
        let _ = writeln!(out, "{}", fake.addr);
        let _ = out.flush();
        tokio::task::spawn_blocking(|| std::io::stdin().lines().count())
            .await
            .ok();
    });
}

fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

fn run(shape: Shape) {
    let exe = std::env::current_exe().expect("the bench's own path");
    let mut child = Command::new(exe)
        .args([
            "--serve-fake",
            &shape.nodes.to_string(),
            &shape.pods.to_string(),
            &shape.pending.to_string(),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the API fake");
    let mut addr = String::new();
    BufReader::new(child.stdout.take().expect("piped"))
        .read_line(&mut addr)
        .expect("the fake's address");
    let url = format!("http://{}", addr.trim());
    let settings = Settings::from_lookup(|name| match name {
        "FLEETWRIGHT_CLUSTER_NAME" => Some("scale".into()),
        "FLEETWRIGHT_KUBE_API_URL" => Some(url.clone()),
        "FLEETWRIGHT_DRY_RUN" => Some((shape.pending > 0).to_string()),
        _ => None,
    })
    .expect("valid settings");
    // One thread, as the tick function runs (its invocations are sequential).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let summary = runtime.block_on(async {
        let mut config = kube::Config::new(url.parse().expect("a URL"));
        config.default_retry = false;
        let kube = kube::Client::try_from(config).expect("a client");
        // The simulated cloud over the embedded catalog, holding the fleet's instances.
        let cloud = SimCloud::new("scale", Arc::new(Catalog::embedded().clone()));
        for i in 0..shape.nodes {
            cloud.adopt(instance(i), 0.384);
        }
        let tick = Tick::new(cloud, kube, settings);
        let start = Instant::now();
        let summary = tick.run(Utc::now(), "scale-bench").await.expect("the tick");
        (summary, start.elapsed())
    });
    drop(child.stdin.take());
    let _ = child.wait();
    let (summary, elapsed) = summary;
    assert_eq!(
        summary.pending_pods, shape.pending,
        "the tick saw every pending pod"
    );
    let mut out = std::io::stdout();
    if shape.pending > 0 {
        assert!(
            summary.unschedulable.is_empty() && !summary.nodeclaims_created.is_empty(),
            "the tick planned NodeClaims for the pending pods: {:?}",
            summary.unschedulable
        );
        let _ = writeln!(
            out,
            "scale: provisioning, one dry-run tick over {} nodes and {} pods ({} pending): {:.2} s wall, peak RSS {:.0} MiB, {} nodeclaims planned",
            shape.nodes,
            shape.pods,
            shape.pending,
            elapsed.as_secs_f64(),
            peak_rss_mib(),
            summary.nodeclaims_created.len()
        );
    } else {
        assert!(
            !summary.disruptions.is_empty(),
            "the tick decided to consolidate the half-empty fleet: {summary:?}"
        );
        let _ = writeln!(
            out,
            "scale: consolidation, one tick with writes over {} nodes and {} pods (none pending): {:.2} s wall, peak RSS {:.0} MiB, command {}",
            shape.nodes,
            shape.pods,
            elapsed.as_secs_f64(),
            peak_rss_mib(),
            summary.disruptions.join(" ").chars().take(60).collect::<String>()
        );
    }
}

/// The instance behind node `i`, tagged as this cluster's.
fn instance(i: usize) -> fleetwright_cloud::Instance {
    let tags = [
        ("kubernetes.io/cluster/scale", "owned"),
        ("karpenter.sh/nodepool", "default"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .chain([(
        "karpenter.sh/nodeclaim".to_string(),
        format!("default-{i:06}"),
    )])
    .collect();
    fleetwright_cloud::Instance {
        id: format!("i-{i:017x}"),
        instance_type: "m5.2xlarge".into(),
        zone: ZONES[i % ZONES.len()].into(),
        state: "running".into(),
        capacity_type: "on-demand".into(),
        image_id: String::new(),
        subnet_id: String::new(),
        security_groups: Vec::new(),
        launch_time: Some(
            chrono::DateTime::parse_from_rfc3339("2026-11-22T09:00:00Z")
                .unwrap()
                .with_timezone(&Utc),
        ),
        tags,
        capacity_reservation_id: None,
        partition: None,
    }
}

fn main() {
    // `SCALE_LOG=fleetwright_runtime=debug` prints the tick's logs, with each phase's time.
    if let Ok(filter) = std::env::var("SCALE_LOG") {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .init();
    }
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--serve-fake") {
        let n = |i: usize| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(0);
        serve(Shape {
            nodes: n(2),
            pods: n(3),
            pending: n(4),
        });
        return;
    }
    if let Some(step) = flag(&args, "--real-step") {
        real_step(&step, real_size(&args));
        return;
    }
    if args.iter().any(|a| a == "--real") {
        run_real(real_size(&args));
        return;
    }
    let full = args.iter().any(|a| a == "--bench");
    let (nodes, pods) = if full { (5_000, 50_000) } else { (50, 500) };
    let case = |pending| Shape {
        nodes,
        pods,
        pending,
    };
    match args
        .iter()
        .position(|a| a == "--case")
        .and_then(|i| args.get(i + 1))
    {
        Some(c) if c == "provisioning" => run(case(if full { 1_000 } else { 20 })),
        Some(c) if c == "consolidation" => run(case(0)),
        _ => {
            // Each case in its own process, so each peak RSS is its own.
            for c in ["provisioning", "consolidation"] {
                let mut child_args: Vec<&str> = vec!["--case", c];
                if full {
                    child_args.push("--bench");
                }
                let exe = std::env::current_exe().expect("the bench's own path");
                let status = Command::new(exe)
                    .args(&child_args)
                    .status()
                    .expect("run the case");
                assert!(status.success(), "the {c} case failed");
            }
        }
    }
}

fn flag(args: &[String], name: &str) -> Option<String> {
    let at = args.iter().position(|a| a == name)?;
    args.get(at + 1).cloned()
}

/// `--nodes N --pods M --pending P` (5,000 nodes, 50,000 pods and 1,000 pending by default).
fn real_size(args: &[String]) -> real::Size {
    let number = |name: &str, default: usize| {
        flag(args, name).map_or(default, |v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name} takes a count, not {v:?}"))
        })
    };
    real::Size {
        nodes: number("--nodes", 5_000),
        pods: number("--pods", 50_000),
        pending: number("--pending", 1_000),
    }
}

fn real_step(step: &str, size: real::Size) {
    match step {
        "load" => real::load(size),
        "provisioning" => real::tick(size, real::Case::Provisioning),
        "unload" => real::unload_pending(),
        "consolidation" => real::tick(size, real::Case::Consolidation),
        "confirmation" => real::tick(size, real::Case::Confirmation),
        "reads" => real::reads(),
        other => panic!("no step {other:?}"),
    }
}

/// The benchmark on a real API server: each step in a process of its own, so each tick's peak
/// RSS is its own and not the loader's.
fn run_real(size: real::Size) {
    let exe = std::env::current_exe().expect("the bench's own path");
    let steps = [
        "load",
        "provisioning",
        "unload",
        "consolidation",
        "confirmation",
        "reads",
    ];
    for step in steps {
        let status = Command::new(&exe)
            .args(["--real-step", step])
            .args(["--nodes", &size.nodes.to_string()])
            .args(["--pods", &size.pods.to_string()])
            .args(["--pending", &size.pending.to_string()])
            .status()
            .expect("run the step");
        assert!(status.success(), "the {step} step failed");
    }
}
