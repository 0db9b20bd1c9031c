//! Reboot as a repair action, as Karpenter v1.15 does it behind its `RebootForRepair` gate
//! (here [`super::repair::NodeRepair::Reboot`], `FLEETWRIGHT_REBOOT_FOR_REPAIR`): a node whose
//! only due fault is one a reboot clears (the GPU XID codes the AWS provider names) is rebooted
//! in place instead of replaced, at most twice in 24 hours; the third time it is replaced.
//!
//! The lifecycle lives on the NodeClaim, so a tick cut off anywhere leaves what the next one
//! carries on from: the condition `Rebooting` (`RebootRequested`, then `RebootIssued`, then
//! False with `RebootSucceeded` or `RebootFailed`), the drain's bound
//! (`karpenter.sh/reboot-termination-grace-period`), the boot ID before the reboot
//! (`karpenter.sh/reboot-pre-boot-id`, written before the cloud is asked, so a reboot that
//! already happened is never asked for again), and two of Fleetwright's own: when the reboot
//! was first asked for (the issuance timeout counts from it) and the recent reboots (Karpenter
//! keeps both in its process).
//!
//! Each tick, for each NodeClaim rebooting: the node is fenced (`karpenter.sh/rebooting`
//! NoSchedule) and drained through the Eviction API until its pods are gone or the bound is
//! over (at least 5 s; the pods left ride the reboot, never deleted); then the instance is
//! rebooted (this cluster's only, checked by tag); once the node reports a new boot ID the fence
//! goes, and once it is Ready the reboot succeeded. A reboot not issued within 5 minutes, a node
//! not back within 20, or a cloud that refuses, fails it: the NodeClaim is deleted and replaced,
//! its drain bounded as the reboot's was. Pure: the dump and `now` in, actions out.

use chrono::{DateTime, Duration, Utc};
use fleetwright_crds::NodeClaim;
use fleetwright_kube::dump::ClusterDump;
use k8s_openapi::api::core::v1::Node;

use super::action::Action;
pub use super::action::RebootStep;
use super::claims::{name_of, provider_id};
use fleetwright_crds::conditions;

/// The NodeClaim condition a reboot is carried on.
pub const REBOOTING: &str = conditions::REBOOTING;
pub const REQUESTED: &str = "RebootRequested";
pub const ISSUED: &str = "RebootIssued";
pub const SUCCEEDED: &str = "RebootSucceeded";
pub const FAILED: &str = "RebootFailed";
/// The `Initialized=Unknown` reason while a node reboots.
pub const INITIALIZED_REBOOTING: &str = "Rebooting";
/// On a NodeClaim: the node's boot ID before the reboot.
pub const PRE_BOOT_ID: &str = "karpenter.sh/reboot-pre-boot-id";
/// On a NodeClaim: the bound on the reboot's drain (a Go duration).
pub const GRACE: &str = "karpenter.sh/reboot-termination-grace-period";
/// On a NodeClaim: when the reboot was first asked of the cloud (RFC 3339).
pub const ISSUANCE_STARTED: &str = "fleetwright.io/reboot-issuance-started";
/// On a NodeClaim: when its recent reboots were committed (RFC 3339, comma-separated).
pub const HISTORY: &str = "fleetwright.io/reboots";
/// On a NodeClaim: the cloud is being asked to reboot its instance (RFC 3339), written before
/// the call and removed when the call fails: found on a later tick, the call may have gone
/// through, so it is not made again.
pub const ASKED: &str = "fleetwright.io/reboot-asked";

/// How long a node has to come back, Ready with a new boot ID, once its reboot is issued.
pub const OBSERVATION_WINDOW: Duration = Duration::minutes(20);
/// How long the cloud may take to accept a reboot.
pub const ISSUANCE_TIMEOUT: Duration = Duration::minutes(5);
/// A drained node waits at least this long after the request, for pods bound late.
pub const MIN_DRAIN: Duration = Duration::seconds(5);
/// Reboots within this window count towards replacement.
pub const HISTORY_WINDOW: Duration = Duration::hours(24);
/// After this many reboots within the window, the node is replaced instead.
pub const BEFORE_REPLACEMENT: usize = 2;

/// The reboot a repair commits to (see [`RebootStep::Commit`]).
pub fn commit(
    claim: &NodeClaim,
    node: String,
    nodepool: String,
    condition: String,
    grace: Duration,
    now: DateTime<Utc>,
) -> Action {
    let mut history: Vec<DateTime<Utc>> = recent_reboots(claim, now);
    history.push(now);
    let history = history
        .iter()
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .collect::<Vec<_>>()
        .join(",");
    Action::Reboot {
        nodeclaim: name_of(claim),
        node,
        step: RebootStep::Commit {
            nodepool,
            condition,
            grace_seconds: grace.num_seconds().max(0),
            history,
        },
    }
}

