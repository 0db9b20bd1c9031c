//! Trace benchmark: a load that rises to 200 pods and falls to 40 goes through the real tick
//! (provisioning, launch, registration, disruption, deletion) on a virtual clock, one tick a
//! minute, against the simulated cloud (`fleetwright_cloud::sim`) and the HTTP Kubernetes API
//! fake. Between ticks a simulated
//! kubelet registers a Ready node for each launched instance and a simulated scheduler binds
//! pending pods first-fit and recreates evicted ones as a ReplicaSet would.
//!
//! After the fall it prints, per tick, the fleet's hourly cost against the LP lower bound for the
//! 40 pods left. The target is a ratio of at most 1.10 within 5 ticks of the fall.
//!
//! `cargo bench -p fleetwright-runtime --bench trace` (it also runs, identically, as a check
//! under `cargo test`: the trace is small). `TRACE_VERBOSE=1` prints each tick's summary.

#[path = "../../kube/tests/fake_api/mod.rs"]
mod fake_api;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use fake_api::FakeApi;
use fleetwright_cloud::sim::SimCloud;
use fleetwright_core::labels::{INSTANCE_CATEGORY, INSTANCE_GENERATION};
use fleetwright_core::{Catalog, InstanceType, NodeClassSettings, ScheduleOptions};
use fleetwright_runtime::settings::Settings;
use fleetwright_runtime::tick::Tick;
use serde_json::{json, Value};

const CLUSTER: &str = "trace";
const PODS: &str = "/api/v1/pods";
const NODES: &str = "/api/v1/nodes";
const NODECLAIMS: &str = "/apis/karpenter.sh/v1/nodeclaims";
/// Pod sizes, cycled: (cpu, memory).
const SIZES: [(&str, &str); 4] = [
    ("250m", "512Mi"),
    ("500m", "1Gi"),
    ("1", "2Gi"),
    ("2", "4Gi"),
];

/// The embedded catalog and its instance types by name: what the simulated kubelet gives a node,
/// and what the whole-node bound packs.
struct Types {
    catalog: Arc<Catalog>,
    by_name: BTreeMap<String, InstanceType>,
}

impl Types {
    fn embedded() -> Self {
        let catalog = Catalog::embedded().clone();
        let by_name = catalog
            .instance_types(&NodeClassSettings::default())
            .into_iter()
            .map(|t| (t.name.clone(), t))
            .collect();
        Types {
            catalog: Arc::new(catalog),
            by_name,
        }
    }

    /// A lower bound that sees whole nodes, for pods that all ask for 2 GiB per CPU (as
    /// [`SIZES`] do): a node holds at most min(allocatable CPU, allocatable memory ÷ 2) of
    /// their CPU, so no set of whole nodes that holds them costs less than the cheapest set
    /// whose such capacities add up to their CPU. Computed exactly, as an unbounded knapsack
    /// cover in 250m steps over the NodePool's types (c/m/r, generation > 4, on-demand).
    fn whole_node_bound(&self, cpu_millis: i64) -> f64 {
        const STEP: i64 = 250;
        let items: Vec<(usize, f64)> = self
            .by_name
            .values()
            .filter_map(|t| {
                let labels = t.requirements.single_valued_labels();
                let category = labels.get(INSTANCE_CATEGORY)?;
                let generation: u32 = labels.get(INSTANCE_GENERATION)?.parse().ok()?;
                if !["c", "m", "r"].contains(&category.as_str()) || generation <= 4 {
                    return None;
                }
                let price = t
                    .offerings
                    .iter()
                    .filter(|o| o.capacity_type == "on-demand")
                    .map(|o| o.price)
                    .min_by(f64::total_cmp)?;
                let a = &t.allocatable;
                let holds = a.cpu.min(a.memory * 1000 / (2 << 30)) / STEP;
                (holds > 0).then_some((holds as usize, price))
            })
            .collect();
        let need = (cpu_millis + STEP - 1) / STEP;
        // best[u]: the cheapest set of nodes that holds at least u steps.
        let mut best = vec![f64::INFINITY; need as usize + 1];
        best[0] = 0.0;
        for u in 1..best.len() {
            for (holds, price) in &items {
                let rest = u.saturating_sub(*holds);
                best[u] = best[u].min(best[rest] + price);
            }
        }
        best[need as usize]
    }
}

