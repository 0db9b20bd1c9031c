//! Disruption commands in progress, carried forward each tick: a command waits for its
//! replacements to initialize, then its candidates are drained and deleted; one whose
//! replacement is gone or late, or whose drain has stalled, is abandoned (the taint comes off,
//! the annotation goes, and an Event says why).

use super::action::Action;
use super::claims::{has_condition, name_of as name, provider_id};
use chrono::{DateTime, Duration, Utc};
use fleetwright_core::labels::TAINT_DISRUPTED;
use fleetwright_core::scheduler::INITIALIZATION_GRACE;
use fleetwright_crds::conditions;
use fleetwright_crds::NodeClaim;
use fleetwright_kube::dump::ClusterDump;
use fleetwright_kube::objects;
use k8s_openapi::api::core::v1::{Node, Pod};
use std::collections::BTreeMap;

/// On a candidate's NodeClaim: `<reason>/<command>[/<replacement NodeClaim>[,<another>...]]`.
pub const DISRUPTION_ANNOTATION: &str = fleetwright_core::labels::DISRUPTION_COMMAND;
pub use fleetwright_core::labels::TERMINATION_TIMESTAMP;
/// The state ConfigMap key of a decision waiting for confirmation.
pub const PENDING_KEY: &str = "pendingDisruption";
/// On a candidate's NodeClaim: when its drain started (RFC 3339). Its `terminationGracePeriod`
/// counts from here; at the deadline the pods still left are deleted.
pub const DRAIN_STARTED_ANNOTATION: &str = "fleetwright.io/drain-started";
/// On a replacement's NodeClaim: the candidates' NodeClaims (comma-separated) whose command it
/// was created for. The replacement is created before the command is recorded on them (its
/// name comes from the API server), so a tick cut off in between leaves a replacement no
/// command names; this says whose it was.
pub const REPLACEMENT_FOR: &str = "fleetwright.io/replacement-for";
/// The state ConfigMap key of the nodes last reported as blocked, with their reasons, so each
/// reason is evented once and not every minute.
pub const BLOCKED_KEY: &str = "blockedDisruptions";
/// How long a decision waits before it is confirmed and carried out.
pub const CONFIRM_AFTER: Duration = Duration::seconds(15);
/// On a candidate's NodeClaim: `<pods left>@<RFC 3339>`, when the pods its drain has left last
/// changed.
pub const DRAIN_PROGRESS_ANNOTATION: &str = "fleetwright.io/drain-progress";
/// How long a replacement may take to initialize before its command is abandoned (the
/// candidates untainted), as Karpenter's orchestration gives up on a replacement.
pub const REPLACEMENT_TTL: Duration = Duration::minutes(10);
/// How long a drain may go without a pod leaving (evictions refused or failing) before its
/// command is abandoned, when no `terminationGracePeriod` will end it: a node is never left
/// cordoned for good by a disruption that cannot finish.
pub const DRAIN_STALL: Duration = Duration::minutes(10);

/// When a drain that started at `started` must end: its `terminationGracePeriod` later (None
/// when the NodeClaim has none, or an unreadable one: then the drain waits for evictions).
pub(crate) fn grace_deadline(claim: &NodeClaim, started: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let text = claim.spec.termination_grace_period.as_deref()?;
    let seconds = fleetwright_kube::convert::duration_seconds(text).ok()??;
    Some(started + Duration::seconds(seconds))
}

/// The NodeClaims of the named nodes.
pub(crate) fn claims_of<'a>(dump: &'a ClusterDump, nodes: &[String]) -> Vec<&'a NodeClaim> {
    dump.nodeclaims
        .iter()
        .filter(|c| {
            c.status
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .is_some_and(|n| nodes.iter().any(|x| x == n))
        })
        .collect()
}

/// The reason of the disruption command a NodeClaim is annotated with (`underutilized`, ...).
pub(crate) fn reason_of(claim: &NodeClaim) -> Option<&str> {
    annotation(claim).and_then(|a| a.split('/').next())
}

pub(crate) fn annotation(claim: &NodeClaim) -> Option<&str> {
    claim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DISRUPTION_ANNOTATION))
        .map(String::as_str)
}

