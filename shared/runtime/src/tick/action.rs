//! What a tick does, as data: every step of the tick decides a list of [`Action`]s (purely, in
//! [`super::decide`] and [`super::disruption`]), and one executor ([`super::execute`]) applies
//! them in order. A dry run returns them unapplied, and `fleetwright plan --actions` prints them
//! for a cluster dump. Actions carry what their effect and its log line need, and serialize to
//! what a person reading a plan wants to see (names, not whole objects).

use chrono::{DateTime, Utc};
use fleetwright_crds::NodeClaim;
use k8s_openapi::api::core::v1::Pod;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

use super::disrupted::Disrupted;

/// One effect of a tick, decided before anything is applied.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "action", rename_all = "camelCase")]
pub enum Action {
    /// Create a NodeClaim for a node the plan needs (`replacement` for a disruption's).
    #[serde(rename_all = "camelCase")]
    CreateNodeClaim {
        nodepool: String,
        requests: Value,
        instance_types: Vec<String>,
        #[serde(skip)]
        claim: Box<NodeClaim>,
    },
    /// Launch the instance of a NodeClaim that has none (new, or an interrupted launch); a
    /// failed launch deletes the NodeClaim, so the next plan tries elsewhere.
    #[serde(rename_all = "camelCase")]
    Launch {
        nodeclaim: String,
        /// What its requirements allow it to launch as, as they list it; empty: any.
        instance_types: Vec<String>,
        zones: Vec<String>,
        capacity_types: Vec<String>,
        #[serde(skip)]
        claim: Box<NodeClaim>,
    },
    /// Sync a joined node with its NodeClaim (labels, taints, finalizer) and record it.
    #[serde(rename_all = "camelCase")]
    Register {
        nodeclaim: String,
        node: String,
        provider_id: String,
        #[serde(skip)]
        claim: Box<NodeClaim>,
    },
    /// Write the current hash version (and, unless the NodeClaim had drifted, the current hash)
    /// of its NodePool and EC2NodeClass onto a NodeClaim whose hashes another version wrote: from
    /// then on a change of either is drift, and the change of version itself is not.
    Restamp {
        nodeclaim: String,
        annotations: std::collections::BTreeMap<String, String>,
    },
    /// Label a NodeClaim launched into a partition placement group, without a partition of its
    /// own, with the partition EC2 placed its instance in (Karpenter's placement-group
    /// registration hook): its node registers only then, so spreads over partitions count it.
    LabelPartition {
        nodeclaim: String,
        partition: String,
    },
    /// Set a NodeClaim's `Drifted` condition to the reason it has drifted, or clear it (None):
    /// what `kubectl describe nodeclaim` shows, as with Karpenter.
    MarkDrifted {
        nodeclaim: String,
        reason: Option<String>,
    },
    /// Delete a NodeClaim of a static NodePool above its replicas (the deletion step then
    /// drains its node, respecting PodDisruptionBudgets, and terminates its instance).
    ScaleDown { nodepool: String, nodeclaim: String },
    /// A static NodePool that cannot reach its replicas, and why (logged every tick).
    ShortOfReplicas { nodepool: String, reason: String },
    /// Repair an unhealthy node: annotate its NodeClaim `unhealthy` (with its termination
    /// timestamp `terminate_at`, when its drain's grace is over and the pods still on the node
    /// are deleted) and delete it; the deletion step drains it and a later plan replaces it.
    #[serde(rename_all = "camelCase")]
    Repair {
        nodeclaim: String,
        node: String,
        nodepool: String,
        /// The condition that was unhealthy past its toleration (`Ready=Unknown`).
        condition: String,
        /// The repair policy's bound on the drain (now: forceful, the pods deleted at once);
        /// none leaves it to the NodeClaim's `terminationGracePeriod`.
        terminate_at: Option<DateTime<Utc>>,
        /// What the disruption metrics say of it.
        #[serde(skip)]
        disrupted: Disrupted,
    },
    /// A step of a reboot for repair (see [`super::reboot`]).
    Reboot {
        nodeclaim: String,
        node: String,
        #[serde(flatten)]
        step: RebootStep,
    },
    /// Delete a NodeClaim that outlived its `expireAfter` (forceful: no budget, no replacement
    /// first).
    #[serde(rename_all = "camelCase")]
    Expire {
        nodeclaim: String,
        node: Option<String>,
        expired_at: DateTime<Utc>,
        /// What the disruption metrics say of it.
        #[serde(skip)]
        disrupted: Disrupted,
    },
    /// Delete a NodeClaim whose capacity block is expiring (40 minutes before its end), so its
    /// node is drained before AWS reclaims the instance.
    ReservationExpiring {
        nodeclaim: String,
        reservation: String,
        ends: Option<DateTime<Utc>>,
    },
    /// Write an EC2NodeClass's status: what it resolved to this tick, and its conditions.
    NodeClassStatus {
        nodeclass: String,
        #[serde(skip)]
        status: Box<fleetwright_crds::EC2NodeClassStatus>,
    },
    /// An unhealthy node left alone: more of its pool than repair allows is unhealthy.
    RepairBlocked {
        node: String,
        nodepool: String,
        unhealthy: usize,
        nodes: usize,
        /// Whether to say so now: every five minutes, as Karpenter requeues a blocked repair,
        /// not every tick.
        #[serde(skip)]
        said: bool,
    },
    /// Mark a registered NodeClaim Initialized: its node is Ready and free of startup taints.
    Initialize { nodeclaim: String, node: String },
    /// Give up a NodeClaim whose instance never registered: terminate it, delete the claim.
    #[serde(rename_all = "camelCase")]
    GiveUp {
        nodeclaim: String,
        instance_id: Option<String>,
    },
    /// Evict the pods still on a deleting NodeClaim's node (the instance waits for them).
    #[serde(rename_all = "camelCase")]
    EvictForDeletion {
        node: String,
        /// The deleting NodeClaim, which records since when evictions have been failing.
        nodeclaim: String,
        #[serde(serialize_with = "pod_keys")]
        pods: Vec<Pod>,
        /// The pods `karpenter.sh/do-not-disrupt` holds: never evicted, the instance waits for
        /// them until the NodeClaim's `terminationGracePeriod` is over.
        #[serde(serialize_with = "pod_keys", skip_serializing_if = "Vec::is_empty")]
        held: Vec<Pod>,
        /// Of `pods`, those whose evictions have failed with errors (not a PDB's 429) for
        /// [`super::finish::EVICTION_FAILING`]: deleted with their own grace when their eviction
        /// fails so again in this pass.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        given_up: Vec<String>,
        /// How soon a pod's own shutdown must begin, or the drain's deadline comes.
        #[serde(skip)]
        next_due: Option<chrono::Duration>,
    },
    /// Delete pods on a draining node without the Eviction API: those still there when its
    /// `terminationGracePeriod` is over (`grace_seconds` None: each with its own grace), or,
    /// before then, those whose own grace would run past the node's deadline (`grace_seconds`
    /// the time left).
    #[serde(rename_all = "camelCase")]
    DeletePods {
        node: String,
        #[serde(serialize_with = "pod_keys")]
        pods: Vec<Pod>,
        grace_seconds: Option<i64>,
    },
    /// Terminate a deleting NodeClaim's instance, then let the NodeClaim and its node go.
    #[serde(rename_all = "camelCase")]
    FinishDeletion {
        nodeclaim: String,
        instance_id: Option<String>,
        node: Option<String>,
        /// Why it is deleted: the disruption reason it was annotated with (`underutilized`,
        /// `empty`, `drifted`, `expired`), else `deleted` (by the interruption function, or by
        /// hand). The terminated-NodeClaims metric is broken down by it.
        reason: String,
    },
    /// Delete a NodeClaim (and its node) whose instance is gone: nothing to terminate.
    #[serde(rename_all = "camelCase")]
    ForgetNodeClaim {
        nodeclaim: String,
        instance_id: String,
        node: Option<String>,
    },
    /// Terminate an owned instance that no NodeClaim accounts for.
    #[serde(rename_all = "camelCase")]
    CollectGarbage {
        instance_id: String,
        nodeclaim: Option<String>,
    },
    /// Persist the unavailable offerings (in the state ConfigMap) for the next cold start.
    SaveUnavailable {
        offerings: fleetwright_cloud::unavailable::UnavailableOfferings,
    },
    /// Write a NodePool's `status.nodes` and `status.resources` (what `kubectl get nodepools`
    /// and the scale subresource read), when they no longer say what it holds.
    PoolStatus {
        nodepool: String,
        nodes: i64,
        resources: std::collections::BTreeMap<String, String>,
        #[serde(skip)]
        conditions: Vec<fleetwright_crds::Condition>,
    },
    /// Record on NodeClaims the pods their nodes hold now, and their last pod event (what
    /// `consolidateAfter` counts from): a pod that goes between two reads is then still seen
    /// to have gone.
    PodRecords { records: Vec<PodRecord> },
    /// A disruption candidate left alone, and why (logged every tick, at info when it changed).
    Blocked {
        node: String,
        reason: String,
        /// Whether the reason is new since the last tick (logged at info, else at debug).
        changed: bool,
    },
    /// A consolidation move of a `Balanced` pool, scored (Karpenter's
    /// `karpenter_consolidation_score` and `karpenter_consolidation_moves_total`).
    Scored {
        nodepool: String,
        nodes: Vec<String>,
        score: f64,
        approved: bool,
    },

