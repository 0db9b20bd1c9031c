//! The tick as one state machine, with no I/O: it is built from the tick's read of the cluster,
//! asks for the other reads it needs ([`Need`]) when it needs them, hands out the next
//! [`Action`]s, and takes back typed [`Outcome`]s of what was applied. The phase order is
//! written once, in [`PHASES`]; a driver ([`super::drive`]) feeds it from one of three outlets:
//! the live executor, the dry run, and `fleetwright plan --actions`. What each phase decides is
//! in [`phases`].

mod phases;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use fleetwright_cloud::unavailable::UnavailableOfferings;
use fleetwright_cloud::Instance;
use fleetwright_core::model::NodePool;
use fleetwright_core::{Catalog, Snapshot};
use fleetwright_crds::NodeClaim;
use fleetwright_kube::convert::Rejected;
use fleetwright_kube::dump::ClusterDump;

use super::action::Action;
use super::disruption::PendingDisruption;
use super::{follow_up, isolation, reservations, status};
use crate::error::RuntimeError;
use crate::metrics::Metrics;

/// The steps of a tick, in the order they run: the only place the order is written.
pub const PHASES: &[Phase] = &[
    Phase::Plan,
    Phase::Replicas,
    Phase::Launch,
    Phase::Register,
    Phase::Initialize,
    Phase::Restamp,
    Phase::Liveness,
    Phase::DeletedNodes,
    Phase::OrphanedNodes,
    Phase::Expire,
    Phase::Expiring,
    Phase::Repair,
    Phase::Reboot,
    Phase::ContinueCommands,
    Phase::DriftMarks,
    Phase::Disrupt,
    Phase::LaunchReplacements,
    Phase::Deletions,
    Phase::Statuses,
    Phase::Garbage,
    Phase::PartitionLabels,
    Phase::Stranded,
    Phase::SaveUnavailable,
    Phase::PodRecords,
    Phase::ReportRejected,
];

/// One step of the tick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Plan the pending pods; a NodeClaim for each node the plan needs.
    Plan,
    /// A NodeClaim for each replica a static NodePool lacks; those above its replicas deleted.
    Replicas,
    /// Launch every NodeClaim without an instance.
    Launch,
    /// Sync joined nodes with their NodeClaims.
    Register,
    /// Mark registered NodeClaims whose node is ready Initialized.
    Initialize,
    /// Hashes another version wrote, re-stamped.
    Restamp,
    /// NodeClaims that never registered, given up.
    Liveness,
    /// Nodes deleted by hand: their NodeClaims deleted.
    DeletedNodes,
    /// Deleting nodes no NodeClaim accounts for, let go.
    OrphanedNodes,
    /// NodeClaims past their `expireAfter`, deleted.
    Expire,
    /// NodeClaims of expiring capacity blocks, deleted.
    Expiring,
    /// Nodes unhealthy past their toleration, repaired.
    Repair,
    /// Reboots for repair in progress, carried a step further.
    Reboot,
    /// Disruption commands in progress, carried forward.
    ContinueCommands,
    /// NodeClaims' `Drifted` conditions.
    DriftMarks,
    /// The next disruption decided, and those waiting confirmed.
    Disrupt,
    /// A confirmed command's replacements, launched.
    LaunchReplacements,
    /// Deleting NodeClaims drained and terminated.
    Deletions,
    /// NodePool and EC2NodeClass statuses.
    Statuses,
    /// Owned instances no NodeClaim accounts for, terminated.
    Garbage,
    /// Partitions EC2 chose, labelled.
    PartitionLabels,
    /// NodeClaims whose instance is gone, forgotten.
    Stranded,
    /// The unavailable offerings, persisted.
    SaveUnavailable,
    /// NodeClaims' records of the pods their nodes hold, where they changed.
    PodRecords,
    /// The objects the read could not take, reported.
    ReportRejected,
}

/// The groups of phases: a read that fails stops the rest of its group, and only that.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    Provisioning,
    Lifecycle,
    Disruption,
    Finishing,
    Reporting,
}

