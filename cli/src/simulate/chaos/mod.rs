//! `fleetwright simulate --chaos --seeds N [--scenario FILE]`: the simulation with random
//! faults from each seed, and invariants checked after every simulated second. Each seed starts
//! from the cluster of a scenario (`examples/simulate/chaos.yaml` unless one is named). On
//! `chaos.yaml` the seed writes its own timeline (scale steps, spot interruptions, a capacity
//! shortage) and adds a tainted batch pool with a tight CPU limit and a zone-spread Deployment;
//! another scenario keeps its own timeline. For the first [`CHAOS_END`] seconds it injects faults:
//!
//! * Kubernetes API errors (429, 500, 503 on reads, which are retried; 409, 500, 503 on writes),
//!   and tick invocations cut off at a random await point (every write after it fails);
//! * two tick invocations at once (the Lease lets one through); ticks that take simulated time
//!   while the cluster and the interruption function go on beside them, and ticks with a real
//!   deadline that runs out part-way ([`ticks`]);
//! * instances that die without a spot warning (EC2's state-change event still reports them),
//!   and spot warnings for instances already gone; AWS Health scheduled changes, rebalance
//!   recommendations and capacity-reservation interruptions ([`incidents`]);
//! * EC2 API faults: throttling and 5xx on CreateFleet, TerminateInstances and DescribeInstances,
//!   a CreateFleet whose answer is lost after it launched, DescribeInstances listing new
//!   instances only after a lag of up to 20 s (its eventual consistency), and listings that
//!   succeed empty or miss instances (a stale tag lookup);
//! * Kubernetes API latency (requests held up to 200 ms);
//! * evictions refused with 403 (a denying webhook) and with 500 (a pod that two
//!   PodDisruptionBudgets select); replacements that register and never initialize; Nodes
//!   deleted by hand; malformed NodePools and EC2NodeClasses applied beside the healthy ones;
//! * SQS deliveries that come late, twice, out of order, or with a poison message beside them
//!   (a failed message comes back after the visibility timeout, and goes to the DLQ after
//!   [`MAX_RECEIVES`] receives);
//! * webhook floods and nudges lost on the bus.
//!
//! The simulated cluster ends pods as kubelets do (a share of their grace period after they are
//! asked to go) and deletes Nodes through the API, so finalizers hold them. Then the faults stop
//! and the run goes on for [`QUIET`] seconds. The first invariant broken ends the seed and is
//! printed with the seed, the second, the object and what was seen; see [`checks`].

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::Context;
use chrono::{DateTime, Duration, Utc};
use fleetwright_core::labels::{NODEPOOL, TAG_CLUSTER_PREFIX};
use fleetwright_core::NodeClassSettings;
use fleetwright_runtime::world::Cadence;
use serde_json::{json, Value};

mod additions;
mod checks;
mod faults;
mod incidents;
mod invariants;
mod pending;
mod settled;
mod ticks;

use invariants::{Invariants, Queue};

use super::scenario::{Action, Ice, Interrupt, Scale, Scenario, Step};
use super::{ec2_event, log, Simulation};
use fleetwright_core::rng::Rng;
use fleetwright_sim::ZONES;

/// The cluster every seed starts from unless a scenario is named.
const BASE: &str = include_str!("../../../../examples/simulate/chaos.yaml");
const BASE_PATH: &str = "examples/simulate/chaos.yaml";
/// Faults are injected until this second.
pub const CHAOS_END: i64 = 8 * 60;
/// How long the run goes on without faults.
pub const QUIET: i64 = 7 * 60;
/// SQS: a failed message is received again after this long, and dead-lettered after
/// [`MAX_RECEIVES`] receives (the template's settings).
const VISIBILITY: i64 = 180;
pub const MAX_RECEIVES: u32 = 5;
/// The tick Lease's default term (`FLEETWRIGHT_LEASE_SECONDS`).
const LEASE_SECONDS: i64 = fleetwright_runtime::settings::DEFAULT_LEASE_SECONDS as i64;
const FOREIGN: &str = "i-0f0re1gn00000000";
/// A cut-off invocation's fault: every write from its point on fails (more than any tick makes).
const CUT: usize = 1_000_000;
/// The no-churn window: the chaos pool's consolidateAfter (from chaos.yaml) plus five minutes.
static CHURN_WINDOW: std::sync::LazyLock<i64> = std::sync::LazyLock::new(|| {
    let after = BASE
        .lines()
        .find_map(|l| l.trim().strip_prefix("consolidateAfter:"))
        .and_then(|v| {
            fleetwright_kube::convert::duration_seconds(v.trim())
                .ok()
                .flatten()
        })
        .unwrap_or(0);
    after + 300
});

