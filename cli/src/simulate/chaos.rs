//! `fleetwright simulate --chaos --seeds N`: the simulation with random faults from each seed,
//! and invariants checked after every simulated second. Each seed starts from the cluster in
//! `examples/simulate/chaos.yaml`, writes its own timeline (scale steps, spot interruptions, a
//! capacity shortage) and, for the first [`CHAOS_END`] seconds, injects faults:
//!
//! * Kubernetes API errors (429, 500, 503 on reads, which are retried; 409, 500, 503 on writes),
//!   and tick invocations cut off at a random await point (every write after it fails);
//! * two tick invocations at once (the Lease lets one through);
//! * instances that die without a warning, and spot warnings for instances already gone;
//! * SQS deliveries that come late, twice, out of order, or with a poison message beside them
//!   (a failed message comes back after the visibility timeout, and goes to the DLQ after
//!   [`MAX_RECEIVES`] receives);
//! * webhook floods and nudges lost on the bus.
//!
//! Then the faults stop and the run goes on for [`QUIET`] seconds. The first invariant broken
//! ends the seed and is printed with the seed and the second; see [`Invariants`].

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;

use anyhow::Context;
use aws_lambda_events::event::sqs::SqsEvent;
use chrono::{DateTime, Duration, Utc};
use fleetwright_core::{Catalog, NodeClassSettings, ScheduleOptions};
use fleetwright_kube::memory::Fault;
use fleetwright_runtime::metrics::Metrics;
use fleetwright_runtime::tick::{Tick, TickSummary};
use fleetwright_runtime::RuntimeError;
use fleetwright_sim::cluster::{NODECLAIMS, NODES, PODS};
use serde_json::{json, Value};
use tracing::warn;

use super::scenario::{Action, Ice, Interrupt, Scale, Scenario, Step};
use super::{ec2_event, log, Simulation, ACCOUNT, CLUSTER};
use fleetwright_core::rng::Rng;
use fleetwright_sim::ZONES;

/// The cluster every seed starts from.
const BASE: &str = include_str!("../../../examples/simulate/chaos.yaml");
/// Faults are injected until this second.
pub const CHAOS_END: i64 = 8 * 60;
/// How long the run goes on without faults.
pub const QUIET: i64 = 7 * 60;
/// SQS: a failed message is received again after this long, and dead-lettered after
/// [`MAX_RECEIVES`] receives (the template's settings).
const VISIBILITY: i64 = 180;
pub const MAX_RECEIVES: u32 = 3;
/// The invariants' limits, in seconds.
const UNPAIRED_LIMIT: i64 = 300;
const CORDON_LIMIT: i64 = 600;
const PENDING_LIMIT: i64 = 180;
/// The tick Lease's default term (`FLEETWRIGHT_LEASE_SECONDS`).
const LEASE_SECONDS: i64 = 70;
/// The pool's limits in the base cluster.
const CPU_LIMIT: i64 = 120;
const NODE_BUDGET: usize = 2;
const FOREIGN: &str = "i-0f0re1gn00000000";
/// A cut-off invocation's fault: every write from its point on fails (more than any tick makes).
const CUT: usize = 1_000_000;
const DO_NOT_DISRUPT_PREFIX: &str = "pinned-";

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