fn pending_pod(name: &str, size: (&str, &str), created: DateTime<Utc>) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "apps", "uid": format!("uid-{name}"),
            "creationTimestamp": created.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            "labels": {"app": "web"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5db4558c8", "uid": "uid-rs", "controller": true}]},
        "spec": {"containers": [{"name": "app", "image": "nginx", "resources": {"requests": {"cpu": size.0, "memory": size.1}}}]},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}})
}

fn initial_objects() -> BTreeMap<String, Vec<Value>> {
    let nodepool = json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default", "uid": "np-1"},
        "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [{"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]},
                {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["4"]},
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]}},
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s",
                "budgets": [{"nodes": "100%"}]}}});
    let nodeclass = json!({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
        "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}], "role": "trace",
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}]}});
    [
        ("/apis/karpenter.sh/v1/nodepools", vec![nodepool]),
        ("/apis/karpenter.k8s.aws/v1/ec2nodeclasses", vec![nodeclass]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// The kubelet and the scheduler between two ticks.
struct World<'a> {
    api: &'a FakeApi,
    cloud: Arc<SimCloud>,
    types: &'a Types,
    next_pod: usize,
}

impl World<'_> {
    fn scale_up(&mut self, to: usize, now: DateTime<Utc>) {
        let mut state = self.api.state.lock().unwrap();
        let pods = state.objects.entry(PODS.into()).or_default();
        while pods.len() < to {
            let size = SIZES[self.next_pod % SIZES.len()];
            pods.push(pending_pod(&format!("web-{}", self.next_pod), size, now));
            self.next_pod += 1;
        }
    }

    /// A ReplicaSet scale-down that spreads: it keeps every fifth pod.
    fn scale_down_to_a_fifth(&mut self) {
        let mut state = self.api.state.lock().unwrap();
        let pods = state.objects.entry(PODS.into()).or_default();
        let mut i = 0;
        pods.retain(|_| {
            i += 1;
            (i - 1) % 5 == 0
        });
    }

    /// Registers a Ready node for every launched NodeClaim without one; removes nodes whose
    /// instance is gone.
    fn kubelet(&self) {
        let live: BTreeSet<String> = self
            .cloud
            .live()
            .values()
            .map(|i| format!("aws:///{}/{}", i.instance.zone, i.instance.id))
            .collect();
        let mut state = self.api.state.lock().unwrap();
        let claims = state.objects.get(NODECLAIMS).cloned().unwrap_or_default();
        let nodes = state.objects.entry(NODES.into()).or_default();
        nodes.retain(|n| live.contains(n["spec"]["providerID"].as_str().unwrap_or_default()));
        for claim in claims {
            let Some(provider) = claim["status"]["providerID"].as_str() else {
                continue;
            };
            if !live.contains(provider) || nodes.iter().any(|n| n["spec"]["providerID"] == provider)
            {
                continue;
            }
            let instance_type = claim["metadata"]["labels"]["node.kubernetes.io/instance-type"]
                .as_str()
                .unwrap_or_default();
            let Some(t) = self.types.by_name.get(instance_type) else {
                continue;
            };
            let name = format!(
                "ip-10-0-{}.ec2.internal",
                provider.rsplit('/').next().unwrap_or("")
            );
            let mut labels = claim["metadata"]["labels"].clone();
            labels["kubernetes.io/hostname"] = json!(name);
            let a = &t.allocatable;
            let allocatable = json!({"cpu": format!("{}m", a.cpu), "memory": a.memory.to_string(), "pods": a.pods.to_string()});
            nodes.push(json!({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "uid": format!("uid-{name}"), "labels": labels},
                "spec": {"providerID": provider, "taints": [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}]},
                "status": {"allocatable": allocatable, "capacity": allocatable,
                    "conditions": [{"type": "Ready", "status": "True"}]}}));
        }
    }

    /// Recreates evicted pods and pods whose node is gone as pending; binds pending pods
    /// first-fit to Ready, untainted nodes with room.
    fn scheduler(&mut self, now: DateTime<Utc>) {
        let mut state = self.api.state.lock().unwrap();
        let evicted: BTreeSet<String> = std::mem::take(&mut state.evicted).into_iter().collect();
        let nodes = state.objects.get(NODES).cloned().unwrap_or_default();
        let node_names: BTreeSet<String> = nodes
            .iter()
            .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_string))
            .collect();
        let pods = state.objects.entry(PODS.into()).or_default();
        for pod in pods.iter_mut() {
            let key = format!(
                "apps/{}",
                pod["metadata"]["name"].as_str().unwrap_or_default()
            );
            let node = pod["spec"]["nodeName"].as_str().map(str::to_string);
            let orphaned = node.as_ref().is_some_and(|n| !node_names.contains(n));
            if evicted.contains(&key) || orphaned {
                let size = (
                    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"]
                        .as_str()
                        .unwrap_or("1")
                        .to_string(),
                    pod["spec"]["containers"][0]["resources"]["requests"]["memory"]
                        .as_str()
                        .unwrap_or("1Gi")
                        .to_string(),
                );
                *pod = pending_pod(&format!("web-{}", self.next_pod), (&size.0, &size.1), now);
                self.next_pod += 1;
            }
        }
        let mut used: BTreeMap<String, (i64, i64)> = BTreeMap::new();
        for pod in pods.iter() {
            if let Some(node) = pod["spec"]["nodeName"].as_str() {
                let (c, m) = requests(pod);
                let u = used.entry(node.to_string()).or_default();
                u.0 += c;
                u.1 += m;
            }
        }
        for pod in pods.iter_mut().filter(|p| p["spec"]["nodeName"].is_null()) {
            let (c, m) = requests(pod);
            let fits = nodes.iter().find(|n| {
                let name = n["metadata"]["name"].as_str().unwrap_or_default();
                let schedulable = n["spec"]["taints"].as_array().is_none_or(|t| t.is_empty());
                let (uc, um) = used.get(name).copied().unwrap_or_default();
                let (ac, am) = allocatable(n);
                schedulable && uc + c <= ac && um + m <= am
            });
            if let Some(n) = fits {
                let name = n["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let u = used.entry(name.clone()).or_default();
                u.0 += c;
                u.1 += m;
                pod["spec"]["nodeName"] = json!(name);
                pod["status"] = json!({"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}]});
            }
        }
    }

    /// The CPU the pods now in the cluster request, in millicores.
    fn cpu_requested(&self) -> i64 {
        let state = self.api.state.lock().unwrap();
        state
            .objects
            .get(PODS)
            .map_or(0, |p| p.iter().map(|pod| requests(pod).0).sum())
    }

    fn pending(&self) -> usize {
        let state = self.api.state.lock().unwrap();
        state.objects.get(PODS).map_or(0, |p| {
            p.iter().filter(|p| p["spec"]["nodeName"].is_null()).count()
        })
    }

    /// The LP lower bound on the hourly cost of the pods now in the cluster, and the cost of
    /// the scheduler's own plan for them from scratch.
    fn lower_bound(&self) -> (f64, f64) {
        let state = self.api.state.lock().unwrap();
        let mut items: Vec<Value> = Vec::new();
        for path in [
            "/apis/karpenter.sh/v1/nodepools",
            "/apis/karpenter.k8s.aws/v1/ec2nodeclasses",
        ] {
            items.extend(state.objects.get(path).cloned().unwrap_or_default());
        }
        for pod in state.objects.get(PODS).cloned().unwrap_or_default() {
            let size = (
                pod["spec"]["containers"][0]["resources"]["requests"]["cpu"].clone(),
                pod["spec"]["containers"][0]["resources"]["requests"]["memory"].clone(),
            );
            let name = pod["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            items.push(pending_pod(
                &name,
                (
                    size.0.as_str().unwrap_or("1"),
                    size.1.as_str().unwrap_or("1Gi"),
                ),
                Utc::now(),
            ));
        }
        let text =
            serde_json::to_string(&json!({"apiVersion": "v1", "kind": "List", "items": items}))
                .unwrap();
        let snapshot = fleetwright_kube::snapshot_from_yaml(&text, "trace").expect("a snapshot");
        let cost =
            fleetwright_core::schedule(&snapshot, &self.types.catalog, &ScheduleOptions::default())
                .cost;
        (cost.lower_bound, cost.hourly)
    }
}