/// What one seed found.
#[derive(Debug, Default)]
pub struct SeedOutcome {
    pub seed: u64,
    /// The first invariant broken, if any.
    pub violation: Option<String>,
    /// The longest any workload pod waited to run, in seconds.
    pub worst_pending: i64,
    pub faults: BTreeMap<&'static str, usize>,
}

/// Runs `count` seeds from `first`, `jobs` at a time, on the cluster of `scenario` (chaos.yaml
/// without one), prints what they found, and fails when any invariant was broken.
pub fn run(first: u64, count: u64, jobs: usize, scenario: Option<&Path>) -> anyhow::Result<()> {
    let (text, source) = match scenario {
        Some(path) => (
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?,
            path.display().to_string(),
        ),
        None => (BASE.to_string(), BASE_PATH.to_string()),
    };
    // Refuse a bad scenario once, before any seed runs.
    crate::input::check(&Scenario::parse(&text, &source)?.warnings)?;
    let started = std::time::Instant::now();
    let seeds: Vec<u64> = (first..first + count).collect();
    let jobs = jobs.clamp(1, seeds.len().max(1));
    let progress = Progress {
        done: AtomicUsize::new(0),
        broken: AtomicUsize::new(0),
        total: seeds.len(),
        started,
        show: count > 1,
    };
    let outcomes: Vec<SeedOutcome> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..jobs)
            .map(|j| {
                let mine: Vec<u64> = seeds.iter().copied().skip(j).step_by(jobs).collect();
                let (text, source, progress) = (&text, &source, &progress);
                scope.spawn(move || {
                    mine.into_iter()
                        .map(|seed| {
                            let outcome = one_seed(text, source, seed, count == 1)?;
                            progress.seed_done(&outcome);
                            Ok(outcome)
                        })
                        .collect::<anyhow::Result<Vec<_>>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| anyhow::anyhow!("a chaos worker panicked"))?
            })
            .collect::<anyhow::Result<Vec<Vec<_>>>>()
    })?
    .into_iter()
    .flatten()
    .collect();
    let mut outcomes = outcomes;
    outcomes.sort_by_key(|o| o.seed);
    report(&source, &outcomes, started.elapsed())
}

/// Seeds finished so far, shown on stderr as they finish (about twenty lines a run).
struct Progress {
    done: AtomicUsize,
    broken: AtomicUsize,
    total: usize,
    started: std::time::Instant,
    show: bool,
}

impl Progress {
    fn seed_done(&self, outcome: &SeedOutcome) {
        if let Some(v) = &outcome.violation {
            self.broken.fetch_add(1, Ordering::Relaxed);
            eprintln!("chaos: seed {}: VIOLATION {v}", outcome.seed);
        }
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        let every = (self.total / 20).max(1);
        if self.show && (done.is_multiple_of(every) || done == self.total) {
            eprintln!(
                "chaos: {done}/{} seeds, {} violation(s), {:.0} s",
                self.total,
                self.broken.load(Ordering::Relaxed),
                self.started.elapsed().as_secs_f64()
            );
        }
    }
}

fn report(
    source: &str,
    outcomes: &[SeedOutcome],
    elapsed: std::time::Duration,
) -> anyhow::Result<()> {
    let mut out = std::io::stdout();
    let mut faults: BTreeMap<&str, usize> = BTreeMap::new();
    for o in outcomes {
        for (k, v) in &o.faults {
            *faults.entry(k).or_default() += v;
        }
        if let Some(v) = &o.violation {
            writeln!(out, "chaos: seed {}: VIOLATION {v}", o.seed)?;
        }
    }
    let violations = outcomes.iter().filter(|o| o.violation.is_some()).count();
    let worst = outcomes
        .iter()
        .max_by_key(|o| (o.worst_pending, std::cmp::Reverse(o.seed)));
    let faults: Vec<String> = faults.iter().map(|(k, v)| format!("{k} {v}")).collect();
    writeln!(out, "chaos: scenario {source}")?;
    writeln!(
        out,
        "chaos: {} seed(s), {violations} violation(s); worst pending time {} s{}; {:.0} s",
        outcomes.len(),
        worst.map_or(0, |o| o.worst_pending),
        worst.map_or(String::new(), |o| format!(" (seed {})", o.seed)),
        elapsed.as_secs_f64()
    )?;
    writeln!(out, "chaos: faults injected: {}", faults.join(", "))?;
    if violations > 0 {
        out.flush()?;
        anyhow::bail!("{violations} chaos seed(s) broke an invariant");
    }
    Ok(())
}

