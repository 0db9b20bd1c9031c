//! `fleetwright simulate`: the real runtime use cases (tick, interruption, webhook) on a virtual
//! clock, one simulated second at a time, against a simulated cloud ([`fleetwright_sim::SimCloud`], the
//! runtime's `Cloud` trait over the embedded catalog) and a simulated cluster
//! ([`fleetwright_sim::Cluster`]: a real `kube::Client` over the in-memory API, plus a kubelet, the
//! Deployment controllers and a scheduler). Pods created by a Deployment go through the webhook,
//! whose nudge starts a tick a second later; a tick also runs at every whole minute, as the
//! EventBridge schedule does. Spot interruption warnings and instance state changes reach the
//! interruption function as an SQS batch. Everything random comes from the scenario's seed.

mod admission;
mod aws_events;
mod chaos;
mod html;
mod live;
mod log;
mod report;
mod scenario;
mod watch;

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use chrono::{DateTime, Duration, Utc};
use clap::ValueEnum;
use fleetwright_core::{Catalog, NodeClassSettings, ScheduleOptions};
use fleetwright_runtime::interruption::Interruption;
use fleetwright_runtime::settings::Settings;
use fleetwright_runtime::tick::{Tick, TickSummary};
use fleetwright_runtime::webhook::Webhook;
use fleetwright_runtime::world::{drive, QueuedNudges, World};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{json, Value};
use tracing::{info, warn};

use admission::{admit, node_reviewed};
use aws_events::{deliver, ec2_event, reclaimed, spot_warning};
use fleetwright_core::rng::Rng;
use fleetwright_sim::{Cluster, SimCloud};
use report::{Report, Sample};
use scenario::{Action, Scenario, Step};

const CLUSTER: &str = "simulated";
const ACCOUNT: &str = "123456789012";
/// Spot prices are drawn per type and zone from this range of the on-demand price.
const SPOT_RANGE: (f64, f64) = (0.25, 0.45);

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Karpenter-style log lines as the simulation runs, then a summary table.
    Log,
    /// Only the report, as JSON.
    Json,
}

#[derive(Debug, clap::Args)]
pub struct SimulateArgs {
    /// A scenario file (YAML). Without it, the embedded replay of the Karpenter hands-on.
    #[arg(long)]
    scenario: Option<PathBuf>,
    /// Simulated seconds per wall-clock second; 0 runs as fast as it can.
    #[arg(long, default_value_t = 0.0)]
    speed: f64,
    #[arg(short = 'o', long, value_enum, default_value = "log")]
    output: Output,
    /// Overrides the scenario's seed (with --chaos: the first seed).
    #[arg(long)]
    seed: Option<u64>,
    /// Chaos mode: random faults from each seed (API errors, invocations cut off, slow and
    /// concurrent ticks, instances dying, interruption events, eviction errors, nodes deleted by
    /// hand, malformed objects, late, duplicated and poison SQS deliveries, webhook floods, lost
    /// nudges) on the cluster of --scenario (examples/simulate/chaos.yaml without it), with
    /// invariants checked after every simulated second. Exits non-zero when one is broken.
    #[arg(long)]
    chaos: bool,
    /// With --chaos: how many seeds to run.
    #[arg(long, default_value_t = 50)]
    seeds: u64,
    /// With --chaos: seeds run at once (default: the CPUs available).
    #[arg(long)]
    jobs: Option<usize>,
    /// Also write the report as a self-contained HTML page (plots of nodes, cost against the
    /// LP bound, running and pending pods; the timeline; the summary table).
    #[arg(long, value_name = "FILE.html", conflicts_with = "chaos")]
    report: Option<PathBuf>,
    /// Runs the scenario against the API server of this kubeconfig (a kwok or test cluster
    /// with kube-controller-manager, kube-scheduler and kwok, and no node autoscaler), in wall
    /// clock time, with a simulated cloud. Without it, an in-memory cluster on a virtual clock.
    #[arg(long, value_name = "FILE", conflicts_with = "chaos")]
    kubeconfig: Option<PathBuf>,
    /// With --kubeconfig: the identity tick and interruption run as (default: --kubeconfig's).
    #[arg(long, value_name = "FILE", requires = "kubeconfig")]
    controller_kubeconfig: Option<PathBuf>,
    /// With --kubeconfig: Karpenter's KWOK controller (built by scripts/peer-e2e.sh) as the
    /// node autoscaler instead of Fleetwright, run under --controller-kubeconfig's identity on
    /// the same catalog, to compare the two on one scenario.
    #[arg(
        long,
        value_name = "BIN",
        requires = "kubeconfig",
        requires = "karpenter_crds"
    )]
    karpenter: Option<PathBuf>,
    /// With --karpenter: a directory of Karpenter's CRDs to install (given once for its
    /// karpenter.sh CRDs and once for its KWOK node class).
    #[arg(long, value_name = "DIR", requires = "karpenter")]
    karpenter_crds: Vec<PathBuf>,
    /// With --karpenter: also run Fleetwright's tick in shadow mode (`FLEETWRIGHT_DRY_RUN`)
    /// under this kubeconfig's identity, beside Karpenter; the report gains what it would have
    /// done against what Karpenter did.
    #[arg(long, value_name = "FILE", requires = "karpenter")]
    shadow_kubeconfig: Option<PathBuf>,
}