    /// A Normal Event on a node.
    NodeEvent {
        node: String,
        #[serde(skip)]
        uid: Option<String>,
        reason: String,
        message: String,
    },
    /// Remember the blocked nodes and reasons already evented.
    #[serde(rename_all = "camelCase")]
    SaveBlocked {
        blocked: std::collections::BTreeMap<String, String>,
    },
    /// Remember the disruption decided (or none), to confirm it on a later tick.
    SavePending { pending: Vec<PendingDisruption> },
    /// A disruption decided now and confirmed on a later tick (`next`: decided while another
    /// starts).
    ConfirmLater {
        command: String,
        savings: f64,
        next: bool,
    },
    /// A confirmed disruption is carried out (this is its log line).
    Disrupting {
        command: &'static str,
        reason: &'static str,
        savings: f64,
        /// Each replacement's instance type options (none for a delete).
        replacements: Vec<Vec<String>>,
        nodes: Vec<String>,
    },
    /// Start a command: create its replacements (if any), then taint the candidates
    /// `karpenter.sh/disrupted:NoSchedule` and annotate their NodeClaims with the command.
    #[serde(rename_all = "camelCase")]
    StartDisruption {
        /// `<reason>/<command>`; the replacements' names are appended (`/a,b`) once created.
        command: String,
        /// A [`Action::CreateNodeClaim`] for each replacement.
        replacements: Vec<Action>,
        /// `(node, its NodeClaim)`.
        candidates: Vec<(String, String)>,
        /// What the disruption metrics say of each candidate.
        #[serde(skip)]
        disrupted: Vec<Disrupted>,
    },
    /// Taint a command's candidate `karpenter.sh/disrupted:NoSchedule` (again: a tick cut off
    /// between annotating a NodeClaim and tainting its node left it untainted).
    Cordon { node: String },
    /// Disruption waits this tick: pods are pending for capacity this tick provisions (`pods`
    /// of them), or NodeClaims were created for them; nothing is disrupted while they wait.
    DisruptionWaits { pods: usize, creating: bool },
    /// A decision that waited for confirmation no longer holds (why), and is not carried out.
    Invalidated { command: String, reason: String },
    /// A command in progress waits for its replacements to initialize (`a,b`: those not yet).
    AwaitReplacement { replacement: String },
    /// A replacement is gone before it initialized: untaint the candidates, drop the
    /// annotation, and say why in an Event on each NodeClaim.
    Abandon {
        replacement: String,
        /// Why: the replacement is gone, did not initialize in time, or the drain stalled.
        why: String,
        /// `(NodeClaim, its uid, its node)`.
        candidates: Vec<(String, Option<String>, Option<String>)>,
    },
    /// An object the tick could not read or convert, left out of the tick: a warning, and a
    /// Warning Event when `event` (its error is new).
    Rejected {
        object: fleetwright_kube::convert::Rejected,
        event: bool,
    },
    /// Record which rejected objects were evented, with their errors.
    SaveRejected {
        said: std::collections::BTreeMap<String, String>,
    },
    /// A Node deleted by hand (or by anything else) whose NodeClaim is not being deleted:
    /// delete the NodeClaim, so the node is drained and its instance terminated as Karpenter's
    /// termination does.
    NodeDeleted { node: String, nodeclaim: String },
    /// A Node being deleted that no NodeClaim accounts for: take its termination finalizer
    /// off, so it goes.
    ReleaseNode { node: String },
    /// A candidate of a command with no node left: delete its NodeClaim.
    DeleteNodeClaim { nodeclaim: String },
    /// A repair of a `Ready` node gave up on replacements that did not initialize: record it
    /// (`fleetwright.io/repair-failed`), so the next repair waits its backoff.
    RecordRepairFailure { nodeclaim: String, mark: String },
    /// A replacement not launched yet whose command never started (no candidate names it):
    /// delete it before it launches.
    DropReplacement {
        nodeclaim: String,
        candidates: String,
    },
    /// A candidate whose drain finished: delete its NodeClaim (the node is disrupted).
    DeleteDrained { nodeclaim: String },
    /// Drain a candidate's node; its drain finishes once nothing evictable is left, or when its
    /// `terminationGracePeriod` is over (`grace_over`; the pods left are deleted then).
    #[serde(rename_all = "camelCase")]
    DrainDisrupted {
        nodeclaim: String,
        node: String,
        /// The pods to evict; a PodDisruptionBudget may still refuse some.
        #[serde(serialize_with = "pod_keys")]
        pods: Vec<Pod>,
        /// The pods `karpenter.sh/do-not-disrupt` holds: never evicted, the drain waits for
        /// them until its `terminationGracePeriod` is over.
        #[serde(serialize_with = "pod_keys", skip_serializing_if = "Vec::is_empty")]
        held: Vec<Pod>,
        /// Set when the drain starts now: the time to record on the NodeClaim.
        mark_started: Option<DateTime<Utc>>,
        grace_over: bool,
        /// Pods whose own grace would run past the drain's deadline: deleted now, with the
        /// time left (`due_grace` seconds), instead of evicted.
        #[serde(serialize_with = "pod_keys")]
        due: Vec<Pod>,
        due_grace: Option<i64>,
        /// Set when the pods left changed since the last pass: the progress mark to record
        /// (`<pods left>@<RFC 3339>`), from which a stalled drain is told.
        progress: Option<String>,
        /// How long the pods left have not changed, when no grace period bounds the drain.
        #[serde(skip)]
        stalled_since: Option<chrono::Duration>,
        /// How soon a pod's own shutdown must begin, or the drain's deadline comes.
        #[serde(skip)]
        next_due: Option<chrono::Duration>,
    },
}

