use super::super::in_progress::CONFIRM_AFTER;
use super::*;
use k8s_openapi::api::core::v1::Pod;

fn drain(progress: Option<&str>, pods: Vec<Pod>) -> Action {
    Action::DrainDisrupted {
        nodeclaim: "c1".into(),
        node: "n1".into(),
        pods,
        held: Vec::new(),
        mark_started: None,
        grace_over: false,
        due: Vec::new(),
        due_grace: None,
        progress: progress.map(str::to_string),
        stalled_since: None,
        next_due: None,
    }
}

fn leaving() -> Pod {
    let mut pod = Pod::default();
    pod.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
    ));
    pod
}

#[test]
fn a_command_in_flight_is_polled_and_the_soonest_follow_up_wins() {
    let delete = Action::DeleteNodeClaim {
        nodeclaim: "c1".into(),
    };
    assert_eq!(soonest(None, std::slice::from_ref(&delete)), Some(POLL));
    assert_eq!(soonest(Some(CONFIRM_AFTER), &[delete]), Some(POLL));
    assert_eq!(
        soonest(Some(Duration::seconds(3)), &[]),
        Some(Duration::seconds(3))
    );
}

#[test]
fn a_drain_is_followed_only_while_it_moves() {
    assert_eq!(
        after(&drain(Some("3@2026-11-26T10:00:00Z"), Vec::new())),
        Some(POLL)
    );
    assert_eq!(after(&drain(None, vec![leaving()])), Some(POLL));
    // A PodDisruptionBudget holds every pod: nothing changed, nothing is leaving.
    assert_eq!(after(&drain(None, vec![Pod::default()])), None);
}

/// A drain with a deadline that a budget holds still wakes the tick when a pod's own
/// shutdown must begin (its grace before the deadline), and at the deadline itself: a pod of
/// 120 s grace under a deadline 5 minutes away falls due in 3.
#[test]
fn a_held_drain_wakes_when_a_pod_falls_due_and_at_its_deadline() {
    use crate::tick::shutdown::next_due;
    let now = chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap();
    let deadline = now + Duration::minutes(5);
    let slow = Pod {
        spec: Some(k8s_openapi::api::core::v1::PodSpec {
            termination_grace_period_seconds: Some(120),
            ..Default::default()
        }),
        ..Default::default()
    };
    assert_eq!(
        next_due(std::slice::from_ref(&slow), Some(deadline), now),
        Some(Duration::minutes(3))
    );
    // Past its own due time (it was deleted then), the deadline is next.
    let later = now + Duration::minutes(4);
    assert_eq!(
        next_due(std::slice::from_ref(&slow), Some(deadline), later),
        Some(Duration::minutes(1))
    );
    assert_eq!(next_due(std::slice::from_ref(&slow), None, now), None);
    let evict = Action::EvictForDeletion {
        node: "n1".into(),
        nodeclaim: "c1".into(),
        pods: vec![slow],
        held: Vec::new(),
        given_up: Vec::new(),
        next_due: Some(Duration::minutes(3)),
    };
    assert_eq!(after(&evict), Some(Duration::minutes(3)));
}

#[test]
fn nothing_in_flight_waits_for_the_schedule() {
    let waits = Action::DisruptionWaits {
        pods: 1,
        creating: true,
    };
    let confirm = Action::ConfirmLater {
        command: "empty/delete:n1".into(),
        savings: 0.1,
        next: false,
    };
    assert_eq!(soonest(None, &[waits, confirm]), None);
}

/// A reboot's drain that a budget holds wakes the tick when its bound ends (the reboot goes on
/// then), not every few seconds; one waiting only for its fence or its minimum is polled.
#[test]
fn a_reboot_drain_wakes_at_its_bound() {
    use crate::tick::action::RebootStep;
    let drain = |pods: Vec<Pod>, held: Vec<Pod>, until_bound| Action::Reboot {
        nodeclaim: "c1".into(),
        node: "n1".into(),
        step: RebootStep::Drain {
            pods,
            held,
            until_bound,
        },
    };
    let bound = Some(Duration::minutes(4));
    let held = drain(vec![Pod::default()], Vec::new(), bound);
    assert_eq!(after(&held), Some(Duration::minutes(4)));
    let kept = drain(Vec::new(), vec![Pod::default()], bound);
    assert_eq!(
        after(&kept),
        Some(Duration::minutes(4)),
        "a do-not-disrupt pod left waits for the bound too"
    );
    assert_eq!(after(&drain(Vec::new(), Vec::new(), None)), Some(POLL));
}
