//! Trace benchmark: a load that rises to 200 pods and falls to 40 goes through the real tick
//! (provisioning, launch, registration, disruption, deletion) on a virtual clock, one tick a
//! minute (and at the follow-ups a tick asks for), driven by the one simulation loop
//! (`fleetwright_runtime::world`) in the project's one simulated world (`fleetwright_sim`): the
//! simulated cloud, and the simulated cluster behind a real `kube::Client` whose kubelet registers launched instances,
//! whose ReplicaSets replace evicted pods and whose scheduler binds pending ones. The cluster
//! steps every simulated second between ticks, as `fleetwright simulate` does.
//!
//! After the fall it prints, per minute, the fleet's hourly cost against the LP lower bound and
//! against the whole-node optimum for the 40 pods left (an exact knapsack cover, below). The
//! target is at most 1.03 x the whole-node optimum within 5 minutes; the trace prints whether
//! it is reached and asserts what holds (see docs/benchmarks.md).
//!
//! `cargo bench -p fleetwright-runtime --bench trace` (it also runs, identically, as a check
//! under `cargo test`: the trace is small). `TRACE_VERBOSE=1` prints each tick's summary.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use fleetwright_core::labels::{INSTANCE_CATEGORY, INSTANCE_GENERATION};
use fleetwright_core::{Catalog, InstanceType, NodeClassSettings, ScheduleOptions};
use fleetwright_runtime::settings::Settings;
use fleetwright_runtime::tick::{Tick, TickSummary};
use fleetwright_runtime::world::{drive, World};
use fleetwright_sim::cluster::PODS;
use fleetwright_sim::{Cluster, SimCloud};
use serde_json::{json, Value};

const CLUSTER: &str = "trace";
/// Pod sizes, one Deployment each: (cpu, memory).
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

fn deployment(index: usize, size: (&str, &str)) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": format!("web-{index}"), "namespace": "apps"},
        "spec": {"replicas": 0, "template": {"metadata": {"labels": {"app": format!("web-{index}")}},
            "spec": {"containers": [{"name": "app", "image": "nginx",
                "resources": {"requests": {"cpu": size.0, "memory": size.1}}}]}}}})
}

fn objects() -> Vec<Value> {
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
    let mut objects = vec![nodepool, nodeclass];
    objects.extend(SIZES.iter().enumerate().map(|(i, s)| deployment(i, *s)));
    objects
}

/// The simulated world and what the trace asks of it.
struct Trace<'a> {
    cluster: Cluster,
    cloud: Arc<SimCloud>,
    types: &'a Types,
    tick: Tick<Arc<SimCloud>>,
    start: DateTime<Utc>,
    /// The next second to simulate.
    next: i64,
    /// When this part of the trace ends.
    until: Until,
    /// The fleet's hourly cost at the end of each minute of this part.
    costs: Vec<f64>,
}

/// When a part of the trace ends: at the first whole minute with no pod pending (or at the
/// last one given), or after some minutes.
#[derive(Clone, Copy)]
enum Until {
    AllRunning { by_minute: i64 },
    Minutes(i64),
}