/// One step of a reboot, on the NodeClaim and node of its [`Action::Reboot`] (see [`super::reboot`]).
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "step", rename_all = "camelCase")]
pub enum RebootStep {
    /// Commit the reboot: `Rebooting=True` (`RebootRequested`), its drain's bound and the
    /// reboot history on the NodeClaim, and the fence on the node.
    #[serde(rename_all = "camelCase")]
    Commit {
        nodepool: String,
        /// The condition that was unhealthy past its toleration.
        condition: String,
        grace_seconds: i64,
        history: String,
    },
    /// Fence the node and evict these pods (PodDisruptionBudgets may refuse some).
    Drain {
        #[serde(serialize_with = "pod_keys")]
        pods: Vec<Pod>,
        /// The pods `karpenter.sh/do-not-disrupt` holds: never evicted, they ride the reboot
        /// once its bound is over.
        #[serde(serialize_with = "pod_keys", skip_serializing_if = "Vec::is_empty")]
        held: Vec<Pod>,
        /// How long until the drain's bound ends (the pods left then ride the reboot).
        #[serde(skip)]
        until_bound: Option<chrono::Duration>,
    },
    /// Record `boot_id` and that the cloud is being asked, ask it to reboot `instance_id`
    /// (None: it was asked before, or the node has already booted again, so only the condition
    /// moves on: an instance is never rebooted twice for one request), and mark the NodeClaim
    /// `RebootIssued` and not initialized.
    #[serde(rename_all = "camelCase")]
    Issue {
        instance_id: Option<String>,
        boot_id: String,
        /// The drain's bound, should the cloud refuse and the node be replaced instead.
        grace_seconds: Option<i64>,
    },
    /// The node is back with a new boot: the fence goes; once `ready`, the reboot succeeded.
    Observed { ready: bool },
    /// The reboot failed: `Rebooting=False` (`RebootFailed`, `message`), the fence gone and,
    /// when `replace`, the NodeClaim deleted (its drain over at `terminate_at`).
    #[serde(rename_all = "camelCase")]
    Fail {
        message: String,
        replace: bool,
        terminate_at: Option<DateTime<Utc>>,
    },
}

