use super::*;

#[test]
fn an_offering_is_unavailable_for_three_minutes() {
    let now = DateTime::parse_from_rfc3339("2026-11-22T10:00:00Z")
        .unwrap()
        .to_utc();
    let mut u = UnavailableOfferings::default();
    u.mark("spot", "m5.large", "us-east-1a", now);
    assert!(u.is_unavailable(
        "spot",
        "m5.large",
        "us-east-1a",
        now + Duration::seconds(179)
    ));
    assert!(!u.is_unavailable("on-demand", "m5.large", "us-east-1a", now));
    assert!(!u.is_unavailable(
        "spot",
        "m5.large",
        "us-east-1a",
        now + Duration::seconds(180)
    ));
    let json = serde_json::to_string(&u).unwrap();
    let back: UnavailableOfferings = serde_json::from_str(&json).unwrap();
    assert_eq!(back.active(now).len(), 1);
    let mut later = UnavailableOfferings::default();
    later.mark(
        "spot",
        "m5.large",
        "us-east-1a",
        now + Duration::seconds(60),
    );
    u.merge(&later);
    assert!(u.is_unavailable(
        "spot",
        "m5.large",
        "us-east-1a",
        now + Duration::seconds(200)
    ));
    u.prune(now + Duration::seconds(300));
    assert!(u.is_empty());
}