/// One seed on the scenario `text`, on its own runtime.
/// With `log_lines`, the run's log is printed as `fleetwright simulate` prints it (to replay
/// one seed: `--chaos --seed S --seeds 1`).
pub fn one_seed(
    text: &str,
    source: &str,
    seed: u64,
    log_lines: bool,
) -> anyhow::Result<SeedOutcome> {
    let mut scenario = Scenario::parse(text, source)?;
    let base = scenario.name == "chaos";
    scenario.seed = seed;
    scenario.duration = scenario.duration.max(CHAOS_END + QUIET);
    if base {
        scenario.timeline = timeline(seed);
        scenario.objects.extend(additions::base_objects());
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let clock = log::Clock::default();
    if log_lines {
        log::install(true, clock.clone(), None);
    }
    runtime.block_on(async {
        let sim = Simulation::new(scenario, clock, None)?;
        let mut chaos = Chaos::new(sim, seed, base);
        chaos
            .run()
            .await
            .with_context(|| format!("chaos seed {seed}"))
    })
}

/// The seed's timeline on chaos.yaml: a step every 40 to 100 s until the faults stop.
fn timeline(seed: u64) -> Vec<Step> {
    let mut rng = Rng::new(seed ^ 0xc4a0_5eed);
    let mut steps = Vec::new();
    let mut t = 20;
    let mut iced = false;
    while t < CHAOS_END {
        let action = match rng.below(7) {
            0 | 1 => Action::Scale(Scale {
                deployment: "web".into(),
                replicas: rng.below(25) as u32,
            }),
            2 => Action::Scale(Scale {
                deployment: "api".into(),
                replicas: rng.below(9) as u32,
            }),
            3 => Action::Scale(Scale {
                deployment: "pinned".into(),
                replicas: rng.below(4) as u32,
            }),
            6 => Action::Scale(Scale {
                deployment: additions::BATCH.into(),
                replicas: rng.below(additions::BATCH_MAX) as u32,
            }),
            // Warned instances are reclaimed two minutes later: within the faults' window.
            4 if t < CHAOS_END - 150 => Action::Interrupt(Interrupt {
                nodepool: "web".into(),
                count: 1 + rng.below(2),
            }),
            _ if !iced => {
                iced = true;
                Action::Ice(Ice {
                    instance_type: None,
                    zone: Some(rng.pick(&ZONES).to_string()),
                    capacity_type: Some("spot".into()),
                })
            }
            _ => Action::Scale(Scale {
                deployment: "web".into(),
                replicas: rng.below(25) as u32,
            }),
        };
        steps.push(Step { at: t, action });
        t += 40 + rng.below(61) as i64;
    }
    steps
}

struct Chaos {
    sim: Simulation,
    rng: Rng,
    queue: Queue,
    seen: Invariants,
    outcome: SeedOutcome,
    cpu_of: BTreeMap<String, i64>,
    memory_of: BTreeMap<String, i64>,
    /// Whether the run is on chaos.yaml (its own workload and limits are known).
    base: bool,
    /// The next timeline step.
    next_step: usize,
    /// When the tick runs: the schedule, nudges and follow-ups.
    cadence: Cadence,
    /// Malformed objects applied and not yet removed.
    broken: Vec<Value>,
    /// Pods the last tick that finished reported unschedulable (`namespace/name`).
    unschedulable: BTreeSet<String>,
    /// Workload (`namespace/owner`) → the second since which more of its pods have been
    /// waiting than the last finished tick named unschedulable.
    excess_since: BTreeMap<String, i64>,
    /// When a second PodDisruptionBudget over the first one's pods is applied, if it is.
    overlap_at: Option<i64>,
    /// Node → its instance, as last seen.
    node_instance: BTreeMap<String, String>,
    /// Pods (`namespace/name`) the code under test deleted outright.
    deleted_directly: BTreeSet<String>,
    /// Node → the second it was first seen Terminating.
    terminating_since: BTreeMap<String, i64>,
    /// Whether a tick of this second failed on a malformed object.
    failed_on_broken: bool,
}

fn stamp(start: DateTime<Utc>, t: i64) -> DateTime<Utc> {
    start + Duration::seconds(t)
}

impl Chaos {
    fn new(sim: Simulation, seed: u64, base: bool) -> Chaos {
        let types = sim.catalog.instance_types(&NodeClassSettings::default());
        let cpu_of = types
            .iter()
            .map(|t| (t.name.clone(), t.capacity.cpu))
            .collect();
        let memory_of = types
            .iter()
            .map(|t| (t.name.clone(), t.capacity.memory))
            .collect();
        let mut foreign_tags = BTreeMap::new();
        foreign_tags.insert(format!("{TAG_CLUSTER_PREFIX}another"), "owned".to_string());
        foreign_tags.insert(NODEPOOL.to_string(), "web".to_string());
        sim.cloud.adopt(
            fleetwright_cloud::Instance {
                id: FOREIGN.into(),
                instance_type: "m6i.large".into(),
                zone: ZONES[0].into(),
                state: "running".into(),
                capacity_type: "on-demand".into(),
                image_id: "ami-foreign".into(),
                subnet_id: String::new(),
                security_groups: Vec::new(),
                launch_time: Some(sim.start),
                tags: foreign_tags,
                capacity_reservation_id: None,
                partition: None,
            },
            0.0,
        );
        let mut rng = Rng::new(seed.rotate_left(29) ^ 0x0bad_cafe);
        // DescribeInstances' eventual consistency: new instances are listed up to 20 s late.
        sim.cloud
            .set_listing_lag(Duration::seconds(rng.below(21) as i64));
        let mut sim = sim;
        sim.cluster.slow_exits = true;
        let overlap_at = (rng.below(10) < 6).then(|| 30 + rng.below(300) as i64);
        Chaos {
            cadence: Cadence::new(sim.scenario.schedule),
            sim,
            rng,
            queue: Queue::default(),
            seen: Invariants::default(),
            outcome: SeedOutcome {
                seed,
                ..Default::default()
            },
            cpu_of,
            memory_of,
            base,
            next_step: 0,
            broken: Vec::new(),
            unschedulable: BTreeSet::new(),
            excess_since: BTreeMap::new(),
            overlap_at,
            node_instance: BTreeMap::new(),
            deleted_directly: BTreeSet::new(),
            terminating_since: BTreeMap::new(),
            failed_on_broken: false,
        }
    }

    fn count(&mut self, fault: &'static str) {
        *self.outcome.faults.entry(fault).or_default() += 1;
    }

    fn chance(&mut self, p: f64) -> bool {
        self.rng.between(0.0, 1.0) < p
    }

    async fn run(&mut self) -> anyhow::Result<SeedOutcome> {
        let duration = self.sim.scenario.duration;
        let mut t = 0;
        while t <= duration {
            if let Some(v) = self.second(t).await {
                return self.broke(t, v);
            }
            let mut last = t;
            if self.tick_due(t) {
                match self.tick(t).await {
                    Ok(done) => {
                        self.cadence.ran(t, done, None);
                        last = done;
                    }
                    Err((at, v)) => return self.broke(at, v),
                }
            }
            if let Some(v) = self.check(last) {
                return self.broke(last, v);
            }
            t = last + 1;
        }
        if let Some(v) = self.queue.check(duration) {
            return self.broke(duration, v);
        }
        self.outcome.worst_pending = self.worst_pending();
        Ok(std::mem::take(&mut self.outcome))
    }

    /// Whether a tick starts at `t`: the schedule's, or a nudge's a second after it was sent.
    fn tick_due(&mut self, t: i64) -> bool {
        let chaos = t < CHAOS_END;
        let nudged = !self.sim.nudges.take().is_empty();
        if nudged && !(chaos && self.chance(0.3)) {
            self.cadence.nudge(t);
        } else if nudged {
            self.count("nudges lost");
        }
        self.cadence.due(t)
    }

    /// Everything in second `t` but the tick and the checks: the timeline, the faults, EC2,
    /// the queue, and the cluster's own controllers. Returns a violation seen on the way.
    async fn second(&mut self, t: i64) -> Option<String> {
        let now = stamp(self.sim.start, t);
        self.sim.clock.set(now);
        self.sim.cluster.set_clock(now);
        self.sim.cloud.set_clock(now);
        let timeline = &self.sim.scenario.timeline;
        let due: Vec<Step> = timeline[self.next_step..]
            .iter()
            .take_while(|s| s.at <= t)
            .cloned()
            .collect();
        self.next_step += due.len();
        for step in &due {
            self.step(step, t, now);
        }
        let chaos = t < CHAOS_END;
        if t == CHAOS_END {
            self.stop_faults();
        }
        if chaos {
            self.cloud_faults(t, now);
            self.ec2_faults();
            self.api_faults();
            self.incidents(t, now);
        }
        for instance in self.sim.cloud.reclaim(now) {
            self.seen.interrupted.insert(instance.id.clone());
            let event = ec2_event(
                "EC2 Instance State-change Notification",
                &instance.id,
                json!({"instance-id": instance.id, "state": "shutting-down"}),
                now,
            );
            self.send(event, t, chaos);
        }
        self.receive(t, now).await;
        let mut live = self.sim.cloud.live();
        // Another cluster's instance never joins this one.
        live.remove(FOREIGN);
        let joined = self.sim.cluster.kubelet(&live, now);
        self.sim.cluster.reboots(&self.sim.cloud.reboots(), now);
        for node in joined.iter().filter(|n| super::node_reviewed(n)) {
            self.sim.admit(node, now).await;
        }
        if let Some(v) = self.evicted_do_not_disrupt() {
            return Some(v);
        }
        for pod in self.sim.cluster.controllers(now) {
            self.sim.admit(&pod, now).await;
        }
        if chaos && self.chance(0.005) {
            self.flood(now).await;
        }
        self.sim.cluster.scheduler(now);
        None
    }

    /// The faults stop: none injected earlier is left waiting for a request, and the malformed
    /// objects and overlapping budgets are deleted.
    fn stop_faults(&mut self) {
        let mut api = self.sim.cluster.api.lock();
        api.faults.clear();
        api.latency = None;
        drop(api);
        self.sim.cloud.clear_faults();
        for object in std::mem::take(&mut self.broken) {
            self.sim.cluster.remove(&object);
        }
    }

    fn broke(&mut self, t: i64, violation: String) -> anyhow::Result<SeedOutcome> {
        self.outcome.violation = Some(format!("at {t} s: {violation}"));
        self.outcome.worst_pending = self.worst_pending();
        Ok(std::mem::take(&mut self.outcome))
    }

    fn step(&mut self, step: &Step, t: i64, now: DateTime<Utc>) {
        match &step.action {
            Action::Scale(s) => self.sim.cluster.scale(&s.deployment, s.replicas),
            Action::Delete(d) => self.sim.cluster.delete(&d.deployment),
            Action::Apply(o) => self.sim.cluster.apply(o),
            Action::ChangeAmi(c) => self.sim.cloud.release_ami(c.nodeclass.as_deref()),
            Action::Ice(i) => self.sim.cloud.add_ice(i.clone()),
            Action::Fail(f) => {
                let rng = &mut self.rng;
                let failed = self
                    .sim
                    .cluster
                    .fail_node(&f.nodepool, f.failure(), now, |n| rng.below(n));
                failed
                    .iter()
                    .filter(|_| f.persists)
                    .for_each(|n| self.sim.cluster.persist_failure(n));
                // A failed node is an involuntary disruption: repair may take it without a drain.
                if let Some(id) = failed.and_then(|n| self.instance_of_node(&n)) {
                    self.seen.interrupted.insert(id);
                }
            }
            Action::Interrupt(i) => {
                let rng = &mut self.rng;
                let warned = self
                    .sim
                    .cloud
                    .warn_spot(&i.nodepool, i.count, now, |n| rng.below(n));
                for instance in warned {
                    self.seen.interrupted.insert(instance.id.clone());
                    let event = spot_warning(&instance.id, now);
                    self.send(event, t, true);
                }
            }
        }
    }

    /// The instance behind a node, from its provider ID.
    fn instance_of_node(&self, node: &str) -> Option<String> {
        let state = self.sim.cluster.api.lock();
        state
            .objects
            .get(fleetwright_sim::cluster::NODES)?
            .iter()
            .find(|n| n["metadata"]["name"] == node)
            .and_then(|n| n["spec"]["providerID"].as_str())
            .and_then(|p| p.rsplit('/').next())
            .map(str::to_string)
    }

    fn worst_pending(&self) -> i64 {
        let now = stamp(self.sim.start, self.sim.scenario.duration);
        let bound = self.sim.cluster.waits.iter().map(|w| w.seconds);
        let (_, pending) = self.sim.cluster.workload();
        bound
            .chain(pending.iter().map(|c| (now - *c).num_seconds()))
            .max()
            .unwrap_or(0)
    }
}

fn spot_warning(instance_id: &str, now: DateTime<Utc>) -> Value {
    ec2_event(
        "EC2 Spot Instance Interruption Warning",
        instance_id,
        json!({"instance-id": instance_id, "instance-action": "terminate"}),
        now,
    )
}