/// A disruption decision waiting for confirmation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingDisruption {
    /// What the command is: `<reason>/<command>:<nodes>`.
    pub key: String,
    pub decided_at: DateTime<Utc>,
}

/// How a failed action is handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnFailure {
    /// Reported; everything else goes on.
    Independent,
    /// A step that relies on the ones before it on the same objects (a drain on the cordon
    /// before it, a deletion on the drain, an initialization on the registration): after a
    /// failure on its objects this tick, it waits for the next tick. Nothing else waits.
    Ordered,
}

impl Action {
    /// How this action's failure, or a failure before it on its objects, is handled.
    pub fn on_failure(&self) -> OnFailure {
        match self {
            Action::Initialize { .. }
            | Action::DrainDisrupted { .. }
            | Action::EvictForDeletion { .. }
            | Action::DeletePods { .. }
            | Action::FinishDeletion { .. }
            | Action::DeleteNodeClaim { .. } => OnFailure::Ordered,
            // It exists only because its drain finished: a failure of that drain's other
            // steps (deleting pods whose grace runs past the deadline) does not hold it.
            Action::DeleteDrained { .. } => OnFailure::Independent,
            _ => OnFailure::Independent,
        }
    }

    /// The NodeClaim or instance this action terminates, if it terminates one (a failure is
    /// counted as a failed termination, retried by a later tick).
    pub fn terminates(&self) -> Option<String> {
        match self {
            Action::GiveUp { nodeclaim, .. } | Action::FinishDeletion { nodeclaim, .. } => {
                Some(nodeclaim.clone())
            }
            Action::CollectGarbage { instance_id, .. } => Some(instance_id.clone()),
            _ => None,
        }
    }
}