fn requests(pod: &Value) -> (i64, i64) {
    let r = &pod["spec"]["containers"][0]["resources"]["requests"];
    (
        milli(r["cpu"].as_str().unwrap_or("0")),
        bytes(r["memory"].as_str().unwrap_or("0")),
    )
}

fn allocatable(node: &Value) -> (i64, i64) {
    let a = &node["status"]["allocatable"];
    (
        milli(a["cpu"].as_str().unwrap_or("0")),
        bytes(a["memory"].as_str().unwrap_or("0")),
    )
}

fn milli(q: &str) -> i64 {
    match q.strip_suffix('m') {
        Some(m) => m.parse().unwrap_or(0),
        None => q.parse::<i64>().map(|c| c * 1000).unwrap_or(0),
    }
}

fn bytes(q: &str) -> i64 {
    for (suffix, factor) in [("Ki", 1 << 10), ("Mi", 1 << 20), ("Gi", 1 << 30)] {
        if let Some(n) = q.strip_suffix(suffix) {
            return n.parse::<i64>().unwrap_or(0) * factor;
        }
    }
    q.parse().unwrap_or(0)
}

/// One tick at `now`, then the kubelet and the scheduler.
async fn step(world: &mut World<'_>, settings: &Settings, now: DateTime<Utc>, n: usize) {
    let tick = Tick::new(world.cloud.clone(), world.api.client(), settings.clone());
    let s = tick
        .run(now, &format!("trace-{n}"))
        .await
        .expect("the tick");
    if std::env::var_os("TRACE_VERBOSE").is_some() {
        let _ = writeln!(
            std::io::stdout(),
            "  tick {n}: pending {} created {:?} launched {} registered {:?} initialized {:?} disruptions {:?} disrupted {:?} terminated {:?}",
            s.pending_pods,
            s.nodeclaims_created,
            s.launched.len(),
            s.registered,
            s.initialized,
            s.disruptions,
            s.disrupted,
            s.terminated
        );
    }
    world.kubelet();
    world.scheduler(now);
}