pub(crate) fn uncordoned(node: &Node) -> Option<Node> {
    let taints = node.spec.as_ref()?.taints.as_ref()?;
    if !taints.iter().any(|t| t.key == TAINT_DISRUPTED) {
        return None;
    }
    let mut out = node.clone();
    if let Some(spec) = out.spec.as_mut() {
        spec.taints = Some(
            taints
                .iter()
                .filter(|t| t.key != TAINT_DISRUPTED)
                .cloned()
                .collect(),
        );
    }
    Some(out)
}

/// Sets (or with None removes) the command a NodeClaim carries. A drain's start, and a repair's
/// termination timestamp, belong to the command they came with, so they go whenever the command
/// changes: a later command's `terminationGracePeriod` must count from its own drain, not from
/// an abandoned one.
pub(crate) fn with_annotation(value: Option<String>) -> impl Fn(&NodeClaim) -> Option<NodeClaim> {
    move |claim: &NodeClaim| {
        let mut out = claim.clone();
        let annotations = out
            .metadata
            .annotations
            .get_or_insert_with(Default::default);
        let stale_drain = annotations.remove(DRAIN_STARTED_ANNOTATION).is_some()
            | annotations.remove(DRAIN_PROGRESS_ANNOTATION).is_some()
            | annotations.remove(TERMINATION_TIMESTAMP).is_some();
        match &value {
            Some(v) if annotations.get(DISRUPTION_ANNOTATION) != Some(v) => {
                annotations.insert(DISRUPTION_ANNOTATION.into(), v.clone());
            }
            None if annotations.contains_key(DISRUPTION_ANNOTATION) => {
                annotations.remove(DISRUPTION_ANNOTATION);
            }
            None if stale_drain => {}
            _ => return None,
        }
        Some(out)
    }
}

/// Every command in progress, one step on: wait for its replacement, abandon it if the
/// replacement is gone, or drain its candidates and delete the drained ones. `initialized`
/// names the NodeClaims this tick has just initialized.
pub fn continue_commands(
    dump: &ClusterDump,
    claims: &[NodeClaim],
    initialized: &[String],
    now: DateTime<Utc>,
) -> Vec<Action> {
    continue_commands_but(dump, claims, initialized, now, |_| false)
}

/// [`continue_commands`], leaving out the commands of the NodeClaims `theirs` picks: another
/// phase carries those on (a repair waiting for its replacements, while repair is on).
pub fn continue_commands_but(
    dump: &ClusterDump,
    claims: &[NodeClaim],
    initialized: &[String],
    now: DateTime<Utc>,
    theirs: impl Fn(&NodeClaim) -> bool,
) -> Vec<Action> {
    let mut commands: BTreeMap<&str, Vec<&NodeClaim>> = BTreeMap::new();
    for claim in claims
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none() && !theirs(c))
    {
        if let Some(value) = annotation(claim) {
            commands.entry(value).or_default().push(claim);
        }
    }
    commands
        .into_iter()
        .flat_map(|(value, in_progress)| {
            continue_command(dump, claims, value, &in_progress, initialized, now)
        })
        .collect()
}

pub(crate) fn continue_command(
    dump: &ClusterDump,
    claims: &[NodeClaim],
    value: &str,
    in_progress: &[&NodeClaim],
    initialized: &[String],
    now: DateTime<Utc>,
) -> Vec<Action> {
    let mut actions = Vec::new();
    if let Some(names) = value.split('/').nth(2) {
        let replacements: Vec<&str> = names.split(',').filter(|n| !n.is_empty()).collect();
        let found = |r: &str| {
            claims
                .iter()
                .find(|c| c.metadata.name.as_deref() == Some(r))
        };
        if replacements.iter().any(|r| found(r).is_none()) {
            let why = "the replacement is gone before it initialized";
            return vec![abandon(dump, in_progress, names, why)];
        }
        let waiting: Vec<&str> = replacements
            .iter()
            .copied()
            .filter(|r| {
                found(r).is_some_and(|c| {
                    !has_condition(c, conditions::INITIALIZED)
                        && !initialized.iter().any(|n| n == r)
                })
            })
            .collect();
        let overdue = waiting
            .iter()
            .filter_map(|r| found(r))
            .find_map(|c| replacement_overdue(c, now));
        if let Some(why) = overdue {
            return vec![abandon(dump, in_progress, names, why)];
        }
        if !waiting.is_empty() {
            actions.extend(untainted(dump, in_progress));
            actions.push(Action::AwaitReplacement {
                replacement: waiting.join(","),
            });
            return actions;
        }
    }
    let drains = drain_and_delete(dump, in_progress, now);
    if let Some(stalled) = drains.iter().find_map(stalled) {
        let why = format!("the drain of {stalled} made no progress for 10m");
        return vec![abandon(dump, in_progress, "", &why)];
    }
    actions.extend(untainted(dump, in_progress));
    actions.extend(drains);
    actions
}

