//! `fleetwright simulate --kubeconfig FILE`: a scenario against a real API server (a kwok or
//! test cluster), in wall-clock time. The cluster's own controllers do what the in-memory
//! cluster imitates: kube-controller-manager runs the Deployments, ReplicaSets, DaemonSets,
//! PodDisruptionBudgets and pod garbage collection, kube-scheduler binds the pods, and kwok keeps
//! the nodes Ready and runs their pods. This module plays only what such a cluster has no part
//! for: the cloud ([`SimCloud`]), the kubelets joining (a Node annotated for kwok when an
//! instance has booted, deleted when it is gone), the admission webhook's nudge on each new
//! pod, the EventBridge schedule, and the interruption queue. Tick and interruption are the
//! real use cases, under the identity of `--controller-kubeconfig` (default: `--kubeconfig`'s).
//!
//! It touches only what it created: [`guard`] refuses a cluster in use before the first write,
//! every object the run creates carries its run label, and [`owned`] is the only way it
//! changes or deletes anything. At the end [`clean`] removes what it created.

mod clean;
mod guard;
pub mod karpenter;
mod karpenter_process;
mod kubelet;
mod owned;
mod setup;
#[cfg(test)]
mod tests;
mod utilization;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use chrono::{DateTime, Duration, Utc};
use fleetwright_core::{Catalog, NodeClassSettings};
use fleetwright_runtime::interruption::Interruption;
use fleetwright_runtime::settings::Settings;
use fleetwright_runtime::tick::Tick;
use fleetwright_runtime::webhook::Webhook;
use fleetwright_sim::SimCloud;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ApiResource, DeleteParams, ListParams};
use kube::Client;
use serde_json::{json, Value};
use tracing::{info, warn};

use super::report::{Report, Sample};
use super::scenario::{Action, Scenario, Step};
use super::triggers::{FollowUps, QueuedNudges};
use super::{deliver, CLUSTER};
use fleetwright_core::rng::Rng;

/// How long after its launch an instance's kubelet registers its Node (kwok makes it Ready at
/// once; a real node takes about a minute).
const JOIN_AFTER: Duration = Duration::seconds(5);
/// How often (seconds) the run checks that nothing of anyone else's has appeared since the
/// guard let it through.
const RECHECK: i64 = 5;
/// The field manager of what the simulation applies.
const MANAGER: &str = "fleetwright-simulate";
/// Marks the Nodes the simulation registered.
const SIMULATED: &str = "fleetwright.dev/simulated";

/// Where to run: the kubeconfig of the cluster (applies the scenario, plays the kubelets) and
/// the one tick and interruption use.
#[derive(Clone, Debug)]
pub struct Target {
    pub kubeconfig: PathBuf,
    pub controller_kubeconfig: Option<PathBuf>,
    /// Karpenter as the autoscaler instead of Fleetwright's tick and interruption.
    pub karpenter: Option<karpenter::Karpenter>,
}

/// Runs `scenario` against the target cluster and returns its report.
pub async fn run(
    scenario: Scenario,
    target: &Target,
    catalog: Catalog,
    clock: super::log::Clock,
    bar: Option<indicatif::ProgressBar>,
) -> anyhow::Result<Report> {
    let admin = client(&target.kubeconfig).await?;
    let controller = match &target.controller_kubeconfig {
        Some(path) => {
            karpenter_process::same_server(&target.kubeconfig, path).await?;
            client(path).await?
        }
        None => admin.clone(),
    };
    let mut live = Live::new(scenario, admin, controller, catalog, clock, bar)?;
    live.karpenter = target.karpenter.clone();
    live.controller_kubeconfig = (target.controller_kubeconfig.as_ref())
        .unwrap_or(&target.kubeconfig)
        .clone();
    if let Err(e) = live.prepare().await {
        live.stop_karpenter();
        live.clean_up().await;
        return Err(e);
    }
    let report = live.run().await;
    let usage = live.stop_karpenter();
    live.clean_up().await;
    let mut report = report?;
    report.autoscaler = Some(live.autoscaler_usage(usage));
    Ok(report)
}