impl Phase {
    pub fn group(self) -> Group {
        use Phase::*;
        match self {
            Plan | Replicas | Launch => Group::Provisioning,
            Register | Initialize | Restamp | Liveness | DeletedNodes | OrphanedNodes | Expire
            | Expiring | Repair | Reboot => Group::Lifecycle,
            ContinueCommands | DriftMarks | Disrupt | LaunchReplacements => Group::Disruption,
            Deletions | Statuses | PodRecords | Garbage | PartitionLabels | Stranded
            | SaveUnavailable => Group::Finishing,
            ReportRejected => Group::Reporting,
        }
    }
}

impl Group {
    /// The name a failed group is logged under.
    pub fn name(self) -> &'static str {
        match self {
            Group::Provisioning => "provisioning",
            Group::Lifecycle => "lifecycle",
            Group::Disruption => "disruption",
            Group::Finishing => "finishing",
            Group::Reporting => "reporting",
        }
    }
}

/// A read the machine needs before its next phase decides.
#[derive(Clone, Debug, PartialEq)]
pub enum Need {
    /// The instance catalog, as the cloud prices it now.
    Catalog,
    /// The instances this cluster owns.
    Instances,
    /// Which of these instances (NodeClaims' that the listing missed) still exist.
    Describe(Vec<String>),
    /// The blocked reasons already evented, and the decisions waiting for confirmation.
    DisruptionState,
    /// The rejected objects already evented, with their errors.
    RejectedSaid,
    /// The offerings the cloud has found unavailable.
    Unavailable,
}

/// The answer to a [`Need`]. `Unknown` says the outlet has no such source (a cluster dump has no
/// cloud): the phases that need it decide nothing, and nothing fails.
#[derive(Debug)]
pub enum Input {
    Catalog(Arc<Catalog>),
    Instances(Vec<Instance>),
    /// The instances asked about, and those of them found.
    Described {
        asked: Vec<String>,
        found: Vec<Instance>,
    },
    DisruptionState {
        said: BTreeMap<String, String>,
        pending: Vec<PendingDisruption>,
    },
    RejectedSaid(BTreeMap<String, String>),
    Unavailable(UnavailableOfferings),
    Unknown,
    Failed(RuntimeError),
}

/// What applying an action did that a later phase decides on.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// A NodeClaim was created (a dry run's has a made-up name).
    Created(Box<NodeClaim>),
    /// A NodeClaim's instance was launched; `recorded`: the provider id and labels written
    /// onto the NodeClaim (None when that write failed, and the next tick adopts the instance).
    Launched {
        nodeclaim: String,
        instance_id: String,
        recorded: Option<(String, Vec<(String, String)>)>,
    },
    Registered(String),
    Initialized(String),
    /// A candidate's node has nothing evictable left on it (or its grace is over and the pods
    /// left were deleted): its NodeClaim goes next.
    Drained(String),
}

/// What the machine hands its driver next.
#[derive(Debug)]
pub enum Step {
    Read(Need),
    Apply(Vec<Action>),
    /// A group ended; `failed` is its first error, if it had one.
    GroupDone {
        group: Group,
        failed: Option<String>,
    },
    Done,
}

/// What the decisions found (not what was applied): the tick's summary takes them at the end.
#[derive(Debug, Default)]
pub struct Found {
    pub pending_pods: usize,
    pub unschedulable: Vec<String>,
    pub disruptions: Vec<String>,
    pub disruptions_started: Vec<String>,
    pub metrics: Metrics,
    /// The fleet's cost against a plan from scratch, when measured this tick.
    pub fleet: Option<fleetwright_core::disruption::FleetCost>,
    /// How soon the actions applied want the tick to run again ([`follow_up`]).
    pub follow_up: Option<chrono::Duration>,
}

/// How the machine is built: the tick's read, and what it knows of the EC2NodeClasses.
#[derive(Debug)]
pub struct Start<'a> {
    pub dump: &'a ClusterDump,
    pub snapshot: Snapshot,
    pub now: DateTime<Utc>,
    pub node_repair: super::repair::NodeRepair,
    /// Which classes can launch, for leaving out the pools that cannot (None: all can).
    pub launchable: Option<BTreeMap<String, bool>>,
    /// What each EC2NodeClass resolved to this tick (empty for a dump).
    pub resolved: &'a status::Resolutions,
    pub rejected: Vec<Rejected>,
    pub reservations: reservations::Reservations,
    /// A shadow tick (a dry run beside another autoscaler) measures the fleet's cost every tick.
    pub shadow: bool,
}

