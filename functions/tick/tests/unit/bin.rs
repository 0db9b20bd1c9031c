use super::*;
use serde_json::json;

#[test]
fn a_follow_up_batch_counts_its_latest_requester_and_a_schedule_is_plain() {
    let body = |t: &str| {
        json!({"time": "2026-11-26T10:01:00Z", "detail": {"cluster": "c", "requestedBy": t}})
            .to_string()
    };
    let batch = json!({"Records": [
            {"messageId": "1", "body": body("2026-11-26T10:00:30Z"), "eventSource": "aws:sqs"},
            {"messageId": "2", "body": body("2026-11-26T10:00:45Z"), "eventSource": "aws:sqs"}]});
    let latest: DateTime<Utc> = "2026-11-26T10:00:45Z".parse().unwrap();
    assert_eq!(trigger(&batch), Trigger::FollowUp(latest));
    let schedule = json!({"version": "0", "id": "e", "detail-type": "Scheduled Event",
            "source": "aws.events", "account": "1", "time": "2026-11-26T10:00:00Z",
            "region": "us-east-1", "resources": [], "detail": {}});
    assert_eq!(trigger(&schedule), Trigger::Scheduled);
    let mut nudge = schedule.clone();
    nudge["detail-type"] = json!("Pending Pod");
    nudge["source"] = json!("fleetwright");
    let sent: DateTime<Utc> = "2026-11-26T10:00:00Z".parse().unwrap();
    assert_eq!(trigger(&nudge), Trigger::Nudged(sent));
    for detail_type in fleetwright_runtime::nudge::NUDGES {
        nudge["detail-type"] = json!(detail_type);
        assert_eq!(trigger(&nudge), Trigger::Nudged(sent), "{detail_type}");
    }
}