async fn client(path: &Path) -> anyhow::Result<Client> {
    fleetwright_kube::client::kubeconfig_client(path)
        .await
        .with_context(|| format!("--kubeconfig {}", path.display()))
}

/// One object of the scenario, resolved through discovery.
struct Applied {
    resource: ApiResource,
    namespace: Option<String>,
    name: String,
}

struct Live {
    scenario: Scenario,
    admin: Client,
    start: DateTime<Utc>,
    clock: super::log::Clock,
    bar: Option<indicatif::ProgressBar>,
    catalog: Arc<Catalog>,
    types: BTreeMap<String, fleetwright_core::InstanceType>,
    cloud: Arc<SimCloud>,
    tick: Tick<Arc<SimCloud>>,
    interruption: Interruption<Arc<SimCloud>, QueuedNudges>,
    webhook: Webhook<QueuedNudges>,
    nudges: QueuedNudges,
    /// The namespace of the tick's Lease and state ConfigMap, and the Lease's name.
    namespace: String,
    lease: String,
    rng: Rng,
    watch: super::watch::Watch,
    /// This run: the value of the label on everything it creates.
    run: owned::Run,
    /// Whether the guard let the run through (nothing to clean up before).
    prepared: bool,
    /// The scenario's objects the run created.
    applied: Vec<Applied>,
    /// The namespaces the run created.
    namespaces: Vec<String>,
    /// Nodes registered for instances: name → providerID.
    nodes: BTreeMap<String, String>,
    /// Instances (providerIDs) whose Node name was taken by an object not of this run.
    refused: BTreeSet<String>,
    /// Pods seen, by uid.
    seen_pods: BTreeSet<String>,
    /// Workload pods: uid → (created, seconds until bound).
    waits: BTreeMap<String, (DateTime<Utc>, Option<i64>)>,
    /// When (seconds into the run) the check for objects of anyone else's was last tried, and
    /// last succeeded.
    checks: Checks,
    /// Karpenter, when it is the autoscaler of this run, and its process once started.
    karpenter: Option<karpenter::Karpenter>,
    process: Option<karpenter_process::Process>,
    /// The identity the autoscaler runs as.
    controller_kubeconfig: PathBuf,
    /// Fleetwright's invocations: function → (count, seconds).
    invocations: BTreeMap<&'static str, (usize, f64)>,
    /// The fleet Karpenter ran at the last listing that succeeded.
    last_fleet: BTreeMap<String, fleetwright_sim::SimInstance>,
}

/// The times of the checks that nothing of anyone else's has appeared.
#[derive(Clone, Copy, Debug, Default)]
struct Checks {
    tried: i64,
    passed: i64,
}

/// How long the run goes on while the check that nothing of anyone else's appeared keeps
/// failing: past this it stops, since it no longer knows what the tick would act on.
const UNCHECKED_FOR: i64 = 3 * RECHECK;