fn pod_keys<S: Serializer>(pods: &[Pod], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(pods.iter().map(fleetwright_kube::interruption::pod_key))
}

fn claim(name: &str) -> String {
    format!("NodeClaim {name}")
}

fn node(name: &str) -> String {
    format!("Node {name}")
}

/// The NodeClaims and Nodes an action writes (`NodeClaim <name>`, `Node <name>`): when it fails,
/// the later steps on the same objects wait for the next tick, and nothing else does.
pub fn objects_of(action: &Action) -> Vec<String> {
    match action {
        Action::Launch { nodeclaim, .. }
        | Action::Restamp { nodeclaim, .. }
        | Action::LabelPartition { nodeclaim, .. }
        | Action::MarkDrifted { nodeclaim, .. }
        | Action::ScaleDown { nodeclaim, .. }
        | Action::ReservationExpiring { nodeclaim, .. }
        | Action::GiveUp { nodeclaim, .. }
        | Action::DeleteNodeClaim { nodeclaim }
        | Action::DropReplacement { nodeclaim, .. }
        | Action::RecordRepairFailure { nodeclaim, .. }
        | Action::DeleteDrained { nodeclaim } => vec![claim(nodeclaim)],
        Action::Register {
            nodeclaim, node: n, ..
        }
        | Action::Repair {
            nodeclaim, node: n, ..
        }
        | Action::Reboot {
            nodeclaim, node: n, ..
        }
        | Action::Initialize { nodeclaim, node: n }
        | Action::DrainDisrupted {
            nodeclaim, node: n, ..
        } => vec![claim(nodeclaim), node(n)],
        Action::FinishDeletion {
            nodeclaim, node: n, ..
        }
        | Action::Expire {
            nodeclaim, node: n, ..
        }
        | Action::ForgetNodeClaim {
            nodeclaim, node: n, ..
        } => std::iter::once(claim(nodeclaim))
            .chain(n.as_deref().map(node))
            .collect(),
        Action::EvictForDeletion { node: n, .. }
        | Action::ReleaseNode { node: n }
        | Action::DeletePods { node: n, .. }
        | Action::Cordon { node: n } => vec![node(n)],
        Action::StartDisruption { candidates, .. } => candidates
            .iter()
            .flat_map(|(n, c)| [node(n), claim(c)])
            .collect(),
        Action::Abandon { candidates, .. } => candidates
            .iter()
            .flat_map(|(c, _, n)| std::iter::once(claim(c)).chain(n.as_deref().map(node)))
            .collect(),
        Action::NodeDeleted {
            node: n, nodeclaim, ..
        } => vec![claim(nodeclaim), node(n)],
        Action::CreateNodeClaim { .. }
        | Action::Rejected { .. }
        | Action::SaveRejected { .. }
        | Action::ShortOfReplicas { .. }
        | Action::NodeClassStatus { .. }
        | Action::RepairBlocked { .. }
        | Action::CollectGarbage { .. }
        | Action::SaveUnavailable { .. }
        | Action::PoolStatus { .. }
        | Action::PodRecords { .. }
        | Action::Blocked { .. }
        | Action::Scored { .. }
        | Action::NodeEvent { .. }
        | Action::SaveBlocked { .. }
        | Action::SavePending { .. }
        | Action::ConfirmLater { .. }
        | Action::Disrupting { .. }
        | Action::Invalidated { .. }
        | Action::DisruptionWaits { .. }
        | Action::AwaitReplacement { .. } => Vec::new(),
    }
}

/// The action's name as it serializes (`createNodeClaim`, ...), for a failure's report.
pub fn action_name(action: &Action) -> String {
    serde_json::to_value(action)
        .ok()
        .and_then(|v| v.get("action").and_then(|a| a.as_str()).map(str::to_string))
        .unwrap_or_default()
}

/// One NodeClaim's record of its node's pods.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodRecord {
    pub nodeclaim: String,
    /// The record, as its annotation holds it.
    pub record: String,
    /// The last pod event, also written as `status.lastPodEventTime` (what Karpenter's users
    /// read there).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_pod_event: Option<DateTime<Utc>>,
}