impl Trace<'_> {
    fn scale_up(&mut self, total: usize) {
        for i in 0..SIZES.len() {
            self.cluster
                .scale(&format!("web-{i}"), (total / SIZES.len()) as u32);
        }
    }

    /// A ReplicaSet scale-down that spreads, as kube-controller-manager's ranking of pods on
    /// crowded nodes first does: it keeps every fifth pod, in creation order.
    fn scale_down_to_a_fifth(&mut self) {
        {
            let mut state = self.cluster.api.lock();
            let pods = state.objects.entry(PODS.into()).or_default();
            let mut i = 0;
            pods.retain(|_| {
                i += 1;
                (i - 1) % 5 == 0
            });
        }
        for i in 0..SIZES.len() {
            let name = format!("web-{i}");
            let (_, total) = self.cluster.deployment_pods(&name);
            self.cluster.scale(&name, total as u32);
        }
    }

    /// One simulated second of the rest of Kubernetes.
    fn kubernetes(&mut self, now: DateTime<Utc>) {
        self.cluster.set_clock(now);
        self.cluster.kubelet(&self.cloud.live(), now);
        self.cluster.controllers(now);
        self.cluster.scheduler(now);
    }

    /// Runs the world until `until`, from where it is.
    async fn run(&mut self, until: Until) {
        self.until = until;
        self.costs.clear();
        drive(self).await.unwrap_or_else(|never| match never {});
    }

    fn minutes(&self) -> i64 {
        self.next / 60
    }

    /// The CPU the workload now requests, in millicores.
    fn cpu_requested(&self) -> i64 {
        self.cluster
            .workload_as_pending()
            .iter()
            .map(|pod| {
                milli(
                    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"]
                        .as_str()
                        .unwrap_or("0"),
                )
            })
            .sum()
    }

    fn pending(&self) -> usize {
        self.cluster.workload().1.len()
    }

    /// The LP lower bound on the hourly cost of the pods now in the cluster, and the cost of
    /// the scheduler's own plan for them from scratch.
    fn lower_bound(&self) -> (f64, f64) {
        let mut items = self.cluster.configuration();
        items.extend(self.cluster.workload_as_pending());
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

fn milli(q: &str) -> i64 {
    match q.strip_suffix('m') {
        Some(m) => m.parse().unwrap_or(0),
        None => q.parse::<i64>().map(|c| c * 1000).unwrap_or(0),
    }
}

/// The trace's world: a tick a minute (and when a tick asks for a follow-up); no webhook.
impl World for Trace<'_> {
    type Error = std::convert::Infallible;

    fn schedule(&self) -> i64 {
        60
    }

    async fn next_second(&mut self) -> Result<Option<(i64, DateTime<Utc>)>, Self::Error> {
        let t = self.next;
        if t % 60 == 0 {
            let done = match self.until {
                Until::AllRunning { by_minute } => self.pending() == 0 || t / 60 >= by_minute,
                Until::Minutes(n) => self.costs.len() as i64 >= n,
            };
            if done {
                return Ok(None);
            }
        }
        self.next += 1;
        Ok(Some((t, self.start + Duration::seconds(t))))
    }

    async fn second(&mut self, _t: i64, now: DateTime<Utc>) -> bool {
        self.kubernetes(now);
        true
    }

    fn nudged(&mut self) -> bool {
        false
    }

    async fn tick(&mut self, t: i64, now: DateTime<Utc>) -> Option<TickSummary> {
        self.cluster.set_clock(now);
        let s = self.tick.run(now, &format!("trace-{t}")).await.ok()?;
        if std::env::var_os("TRACE_VERBOSE").is_some() {
            let _ = writeln!(
                std::io::stdout(),
                "  tick at {t}s: pending {} created {:?} launched {} registered {:?} initialized {:?} disruptions {:?} disrupted {:?} terminated {:?}",
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
        Some(s)
    }

    async fn end_second(&mut self, t: i64) {
        if t % 60 == 59 {
            self.costs.push(self.cloud.hourly());
        }
    }
}

fn main() {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(async {
        let types = Types::embedded();
        let cloud = Arc::new(SimCloud::new(CLUSTER, types.catalog.clone()));
        let cluster = Cluster::new(&objects(), types.by_name.clone(), 1);
        let settings = Settings::from_lookup(|name| match name {
            "FLEETWRIGHT_CLUSTER_NAME" => Some(CLUSTER.into()),
            "FLEETWRIGHT_KUBE_API_URL" => Some("http://127.0.0.1:1".into()),
            _ => None,
        })
        .expect("valid settings");
        let start = DateTime::parse_from_rfc3339("2026-11-22T10:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let mut world = Trace {
            tick: Tick::new(cloud.clone(), cluster.api.client(), settings),
            cluster,
            cloud: cloud.clone(),
            types: &types,
            start,
            next: 0,
            until: Until::Minutes(0),
            costs: Vec::new(),
        };
        let mut out = std::io::stdout();
        world.scale_up(200);
        world.kubernetes(start);
        world.run(Until::AllRunning { by_minute: 12 }).await;
        assert_eq!(world.pending(), 0, "200 pods running within 12 minutes");
        let _ = writeln!(
            out,
            "trace: 200 pods running after {} minute(s) on {} node(s), ${:.3}/h",
            world.minutes(),
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
        // The room a replace command keeps for kube-scheduler's spreading on two destinations:
        // one more of the largest pod (2 CPU at 2 GiB per CPU).
        let roomy = types.whole_node_bound(world.cpu_requested() + 2000);
        let _ = writeln!(
            out,
            "trace: with room for one more 2-CPU pod, no set of whole nodes costs less than ${roomy:.3}/h ({:.3} x the whole-node optimum)",
            roomy / whole
        );
        let before = cloud.hourly();
        let target = 1.03 * whole;
        world.run(Until::Minutes(10)).await;
        let costs = world.costs.clone();
        for (k, cost) in costs.iter().enumerate() {
            let _ = writeln!(
                out,
                "trace: minute {} after the fall: ${cost:.3}/h, cost/LP {:.3}, cost/whole-node {:.3}",
                k + 1,
                cost / bound,
                cost / whole
            );
        }
        let _ = writeln!(out, "trace: {} node(s) at the end", cloud.live().len());
        let reached = costs.iter().position(|&c| c <= target + 1e-9).map(|i| i + 1);
        let _ = writeln!(
            out,
            "trace: <= 1.03 x the whole-node optimum (${target:.3}/h) reached {} (target: within 5 minutes); settled at ${:.3}/h ({:.3} x)",
            reached.map_or("never".to_string(), |k| format!("at minute {k}")),
            costs[9],
            costs[9] / whole
        );
        assert_eq!(
            world.pending(),
            0,
            "no pod is left pending by consolidation"
        );
        assert!(
            costs[4] < before / 2.0,
            "the fleet shrinks within 5 minutes of the fall: ${before:.3}/h -> ${:.3}/h",
            costs[4]
        );
        // The 1.03 target cannot hold without a set that kube-scheduler can strand a pod on
        // (docs/benchmarks.md); the cheapest set that keeps the room is reached instead.
        assert!(
            costs[4] <= roomy + 1e-9,
            "within 5 minutes, the cheapest whole nodes with room for one more 2-CPU pod: ${:.3}/h vs ${roomy:.3}/h",
            costs[4]
        );
        assert!(
            costs[5..].windows(2).all(|w| w[1] <= w[0] + 1e-9),
            "once settled, the fleet does not churn back up: {costs:?}"
        );
    });
}
