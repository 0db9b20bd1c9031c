//! `fleetwright simulate --chaos --seeds N`: the simulation with random faults from each seed,
//! and invariants checked after every simulated second. Each seed starts from the cluster in
//! `examples/simulate/chaos.yaml`, writes its own timeline (scale steps, spot interruptions, a
//! capacity shortage) and, for the first [`CHAOS_END`] seconds, injects faults:
//!
//! * Kubernetes API errors (429, 500, 503 on reads, which are retried; 409, 500, 503 on writes),
//!   and tick invocations cut off at a random await point (every write after it fails);
//! * two tick invocations at once (the Lease lets one through);
//! * instances that die without a spot warning (EC2's state-change event still reports them),
//!   and spot warnings for instances already gone;
//! * EC2 API faults: throttling and 5xx on CreateFleet, TerminateInstances and DescribeInstances,
//!   a CreateFleet whose answer is lost after it launched, and DescribeInstances listing new
//!   instances only after a lag of up to 20 s (its eventual consistency);
//! * Kubernetes API latency (requests held up to 200 ms);
//! * SQS deliveries that come late, twice, out of order, or with a poison message beside them
//!   (a failed message comes back after the visibility timeout, and goes to the DLQ after
//!   [`MAX_RECEIVES`] receives);
//! * webhook floods and nudges lost on the bus.
//!
//! Then the faults stop and the run goes on for [`QUIET`] seconds. The first invariant broken
//! ends the seed and is printed with the seed and the second; see [`Invariants`].

use std::collections::BTreeMap;
use std::io::Write;

use anyhow::Context;
use chrono::{DateTime, Duration, Utc};
use fleetwright_core::NodeClassSettings;
use fleetwright_sim::cluster::{NODECLAIMS, NODES, PODS};
use serde_json::{json, Value};

mod faults;
mod invariants;

use invariants::{is_disrupted, Invariants, Queue};

use super::scenario::{Action, Ice, Interrupt, Scale, Scenario, Step};
use super::{ec2_event, log, Simulation};
use fleetwright_core::rng::Rng;
use fleetwright_sim::ZONES;

/// The cluster every seed starts from.
const BASE: &str = include_str!("../../../../examples/simulate/chaos.yaml");
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
const LEASE_SECONDS: i64 = fleetwright_runtime::settings::DEFAULT_LEASE_SECONDS as i64;
/// The pool's limits in the base cluster.
const CPU_LIMIT: i64 = 120;
const NODE_BUDGET: usize = 2;
/// Room for the commands in flight in the runaway check: two 2xlarge nodes' CPU.
const IN_FLIGHT_CPU: i64 = 16_000;
const FOREIGN: &str = "i-0f0re1gn00000000";
/// A cut-off invocation's fault: every write from its point on fails (more than any tick makes).
const CUT: usize = 1_000_000;
const DO_NOT_DISRUPT_PREFIX: &str = "pinned-";
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
                capacity_reservation_id: None,
                partition: None,
            },
            0.0,
        );
        let mut rng = Rng::new(seed.rotate_left(29) ^ 0x0bad_cafe);
        // DescribeInstances' eventual consistency: new instances are listed up to 20 s late.
        sim.cloud
            .set_listing_lag(Duration::seconds(rng.below(21) as i64));
        Chaos {
            sim,
            rng,
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
            self.sim.cloud.set_clock(now);
            while let Some(step) = steps.next_if(|s| s.at <= t) {
                self.step(step, t, now);
            }
            let chaos = t < CHAOS_END;
            if t == CHAOS_END {
                // The faults stop: none injected earlier is left waiting for a request.
                let mut api = self.sim.cluster.api.lock();
                api.faults.clear();
                api.latency = None;
                drop(api);
                self.sim.cloud.clear_faults();
            }
            if chaos {
                self.cloud_faults(t, now);
                self.ec2_faults();
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
            if t % self.sim.scenario.schedule == 0 || nudged_for == Some(t) {
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
            Action::Apply(o) => self.sim.cluster.apply(o),
            Action::ChangeAmi(c) => self.sim.cloud.release_ami(c.nodeclass.as_deref()),
            Action::Ice(i) => self.sim.cloud.add_ice(i.clone()),
            Action::Fail(f) => {
                let rng = &mut self.rng;
                self.sim
                    .cluster
                    .fail_node(&f.nodepool, &f.condition, &f.status, now, |n| rng.below(n));
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
            let requests = &state.requests;
            self.seen
                .pairs(t, &owned, claims)
                .or_else(|| self.seen.evictions_only(requests))
                .or_else(|| self.seen.launches(&owned))
                .or_else(|| self.seen.cordons(t, nodes, claims))
                .or_else(|| self.seen.churn(t, nodes, claims, pods, *CHURN_WINDOW))
                .or_else(|| self.check_budget_and_limits(&owned, nodes))
                .or_else(|| self.check_pending(t, pods))
        };
        let capacity = owned
            .values()
            .map(|i| {
                self.cpu_of
                    .get(&i.instance.instance_type)
                    .copied()
                    .unwrap_or(0)
            })
            .sum();
        broken.or_else(|| self.check_runaway(t, capacity))
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

    /// No runaway scale-up: the fleet's CPU stays within twice the most CPU the workload asked
    /// for at any time in the last ten minutes, plus [`IN_FLIGHT_CPU`] for the commands in
    /// flight (a replacement launched before the node it replaces goes, say).
    fn check_runaway(&mut self, t: i64, capacity: i64) -> Option<String> {
        if t % 10 == 0 {
            let asked = self.requested_cpu();
            self.seen.needed.push((t, asked));
        }
        self.seen.needed.retain(|(at, _)| t - at <= 600);
        let most = self.seen.needed.iter().map(|(_, n)| *n).max().unwrap_or(0);
        (capacity > 2 * most + IN_FLIGHT_CPU).then(|| {
            format!("the fleet has {capacity}m CPU; the workload asked for at most {most}m in the last 10 minutes")
        })
    }

    /// The CPU the workload's pods ask for now, bound or pending, in millicores.
    fn requested_cpu(&self) -> i64 {
        self.sim
            .cluster
            .workload_as_pending()
            .iter()
            .flat_map(|p| {
                p["spec"]["containers"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .map(|c| millicores(c["resources"]["requests"]["cpu"].as_str().unwrap_or("0")))
            .sum()
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

fn millicores(q: &str) -> i64 {
    match q.strip_suffix('m') {
        Some(m) => m.parse().unwrap_or(0),
        None => q.parse::<f64>().map_or(0, |c| (c * 1000.0) as i64),
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
