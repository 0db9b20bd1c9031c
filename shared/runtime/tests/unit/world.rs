use super::*;

#[test]
fn the_latest_ticks_follow_up_is_delivered_once_when_its_delay_is_up() {
    let mut follow_ups = FollowUps::default();
    let asking = |after| TickSummary {
        follow_up_seconds: Some(after),
        ..Default::default()
    };
    follow_ups.note(&asking(15), 60);
    follow_ups.note(&asking(10), 62);
    assert!(!follow_ups.due(71));
    assert!(follow_ups.due(72));
    assert!(!follow_ups.due(75));
    // A later tick that asks for nothing supersedes the earlier one's follow-up.
    follow_ups.note(&asking(15), 80);
    follow_ups.note(&TickSummary::default(), 81);
    assert!(!follow_ups.due(95));
    // A tick that was skipped leaves it.
    follow_ups.note(&asking(15), 100);
    let skipped = TickSummary {
        skipped: Some("another tick holds the lease".into()),
        ..Default::default()
    };
    follow_ups.note(&skipped, 101);
    assert!(follow_ups.due(115));
}

#[test]
fn the_cadence_keeps_each_schedule_slot_once_and_answers_nudges_a_second_later() {
    let mut cadence = Cadence::new(60);
    assert!(cadence.due(0));
    assert!(!cadence.due(1));
    // A nudge at 30 starts a tick at 31; the next slot's tick still comes at 60.
    cadence.nudge(30);
    assert!(!cadence.due(30));
    assert!(cadence.due(31));
    cadence.ran(31, 31, None);
    assert!(!cadence.due(32));
    // A nudge that came before the tick at 60 still has its own tick at 61.
    cadence.nudge(60);
    assert!(cadence.due(60));
    assert!(cadence.due(61));
    // Seconds skipped on a wall clock: the slot from 120 is kept at 125, once.
    assert!(!cadence.due(119));
    assert!(cadence.due(125));
    assert!(!cadence.due(130));
    // A slow tick from 178 to 181 held the slot from 180.
    cadence.nudge(177);
    assert!(cadence.due(178));
    cadence.ran(178, 181, None);
    assert!(!cadence.due(182));
    assert!(cadence.due(240));
}

#[test]
fn the_cadence_delivers_the_latest_ticks_follow_up() {
    let mut cadence = Cadence::new(60);
    assert!(cadence.due(0));
    cadence.ran(
        0,
        0,
        Some(&TickSummary {
            follow_up_seconds: Some(10),
            ..Default::default()
        }),
    );
    assert!(!cadence.due(9));
    assert!(cadence.due(10));
    cadence.ran(10, 10, Some(&TickSummary::default()));
    assert!(!cadence.due(20));
}