/// The replacements not launched yet whose command never started: created for candidates that
/// are all still there, none of which carries a command naming them (a tick cut off between
/// creating them and recording the command, or a roll-back whose deletion failed). Each is
/// deleted before it launches, and the next decision plans afresh. A replacement whose
/// candidates are gone is ordinary capacity by then, and launches.
pub fn orphaned_replacements(claims: &[NodeClaim]) -> Vec<Action> {
    let by_name = |n: &str| {
        claims
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(n))
    };
    claims
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none() && provider_id(c).is_none())
        .filter_map(|c| {
            let name = c.metadata.name.as_deref()?;
            let candidates = c.metadata.annotations.as_ref()?.get(REPLACEMENT_FOR)?;
            let found: Vec<&NodeClaim> = (candidates.split(','))
                .filter(|n| !n.is_empty())
                .map(by_name)
                .collect::<Option<_>>()?;
            let named = |k: &&NodeClaim| {
                annotation(k)
                    .and_then(|a| a.split('/').nth(2))
                    .is_some_and(|names| names.split(',').any(|n| n == name))
            };
            (!found.is_empty() && !found.iter().any(named)).then(|| Action::DropReplacement {
                nodeclaim: name.to_string(),
                candidates: candidates.clone(),
            })
        })
        .collect()
}

/// Why a replacement that has not initialized is given up on, if it is: it registered
/// [`INITIALIZATION_GRACE`] ago (the scheduler no longer counts on it either), or it was created
/// [`REPLACEMENT_TTL`] ago.
pub(crate) fn replacement_overdue(claim: &NodeClaim, now: DateTime<Utc>) -> Option<&'static str> {
    let registered = condition_since(claim, conditions::REGISTERED);
    if registered.is_some_and(|t| (now - t).num_seconds() >= INITIALIZATION_GRACE) {
        return Some("the replacement registered and did not initialize within 5m");
    }
    created_at(claim)
        .is_some_and(|t| now - t >= REPLACEMENT_TTL)
        .then_some("the replacement did not initialize within 10m")
}

/// When a NodeClaim's condition `type_` last turned True.
pub(crate) fn condition_since(claim: &NodeClaim, type_: &str) -> Option<DateTime<Utc>> {
    let c = claim
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_ && c.status == "True")?;
    let t = DateTime::parse_from_rfc3339(c.last_transition_time.as_deref()?).ok()?;
    Some(t.with_timezone(&Utc))
}

/// When a NodeClaim was created.
pub(crate) fn created_at(claim: &NodeClaim) -> Option<DateTime<Utc>> {
    let t = claim.metadata.creation_timestamp.as_ref()?;
    DateTime::from_timestamp(t.0.as_second(), 0)
}

/// The node of a drain that has left the same pods for [`DRAIN_STALL`] and that no grace period
/// will end.
pub(crate) fn stalled(action: &Action) -> Option<&str> {
    let Action::DrainDisrupted {
        node,
        progress,
        grace_over,
        stalled_since,
        ..
    } = action
    else {
        return None;
    };
    (progress.is_none() && !grace_over && stalled_since.is_some_and(|s| s >= DRAIN_STALL))
        .then_some(node.as_str())
}