/// The next step of every reboot in progress.
pub fn steps(dump: &ClusterDump, claims: &[NodeClaim], now: DateTime<Utc>) -> Vec<Action> {
    claims
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .filter_map(|c| step(dump, c, now))
        .collect()
}

/// The phase of a reboot in progress (`RebootRequested` or `RebootIssued`) and when it was
/// requested (None when the condition does not say), if one is.
pub fn in_progress(claim: &NodeClaim) -> Option<(&str, Option<DateTime<Utc>>)> {
    let c = rebooting(claim).filter(|c| c.status == "True")?;
    let at = c.last_transition_time.as_deref().and_then(parse);
    Some((c.reason.as_deref().unwrap_or(REQUESTED), at))
}

/// When the NodeClaim's last reboot ended, if it did.
pub fn finished_at(claim: &NodeClaim) -> Option<DateTime<Utc>> {
    let c = rebooting(claim).filter(|c| c.status == "False")?;
    c.last_transition_time.as_deref().and_then(parse)
}

/// How many reboots were committed for the NodeClaim within the window before `now`.
pub fn recent(claim: &NodeClaim, now: DateTime<Utc>) -> usize {
    recent_reboots(claim, now).len()
}

fn recent_reboots(claim: &NodeClaim, now: DateTime<Utc>) -> Vec<DateTime<Utc>> {
    let mut out: Vec<DateTime<Utc>> = annotation(claim, HISTORY)
        .unwrap_or_default()
        .split(',')
        .filter_map(parse)
        .filter(|t| now - *t < HISTORY_WINDOW)
        .collect();
    out.sort();
    out
}

fn rebooting(claim: &NodeClaim) -> Option<&fleetwright_crds::Condition> {
    claim
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == REBOOTING)
}

fn parse(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text.trim())
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

fn annotation<'a>(claim: &'a NodeClaim, key: &str) -> Option<&'a str> {
    claim
        .metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// The drain's bound from its annotation: none means unbounded, 0 forceful (no drain).
fn grace(claim: &NodeClaim) -> Result<Option<Duration>, String> {
    let Some(text) = annotation(claim, GRACE) else {
        return Ok(None);
    };
    match fleetwright_kube::convert::duration_seconds(text) {
        Ok(Some(seconds)) if seconds >= 0 => Ok(Some(Duration::seconds(seconds))),
        _ => Err(format!("{GRACE}: {text:?} is not a non-negative duration")),
    }
}

/// When the reboot was issued: the transition of `Initialized` to Unknown that issuing it made.
fn issued_at(claim: &NodeClaim) -> Option<DateTime<Utc>> {
    claim
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == conditions::INITIALIZED && c.status == "Unknown")?
        .last_transition_time
        .as_deref()
        .and_then(parse)
}

/// The node's boot ID as its kubelet reports it.
fn boot_id(node: &Node) -> String {
    node.status
        .as_ref()
        .and_then(|s| s.node_info.as_ref())
        .map(|i| i.boot_id.clone())
        .unwrap_or_default()
}

fn ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| {
            c.iter()
                .any(|c| c.type_ == conditions::READY && c.status == "True")
        })
}

fn fenced(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| {
            t.iter()
                .any(|t| t.key == fleetwright_core::labels::TAINT_REBOOTING)
        })
}

/// The deadline of the reboot's phase, and what failing it says: 20 minutes from its issue
/// to see the node back, 5 from the first ask to have the cloud take it (from the request
/// when the node is gone before it was asked).
fn deadline(
    claim: &NodeClaim,
    phase: &str,
    requested: DateTime<Utc>,
    node: bool,
) -> Option<(DateTime<Utc>, &'static str)> {
    if phase == ISSUED {
        // Issued by a writer that did not stamp it: counted from the latest it could have been.
        let at = issued_at(claim).unwrap_or(requested + ISSUANCE_TIMEOUT);
        return Some((
            at + OBSERVATION_WINDOW,
            "node did not recover within the observation window",
        ));
    }
    let started = annotation(claim, ISSUANCE_STARTED).and_then(parse);
    let at = match (started, node) {
        (Some(at), _) => at,
        (None, false) => requested,
        (None, true) => return None,
    };
    Some((
        at + ISSUANCE_TIMEOUT,
        "reboot was not issued within the issuance timeout",
    ))
}

