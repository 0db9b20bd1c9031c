//! The one loop that drives the tick's state machine ([`super::machine`]), and its outlets: the
//! live tick (which applies, or in a dry run describes, through the executor) and a cluster dump
//! (`fleetwright plan --actions`, which has no cloud to read and applies nothing).

use std::future::Future;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use fleetwright_cloud::Cloud;
use fleetwright_core::Catalog;
use fleetwright_kube::dump::ClusterDump;
use fleetwright_kube::state;
use tracing::{debug, warn};

use super::action::Action;
use super::execute::Applied;
use super::machine::{Group, Input, Need, Outcome, Step, TickState};
use super::say::TICK;
use super::{isolation, status, Tick, TickSummary};

/// Where the machine's steps go.
pub(crate) trait Outlet {
    /// Answers a read.
    fn read(&mut self, need: Need) -> impl Future<Output = Input> + Send;
    /// Applies actions (or describes them), and says what they did.
    fn apply(&mut self, actions: Vec<Action>) -> impl Future<Output = Vec<Outcome>> + Send;
    /// A group of phases ended, with its first error if it had one.
    fn group_done(&mut self, group: Group, failed: Option<&str>);
}

/// Runs the machine to its end through `outlet`.
pub(crate) async fn drive<O: Outlet>(state: &mut TickState<'_>, outlet: &mut O) {
    loop {
        match state.poll() {
            Step::Read(need) => {
                let input = outlet.read(need).await;
                state.give(input);
            }
            Step::Apply(actions) => {
                let outcomes = outlet.apply(actions).await;
                state.absorb(outcomes);
            }
            Step::GroupDone { group, failed } => outlet.group_done(group, failed.as_deref()),
            Step::Done => return,
        }
    }
}

/// The output of a future that never waits (the dump outlet's): the plan is synchronous.
pub(crate) fn ready<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
    }
}

/// The live tick: reads from the cloud and the cluster, applies through the executor (which
/// describes instead in a dry run).
pub(crate) struct Live<'t, 'a, C> {
    tick: &'t Tick<C>,
    ctx: Applied<'a>,
    since: std::time::Instant,
    /// Time spent answering reads, and applying actions.
    reading: std::time::Duration,
    writing: std::time::Duration,
}

impl<'t, 'a, C: Cloud> Live<'t, 'a, C> {
    pub fn new(
        tick: &'t Tick<C>,
        dump: &'a ClusterDump,
        resolved: &'a status::Resolutions,
        summary: &'a mut TickSummary,
        now: DateTime<Utc>,
    ) -> Self {
        Live {
            tick,
            ctx: Applied {
                dump,
                now,
                summary,
                outcomes: Vec::new(),
                resolved,
                failed: Default::default(),
                dry_names: 0,
            },
            since: std::time::Instant::now(),
            reading: std::time::Duration::ZERO,
            writing: std::time::Duration::ZERO,
        }
    }

    /// Time spent answering reads, and applying actions, so far.
    pub fn times(&self) -> (std::time::Duration, std::time::Duration) {
        (self.reading, self.writing)
    }

    /// Answers one read of the machine's.
    async fn answer(&self, need: Need) -> Input {
        let tick = self.tick;
        let now = self.ctx.now;
        match need {
            Need::Catalog => match tick.cloud.catalog(now).await {
                Ok(c) => Input::Catalog(c),
                Err(e) => Input::Failed(e.into()),
            },
            Need::Instances => match tick.cloud.instances().await {
                Ok(owned) => Input::Instances(owned),
                Err(e) => Input::Failed(e.into()),
            },
            Need::Describe(asked) => match tick.cloud.describe(&asked).await {
                Ok(found) => Input::Described { asked, found },
                Err(e) => Input::Failed(e.into()),
            },
            Need::DisruptionState => {
                let (said, pending) = tick.disruption_state().await;
                Input::DisruptionState { said, pending }
            }
            Need::RejectedSaid => {
                let ns = &tick.settings.namespace;
                let said = state::load(tick.kube.clone(), ns, isolation::REJECTED_KEY).await;
                Input::RejectedSaid(said.ok().flatten().unwrap_or_default())
            }
            Need::Unavailable => Input::Unavailable(tick.cloud.unavailable()),
        }
    }
}

impl<C: Cloud> Outlet for Live<'_, '_, C> {
    async fn read(&mut self, need: Need) -> Input {
        let started = std::time::Instant::now();
        let input = self.answer(need).await;
        self.reading += started.elapsed();
        input
    }

    async fn apply(&mut self, actions: Vec<Action>) -> Vec<Outcome> {
        let started = std::time::Instant::now();
        self.tick.apply(actions, &mut self.ctx).await;
        self.writing += started.elapsed();
        std::mem::take(&mut self.ctx.outcomes)
    }

    fn group_done(&mut self, group: Group, failed: Option<&str>) {
        let phase = group.name();
        let elapsed_ms = self.since.elapsed().as_millis() as u64;
        self.since = std::time::Instant::now();
        debug!(target: TICK, phase, elapsed_ms, "tick phase done");
        if let Some(error) = failed {
            warn!(target: TICK, phase, %error, "a tick phase failed; the later phases still run");
        }
    }
}

/// A cluster dump: the catalog it was given, no cloud state, and actions collected unapplied,
/// with the dry run's outcomes.
pub(crate) struct FromDump {
    catalog: Arc<Catalog>,
    now: DateTime<Utc>,
    made_up: usize,
    pub actions: Vec<Action>,
}

impl FromDump {
    pub fn new(catalog: &Catalog, now: DateTime<Utc>) -> Self {
        FromDump {
            catalog: Arc::new(catalog.clone()),
            now,
            made_up: 0,
            actions: Vec::new(),
        }
    }
}

impl Outlet for FromDump {
    async fn read(&mut self, need: Need) -> Input {
        match need {
            Need::Catalog => Input::Catalog(self.catalog.clone()),
            Need::DisruptionState => Input::DisruptionState {
                said: Default::default(),
                pending: Vec::new(),
            },
            Need::Instances | Need::Describe(_) | Need::RejectedSaid | Need::Unavailable => {
                Input::Unknown
            }
        }
    }

    async fn apply(&mut self, actions: Vec<Action>) -> Vec<Outcome> {
        let mut outcomes = Vec::new();
        for action in &actions {
            outcomes.extend(super::assumed::assumed(action, &mut self.made_up, self.now));
        }
        self.actions.extend(actions);
        outcomes
    }

    fn group_done(&mut self, _group: Group, _failed: Option<&str>) {}
}
