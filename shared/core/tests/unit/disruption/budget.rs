use super::*;

/// (nodes, schedule, duration, reasons)
type Row<'a> = (&'a str, Option<&'a str>, Option<i64>, &'a [&'a str]);

fn pool(budgets: &[Row]) -> NodePool {
    NodePool {
        name: "default".into(),
        budgets: budgets
            .iter()
            .map(|(nodes, schedule, duration, reasons)| Budget {
                nodes: nodes.to_string(),
                schedule: schedule.map(str::to_string),
                duration: *duration,
                reasons: reasons.iter().map(|r| r.to_string()).collect(),
            })
            .collect(),
        ..Default::default()
    }
}

/// 2026-11-23T10:30:00Z, a Monday.
const MONDAY_1030: i64 = 1_795_429_800;

#[test]
fn percentages_round_up_and_counts_are_counts() {
    for (budget, total, expected) in [
        ("30%", 10, 3),
        ("0%", 10, 0),
        ("100%", 10, 10),
        ("10%", 5, 1),
        ("3", 10, 3),
    ] {
        let p = pool(&[(budget, None, None, &[])]);
        assert_eq!(
            allowed(&p, Reason::Empty, total, 0, 0),
            expected,
            "{budget} of {total}"
        );
    }
    assert_eq!(
        allowed(&pool(&[]), Reason::Empty, 25, 0, 0),
        3,
        "the default is 10%"
    );
}

#[test]
fn the_strictest_matching_budget_wins_and_disrupting_nodes_count() {
    let p = pool(&[("50%", None, None, &[]), ("1", None, None, &["Drifted"])]);
    assert_eq!(allowed(&p, Reason::Drifted, 10, 0, 0), 1);
    assert_eq!(allowed(&p, Reason::Empty, 10, 0, 0), 5);
    assert_eq!(allowed(&p, Reason::Empty, 10, 4, 0), 1);
    assert_eq!(allowed(&p, Reason::Empty, 10, 7, 0), 0);
}

#[test]
fn invalid_budgets_allow_nothing() {
    for bad in ["ten", "150%", "-1"] {
        assert_eq!(
            allowed(&pool(&[(bad, None, None, &[])]), Reason::Empty, 10, 0, 0),
            0,
            "{bad}"
        );
    }
    let bad_cron = pool(&[("100%", Some("every day"), Some(3600), &[])]);
    assert_eq!(allowed(&bad_cron, Reason::Empty, 10, 0, 0), 0);
}

#[test]
fn scheduled_budgets_apply_only_in_their_window() {
    // No disruption on weekdays 09:00–17:00 UTC.
    let named = pool(&[
        ("0", Some("0 9 * * MON-FRI"), Some(8 * 3600), &[]),
        ("100%", None, None, &[]),
    ]);
    assert_eq!(
        allowed(&named, Reason::Empty, 10, 0, MONDAY_1030),
        0,
        "inside the window"
    );
    let p = pool(&[
        ("0", Some("0 9 * * 1-5"), Some(8 * 3600), &[]),
        ("100%", None, None, &[]),
    ]);
    assert_eq!(
        allowed(&p, Reason::Empty, 10, 0, MONDAY_1030),
        0,
        "inside the window"
    );
    assert_eq!(
        allowed(&p, Reason::Empty, 10, 0, MONDAY_1030 + 7 * 3600),
        10,
        "after 17:00"
    );
    assert_eq!(
        allowed(&p, Reason::Empty, 10, 0, MONDAY_1030 - 2 * 3600),
        10,
        "before 09:00"
    );
    assert_eq!(
        allowed(&p, Reason::Empty, 10, 0, MONDAY_1030 - 2 * 86_400),
        10,
        "on Saturday"
    );
}

#[test]
fn cron_fields_and_macros() {
    let daily = Cron::parse("@daily").unwrap();
    assert!(daily.matches(MONDAY_1030 - 10 * 3600 - 30 * 60));
    assert!(!daily.matches(MONDAY_1030));
    let every_15 = Cron::parse("*/15 * * * *").unwrap();
    assert!(every_15.matches(MONDAY_1030) && !every_15.matches(MONDAY_1030 + 60));
    let sunday = Cron::parse("0 0 * * 0").unwrap();
    assert!(sunday.matches(MONDAY_1030 - 10 * 3600 - 30 * 60 - 86_400));
    // Karpenter's parser (robfig/cron) reads a week's days 0–6: a 7 fails its parse, so the
    // budget fails closed there, and here too.
    assert!(Cron::parse("0 0 * * 7").is_none());
    assert!(Cron::parse("0 0 * * sun").is_some());
    assert_eq!(civil_from_days(MONDAY_1030 / 86_400), (2026, 11, 23));
    for bad in ["* * * *", "60 * * * *", "*/0 * * * *", "5-1 * * * *"] {
        assert!(Cron::parse(bad).is_none(), "{bad}");
    }
}

/// One budget that does not read stops every reason of its pool, whatever reasons it names, as
/// Karpenter's `MustGetAllowedDisruptions` answers 0 on any budget's error; without it the
/// others apply as written.
#[test]
fn one_unreadable_budget_stops_every_reason_of_its_pool() {
    let weekend: Row = ("0", Some("0 0 * * 6,7"), Some(48 * 3600), &["Drifted"]);
    let open: Row = ("10%", None, None, &[]);
    let p = pool(&[open, weekend]);
    for reason in [Reason::Empty, Reason::Underutilized, Reason::Drifted] {
        assert_eq!(allowed(&p, reason, 20, 0, MONDAY_1030), 0, "{reason:?}");
    }
    let fixed: Row = ("0", Some("0 0 * * 6,0"), Some(48 * 3600), &["Drifted"]);
    let p = pool(&[open, fixed]);
    assert_eq!(allowed(&p, Reason::Empty, 20, 0, MONDAY_1030), 2);
    let zoned: Row = ("0", Some("CRON_TZ=Asia/Seoul 0 9 * * *"), Some(3600), &[]);
    assert_eq!(
        allowed(&pool(&[open, zoned]), Reason::Empty, 20, 0, MONDAY_1030),
        0
    );
}