const EMBEDDED: &str = "the embedded default scenario";

pub fn run(args: SimulateArgs) -> anyhow::Result<()> {
    if args.chaos {
        let jobs = args.jobs.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
        });
        return chaos::run(
            args.seed.unwrap_or(1),
            args.seeds,
            jobs,
            args.scenario.as_deref(),
        );
    }
    let (text, source) = match &args.scenario {
        Some(path) => (std::fs::read_to_string(path), path.display().to_string()),
        None => (Ok(scenario::DEFAULT.into()), EMBEDDED.into()),
    };
    let text = text.with_context(|| format!("reading {source}"))?;
    let mut scenario = Scenario::parse(&text, &source)?;
    crate::input::check(&scenario.warnings)?;
    region_catalog(&scenario.objects).with_context(|| source.clone())?;
    if let Some(seed) = args.seed {
        scenario.seed = seed;
    }
    if !(args.speed >= 0.0 && args.speed.is_finite()) {
        anyhow::bail!("--speed: {} is not a non-negative number", args.speed);
    }
    if let Some(path) = &args.report {
        html::check_writable(path)?;
    }
    let quiet = crate::verbosity::get() == crate::verbosity::Level::Quiet;
    let bar = (std::io::stdout().is_terminal() && !quiet).then(|| {
        let bar = ProgressBar::with_draw_target(
            Some(scenario.duration as u64),
            ProgressDrawTarget::stderr_with_hz(4),
        );
        bar.set_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} simulated s {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar
    });
    let clock = log::Clock::default();
    log::install(args.output == Output::Log, clock.clone(), bar.clone());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let report = runtime.block_on(async {
        match &args.kubeconfig {
            Some(kubeconfig) => {
                let target = live::Target {
                    kubeconfig: kubeconfig.clone(),
                    controller_kubeconfig: args.controller_kubeconfig.clone(),
                    karpenter: match &args.karpenter {
                        // The file named, never one a PATH search would find instead.
                        Some(bin) => Some(live::karpenter::Karpenter {
                            bin: std::fs::canonicalize(bin)
                                .with_context(|| format!("--karpenter {}", bin.display()))?,
                            crds: args.karpenter_crds.clone(),
                        }),
                        None => None,
                    },
                    shadow_kubeconfig: args.shadow_kubeconfig.clone(),
                };
                let catalog = catalog(scenario.seed, region_catalog(&scenario.objects)?);
                live::run(scenario, &target, catalog, clock, bar.clone()).await
            }
            None => {
                let mut sim = Simulation::new(scenario, clock, bar.clone())?;
                sim.run(args.speed).await
            }
        }
    })?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    if let Some(path) = &args.report {
        std::fs::write(path, html::page(&report)?)
            .with_context(|| format!("writing the report to {}", path.display()))?;
    }
    let mut out = std::io::stdout();
    match args.output {
        Output::Json => writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?,
        Output::Log => write!(out, "{}", report.table())?,
    }
    Ok(())
}

/// The region the scenario's objects point at (zone labels, providerIDs, NodePool zone
/// requirements), else us-east-1; with the embedded catalog of that region.
fn region_catalog(objects: &[Value]) -> anyhow::Result<&'static Catalog> {
    let text = json!({"apiVersion": "v1", "kind": "List", "items": objects}).to_string();
    let snapshot = fleetwright_kube::snapshot_from_yaml(&text, "the scenario's objects")?;
    let (region, why) = match fleetwright_core::region::infer(&snapshot) {
        Some(i) => (
            i.region,
            format!("inferred from the scenario's {}", i.evidence),
        ),
        None => ("us-east-1".to_string(), "the default".to_string()),
    };
    tracing::debug!(target: "simulate::cloud", %region, source = %why, "catalog region");
    Catalog::embedded_region(&region).with_context(|| {
        format!(
            "region {region} ({why}) has no embedded catalog (embedded: {})",
            fleetwright_core::catalog::EMBEDDED_REGIONS.join(", ")
        )
    })
}

