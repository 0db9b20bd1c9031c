use super::*;
use k8s_openapi::api::core::v1::Node;

fn node(name: String) -> Node {
    let mut node = Node::default();
    node.metadata.name = Some(name);
    node
}

/// However large the cluster and however long the lists, the shadow state stays within its
/// bytes in the ConfigMap it shares with the live state.
#[test]
fn the_shadow_state_stays_within_its_bytes() {
    let now = DateTime::parse_from_rfc3339("2026-11-23T12:00:00Z")
        .unwrap()
        .with_timezone(&Utc);
    let mut shadow = Shadow::default();
    for tick in 0..RECORDS_KEPT + 5 {
        let dump = ClusterDump {
            nodes: (0..10_000)
                .map(|i| node(format!("ip-10-{tick}-{i}.ap-northeast-2.compute.internal")))
                .collect(),
            ..Default::default()
        };
        let actions: Vec<Value> = (0..300)
                .map(|i| serde_json::json!({"action": "confirmLater",
                    "command": format!("underutilized/delete:ip-10-0-{i}.ap-northeast-2.compute.internal")}))
                .collect();
        let at = now + chrono::Duration::minutes(tick as i64);
        let record = shadow.observe(&dump, &actions, None, at);
        assert!(record.would_disrupt.len() <= ENTRIES_KEPT);
        assert!(record.other_deleted.len() <= ENTRIES_KEPT);
    }
    let bytes = serde_json::to_vec(&shadow).unwrap().len();
    assert!(bytes <= BYTES_KEPT, "{bytes} bytes");
    assert!(!shadow.records.is_empty());
}

/// An expiration is a disruption the shadow reports, as a decided command is.
#[test]
fn an_expiration_is_a_disruption_the_shadow_would_make() {
    let now = DateTime::parse_from_rfc3339("2026-11-23T12:00:00Z")
        .unwrap()
        .with_timezone(&Utc);
    let actions = vec![
        serde_json::json!({"action": "expire", "nodeclaim": "default-p9w4z",
        "node": "ip-10-0-2-22.ec2.internal", "expiredAt": "2026-11-09T10:00:00Z"}),
    ];
    let record = Shadow::default().observe(&ClusterDump::default(), &actions, None, now);
    assert_eq!(
        record.would_disrupt,
        vec!["expired/delete: ip-10-0-2-22.ec2.internal".to_string()]
    );
}
