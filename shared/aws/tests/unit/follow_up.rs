use super::*;

#[test]
fn the_delay_is_what_sqs_allows_and_the_body_says_when_it_is_due() {
    let now = DateTime::parse_from_rfc3339("2026-11-26T10:00:00Z")
        .unwrap()
        .with_timezone(&Utc);
    let started = now - chrono::Duration::seconds(4);
    let (delay, text) = message("prod", started, now, 15);
    assert_eq!(delay, 15);
    let body: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(body["time"], "2026-11-26T10:00:15.000Z");
    assert_eq!(body["detail"]["cluster"], "prod");
    assert_eq!(requested_by(&text), Some(started));
    assert_eq!(message("prod", started, now, 4000).0, 900);
    assert_eq!(message("prod", started, now, -3).0, 0);
    assert_eq!(requested_by("{}"), None);
}
