use super::*;

/// A Debug print of the webhook (a log line, a panic message) never shows its token.
#[test]
fn debug_output_redacts_the_token() {
    let token = "s3cr3t-token-0123456789";
    let webhook = Webhook::new(crate::nudge::Recorder::default(), Some(token.into()));
    let printed = format!("{webhook:?} {webhook:#?}");
    assert!(!printed.contains(token), "{printed}");
    assert!(printed.contains(REDACTED), "{printed}");
    let open = Webhook::new(crate::nudge::Recorder::default(), None);
    assert!(!format!("{open:?}").contains(REDACTED));
}

#[tokio::test]
async fn a_node_created_nudges_the_tick_and_is_admitted() {
    let recorder = crate::nudge::Recorder::default();
    let webhook = Webhook::new(recorder.clone(), None);
    let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u-7", "kind": {"group": "", "version": "v1", "kind": "Node"},
                "resource": {"group": "", "version": "v1", "resource": "nodes"},
                "name": "ip-10-0-1-2.ec2.internal", "operation": "CREATE",
                "userInfo": {"username": "system:node:ip-10-0-1-2.ec2.internal"},
                "object": {"apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": "ip-10-0-1-2.ec2.internal",
                        "labels": {"karpenter.sh/nodepool": "default"}}}}});
    let now = Utc::now();
    let answer = webhook
        .handle("/admit", review.to_string().as_bytes(), now)
        .await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.body["response"]["allowed"], true);
    assert_eq!(answer.body["response"]["uid"], "u-7");
    let nudges = recorder.recorded();
    assert_eq!(nudges.len(), 1);
    assert_eq!(nudges[0].0, NODE_JOINED);
    assert_eq!(nudges[0].1["name"], "ip-10-0-1-2.ec2.internal");
}

#[test]
fn secrets_match_only_when_every_byte_does() {
    let token = b"0123456789abcdef0123456789abcdef";
    assert!(same_secret(token, token));
    let mut last = *token;
    last[31] = b'x';
    assert!(!same_secret(&last, token));
    let mut first = *token;
    first[0] = b'x';
    assert!(!same_secret(&first, token));
    assert!(!same_secret(&token[..31], token));
    assert!(!same_secret(b"", token));
}