/// The region's embedded catalog with spot prices drawn for the simulated zones.
fn catalog(seed: u64, base: &Catalog) -> Catalog {
    let mut catalog = base.clone();
    let zones = fleetwright_sim::subnet_zones(base);
    let mut rng = Rng::new(seed);
    for (name, price) in Catalog::embedded_prices() {
        for zone in &zones {
            let spot = price * rng.between(SPOT_RANGE.0, SPOT_RANGE.1);
            catalog.spot.insert((name.clone(), zone.to_string()), spot);
        }
    }
    // The simulated spot market is this run's spot price history.
    catalog.spot_prices_read = true;
    catalog
}

struct Simulation {
    scenario: Scenario,
    start: DateTime<Utc>,
    clock: log::Clock,
    bar: Option<ProgressBar>,
    catalog: Arc<Catalog>,
    cloud: Arc<SimCloud>,
    cluster: Cluster,
    tick: Tick<Arc<SimCloud>>,
    interruption: Interruption<Arc<SimCloud>, QueuedNudges>,
    webhook: Webhook<QueuedNudges>,
    nudges: QueuedNudges,
    rng: Rng,
    watch: watch::Watch,
    /// The next second to simulate, and the next step of the timeline.
    next: (i64, usize),
    /// Simulated seconds per wall-clock second (0: as fast as it can), from when the run began.
    pace: Option<(f64, std::time::Instant)>,
}

impl Simulation {
    fn new(
        scenario: Scenario,
        clock: log::Clock,
        bar: Option<ProgressBar>,
    ) -> anyhow::Result<Simulation> {
        // The API server is in memory and each tick happens at one instant of simulated time.
        fleetwright_kube::retry::set_first_pause(std::time::Duration::ZERO);
        let catalog = Arc::new(catalog(scenario.seed, region_catalog(&scenario.objects)?));
        let cloud = Arc::new(SimCloud::new(CLUSTER, catalog.clone()));
        let start = DateTime::parse_from_rfc3339("2026-11-22T10:00:00Z")?.with_timezone(&Utc);
        add_reservations(&cloud, &scenario, start);
        let types = catalog
            .instance_types(&NodeClassSettings::default())
            .into_iter()
            .map(|t| (t.name.clone(), t))
            .collect();
        let cluster = Cluster::new(&scenario.objects, types, scenario.seed);
        let settings = Settings::from_lookup(|name| match name {
            "FLEETWRIGHT_CLUSTER_NAME" => Some(CLUSTER.into()),
            "FLEETWRIGHT_KUBE_API_URL" => Some("http://127.0.0.1:1".into()),
            _ => scenario.settings.get(name).cloned(),
        })
        .with_context(|| format!("scenario {}: settings", scenario.name))?;
        let nudges = QueuedNudges::default();
        let client = cluster.api.client();
        Ok(Simulation {
            rng: Rng::new(scenario.seed.rotate_left(17)),
            scenario,
            start,
            clock,
            bar,
            catalog,
            tick: Tick::new(cloud.clone(), client.clone(), settings.clone()),
            interruption: Interruption::new(cloud.clone(), client, nudges.clone(), settings),
            webhook: Webhook::new(nudges.clone(), None),
            nudges,
            cloud,
            cluster,
            watch: watch::Watch::default(),
            next: (0, 0),
            pace: None,
        })
    }

    async fn run(&mut self, speed: f64) -> anyhow::Result<Report> {
        self.pace = Some((speed, std::time::Instant::now()));
        drive(self).await.unwrap_or_else(|never| match never {});
        Ok(self.report())
    }