fn main() {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(async {
        let types = Types::embedded();
        let cloud = Arc::new(SimCloud::new(CLUSTER, types.catalog.clone()));
        let api = FakeApi::start(initial_objects()).await;
        let url = format!("http://{}", api.addr);
        let settings = Settings::from_lookup(|name| match name {
            "FLEETWRIGHT_CLUSTER_NAME" => Some(CLUSTER.into()),
            "FLEETWRIGHT_KUBE_API_URL" => Some(url.clone()),
            _ => None,
        })
        .expect("valid settings");
        let mut world = World {
            api: &api,
            cloud: cloud.clone(),
            types: &types,
            next_pod: 0,
        };
        let start = DateTime::parse_from_rfc3339("2026-11-22T10:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let mut out = std::io::stdout();
        let mut t = 0;
        let at = |t: usize| start + Duration::minutes(t as i64);
        world.scale_up(200, at(0));
        while world.pending() > 0 && t < 12 {
            step(&mut world, &settings, at(t), t).await;
            t += 1;
        }
        assert_eq!(world.pending(), 0, "200 pods running within 12 ticks");
        let _ = writeln!(
            out,
            "trace: 200 pods running after {t} tick(s) on {} node(s), ${:.3}/h",
            cloud.live().len(),
            cloud.hourly()
        );
        world.scale_down_to_a_fifth();
        let (bound, fresh) = world.lower_bound();
        let _ = writeln!(
            out,
            "trace: scaled down to 40 pods; LP lower bound ${bound:.3}/h; a fresh plan for them ${fresh:.3}/h (cost/LP {:.3})",
            fresh / bound
        );
        let whole = types.whole_node_bound(world.cpu_requested());
        let _ = writeln!(
            out,
            "trace: no set of whole nodes holds them for less than ${whole:.3}/h (cost/LP {:.3})",
            whole / bound
        );
        assert!(
            whole <= fresh + 1e-9 && whole >= bound - 1e-9,
            "the whole-node bound lies between the LP bound and a real plan"
        );
        let before = cloud.hourly();
        let mut reached = None;
        let mut after_five = before;
        for k in 1..=10 {
            step(&mut world, &settings, at(t), t).await;
            t += 1;
            let ratio = cloud.hourly() / bound;
            let _ = writeln!(
                out,
                "trace: tick {k} after the fall: {} node(s), ${:.3}/h, cost/LP {ratio:.3}",
                cloud.live().len(),
                cloud.hourly()
            );
            if ratio <= 1.10 && reached.is_none() {
                reached = Some(k);
            }
            if k == 5 {
                after_five = cloud.hourly();
            }
        }
        let _ = writeln!(
            out,
            "trace: cost/LP <= 1.10 reached {} (target: within 5 ticks)",
            reached.map_or("never".to_string(), |k| format!("at tick {k}"))
        );
        assert_eq!(
            world.pending(),
            0,
            "no pod is left pending by consolidation"
        );
        assert!(
            after_five < before / 2.0,
            "the fleet shrinks within 5 ticks of the fall: ${before:.3}/h -> ${after_five:.3}/h"
        );
    });
}
