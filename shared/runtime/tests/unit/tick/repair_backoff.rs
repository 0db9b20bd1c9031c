use super::*;

fn at(text: &str) -> DateTime<Utc> {
    text.parse().unwrap()
}

fn marked(mark: &str) -> NodeClaim {
    let mut claim = NodeClaim::new("c", Default::default());
    (claim.metadata.annotations.get_or_insert_default()).insert(REPAIR_FAILED.into(), mark.into());
    claim
}

#[test]
fn the_backoff_doubles_from_ten_minutes_to_two_hours() {
    let minutes: Vec<i64> = (1..=7).map(|n| backoff(n).num_minutes()).collect();
    assert_eq!(minutes, [10, 20, 40, 80, 120, 120, 120]);
}

/// A failure is counted once however often its abandon is retried, a later one counts on, and
/// a mark from the future or a day old holds nothing.
#[test]
fn each_failure_is_counted_once_and_odd_marks_hold_nothing() {
    let claim = marked("2@2026-11-25T12:00:00Z");
    assert_eq!(next_mark(&claim, at("2026-11-25T12:13:00Z")), None);
    assert_eq!(
        next_mark(&claim, at("2026-11-25T12:30:00Z")).as_deref(),
        Some("3@2026-11-25T12:30:00Z")
    );
    assert!(waits(&claim, at("2026-11-25T12:19:00Z")).is_some());
    assert!(waits(&claim, at("2026-11-25T12:21:00Z")).is_none());
    let future = marked("5@2026-11-25T13:00:00Z");
    assert!(waits(&future, at("2026-11-25T12:00:00Z")).is_none());
    let old = marked("5@2026-11-24T11:00:00Z");
    assert!(waits(&old, at("2026-11-25T12:00:00Z")).is_none());
    assert_eq!(
        next_mark(&old, at("2026-11-25T12:00:00Z")).as_deref(),
        Some("1@2026-11-25T12:00:00Z")
    );
    assert!(waits(&marked("garbage"), at("2026-11-25T12:00:00Z")).is_none());
}
