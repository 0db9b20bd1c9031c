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
mod observe;
mod owned;
mod second;
mod setup;
#[cfg(test)]
#[path = "../../../tests/unit/simulate/live.rs"]
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
use fleetwright_runtime::world::{drive, QueuedNudges};
use fleetwright_sim::SimCloud;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ApiResource, ListParams};
use kube::Client;
use tracing::warn;

use super::report::Report;
use super::scenario::{Action, Scenario};
use super::CLUSTER;
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
    /// With Karpenter: Fleetwright's tick in shadow mode beside it, under this identity.
    pub shadow_kubeconfig: Option<PathBuf>,
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
    if let Some(path) = &target.shadow_kubeconfig {
        karpenter_process::same_server(&target.kubeconfig, path).await?;
        let settings = live.settings(true)?;
        live.shadow = Some(Tick::new(live.cloud.clone(), client(path).await?, settings));
    }
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
    let shadow = live.shadow_comparison().await;
    live.clean_up().await;
    let mut report = report?;
    report.autoscaler = Some(live.autoscaler_usage(usage));
    report.shadow = shadow;
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
    /// The next step of the timeline.
    next_step: usize,
    /// Fleetwright's tick in shadow mode beside Karpenter, when asked for.
    shadow: Option<Tick<Arc<SimCloud>>>,
    /// The run's pods as this second found them, before its steps.
    second_pods: Vec<Pod>,
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
        let settings = settings(&scenario, false)?;
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
            next_step: 0,
            second_pods: Vec::new(),
            shadow: None,
        })
    }

    async fn run(&mut self) -> anyhow::Result<Report> {
        self.start = Utc::now();
        drive(self).await?;
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
}

/// The functions' settings for a run of `scenario` (a dry run: Fleetwright in shadow mode).
fn settings(scenario: &Scenario, dry_run: bool) -> anyhow::Result<Settings> {
    Settings::from_lookup(|name| match name {
        "FLEETWRIGHT_CLUSTER_NAME" => Some(CLUSTER.into()),
        "FLEETWRIGHT_NAMESPACE" => std::env::var(name).ok(),
        "FLEETWRIGHT_DRY_RUN" if dry_run => Some("true".into()),
        _ => scenario.settings.get(name).cloned(),
    })
    .with_context(|| format!("scenario {}: settings", scenario.name))
}

impl Live {
    fn settings(&self, dry_run: bool) -> anyhow::Result<Settings> {
        settings(&self.scenario, dry_run)
    }

    /// What the shadow ticks recorded, compared with what Karpenter did (None without them).
    async fn shadow_comparison(&self) -> Option<fleetwright_runtime::shadow::Comparison> {
        self.shadow.as_ref()?;
        let key = fleetwright_runtime::shadow::SHADOW_KEY;
        let stored: Option<fleetwright_runtime::shadow::Shadow> =
            match fleetwright_kube::state::load(self.admin.clone(), &self.namespace, key).await {
                Ok(stored) => stored,
                Err(e) => {
                    warn!(target: "simulate::shadow", error = %e, "could not read the shadow records");
                    return None;
                }
            };
        let records = stored.map(|s| s.records).unwrap_or_default();
        Some(fleetwright_runtime::shadow::compare(&records))
    }
}