/// The tick's state between its steps.
#[derive(Debug)]
pub struct TickState<'a> {
    dump: &'a ClusterDump,
    snapshot: Snapshot,
    now: DateTime<Utc>,
    node_repair: super::repair::NodeRepair,
    launchable: Option<BTreeMap<String, bool>>,
    resolved: &'a status::Resolutions,
    rejected: Vec<Rejected>,
    reservations: reservations::Reservations,
    shadow: bool,
    claims: Vec<NodeClaim>,
    /// NodeClaims created by the phase that ran last.
    created: Vec<NodeClaim>,
    /// NodeClaims created after the Launch phase, for the LaunchReplacements phase to launch.
    replacements: Vec<NodeClaim>,
    created_any: bool,
    registered: Vec<String>,
    initialized: Vec<String>,
    launched: Vec<String>,
    drained: Vec<String>,
    /// Actions decided and not yet handed out.
    queued: std::collections::VecDeque<Action>,
    parked: Vec<NodePool>,
    /// The next phase's index in [`PHASES`].
    next: usize,
    /// The group running, and its first error.
    group: Option<Group>,
    group_error: Option<RuntimeError>,
    /// The first error of the tick.
    error: Option<RuntimeError>,
    skip_group: bool,
    /// The answer to the read asked for last.
    input: Option<Input>,
    catalog: Option<Arc<Catalog>>,
    owned: Option<Result<Vec<Instance>, ()>>,
    gone: BTreeSet<String>,
    found: Found,
}

impl<'a> TickState<'a> {
    pub fn new(start: Start<'a>) -> Self {
        TickState {
            claims: start.dump.nodeclaims.clone(),
            dump: start.dump,
            snapshot: start.snapshot,
            now: start.now,
            node_repair: start.node_repair,
            launchable: start.launchable,
            resolved: start.resolved,
            rejected: start.rejected,
            reservations: start.reservations,
            shadow: start.shadow,
            created: Vec::new(),
            replacements: Vec::new(),
            created_any: false,
            registered: Vec::new(),
            initialized: Vec::new(),
            launched: Vec::new(),
            drained: Vec::new(),
            queued: Default::default(),
            parked: Vec::new(),
            next: 0,
            group: None,
            group_error: None,
            error: None,
            skip_group: false,
            input: None,
            catalog: None,
            owned: None,
            gone: BTreeSet::new(),
            found: Found::default(),
        }
    }

    /// The answer to the last [`Step::Read`].
    pub fn give(&mut self, input: Input) {
        self.input = Some(input);
    }

    /// What applying the last [`Step::Apply`]'s actions did.
    pub fn absorb(&mut self, outcomes: Vec<Outcome>) {
        for outcome in outcomes {
            match outcome {
                Outcome::Created(claim) => {
                    self.created_any = true;
                    self.created.push(*claim);
                }
                Outcome::Launched {
                    nodeclaim,
                    instance_id,
                    recorded,
                } => {
                    self.launched.push(instance_id);
                    if let Some((provider_id, labels)) = recorded {
                        self.recorded(&nodeclaim, provider_id, labels);
                    }
                }
                Outcome::Registered(name) => self.registered.push(name),
                Outcome::Initialized(name) => self.initialized.push(name),
                Outcome::Drained(name) => self.drained.push(name),
            }
        }
    }

    /// A launch recorded on its NodeClaim, as the next phases see it.
    fn recorded(&mut self, name: &str, provider_id: String, labels: Vec<(String, String)>) {
        let claim = self
            .claims
            .iter_mut()
            .find(|c| c.metadata.name.as_deref() == Some(name));
        let Some(claim) = claim else {
            return;
        };
        claim
            .status
            .get_or_insert_with(Default::default)
            .provider_id = Some(provider_id);
        let map = claim.metadata.labels.get_or_insert_with(Default::default);
        map.extend(labels);
    }

    /// The first error of the tick, and what the decisions found.
    pub fn finish(self) -> (Option<RuntimeError>, Found) {
        (self.error, self.found)
    }