fn stamp(t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> DateTime<Utc> {
    DateTime::from_timestamp(t.0.as_second(), 0).unwrap_or_default()
}

impl Live {
    fn new(
        scenario: Scenario,
        admin: Client,
        controller: Client,
        catalog: Catalog,
        clock: super::log::Clock,
        bar: Option<indicatif::ProgressBar>,
    ) -> anyhow::Result<Live> {
        let catalog = Arc::new(catalog);
        let cloud = Arc::new(SimCloud::new(CLUSTER, catalog.clone()));
        let start = Utc::now();
        super::add_reservations(&cloud, &scenario, start);
        let types = catalog
            .instance_types(&NodeClassSettings::default())
            .into_iter()
            .map(|t| (t.name.clone(), t))
            .collect();
        let settings = Settings::from_lookup(|name| match name {
            "FLEETWRIGHT_CLUSTER_NAME" => Some(CLUSTER.into()),
            "FLEETWRIGHT_NAMESPACE" => std::env::var(name).ok(),
            _ => scenario.settings.get(name).cloned(),
        })
        .with_context(|| format!("scenario {}: settings", scenario.name))?;
        let nudges = QueuedNudges::default();
        Ok(Live {
            rng: Rng::new(scenario.seed.rotate_left(17)),
            scenario,
            start,
            clock,
            bar,
            types,
            tick: Tick::new(cloud.clone(), controller.clone(), settings.clone()),
            interruption: Interruption::new(
                cloud.clone(),
                controller,
                nudges.clone(),
                settings.clone(),
            ),
            webhook: Webhook::new(nudges.clone(), None),
            nudges,
            namespace: settings.namespace.clone(),
            lease: settings.lease_name.clone(),
            catalog,
            cloud,
            admin,
            watch: Default::default(),
            run: owned::Run::fresh(),
            prepared: false,
            applied: Vec::new(),
            namespaces: Vec::new(),
            nodes: BTreeMap::new(),
            refused: BTreeSet::new(),
            seen_pods: BTreeSet::new(),
            waits: BTreeMap::new(),
            checks: Checks::default(),
            karpenter: None,
            process: None,
            controller_kubeconfig: PathBuf::new(),
            invocations: BTreeMap::new(),
            last_fleet: BTreeMap::new(),
        })
    }

    async fn run(&mut self) -> anyhow::Result<Report> {
        let timeline = self.scenario.timeline.clone();
        let mut steps = timeline.iter().peekable();
        let mut nudged_for: Option<i64> = None;
        let mut follow_ups = FollowUps::default();
        let mut last_tick: Option<i64> = None;
        self.start = Utc::now();
        loop {
            let now = Utc::now();
            let t = (now - self.start).num_seconds();
            if t > self.scenario.duration {
                break;
            }
            self.clock.set(now);
            self.cloud.set_clock(now);
            // By elapsed time, not `t % RECHECK`: a round that takes over a second must not
            // skip the check for good.
            if t - self.checks.tried >= RECHECK {
                self.still_alone(t).await?;
            }
            // The pods as this second found them, before its steps: a sample taken at a step's
            // second is the cluster the step acted on, whatever the controllers do next.
            let pods = self.pods().await;
            while let Some(step) = steps.next_if(|s| s.at <= t) {
                self.step(step, t, now).await;
            }
            self.admit_new(&pods, now).await;
            if self.karpenter.is_some() {
                self.karpenter_round(t).await;
            } else {
                self.reclaim(now).await;
                if let Err(e) = self.kubelet(now).await {
                    warn!(target: "simulate::kubelet", error = %format!("{e:#}"), "the kubelets' round failed; the next second retries");
                }
                if !self.nudges.take().is_empty() {
                    nudged_for.get_or_insert(t + 1);
                }
                let scheduled =
                    t / self.scenario.schedule != last_tick.unwrap_or(-1) / self.scenario.schedule;
                let followed_up = follow_ups.due(t);
                if last_tick.is_none()
                    || scheduled
                    || nudged_for.is_some_and(|n| n <= t)
                    || followed_up
                {
                    nudged_for = None;
                    last_tick = Some(t);
                    let started = std::time::Instant::now();
                    let summary = super::run_tick(&self.tick, &mut self.watch, now, t).await;
                    self.invoked("tick", started);
                    if let Some(summary) = summary {
                        follow_ups.note(&summary, t);
                    }
                }
            }
            self.observe(t, &pods).await;
            if let Some(bar) = &self.bar {
                bar.set_position(t.max(0) as u64);
            }
            let next = self.start + Duration::seconds(t + 1);
            if let Ok(wait) = (next - Utc::now()).to_std() {
                tokio::time::sleep(wait).await;
            }
        }
        let end = self.start + Duration::seconds(self.scenario.duration);
        let waits: Vec<(DateTime<Utc>, i64)> = self
            .waits
            .values()
            .map(|(created, bound)| (*created, bound.unwrap_or((end - *created).num_seconds())))
            .collect();
        Ok(self.watch.report(
            &self.scenario,
            &self.catalog,
            self.start,
            &waits,
            self.counts(),
        ))
    }

    async fn step(&mut self, step: &Step, t: i64, now: DateTime<Utc>) {
        info!(target: "simulate::scenario", step = %step.action, "scenario step");
        let index = self
            .watch
            .step(t, step.action.to_string(), self.nodes.len(), self.hourly());
        if self.karpenter.is_some() && !karpenter::plays(&step.action) {
            warn!(target: "simulate::scenario", step = %step.action, "Karpenter's KWOK provider has no simulated cloud to play this step on; skipped");
            return;
        }
        let result = match &step.action {
            Action::Scale(s) => {
                self.watch
                    .scaling
                    .push((index, s.deployment.clone(), s.replicas));
                let replicas = Some(s.replicas as i32);
                owned::replace(
                    &self.deployment(&s.deployment),
                    &self.run,
                    "Deployment",
                    &s.deployment,
                    |d| {
                        let spec = d.spec.get_or_insert_with(Default::default);
                        let changed = spec.replicas != replicas;
                        spec.replicas = replicas;
                        changed
                    },
                )
                .await
                .map(|_| ())
            }
            Action::Delete(d) => owned::delete(
                &self.deployment(&d.deployment),
                &self.run,
                "Deployment",
                &d.deployment,
                &DeleteParams::background(),
            )
            .await
            .map(|_| ()),
            Action::Apply(o) => self.apply(o).await,
            Action::ChangeAmi(c) => {
                self.cloud.release_ami(c.nodeclass.as_deref());
                Ok(())
            }
            Action::Ice(i) => {
                self.cloud.add_ice(i.clone());
                Ok(())
            }
            Action::Interrupt(i) if self.karpenter.is_some() => {
                self.interrupt_karpenter(&i.nodepool, i.count, t).await;
                Ok(())
            }
            Action::Interrupt(i) => {
                self.interrupt(&i.nodepool, i.count, t, now).await;
                Ok(())
            }
            Action::Fail(_) => {
                // kwok owns the nodes' conditions on the control plane and would set them back.
                warn!(target: "simulate::scenario", step = %step.action, "node failures are simulated in memory only; skipped on the control plane");
                Ok(())
            }
        };
        if let Err(e) = result {
            warn!(target: "simulate::scenario", step = %step.action, error = %format!("{e:#}"), "the step failed");
        }
    }

    /// The fleet's hourly cost now.
    fn hourly(&self) -> f64 {
        match self.karpenter {
            Some(_) => self.last_fleet.values().map(|i| i.price).sum(),
            None => self.cloud.hourly(),
        }
    }

    /// Instances launched and terminated, and capacity errors (Karpenter's provider has none).
    fn counts(&self) -> (usize, usize, usize) {
        match self.karpenter {
            Some(_) => {
                let launched = self.watch.launches.len();
                (launched, launched - self.last_fleet.len().min(launched), 0)
            }
            None => self.cloud.counts(),
        }
    }

    fn deployment(&self, name: &str) -> Api<Deployment> {
        let namespace = self
            .scenario
            .objects
            .iter()
            .find(|o| o["kind"] == "Deployment" && o["metadata"]["name"] == name)
            .and_then(|o| o["metadata"]["namespace"].as_str())
            .unwrap_or("default");
        Api::namespaced(self.admin.clone(), namespace)
    }

    async fn interrupt(&mut self, nodepool: &str, count: usize, t: i64, now: DateTime<Utc>) {
        let pods = self.pods().await;
        // Which node kube-scheduler filled is wall-clock chance; a warning is only worth
        // sending in the story to a node that holds pods, while one does.
        let busy: BTreeSet<String> = pods
            .iter()
            .filter(|p| workload(p))
            .filter_map(|p| p.spec.as_ref()?.node_name.as_ref())
            .filter_map(|n| self.nodes.get(n).cloned())
            .collect();
        let rng = &mut self.rng;
        let warned = self.cloud.warn_spot_preferring(
            nodepool,
            count,
            now,
            |i| busy.contains(&format!("aws:///{}/{}", i.zone, i.id)),
            |n| rng.below(n),
        );
        if warned.is_empty() {
            warn!(target: "simulate::cloud", %nodepool, "no spot instance of the nodepool to interrupt");
        }
        let mut events = Vec::new();
        for instance in &warned {
            let provider = format!("aws:///{}/{}", instance.zone, instance.id);
            let node = self
                .nodes
                .iter()
                .find(|(_, p)| **p == provider)
                .map(|(n, _)| n.clone());
            info!(target: "simulate::cloud", instance_id = %instance.id, node = node.as_deref().unwrap_or("none"), "spot interruption warning; the instance is reclaimed in 2 minutes");
            let displaced = pods
                .iter()
                .filter(|p| {
                    workload(p)
                        && p.spec.as_ref().and_then(|s| s.node_name.as_ref()) == node.as_ref()
                })
                .count();
            let displaced = if node.is_some() { displaced } else { 0 };
            events.push(super::spot_warning(
                &mut self.watch,
                (t, now),
                nodepool,
                instance,
                node,
                displaced,
            ));
        }
        self.deliver(events, now).await;
    }

    async fn reclaim(&mut self, now: DateTime<Utc>) {
        let events = super::reclaimed(&self.cloud, now);
        self.deliver(events, now).await;
    }

    /// Delivers events to the interruption function, its time counted.
    async fn deliver(&mut self, events: Vec<Value>, now: DateTime<Utc>) {
        if events.is_empty() {
            return;
        }
        let started = std::time::Instant::now();
        deliver(&self.interruption, events, now).await;
        self.invoked("interruption", started);
    }

    /// Counts one invocation of `function` that began at `started`.
    fn invoked(&mut self, function: &'static str, started: std::time::Instant) {
        let entry = self.invocations.entry(function).or_default();
        entry.0 += 1;
        entry.1 += started.elapsed().as_secs_f64();
    }

    async fn pods(&self) -> Vec<Pod> {
        let api: Api<Pod> = Api::all(self.admin.clone());
        match api
            .list(&ListParams::default().labels(&self.run.selector()))
            .await
        {
            Ok(list) => list
                .items
                .into_iter()
                .filter(|p| self.run.owns(p))
                .collect(),
            Err(e) => {
                warn!(target: "simulate::cluster", error = %e, "listing pods failed");
                Vec::new()
            }
        }
    }

    /// Each new pod goes through the webhook as the API server would send it, and each
    /// workload pod's wait is kept for the report.
    async fn admit_new(&mut self, pods: &[Pod], now: DateTime<Utc>) {
        for pod in pods {
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            if workload(pod) {
                let created = pod.metadata.creation_timestamp.as_ref().map_or(now, stamp);
                let entry = self.waits.entry(uid.clone()).or_insert((created, None));
                if entry.1.is_none() {
                    entry.1 = bound_at(pod).map(|b| (b - created).num_seconds().max(0));
                }
            }
            if self.karpenter.is_some()
                || !self.seen_pods.insert(uid)
                || pod.spec.as_ref().is_some_and(|s| s.node_name.is_some())
            {
                continue;
            }
            let Ok(value) = serde_json::to_value(pod) else {
                continue;
            };
            let started = std::time::Instant::now();
            super::admit(&self.webhook, &value, now).await;
            self.invoked("webhook", started);
        }
    }

    /// A Node the kubelets registered goes through the webhook, as the API server sends it.
    async fn admit_node(&mut self, node: &Value, now: DateTime<Utc>) {
        if !super::node_reviewed(node) {
            return;
        }
        let mut node = node.clone();
        node["kind"] = json!("Node");
        let started = std::time::Instant::now();
        super::admit(&self.webhook, &node, now).await;
        self.invoked("webhook", started);
    }

    async fn observe(&mut self, t: i64, pods: &[Pod]) {
        // Seconds lost to a slow round repeat the fleet as it was.
        while (self.watch.series.len() as i64) < t {
            let last = self.watch.series.last().copied().unwrap_or_default();
            self.watch.series.push(last);
        }
        let live = match self.karpenter {
            Some(_) => self.karpenter_fleet().await,
            None => self.cloud.live(),
        };
        self.watch.note_fleet(t, self.nodes.len(), &live);
        let mut counts = BTreeMap::new();
        for o in self
            .scenario
            .objects
            .iter()
            .filter(|o| o["kind"] == "Deployment")
        {
            let name = o["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            if let Ok(d) = self.deployment(&name).get(&name).await {
                let status = d.status.unwrap_or_default();
                counts.insert(
                    name,
                    (
                        status.ready_replicas.unwrap_or(0),
                        status.replicas.unwrap_or(0),
                    ),
                );
            }
        }
        self.watch.note_scaling(t, |d, replicas| {
            counts
                .get(d)
                .is_some_and(|&(ready, total)| ready == replicas as i32 && total == replicas as i32)
        });
        if t % 60 == 0 || t == self.scenario.duration {
            let ready_nodes = self.ready_nodes().await;
            let used = self.utilization(pods).await;
            let workload: Vec<&Pod> = pods.iter().filter(|p| workload(p)).collect();
            let running = workload
                .iter()
                .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
                .count();
            let pending = workload
                .iter()
                .filter(|p| p.spec.as_ref().is_none_or(|s| s.node_name.is_none()))
                .count();
            self.watch.samples.push(Sample {
                t,
                nodes: self.nodes.len(),
                ready_nodes,
                running_pods: running,
                pending_pods: pending,
                hourly_cost: self.hourly(),
                lower_bound: self.lower_bound(&workload),
                cpu_utilization: used.map(|u| u.0),
                memory_utilization: used.map(|u| u.1),
            });
        }
    }

    /// CPU and memory utilization of the run's nodes by `pods`.
    async fn utilization(&self, pods: &[Pod]) -> Option<(f64, f64)> {
        let api: Api<Node> = Api::all(self.admin.clone());
        let params = ListParams::default().labels(&self.run.selector());
        let nodes = api.list(&params).await.ok()?.items;
        let nodes: Vec<Node> = nodes.into_iter().filter(|n| self.run.owns(n)).collect();
        utilization::utilization(&nodes, pods)
    }

    async fn ready_nodes(&self) -> usize {
        let api: Api<Node> = Api::all(self.admin.clone());
        let mut ready_count = 0;
        for name in self.nodes.keys() {
            if api.get(name).await.is_ok_and(|n| ready(&n)) {
                ready_count += 1;
            }
        }
        ready_count
    }

    fn lower_bound(&self, workload: &[&Pod]) -> f64 {
        let mut items: Vec<Value> = self
            .scenario
            .objects
            .iter()
            .filter(|o| {
                matches!(
                    o["kind"].as_str(),
                    Some("NodePool" | "EC2NodeClass" | "NodeOverlay" | "DaemonSet")
                )
            })
            .cloned()
            .collect();
        for pod in workload {
            let Ok(mut value) = serde_json::to_value(pod) else {
                continue;
            };
            if let Some(spec) = value["spec"].as_object_mut() {
                spec.remove("nodeName");
            }
            value["status"] = json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]});
            items.push(value);
        }
        super::whole_reservations(&mut items, &self.scenario);
        super::lower_bound(&self.catalog, items)
    }
}

/// A pod of the workload: not a DaemonSet's.
fn workload(pod: &Pod) -> bool {
    !pod.metadata
        .owner_references
        .as_ref()
        .is_some_and(|o| o.iter().any(|o| o.kind == "DaemonSet"))
}

fn ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// When kube-scheduler bound the pod.
fn bound_at(pod: &Pod) -> Option<DateTime<Utc>> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled" && c.status == "True")?
        .last_transition_time
        .as_ref()
        .map(stamp)
}