    async fn apply(&mut self, step: &Step, t: i64, now: DateTime<Utc>) {
        info!(target: "simulate::scenario", step = %step.action, "scenario step");
        let (nodes, _) = self.cluster.nodes();
        let index = self
            .watch
            .step(t, step.action.to_string(), nodes, self.cloud.hourly());
        match &step.action {
            Action::Scale(s) => {
                self.cluster.scale(&s.deployment, s.replicas);
                self.watch
                    .scaling
                    .push((index, s.deployment.clone(), s.replicas));
            }
            Action::Delete(d) => self.cluster.delete(&d.deployment),
            Action::Apply(o) => self.cluster.apply(o),
            Action::ChangeAmi(c) => self.cloud.release_ami(c.nodeclass.as_deref()),
            Action::Ice(i) => self.cloud.add_ice(i.clone()),
            Action::Interrupt(i) => self.interrupt(&i.nodepool, i.count, t, now).await,
            Action::Fail(f) => {
                let rng = &mut self.rng;
                let pick = |n| rng.below(n);
                match self.cluster.fail_node(&f.nodepool, f.failure(), now, pick) {
                    Some(node) if f.persists => self.cluster.persist_failure(&node),
                    Some(_) => {}
                    None => {
                        warn!(target: "simulate::scenario", nodepool = %f.nodepool, "no node of the nodepool to fail")
                    }
                }
            }
        }
    }