fn step(dump: &ClusterDump, claim: &NodeClaim, now: DateTime<Utc>) -> Option<Action> {
    let (phase, requested) = in_progress(claim)?;
    let node = dump.node_of(claim);
    let reboot = |step| Action::Reboot {
        nodeclaim: name_of(claim),
        node: node
            .and_then(|n| n.metadata.name.clone())
            .unwrap_or_default(),
        step,
    };
    let request = requested.ok_or_else(|| {
        format!("condition {REBOOTING} has no lastTransitionTime to count its deadlines from")
    });
    let (grace, requested) = match grace(claim).and_then(|g| Ok((g, request?))) {
        Ok(read) => read,
        // A request that cannot be read fails without replacing the node, as Karpenter's.
        Err(why) => {
            return Some(reboot(RebootStep::Fail {
                message: format!("invalid reboot request: {why}"),
                replace: false,
                terminate_at: None,
            }))
        }
    };
    let fail = |message: &str| {
        reboot(RebootStep::Fail {
            message: message.to_string(),
            replace: true,
            terminate_at: grace.map(|g| now + g),
        })
    };
    if let Some((at, why)) = deadline(claim, phase, requested, node.is_some()) {
        if now > at {
            return Some(fail(why));
        }
    }
    let node = node?;
    let next = match phase {
        ISSUED => issued(claim, node),
        _ => requested_step(dump, claim, node, grace, requested, now),
    };
    next.map(|step| match step {
        RebootStep::Fail { message, .. } => fail(&message),
        step => reboot(step),
    })
}

/// A requested reboot: drained (unless its bound is 0), then issued. A boot ID recorded before
/// means the cloud was asked already: the node that booted since is not rebooted again.
fn requested_step(
    dump: &ClusterDump,
    claim: &NodeClaim,
    node: &Node,
    grace: Option<Duration>,
    requested: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Option<RebootStep> {
    let boot = boot_id(node);
    let instance = provider_id(claim)
        .and_then(|p| p.rsplit('/').next())
        .filter(|id| id.starts_with("i-"))
        .map(str::to_string);
    let grace_seconds = grace.map(|g| g.num_seconds());
    let issue = |instance_id, boot_id| RebootStep::Issue {
        instance_id,
        boot_id,
        grace_seconds,
    };
    if let Some(pre) = annotation(claim, PRE_BOOT_ID) {
        // Asked already, and not known to have failed, or booted since: only the condition
        // moves on.
        let again = boot == pre && annotation(claim, ASKED).is_none();
        return Some(match (again, instance) {
            (false, _) => issue(None, pre.to_string()),
            (true, Some(id)) => issue(Some(id), pre.to_string()),
            (true, None) => no_instance(),
        });
    }
    // Fenced first, whatever the bound: nothing new may land on it.
    if !fenced(node) {
        return Some(RebootStep::Drain {
            pods: Vec::new(),
            held: Vec::new(),
            until_bound: None,
        });
    }
    if grace != Some(Duration::zero()) {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let fence = fleetwright_core::labels::TAINT_REBOOTING;
        let pods = super::claims::pods_to_move_behind(dump, name, fence, now);
        let bound = grace.map(|g| requested + g.max(MIN_DRAIN));
        let draining = !pods.is_empty() && bound.is_none_or(|b| now < b);
        if draining || now < requested + MIN_DRAIN {
            let (pods, held) = match draining {
                true => super::claims::split_held(pods, now),
                false => Default::default(),
            };
            return Some(RebootStep::Drain {
                pods,
                held,
                until_bound: bound.filter(|_| draining).map(|b| b - now),
            });
        }
    }
    Some(match instance {
        Some(id) => issue(Some(id), boot),
        None => no_instance(),
    })
}

fn no_instance() -> RebootStep {
    RebootStep::Fail {
        message: "the NodeClaim names no instance to reboot".into(),
        replace: true,
        terminate_at: None,
    }
}

/// An issued reboot: once the node reports a new boot ID its fence goes, and once it is also
/// Ready the reboot succeeded.
fn issued(claim: &NodeClaim, node: &Node) -> Option<RebootStep> {
    let pre = annotation(claim, PRE_BOOT_ID).unwrap_or_default();
    if boot_id(node) == pre {
        return None;
    }
    let ready = ready(node);
    (ready || fenced(node)).then_some(RebootStep::Observed { ready })
}

#[cfg(test)]
#[path = "../../tests/unit/tick/reboot.rs"]
mod tests;
