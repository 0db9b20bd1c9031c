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
//! It refuses a cluster that already has NodeClaims or nodes of a NodePool: the simulated cloud
//! would take them for its own. At the end it removes what it created.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context};
use chrono::{DateTime, Duration, Utc};
use fleetwright_core::{Catalog, NodeClassSettings};
use fleetwright_kube::crds::NodeClaim;
use fleetwright_runtime::interruption::Interruption;
use fleetwright_runtime::settings::Settings;
use fleetwright_runtime::tick::Tick;
use fleetwright_runtime::webhook::Webhook;
use fleetwright_sim::SimCloud;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use kube::discovery::Scope;
use kube::Client;
use serde_json::{json, Value};
use tracing::{info, warn};

use super::report::{Report, Sample};
use super::scenario::{Action, Scenario, Step};
use super::{deliver, QueuedNudges, CLUSTER};
use fleetwright_core::rng::Rng;

/// How long after its launch an instance's kubelet registers its Node (kwok makes it Ready at
/// once; a real node takes about a minute).
const JOIN_AFTER: Duration = Duration::seconds(5);
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
        Some(path) => client(path).await?,
        None => admin.clone(),
    };
    let mut live = Live::new(scenario, admin, controller, catalog, clock, bar)?;
    live.prepare().await?;
    let report = live.run().await;
    live.clean_up().await;
    report
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
    namespace: String,
    rng: Rng,
    watch: super::watch::Watch,
    applied: Vec<Applied>,
    /// Nodes registered for instances: name → providerID.
    nodes: BTreeMap<String, String>,
    /// Pods seen, by uid.
    seen_pods: BTreeSet<String>,
    /// Workload pods: uid → (created, seconds until bound).
    waits: BTreeMap<String, (DateTime<Utc>, Option<i64>)>,
}

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
            catalog,
            cloud,
            admin,
            watch: Default::default(),
            applied: Vec::new(),
            nodes: BTreeMap::new(),
            seen_pods: BTreeSet::new(),
            waits: BTreeMap::new(),
        })
    }

    /// Refuses a cluster with NodeClaims or NodePool nodes, installs the CRDs and the
    /// namespace if missing, and applies the scenario's objects.
    async fn prepare(&mut self) -> anyhow::Result<()> {
        self.clock.set(Utc::now());
        self.refuse_a_managed_cluster().await?;
        self.install_crds().await?;
        self.ensure_namespace(&self.namespace.clone()).await?;
        let objects = self.scenario.objects.clone();
        for (index, object) in objects.iter().enumerate() {
            self.apply(object)
                .await
                .with_context(|| format!("the scenario's objects[{index}]"))?;
        }
        info!(target: "simulate::scenario", objects = objects.len(), "scenario applied to the cluster");
        Ok(())
    }

    /// Applies Fleetwright's CRDs and waits until the API server serves them.
    async fn install_crds(&self) -> anyhow::Result<()> {
        let api: Api<CustomResourceDefinition> = Api::all(self.admin.clone());
        let mut names = Vec::new();
        for crd in fleetwright_kube::crds::definitions() {
            let name = crd.metadata.name.clone().unwrap_or_default();
            api.patch(
                &name,
                &PatchParams::apply(MANAGER).force(),
                &Patch::Apply(&crd),
            )
            .await
            .with_context(|| format!("installing CustomResourceDefinition {name}"))?;
            names.push(name);
        }
        let deadline = Utc::now() + Duration::seconds(30);
        for name in names {
            loop {
                let established = api
                    .get(&name)
                    .await
                    .ok()
                    .and_then(|c| c.status)
                    .and_then(|s| s.conditions)
                    .is_some_and(|c| {
                        c.iter()
                            .any(|c| c.type_ == "Established" && c.status == "True")
                    });
                if established {
                    break;
                }
                if Utc::now() > deadline {
                    bail!("CustomResourceDefinition {name} is not Established after 30 s");
                }
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
        }
        Ok(())
    }

    async fn refuse_a_managed_cluster(&self) -> anyhow::Result<()> {
        let claims: Api<NodeClaim> = Api::all(self.admin.clone());
        if let Ok(list) = claims.list(&ListParams::default().limit(5)).await {
            let names: Vec<String> = list
                .items
                .iter()
                .filter_map(|c| c.metadata.name.clone())
                .collect();
            if !names.is_empty() {
                bail!("the cluster has NodeClaims ({}): simulate --kubeconfig runs on a cluster without a node autoscaler (a kwok or test cluster), where it cannot take another's nodes for its own", names.join(", "));
            }
        }
        let nodes: Api<Node> = Api::all(self.admin.clone());
        let pooled = nodes
            .list(
                &ListParams::default()
                    .labels(fleetwright_core::labels::NODEPOOL)
                    .limit(5),
            )
            .await
            .context("listing nodes")?;
        if let Some(node) = pooled.items.first() {
            bail!(
                "node {} belongs to a NodePool: simulate --kubeconfig runs on a cluster without a node autoscaler (a kwok or test cluster)",
                node.metadata.name.as_deref().unwrap_or_default()
            );
        }
        Ok(())
    }

    async fn ensure_namespace(&self, name: &str) -> anyhow::Result<()> {
        let api: Api<Namespace> = Api::all(self.admin.clone());
        let object = serde_json::from_value(json!({"metadata": {"name": name}}))?;
        match api.create(&PostParams::default(), &object).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
            Err(e) => Err(e).with_context(|| format!("creating namespace {name}")),
        }
    }

    /// Server-side applies one object, its kind resolved through discovery.
    async fn apply(&mut self, object: &Value) -> anyhow::Result<()> {
        let kind = object["kind"].as_str().unwrap_or_default();
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let (group, version) = match object["apiVersion"]
            .as_str()
            .unwrap_or_default()
            .split_once('/')
        {
            Some((g, v)) => (g.to_string(), v.to_string()),
            None => (
                String::new(),
                object["apiVersion"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            ),
        };
        let gvk = GroupVersionKind::gvk(&group, &version, kind);
        let (resource, capabilities) = kube::discovery::pinned_kind(&self.admin, &gvk)
            .await
            .with_context(|| {
                format!(
                    "{kind} {name}: the API server does not serve {}",
                    object["apiVersion"]
                )
            })?;
        let mut object = object.clone();
        if kind == "Node" {
            object["metadata"]["annotations"]["kwok.x-k8s.io/node"] = json!("fake");
        }
        let namespace = (capabilities.scope == Scope::Namespaced).then(|| {
            object["metadata"]["namespace"]
                .as_str()
                .unwrap_or("default")
                .to_string()
        });
        let api: Api<DynamicObject> = match &namespace {
            Some(ns) => {
                self.ensure_namespace(ns).await?;
                Api::namespaced_with(self.admin.clone(), ns, &resource)
            }
            None => Api::all_with(self.admin.clone(), &resource),
        };
        let typed: DynamicObject =
            serde_json::from_value(object).with_context(|| format!("{kind} {name}"))?;
        api.patch(
            &name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&typed),
        )
        .await
        .with_context(|| format!("applying {kind} {name}"))?;
        self.applied.push(Applied {
            resource,
            namespace,
            name,
        });
        Ok(())
    }

    async fn run(&mut self) -> anyhow::Result<Report> {
        let timeline = self.scenario.timeline.clone();
        let mut steps = timeline.iter().peekable();
        let mut nudged_for: Option<i64> = None;
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
            while let Some(step) = steps.next_if(|s| s.at <= t) {
                self.step(step, t, now).await;
            }
            self.reclaim(now).await;
            if let Err(e) = self.kubelet(now).await {
                warn!(target: "simulate::kubelet", error = %format!("{e:#}"), "the kubelets' round failed; the next second retries");
            }
            let pods = self.pods().await;
            self.admit_new(&pods, now).await;
            if !self.nudges.take().is_empty() {
                nudged_for.get_or_insert(t + 1);
            }
            let scheduled =
                t / self.scenario.schedule != last_tick.unwrap_or(-1) / self.scenario.schedule;
            if last_tick.is_none() || scheduled || nudged_for.is_some_and(|n| n <= t) {
                nudged_for = None;
                last_tick = Some(t);
                super::run_tick(&self.tick, &mut self.watch, now, t).await;
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
            &self.catalog.region,
            self.start,
            &waits,
            self.cloud.counts(),
        ))
    }

    async fn step(&mut self, step: &Step, t: i64, now: DateTime<Utc>) {
        info!(target: "simulate::scenario", step = %step.action, "scenario step");
        let index = self.watch.step(
            t,
            step.action.to_string(),
            self.nodes.len(),
            self.cloud.hourly(),
        );
        let result = match &step.action {
            Action::Scale(s) => {
                self.watch
                    .scaling
                    .push((index, s.deployment.clone(), s.replicas));
                self.deployment(&s.deployment)
                    .patch(
                        &s.deployment,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"spec": {"replicas": s.replicas}})),
                    )
                    .await
                    .map(|_| ())
            }
            Action::Delete(d) => self
                .deployment(&d.deployment)
                .delete(&d.deployment, &DeleteParams::background())
                .await
                .map(|_| ()),
            Action::Apply(o) => {
                if let Err(e) = self.apply(o).await {
                    warn!(target: "simulate::scenario", step = %step.action, error = %e, "the step failed");
                }
                Ok(())
            }
            Action::ChangeAmi(c) => {
                self.cloud.release_ami(c.nodeclass.as_deref());
                Ok(())
            }
            Action::Ice(i) => {
                self.cloud.add_ice(i.clone());
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
            warn!(target: "simulate::scenario", step = %step.action, error = %e, "the step failed");
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
        deliver(&self.interruption, events, now).await;
    }

    async fn reclaim(&mut self, now: DateTime<Utc>) {
        let events = super::reclaimed(&self.cloud, now);
        deliver(&self.interruption, events, now).await;
    }

    /// The kubelets: a Node for each instance booted long enough, its startup taints removed
    /// once kwok has made it Ready, and deleted when its instance is gone.
    async fn kubelet(&mut self, now: DateTime<Utc>) -> anyhow::Result<()> {
        let live = self.cloud.live();
        let providers: BTreeMap<String, &fleetwright_sim::SimInstance> = live
            .values()
            .map(|i| (format!("aws:///{}/{}", i.instance.zone, i.instance.id), i))
            .collect();
        let api: Api<Node> = Api::all(self.admin.clone());
        let gone: Vec<String> = self
            .nodes
            .iter()
            .filter(|(_, p)| !providers.contains_key(*p))
            .map(|(n, _)| n.clone())
            .collect();
        for name in gone {
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => {
                    info!(target: "simulate::kubelet", node = %name, "node removed: its instance is gone")
                }
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => return Err(e).with_context(|| format!("deleting node {name}")),
            }
            self.nodes.remove(&name);
        }
        let claims: Vec<Value> = Api::<NodeClaim>::all(self.admin.clone())
            .list(&ListParams::default())
            .await
            .context("listing NodeClaims")?
            .items
            .iter()
            .filter_map(|c| serde_json::to_value(c).ok())
            .collect();
        for (provider, instance) in &providers {
            let booted = instance
                .instance
                .launch_time
                .is_some_and(|l| now - l >= JOIN_AFTER);
            if !booted || self.nodes.values().any(|p| p == provider) {
                continue;
            }
            let mut node = fleetwright_sim::cluster::node_object(
                &self.types,
                provider,
                instance,
                &claims,
                now,
            );
            let name = node["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            node["metadata"] = json!({"name": name, "labels": node["metadata"]["labels"],
                "annotations": {"kwok.x-k8s.io/node": "fake", SIMULATED: "true"}});
            if let Some(status) = node["status"].as_object_mut() {
                status.remove("conditions");
            }
            match api
                .create(&PostParams::default(), &serde_json::from_value(node)?)
                .await
            {
                Ok(_) => {
                    info!(target: "simulate::kubelet", node = %name, instance_id = %instance.instance.id, "node registered")
                }
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => return Err(e).with_context(|| format!("registering node {name}")),
            }
            self.nodes.insert(name, provider.clone());
        }
        self.remove_startup_taints(&claims).await
    }

    /// What a CNI or another agent does once the node is up: removes the startup taints.
    async fn remove_startup_taints(&self, claims: &[Value]) -> anyhow::Result<()> {
        let api: Api<Node> = Api::all(self.admin.clone());
        for (name, provider) in &self.nodes {
            let startup: Vec<&Value> = claims
                .iter()
                .filter(|c| c["status"]["providerID"] == provider.as_str())
                .flat_map(|c| c["spec"]["startupTaints"].as_array().into_iter().flatten())
                .collect();
            if startup.is_empty() {
                continue;
            }
            let Ok(node) = api.get(name).await else {
                continue;
            };
            if !ready(&node) {
                continue;
            }
            let taints = node
                .spec
                .as_ref()
                .and_then(|s| s.taints.clone())
                .unwrap_or_default();
            let kept: Vec<_> = taints
                .iter()
                .filter(|t| !startup.iter().any(|s| s["key"] == t.key.as_str()))
                .collect();
            if kept.len() < taints.len() {
                api.patch(
                    name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"taints": kept}})),
                )
                .await
                .with_context(|| format!("removing node {name}'s startup taints"))?;
            }
        }
        Ok(())
    }

    async fn pods(&self) -> Vec<Pod> {
        let api: Api<Pod> = Api::all(self.admin.clone());
        match api.list(&ListParams::default()).await {
            Ok(list) => list.items,
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
            if !self.seen_pods.insert(uid)
                || pod.spec.as_ref().is_some_and(|s| s.node_name.is_some())
            {
                continue;
            }
            let Ok(value) = serde_json::to_value(pod) else {
                continue;
            };
            super::admit(&self.webhook, &value, now).await;
        }
    }

    async fn observe(&mut self, t: i64, pods: &[Pod]) {
        // Seconds lost to a slow round repeat the fleet as it was.
        while (self.watch.series.len() as i64) < t {
            let last = self.watch.series.last().copied().unwrap_or_default();
            self.watch.series.push(last);
        }
        let live = self.cloud.live();
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
                hourly_cost: self.cloud.hourly(),
                lower_bound: self.lower_bound(&workload),
            });
        }
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

    /// Removes what the run created: the scenario's objects, the NodeClaims (their finalizers
    /// dropped: the simulated cloud is gone with the run) and the Nodes it registered.
    async fn clean_up(&mut self) {
        for a in self.applied.iter().rev() {
            let api: Api<DynamicObject> = match &a.namespace {
                Some(ns) => Api::namespaced_with(self.admin.clone(), ns, &a.resource),
                None => Api::all_with(self.admin.clone(), &a.resource),
            };
            if let Err(e) = api.delete(&a.name, &DeleteParams::background()).await {
                if !matches!(&e, kube::Error::Api(s) if s.code == 404) {
                    warn!(target: "simulate::cluster", kind = %a.resource.kind, name = %a.name, error = %e, "could not delete");
                }
            }
        }
        let claims: Api<NodeClaim> = Api::all(self.admin.clone());
        let left = claims
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default();
        for claim in left {
            let name = claim.metadata.name.clone().unwrap_or_default();
            warn!(target: "simulate::cluster", nodeclaim = %name, "NodeClaim left at the end; removed with its finalizer");
            let _ = claims
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {"finalizers": null}})),
                )
                .await;
            let _ = claims.delete(&name, &DeleteParams::default()).await;
        }
        let nodes: Api<Node> = Api::all(self.admin.clone());
        for name in self.nodes.keys() {
            warn!(target: "simulate::cluster", node = %name, "node left at the end; removed");
            let _ = nodes
                .patch(
                    name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {"finalizers": null}})),
                )
                .await;
            let _ = nodes.delete(name, &DeleteParams::default()).await;
        }
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