    /// Warns spot instances of an interruption and delivers the warnings to the interruption
    /// function through the queue.
    async fn interrupt(&mut self, nodepool: &str, count: usize, t: i64, now: DateTime<Utc>) {
        let rng = &mut self.rng;
        let warned = self.cloud.warn_spot(nodepool, count, now, |n| rng.below(n));
        if warned.is_empty() {
            warn!(target: "simulate::cloud", %nodepool, "no spot instance of the nodepool to interrupt");
        }
        let mut events = Vec::new();
        for instance in &warned {
            let node = self.cluster.node_of(&instance.zone, &instance.id);
            info!(target: "simulate::cloud", instance_id = %instance.id, node = node.as_deref().unwrap_or("none"), "spot interruption warning; the instance is reclaimed in 2 minutes");
            let displaced = node.as_deref().map_or(0, |n| self.cluster.workload_on(n));
            events.push(spot_warning(
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

    /// EC2 reclaims warned spot instances when their two minutes are up; the state changes
    /// reach the interruption function.
    async fn reclaim(&mut self, now: DateTime<Utc>) {
        let events = reclaimed(&self.cloud, now);
        self.deliver(events, now).await;
    }

    async fn deliver(&mut self, events: Vec<Value>, now: DateTime<Utc>) {
        deliver(&self.interruption, events, now).await;
    }

    /// A created pod goes through the admission webhook, as the API server sends it.
    async fn admit(&mut self, pod: &Value, now: DateTime<Utc>) {
        admit(&self.webhook, pod, now).await;
    }

    fn observe(&mut self, t: i64) {
        let (nodes, ready) = self.cluster.nodes();
        let cost = self.cloud.hourly();
        self.watch.note_fleet(t, nodes, &self.cloud.live());
        let cluster = &self.cluster;
        self.watch.note_scaling(t, |d, replicas| {
            let (bound, total) = cluster.deployment_pods(d);
            bound == replicas as usize && total == bound
        });
        if t % 60 == 0 || t == self.scenario.duration {
            let (running, pending) = self.cluster.workload();
            self.watch.samples.push(Sample {
                t,
                nodes,
                ready_nodes: ready,
                running_pods: running,
                pending_pods: pending.len(),
                hourly_cost: cost,
                lower_bound: self.lower_bound(),
                ..Default::default()
            });
        }
    }

    /// The LP lower bound on the workload's hourly cost, planned from scratch.
    fn lower_bound(&self) -> f64 {
        let mut items = self.cluster.configuration();
        items.extend(self.cluster.workload_as_pending());
        whole_reservations(&mut items, &self.scenario);
        lower_bound(&self.catalog, items)
    }

    fn report(&mut self) -> Report {
        let now = self.start + Duration::seconds(self.scenario.duration);
        let mut waits: Vec<(DateTime<Utc>, i64)> = self
            .cluster
            .waits
            .iter()
            .map(|w| (w.created, w.seconds))
            .collect();
        let (_, pending) = self.cluster.workload();
        waits.extend(pending.iter().map(|c| (*c, (now - *c).num_seconds())));
        self.watch.report(
            &self.scenario,
            &self.catalog,
            self.start,
            &waits,
            self.cloud.counts(),
        )
    }
}

/// The in-memory world, on a virtual clock: every second of the scenario, one after another.
impl World for Simulation {
    type Error = std::convert::Infallible;

    fn schedule(&self) -> i64 {
        self.scenario.schedule
    }

    async fn next_second(&mut self) -> Result<Option<(i64, DateTime<Utc>)>, Self::Error> {
        let t = self.next.0;
        if t > self.scenario.duration {
            return Ok(None);
        }
        self.next.0 += 1;
        let now = self.start + Duration::seconds(t);
        self.clock.set(now);
        self.cluster.set_clock(now);
        Ok(Some((t, now)))
    }

    async fn second(&mut self, t: i64, now: DateTime<Utc>) -> bool {
        while let Some(step) = self
            .scenario
            .timeline
            .get(self.next.1)
            .filter(|s| s.at <= t)
        {
            let step = step.clone();
            self.next.1 += 1;
            self.apply(&step, t, now).await;
        }
        self.reclaim(now).await;
        for node in self.cluster.kubelet(&self.cloud.live(), now) {
            if node_reviewed(&node) {
                self.admit(&node, now).await;
            }
        }
        self.cluster.reboots(&self.cloud.reboots(), now);
        for pod in self.cluster.controllers(now) {
            self.admit(&pod, now).await;
        }
        self.cluster.scheduler(now);
        true
    }

    fn nudged(&mut self) -> bool {
        !self.nudges.take().is_empty()
    }

    async fn tick(&mut self, t: i64, now: DateTime<Utc>) -> Option<TickSummary> {
        run_tick(&self.tick, &mut self.watch, now, t).await
    }

    async fn end_second(&mut self, t: i64) {
        self.observe(t);
        if let Some(bar) = &self.bar {
            bar.set_position(t as u64);
        }
        if let Some((speed, wall)) = self.pace.filter(|(speed, _)| *speed > 0.0) {
            let due = std::time::Duration::from_secs_f64(t as f64 / speed);
            if let Some(wait) = due.checked_sub(wall.elapsed()) {
                tokio::time::sleep(wait).await;
            }
        }
    }
}

/// The LP lower bound on the hourly cost of the pending pods among `items` (with the NodePools,
/// EC2NodeClasses and DaemonSets among them), planned from scratch; 0 without pods.
fn lower_bound(catalog: &Catalog, items: Vec<Value>) -> f64 {
    if !items.iter().any(|o| o["kind"] == "Pod") {
        return 0.0;
    }
    let text = json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string();
    match fleetwright_kube::snapshot_from_yaml(&text, "the simulated cluster") {
        Ok(snapshot) => {
            fleetwright_core::schedule(&snapshot, catalog, &ScheduleOptions::default())
                .cost
                .lower_bound
        }
        Err(e) => {
            warn!(target: "simulate::report", error = %e, "could not compute the lower bound");
            0.0
        }
    }
}

/// One tick, its commands noted for the report.
async fn run_tick(
    tick: &Tick<Arc<SimCloud>>,
    watch: &mut watch::Watch,
    now: DateTime<Utc>,
    t: i64,
) -> Option<TickSummary> {
    watch.ticks += 1;
    match tick.run(now, &format!("simulate-{t}")).await {
        Ok(summary) => {
            watch.note_tick(&summary, t);
            Some(summary)
        }
        Err(e) => {
            warn!(target: "simulate::tick", error = %e, "tick failed; the next one retries");
            None
        }
    }
}

/// Planned from scratch, every reservation is whole again: the EC2NodeClasses' status counts
/// the instances left, which the workload's own nodes took.
pub(crate) fn whole_reservations(items: &mut [Value], scenario: &Scenario) {
    for item in items.iter_mut().filter(|o| o["kind"] == "EC2NodeClass") {
        let list = item
            .get_mut("status")
            .and_then(|s| s.get_mut("capacityReservations"))
            .and_then(Value::as_array_mut);
        let Some(list) = list else {
            continue;
        };
        for r in list {
            if let Some(s) = scenario
                .reservations
                .iter()
                .find(|s| r["id"] == s.file.id.as_str())
            {
                r["availableInstanceCount"] = json!(s.file.count);
            }
        }
    }
}

/// The scenario's capacity reservations, in the simulated account from `start`.
pub(crate) fn add_reservations(cloud: &SimCloud, scenario: &Scenario, start: DateTime<Utc>) {
    for r in &scenario.reservations {
        let f = &r.file;
        cloud.add_reservation(
            fleetwright_cloud::nodeclass::ResolvedReservation {
                id: f.id.clone(),
                instance_type: f.instance_type.clone(),
                zone: f.zone.clone(),
                kind: f.r#type.clone(),
                interruptible: f.interruptible,
                owner_id: "123456789012".into(),
                instance_match_criteria: "targeted".into(),
                end_time: r.ends.map(|s| start + Duration::seconds(s)),
                available: f.count,
            },
            f.tags.clone(),
        );
    }
}