/// Runs `count` seeds from `first`, `jobs` at a time, prints what they found, and fails when
/// any invariant was broken.
pub fn run(first: u64, count: u64, jobs: usize) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let seeds: Vec<u64> = (first..first + count).collect();
    let jobs = jobs.clamp(1, seeds.len().max(1));
    let outcomes: Vec<SeedOutcome> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..jobs)
            .map(|j| {
                let mine: Vec<u64> = seeds.iter().copied().skip(j).step_by(jobs).collect();
                scope.spawn(move || {
                    mine.into_iter()
                        .map(|seed| one_seed(seed, count == 1))
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
    report(&outcomes, started.elapsed())
}

fn report(outcomes: &[SeedOutcome], elapsed: std::time::Duration) -> anyhow::Result<()> {
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

/// One seed, on its own runtime.
/// With `log_lines`, the run's log is printed as `fleetwright simulate` prints it (to replay
/// one seed: `--chaos --seed S --seeds 1`).
pub fn one_seed(seed: u64, log_lines: bool) -> anyhow::Result<SeedOutcome> {
    let mut scenario = Scenario::parse(BASE, "examples/simulate/chaos.yaml")?;
    scenario.seed = seed;
    scenario.duration = CHAOS_END + QUIET;
    scenario.timeline = timeline(seed);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let clock = log::Clock::default();
    if log_lines {
        log::install(true, clock.clone(), None);
    }
    runtime.block_on(async {
        let sim = Simulation::new(scenario, clock, None)?;
        let mut chaos = Chaos::new(sim, seed);
        chaos
            .run()
            .await
            .with_context(|| format!("chaos seed {seed}"))
    })
}

/// The seed's timeline: a step every 40 to 100 s until the faults stop.
fn timeline(seed: u64) -> Vec<Step> {
    let mut rng = Rng::new(seed ^ 0xc4a0_5eed);
    let mut steps = Vec::new();
    let mut t = 20;
    let mut iced = false;
    while t < CHAOS_END {
        let action = match rng.below(6) {
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

/// A message in the simulated SQS queue.
#[derive(Clone, Debug)]
struct Message {
    id: String,
    body: String,
    receives: u32,
    due: i64,
}

/// The interruption queue: deliveries in flight, acknowledged, and dead-lettered.
#[derive(Debug, Default)]
struct Queue {
    waiting: Vec<Message>,
    acked: BTreeSet<String>,
    dead: BTreeSet<String>,
    sent: BTreeSet<String>,
}

/// What the invariants remember between seconds.
#[derive(Debug, Default)]
struct Invariants {
    /// Instance → the second it was first seen without a NodeClaim.
    unclaimed: BTreeMap<String, i64>,
    /// NodeClaim → the second it was first seen without a live instance.
    unbacked: BTreeMap<String, i64>,
    /// NodeClaim (its tag) → every instance ever launched for it.
    launched_for: BTreeMap<String, BTreeSet<String>>,
    /// Node → the second it was first seen cordoned for disruption.
    cordoned: BTreeMap<String, i64>,
    /// Instances warned, reclaimed or killed: their pods may be evicted whatever they say.
    interrupted: BTreeSet<String>,
    /// Every instance ever seen live.
    ever: BTreeSet<String>,
    /// The nodes the workload needed, planned from scratch, per 30 s.
    needed: Vec<(i64, usize)>,
}

impl Invariants {
    /// Instances without NodeClaims and NodeClaims without instances, for 5 minutes.
    fn pairs(
        &mut self,
        t: i64,
        owned: &BTreeMap<&String, &fleetwright_sim::SimInstance>,
        claims: &[Value],
    ) -> Option<String> {
        let claimed: BTreeMap<String, String> = claims
            .iter()
            .filter_map(|c| {
                let provider = c["status"]["providerID"].as_str()?;
                let id = provider.rsplit('/').next()?.to_string();
                Some((
                    id,
                    c["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                ))
            })
            .collect();
        self.unclaimed
            .retain(|id, _| owned.contains_key(id) && !claimed.contains_key(id));
        for id in owned.keys().filter(|id| !claimed.contains_key(**id)) {
            let since = *self.unclaimed.entry((*id).clone()).or_insert(t);
            if t - since > UNPAIRED_LIMIT {
                return Some(format!(
                    "instance {id} has run {} s without a NodeClaim",
                    t - since
                ));
            }
        }
        let unbacked: BTreeSet<&String> = claimed
            .iter()
            .filter(|(id, _)| !owned.contains_key(*id))
            .map(|(_, claim)| claim)
            .collect();
        self.unbacked.retain(|c, _| unbacked.contains(c));
        for claim in unbacked {
            let since = *self.unbacked.entry(claim.clone()).or_insert(t);
            if t - since > UNPAIRED_LIMIT {
                return Some(format!(
                    "NodeClaim {claim} has had no instance for {} s",
                    t - since
                ));
            }
        }
        None
    }

    /// No NodeClaim ever has two instances.
    fn launches(
        &mut self,
        owned: &BTreeMap<&String, &fleetwright_sim::SimInstance>,
    ) -> Option<String> {
        for (id, i) in owned {
            let Some(claim) = i.instance.nodeclaim() else {
                continue;
            };
            let ids = self.launched_for.entry(claim.to_string()).or_default();
            ids.insert((*id).clone());
            if ids.len() > 1 {
                return Some(format!("NodeClaim {claim} got two instances: {ids:?}"));
            }
        }
        None
    }

    /// No node stays cordoned for disruption 10 minutes while its NodeClaim is not deleting.
    fn cordons(&mut self, t: i64, nodes: &[Value], claims: &[Value]) -> Option<String> {
        let deleting: BTreeSet<&str> = claims
            .iter()
            .filter(|c| !c["metadata"]["deletionTimestamp"].is_null())
            .filter_map(|c| c["status"]["nodeName"].as_str())
            .collect();
        let cordoned: BTreeSet<String> = nodes
            .iter()
            .filter(|n| is_disrupted(n))
            .filter_map(|n| n["metadata"]["name"].as_str())
            .filter(|n| !deleting.contains(n))
            .map(str::to_string)
            .collect();
        self.cordoned.retain(|n, _| cordoned.contains(n));
        for node in cordoned {
            let since = *self.cordoned.entry(node.clone()).or_insert(t);
            if t - since > CORDON_LIMIT {
                return Some(format!(
                    "node {node} has been cordoned {} s with no command finishing it",
                    t - since
                ));
            }
        }
        None
    }
}

impl Queue {
    /// Every message was handled or dead-lettered; none is lost, and no poison was acknowledged.
    fn check(&self) -> Option<String> {
        if let Some(m) = self.waiting.first() {
            return Some(format!("message {} is still in flight at the end", m.id));
        }
        for id in &self.sent {
            if id.starts_with("poison-") && self.acked.contains(id) {
                return Some(format!("poison message {id} was acknowledged"));
            }
            if !self.acked.contains(id) && !self.dead.contains(id) {
                return Some(format!(
                    "message {id} was neither handled nor dead-lettered"
                ));
            }
        }
        None
    }
}

struct Chaos {
    sim: Simulation,
    rng: Rng,
    queue: Queue,
    seen: Invariants,
    outcome: SeedOutcome,
    cpu_of: BTreeMap<String, i64>,
}

fn stamp(start: DateTime<Utc>, t: i64) -> DateTime<Utc> {
    start + Duration::seconds(t)
}

impl Chaos {
    fn new(sim: Simulation, seed: u64) -> Chaos {
        let cpu_of = sim
            .catalog
            .instance_types(&NodeClassSettings::default())
            .into_iter()
            .map(|t| (t.name.clone(), t.capacity.cpu))
            .collect();
        let mut foreign_tags = BTreeMap::new();
        foreign_tags.insert(
            "kubernetes.io/cluster/another".to_string(),
            "owned".to_string(),
        );
        foreign_tags.insert("karpenter.sh/nodepool".to_string(), "web".to_string());
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
            },
            0.0,
        );
        Chaos {
            sim,
            rng: Rng::new(seed.rotate_left(29) ^ 0x0bad_cafe),
            queue: Queue::default(),
            seen: Invariants::default(),
            outcome: SeedOutcome {
                seed,
                ..Default::default()
            },
            cpu_of,
        }
    }

    fn count(&mut self, fault: &'static str) {
        *self.outcome.faults.entry(fault).or_default() += 1;
    }

    fn chance(&mut self, p: f64) -> bool {
        self.rng.between(0.0, 1.0) < p
    }

    async fn run(&mut self) -> anyhow::Result<SeedOutcome> {
        let timeline = self.sim.scenario.timeline.clone();
        let mut steps = timeline.iter().peekable();
        let mut nudged_for: Option<i64> = None;
        for t in 0..=self.sim.scenario.duration {
            let now = stamp(self.sim.start, t);
            self.sim.clock.set(now);
            self.sim.cluster.set_clock(now);
            while let Some(step) = steps.next_if(|s| s.at <= t) {
                self.step(step, t, now);
            }
            let chaos = t < CHAOS_END;
            if chaos {
                self.cloud_faults(t, now);
                self.api_faults();
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
            self.sim.cluster.kubelet(&live, now);
            if let Some(v) = self.evicted_do_not_disrupt() {
                return self.broke(t, v);
            }
            for pod in self.sim.cluster.controllers(now) {
                self.sim.admit(&pod, now).await;
            }
            if chaos && self.chance(0.005) {
                self.flood(now).await;
            }
            self.sim.cluster.scheduler(now);
            let nudged = !self.sim.nudges.take().is_empty();
            if nudged && !(chaos && self.chance(0.3)) {
                nudged_for.get_or_insert(t + 1);
            } else if nudged {
                self.count("nudges lost");
            }
            if t % 60 == 0 || nudged_for == Some(t) {
                nudged_for = nudged_for.filter(|&n| n > t);
                self.tick(t, now, chaos).await;
            }
            if let Some(v) = self.check(t) {
                return self.broke(t, v);
            }
        }
        if let Some(v) = self.queue.check() {
            return self.broke(self.sim.scenario.duration, v);
        }
        self.outcome.worst_pending = self.worst_pending();
        Ok(std::mem::take(&mut self.outcome))
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
            Action::ChangeAmi(c) => self.sim.cloud.release_ami(c.nodeclass.as_deref()),
            Action::Ice(i) => self.sim.cloud.add_ice(i.clone()),
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

    /// Instances that die without a warning, and warnings for instances already gone.
    fn cloud_faults(&mut self, t: i64, now: DateTime<Utc>) {
        if self.chance(0.004) {
            let live: Vec<String> = self
                .sim
                .cloud
                .live()
                .into_keys()
                .filter(|id| id != FOREIGN)
                .collect();
            if !live.is_empty() {
                let id = self.rng.pick(&live).clone();
                self.sim.cloud.kill(&id);
                self.seen.interrupted.insert(id);
                self.count("instances killed without a warning");
            }
        }
        if self.chance(0.004) {
            let live = self.sim.cloud.live();
            let gone: Vec<String> = self
                .seen
                .ever
                .iter()
                .filter(|id| !live.contains_key(*id))
                .cloned()
                .collect();
            if !gone.is_empty() {
                let id = self.rng.pick(&gone).clone();
                self.send(spot_warning(&id, now), t, true);
                self.count("warnings for gone instances");
            }
        }
    }

    /// Transient API errors on reads (retried) and on writes (the tick fails; the next repairs).
    fn api_faults(&mut self) {
        const READS: [&str; 4] = [PODS, NODES, NODECLAIMS, "/apis/karpenter.sh/v1/nodepools"];
        if self.chance(0.003) {
            let fault = Fault {
                method: "GET".into(),
                path: self.rng.pick(&READS).to_string(),
                status: *self.rng.pick(&[429, 500, 503]),
                skip: 0,
                times: 1,
            };
            self.sim.cluster.api.lock().faults.push(fault);
            self.count("API read errors");
        }
        if self.chance(0.003) {
            let fault = Fault {
                method: "WRITE".into(),
                path: "/".into(),
                status: *self.rng.pick(&[409, 500, 503]),
                skip: self.rng.below(5),
                times: 1 + self.rng.below(3),
            };
            self.sim.cluster.api.lock().faults.push(fault);
            self.count("API write errors");
        }
    }

    /// A webhook flood: the same pod's CREATE reviewed 30 times.
    async fn flood(&mut self, now: DateTime<Utc>) {
        let pods = self.sim.cluster.workload_as_pending();
        if pods.is_empty() {
            return;
        }
        let pod = self.rng.pick(&pods).clone();
        for _ in 0..30 {
            self.sim.admit(&pod, now).await;
        }
        self.count("webhook floods");
    }

    /// The tick: sometimes cut off at a random await point, sometimes two at once.
    async fn tick(&mut self, t: i64, now: DateTime<Utc>, chaos: bool) {
        let cut = chaos && self.chance(0.08);
        if cut {
            let fault = Fault {
                method: "WRITE".into(),
                path: "/".into(),
                status: 503,
                skip: self.rng.below(12),
                times: CUT,
            };
            self.sim.cluster.api.lock().faults.push(fault);
            self.count("ticks cut off");
        }
        self.sim.watch.ticks += 1;
        if chaos && self.chance(0.1) {
            self.count("concurrent ticks");
            let tick = &self.sim.tick;
            let other = Tick::new(tick.cloud.clone(), tick.kube.clone(), tick.settings.clone());
            let (first, second) = (format!("chaos-{t}-a"), format!("chaos-{t}-b"));
            let (a, b) = tokio::join!(tick.run(now, &first), other.run(now, &second));
            for result in [a, b] {
                self.tick_done(result);
            }
        } else {
            let result = self.sim.tick.run(now, &format!("chaos-{t}")).await;
            self.tick_done(result);
        }
        if cut {
            self.sim
                .cluster
                .api
                .lock()
                .faults
                .retain(|f| f.times > 0 && f.times < CUT / 2);
        }
    }

    fn tick_done(&mut self, result: Result<TickSummary, RuntimeError>) {
        match result {
            Ok(summary) => self.sim.note_tick(&summary),
            Err(e) => {
                warn!(target: "simulate::tick", error = %e, "tick failed; the next one retries")
            }
        }
    }

    /// Puts an event on the queue: late, sometimes twice, sometimes beside a poison message.
    fn send(&mut self, event: Value, t: i64, chaos: bool) {
        let id = event["id"].as_str().unwrap_or_default().to_string();
        let late = if chaos { self.rng.below(30) as i64 } else { 0 };
        let message = Message {
            id: id.clone(),
            body: event.to_string(),
            receives: 0,
            due: t + late,
        };
        self.queue.sent.insert(id.clone());
        if chaos && self.chance(0.2) {
            let mut again = message.clone();
            again.due += self.rng.below(20) as i64;
            self.queue.waiting.push(again);
            self.count("duplicate deliveries");
        }
        self.queue.waiting.push(message);
        if chaos && self.chance(0.1) {
            let poison = format!("poison-{id}");
            self.queue.sent.insert(poison.clone());
            self.queue.waiting.push(Message {
                id: poison,
                body: "{\"detail-type\": 42".into(),
                receives: 0,
                due: t + late,
            });
            self.count("poison messages");
        }
    }

    /// Delivers the messages due, in a shuffled batch of up to ten; failures come back after
    /// the visibility timeout or go to the DLQ.
    async fn receive(&mut self, t: i64, now: DateTime<Utc>) {
        let (mut due, rest): (Vec<Message>, Vec<Message>) = std::mem::take(&mut self.queue.waiting)
            .into_iter()
            .partition(|m| m.due <= t);
        self.queue.waiting = rest;
        // Out of order.
        for i in (1..due.len()).rev() {
            let j = self.rng.below(i + 1);
            due.swap(i, j);
        }
        for batch in due.chunks(10) {
            let records: Vec<Value> = batch
                .iter()
                .map(|m| {
                    json!({"messageId": m.id, "receiptHandle": format!("rh-{}-{}", m.id, m.receives),
                        "body": m.body, "attributes": {"ApproximateReceiveCount": (m.receives + 1).to_string()},
                        "messageAttributes": {}, "md5OfBody": "", "eventSource": "aws:sqs", "awsRegion": "us-east-1",
                        "eventSourceARN": format!("arn:aws:sqs:us-east-1:{ACCOUNT}:fleetwright-{CLUSTER}-interruption")})
                })
                .collect();
            let Ok(event) = serde_json::from_value::<SqsEvent>(json!({ "Records": records }))
            else {
                continue;
            };
            let response = self
                .sim
                .interruption
                .handle_sqs(event, now, &mut Metrics::default())
                .await;
            let failed: BTreeSet<String> = response
                .batch_item_failures
                .into_iter()
                .map(|f| f.item_identifier)
                .collect();
            for m in batch {
                if !failed.contains(&m.id) {
                    // A poison message acknowledged is reported by check_queue.
                    self.queue.acked.insert(m.id.clone());
                    continue;
                }
                let mut m = m.clone();
                m.receives += 1;
                if m.receives >= MAX_RECEIVES {
                    self.queue.dead.insert(m.id.clone());
                } else {
                    m.due = t + VISIBILITY;
                    self.queue.waiting.push(m);
                }
            }
        }
    }

    /// A do-not-disrupt pod evicted from a node whose instance was not interrupted.
    fn evicted_do_not_disrupt(&self) -> Option<String> {
        let state = self.sim.cluster.api.lock();
        let pods = state.objects.get(PODS)?;
        let nodes = state.objects.get(NODES)?;
        for key in &state.evicted {
            let name = key.split('/').nth(1).unwrap_or_default();
            if !name.starts_with(DO_NOT_DISRUPT_PREFIX) {
                continue;
            }
            let node = pods
                .iter()
                .find(|p| p["metadata"]["name"] == name)
                .and_then(|p| p["spec"]["nodeName"].as_str())?;
            let instance = nodes
                .iter()
                .find(|n| n["metadata"]["name"] == node)
                .and_then(|n| n["spec"]["providerID"].as_str())
                .and_then(|p| p.rsplit('/').next())
                .unwrap_or_default();
            if !self.seen.interrupted.contains(instance) {
                return Some(format!(
                    "do-not-disrupt pod {key} was evicted from {node}, whose instance {instance} was not interrupted"
                ));
            }
        }
        None
    }

    /// Every invariant that can be checked at second `t`; the first one broken.
    fn check(&mut self, t: i64) -> Option<String> {
        let live = self.sim.cloud.live();
        if !live.contains_key(FOREIGN) {
            return Some(format!("the foreign instance {FOREIGN} was terminated"));
        }
        let owned: BTreeMap<&String, &fleetwright_sim::SimInstance> =
            live.iter().filter(|(id, _)| *id != FOREIGN).collect();
        self.seen.ever.extend(owned.keys().map(|id| (*id).clone()));
        let broken = {
            // A handle of its own, so the store stays locked (and uncopied) while self changes.
            let api = self.sim.cluster.api.clone();
            let state = api.lock();
            let none = Vec::new();
            let get = |p: &str| state.objects.get(p).unwrap_or(&none);
            let (claims, nodes, pods) = (get(NODECLAIMS), get(NODES), get(PODS));
            self.seen
                .pairs(t, &owned, claims)
                .or_else(|| self.seen.launches(&owned))
                .or_else(|| self.seen.cordons(t, nodes, claims))
                .or_else(|| self.check_budget_and_limits(&owned, nodes))
                .or_else(|| self.check_pending(t, pods))
        };
        broken.or_else(|| self.check_runaway(t, owned.len()))
    }

    /// The pool's node budget (voluntary disruptions at once) and CPU limit.
    fn check_budget_and_limits(
        &self,
        owned: &BTreeMap<&String, &fleetwright_sim::SimInstance>,
        nodes: &[Value],
    ) -> Option<String> {
        let voluntary = nodes
            .iter()
            .filter(|n| is_disrupted(n))
            .filter(|n| {
                let id = n["spec"]["providerID"]
                    .as_str()
                    .and_then(|p| p.rsplit('/').next());
                id.is_some_and(|id| !self.seen.interrupted.contains(id))
            })
            .count();
        if voluntary > NODE_BUDGET {
            return Some(format!(
                "{voluntary} nodes disrupted at once; the budget allows {NODE_BUDGET}"
            ));
        }
        let cpu: i64 = owned
            .values()
            .filter(|i| i.nodepool() == "web")
            .map(|i| {
                self.cpu_of
                    .get(&i.instance.instance_type)
                    .copied()
                    .unwrap_or(0)
            })
            .sum();
        if cpu > CPU_LIMIT * 1000 {
            return Some(format!(
                "the pool runs {cpu}m CPU; its limit is {CPU_LIMIT}"
            ));
        }
        None
    }

    /// No runaway scale-up: the fleet stays within twice what the workload needed at any time
    /// in the last ten minutes, plus room for the commands in flight.
    fn check_runaway(&mut self, t: i64, instances: usize) -> Option<String> {
        if t % 30 == 0 {
            let needed = self.needed_nodes();
            self.seen.needed.push((t, needed));
        }
        self.seen.needed.retain(|(at, _)| t - at <= 600);
        let most = self.seen.needed.iter().map(|(_, n)| *n).max().unwrap_or(0);
        let bound = 2 * most + 4;
        (instances > bound).then(|| {
            format!("{instances} instances run; the workload needed at most {most} nodes in the last 10 minutes")
        })
    }

    /// The nodes a from-scratch plan uses for the workload now.
    fn needed_nodes(&self) -> usize {
        let pods = self.sim.cluster.workload_as_pending();
        if pods.is_empty() {
            return 0;
        }
        let mut items = self.sim.cluster.configuration();
        items.extend(pods);
        let text = json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string();
        fleetwright_kube::snapshot_from_yaml(&text, "chaos")
            .map(|s| schedule_count(&s, &self.sim.catalog))
            .unwrap_or(0)
    }

    /// Once the faults have stopped (and the Lease of a tick cut off at the last moment has
    /// expired), every pending pod runs within 3 minutes.
    fn check_pending(&self, t: i64, pods: &[Value]) -> Option<String> {
        if t < CHAOS_END {
            return None;
        }
        let now = stamp(self.sim.start, t);
        // A tick cut off just before the faults stopped still holds the Lease for its term.
        let quiet_from = stamp(self.sim.start, CHAOS_END + LEASE_SECONDS);
        for p in pods {
            if p["spec"]["nodeName"]
                .as_str()
                .is_some_and(|n| !n.is_empty())
            {
                continue;
            }
            let created = p["metadata"]["creationTimestamp"]
                .as_str()
                .and_then(|c| DateTime::parse_from_rfc3339(c).ok())
                .map_or(now, |c| c.with_timezone(&Utc));
            let since = created.max(quiet_from);
            if (now - since).num_seconds() > PENDING_LIMIT {
                return Some(format!(
                    "pod {} has been pending {} s since the faults stopped",
                    p["metadata"]["name"].as_str().unwrap_or_default(),
                    (now - since).num_seconds()
                ));
            }
        }
        None
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

fn schedule_count(snapshot: &fleetwright_core::Snapshot, catalog: &Catalog) -> usize {
    fleetwright_core::schedule(snapshot, catalog, &ScheduleOptions::default())
        .nodeclaims
        .len()
}

fn is_disrupted(node: &Value) -> bool {
    node["spec"]["taints"]
        .as_array()
        .is_some_and(|t| t.iter().any(|t| t["key"] == "karpenter.sh/disrupted"))
}

fn spot_warning(instance_id: &str, now: DateTime<Utc>) -> Value {
    ec2_event(
        "EC2 Spot Instance Interruption Warning",
        instance_id,
        json!({"instance-id": instance_id, "instance-action": "terminate"}),
        now,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instance(id: &str, nodeclaim: &str) -> fleetwright_sim::SimInstance {
        let mut tags = BTreeMap::new();
        tags.insert("karpenter.sh/nodeclaim".to_string(), nodeclaim.to_string());
        fleetwright_sim::SimInstance {
            instance: fleetwright_cloud::Instance {
                id: id.into(),
                instance_type: "m6i.large".into(),
                zone: ZONES[0].into(),
                state: "running".into(),
                capacity_type: "spot".into(),
                image_id: String::new(),
                subnet_id: String::new(),
                security_groups: Vec::new(),
                launch_time: None,
                tags,
            },
            price: 0.1,
            warned: None,
        }
    }

    #[test]
    fn an_instance_without_a_nodeclaim_breaks_after_five_minutes() {
        let mut seen = Invariants::default();
        let i = instance("i-1", "web-1");
        let id = "i-1".to_string();
        let owned: BTreeMap<&String, &fleetwright_sim::SimInstance> = [(&id, &i)].into();
        assert!(seen.pairs(0, &owned, &[]).is_none());
        assert!(seen.pairs(UNPAIRED_LIMIT, &owned, &[]).is_none());
        let broken = seen.pairs(UNPAIRED_LIMIT + 1, &owned, &[]).unwrap();
        assert!(broken.contains("i-1"), "{broken}");
        let claim = json!({"metadata": {"name": "web-1"}, "status": {"providerID": "aws:///us-east-1a/i-1"}});
        assert!(seen
            .pairs(UNPAIRED_LIMIT + 2, &owned, std::slice::from_ref(&claim))
            .is_none());
        // The claim outlives its instance.
        let none = BTreeMap::new();
        assert!(seen
            .pairs(1000, &none, std::slice::from_ref(&claim))
            .is_none());
        assert!(seen
            .pairs(1000 + UNPAIRED_LIMIT + 1, &none, &[claim])
            .unwrap()
            .contains("web-1"));
    }

    #[test]
    fn two_instances_for_one_nodeclaim_break_at_once() {
        let mut seen = Invariants::default();
        let (a, b) = (instance("i-a", "web-1"), instance("i-b", "web-1"));
        let (ia, ib) = ("i-a".to_string(), "i-b".to_string());
        assert!(seen.launches(&[(&ia, &a)].into()).is_none());
        assert!(seen.launches(&[(&ib, &b)].into()).is_some());
    }

    #[test]
    fn a_node_cordoned_ten_minutes_without_a_deletion_breaks() {
        let mut seen = Invariants::default();
        let node = json!({"metadata": {"name": "n1"}, "spec": {"taints": [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]}});
        assert!(seen.cordons(0, std::slice::from_ref(&node), &[]).is_none());
        let deleting = json!({"metadata": {"name": "c1", "deletionTimestamp": "2026-11-22T10:00:00Z"}, "status": {"nodeName": "n1"}});
        assert!(
            seen.cordons(CORDON_LIMIT + 1, std::slice::from_ref(&node), &[deleting])
                .is_none(),
            "a deletion is finishing it"
        );
        assert!(
            seen.cordons(CORDON_LIMIT + 2, std::slice::from_ref(&node), &[])
                .is_none(),
            "counted again from now"
        );
        assert!(seen.cordons(2 * CORDON_LIMIT + 3, &[node], &[]).is_some());
    }

    #[test]
    fn a_message_neither_handled_nor_dead_lettered_or_an_acknowledged_poison_breaks() {
        let mut queue = Queue::default();
        queue.sent.insert("m-1".into());
        assert!(queue.check().unwrap().contains("m-1"));
        queue.dead.insert("m-1".into());
        assert!(queue.check().is_none());
        queue.sent.insert("poison-m-2".into());
        queue.acked.insert("poison-m-2".into());
        assert!(queue.check().unwrap().contains("poison"));
    }
}