    /// The next step.
    pub fn poll(&mut self) -> Step {
        if let Some(step) = self.carry_on() {
            return step;
        }
        loop {
            let Some(&phase) = PHASES.get(self.next) else {
                return match self.end_group() {
                    Some(step) => step,
                    None => Step::Done,
                };
            };
            if self.group != Some(phase.group()) {
                if let Some(step) = self.end_group() {
                    return step;
                }
                self.start_group(phase.group());
            }
            // NodeClaims created this tick are launched however their group ended: a
            // repair's replacements, made before disruption decided to wait, most of all.
            if self.skip_group && phase != Phase::LaunchReplacements {
                self.next += 1;
                continue;
            }
            match self.decide(phase) {
                Decision::Read(need) => return Step::Read(need),
                Decision::Actions(actions) => {
                    self.next += 1;
                    if !actions.is_empty() {
                        return self.apply(actions);
                    }
                }
                Decision::Nothing => self.next += 1,
                Decision::StopGroup => {
                    self.next += 1;
                    self.skip_group = true;
                }
                Decision::Last(actions) => {
                    self.next += 1;
                    self.skip_group = true;
                    return self.apply(actions);
                }
            }
        }
    }

    /// Hands actions out to be applied, noting how soon they want the tick again.
    fn apply(&mut self, actions: Vec<Action>) -> Step {
        self.found.follow_up = follow_up::soonest(self.found.follow_up, &actions);
        debug_assert!(
            self.queued.is_empty(),
            "actions handed out before the last were"
        );
        self.queued = actions.into();
        self.hand_out()
    }

    /// The queued actions up to and including the next drain: a drain that finishes has its
    /// NodeClaim deleted before the actions after it are applied.
    fn hand_out(&mut self) -> Step {
        let mut batch = Vec::new();
        while let Some(action) = self.queued.pop_front() {
            let drain = matches!(action, Action::DrainDisrupted { .. });
            batch.push(action);
            if drain {
                break;
            }
        }
        Step::Apply(batch)
    }

    /// What comes before the next phase: the NodeClaims of drains that finished, deleted, then
    /// the rest of the actions handed out.
    fn carry_on(&mut self) -> Option<Step> {
        if !self.drained.is_empty() {
            let deletions = std::mem::take(&mut self.drained)
                .into_iter()
                .map(|nodeclaim| Action::DeleteDrained { nodeclaim })
                .collect();
            return Some(Step::Apply(deletions));
        }
        (!self.queued.is_empty()).then(|| self.hand_out())
    }

    fn start_group(&mut self, group: Group) {
        self.group = Some(group);
        self.skip_group = false;
        if group == Group::Provisioning {
            self.parked = self.park();
        }
    }

    /// Ends the running group (once): its pools put back, its error noted.
    fn end_group(&mut self) -> Option<Step> {
        let group = self.group.take()?;
        let parked = std::mem::take(&mut self.parked);
        isolation::restore(&mut self.snapshot, parked);
        self.catalog = None;
        let failed = self.group_error.take().map(|e| {
            let text = e.to_string();
            self.error.get_or_insert(e);
            text
        });
        // A group that did not run still counts as done; the reporting group is not a phase.
        if group == Group::Reporting {
            return None;
        }
        Some(Step::GroupDone { group, failed })
    }

    /// The pools whose class cannot launch, taken out of the snapshot.
    fn park(&mut self) -> Vec<NodePool> {
        isolation::park_known(&mut self.snapshot, self.launchable.as_ref())
    }

    /// Takes the answer to the last read.
    fn take_input(&mut self) -> Option<Input> {
        self.input.take()
    }

    /// The catalog for this group (read once per group), or the read to ask for.
    fn catalog(&mut self) -> Result<Arc<Catalog>, Decision> {
        if let Some(c) = &self.catalog {
            return Ok(c.clone());
        }
        match self.take_input() {
            Some(Input::Catalog(c)) => {
                self.catalog = Some(c.clone());
                Ok(c)
            }
            Some(Input::Failed(e)) => {
                self.group_error.get_or_insert(e);
                Err(Decision::StopGroup)
            }
            Some(_) => Err(Decision::StopGroup),
            None => Err(Decision::Read(Need::Catalog)),
        }
    }
}

/// What one phase decided.
pub(super) enum Decision {
    Read(Need),
    Actions(Vec<Action>),
    Nothing,
    /// The rest of the group has nothing to do (a read failed).
    StopGroup,
    /// These actions, then nothing more in the group (disruption waits).
    Last(Vec<Action>),
}