/// A [`Action::Cordon`] for each candidate whose node lacks the disrupted taint: a command is
/// recorded on the NodeClaims before their nodes are tainted, so a tick cut off between the
/// two leaves the taint to the next. (A NodeClaim deleted by hand, or by a static pool's scale
/// down, is cordoned this way before its drain, as Karpenter's termination does.)
pub(crate) fn untainted(dump: &ClusterDump, in_progress: &[&NodeClaim]) -> Vec<Action> {
    in_progress
        .iter()
        .filter_map(|c| dump.node_of(c))
        .filter(|node| {
            !node
                .spec
                .as_ref()
                .and_then(|s| s.taints.as_ref())
                .is_some_and(|t| t.iter().any(|t| t.key == TAINT_DISRUPTED))
        })
        .map(|node| Action::Cordon {
            node: node.metadata.name.clone().unwrap_or_default(),
        })
        .collect()
}

pub(crate) fn abandon(
    dump: &ClusterDump,
    in_progress: &[&NodeClaim],
    replacement: &str,
    why: &str,
) -> Action {
    Action::Abandon {
        replacement: replacement.to_string(),
        why: why.to_string(),
        candidates: in_progress
            .iter()
            .map(|c| {
                let node = dump.node_of(c).and_then(|n| n.metadata.name.clone());
                (name(c), c.metadata.uid.clone(), node)
            })
            .collect(),
    }
}

/// Drains the candidates' nodes; their NodeClaims go once nothing evictable is left (or their
/// `terminationGracePeriod` is over). A candidate with no node is deleted at once.
pub(crate) fn drain_and_delete(
    dump: &ClusterDump,
    in_progress: &[&NodeClaim],
    now: DateTime<Utc>,
) -> Vec<Action> {
    in_progress
        .iter()
        .map(|claim| {
            let Some(node) = dump.node_of(claim) else {
                return Action::DeleteNodeClaim {
                    nodeclaim: name(claim),
                };
            };
            let node_name = node.metadata.name.clone().unwrap_or_default();
            let pods: Vec<Pod> = dump
                .pods_on(&node_name)
                .into_iter()
                .filter(|p| !objects::left_by_drain(p, fleetwright_core::labels::TAINT_DISRUPTED))
                .collect();
            let recorded = drain_started(claim);
            let started = recorded.unwrap_or(now);
            let deadline = grace_deadline(claim, started);
            // A pod shutting down (it has a deletion timestamp) is on its way: only the pods
            // not yet leaving measure a drain's progress.
            let staying = pods
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .count();
            let last = drain_progress(claim);
            let changed = last.is_none_or(|(left, _)| left != staying);
            let grace_over = deadline.is_some_and(|d| now >= d);
            let (due, pods) = match grace_over {
                true => (None, pods),
                false => super::shutdown::due_before(pods, deadline, now),
            };
            let next_due = super::shutdown::next_due(&pods, deadline, now);
            let (due, due_grace) =
                due.map_or((Vec::new(), None), |d| (d.pods, Some(d.grace_seconds)));
            // Once the grace is over every pod left goes, whatever holds it.
            let (pods, held) = match grace_over {
                true => (pods, Vec::new()),
                false => super::claims::split_held(pods, now),
            };
            Action::DrainDisrupted {
                nodeclaim: name(claim),
                node: node_name,
                mark_started: recorded.is_none().then_some(now),
                grace_over,
                due,
                due_grace,
                progress: changed.then(|| progress_mark(staying, now)),
                stalled_since: match (changed, deadline) {
                    (false, None) => last.map(|(_, at)| now - at),
                    _ => None,
                },
                next_due,
                pods,
                held,
            }
        })
        .collect()
}

/// The pods a claim's drain had left when they last changed, and when.
pub(crate) fn drain_progress(claim: &NodeClaim) -> Option<(usize, DateTime<Utc>)> {
    let value = claim
        .metadata
        .annotations
        .as_ref()?
        .get(DRAIN_PROGRESS_ANNOTATION)?;
    let (left, at) = value.split_once('@')?;
    let at = DateTime::parse_from_rfc3339(at).ok()?.with_timezone(&Utc);
    Some((left.parse().ok()?, at))
}

pub(crate) fn progress_mark(left: usize, now: DateTime<Utc>) -> String {
    format!(
        "{left}@{}",
        now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    )
}

/// When the claim's drain started, if it has.
pub(crate) fn drain_started(claim: &NodeClaim) -> Option<DateTime<Utc>> {
    claim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DRAIN_STARTED_ANNOTATION))
        .and_then(|v| DateTime::parse_from_rfc3339(v).ok())
        .map(|t| t.with_timezone(&Utc))
}
