//! Reading the messages waiting in an SQS queue without consuming them: they are received with a
//! short visibility timeout, then made visible again at once, so the queue (the interruption DLQ)
//! holds exactly what it held before.

use std::collections::BTreeMap;

use anyhow::Context;

/// How long received messages stay hidden while the queue is read.
const HIDE_SECONDS: i32 = 30;

/// Every message waiting in the queue, as `(message id, body)`, in the order received.
pub async fn peek(url: &str) -> anyhow::Result<Vec<(String, String)>> {
    let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .load()
        .await;
    let sqs = aws_sdk_sqs::Client::new(&config);
    let mut seen: BTreeMap<String, (usize, String, String)> = BTreeMap::new();
    loop {
        let out = sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .visibility_timeout(HIDE_SECONDS)
            .wait_time_seconds(1)
            .send()
            .await
            .with_context(|| format!("sqs:ReceiveMessage on {url}"))?;
        let batch = out.messages.unwrap_or_default();
        if batch.is_empty() {
            break;
        }
        for m in batch {
            let id = m.message_id.unwrap_or_default();
            let order = seen.len();
            seen.entry(id).or_insert((
                order,
                m.receipt_handle.unwrap_or_default(),
                m.body.unwrap_or_default(),
            ));
        }
    }
    for (id, (_, receipt, _)) in &seen {
        let restored = sqs
            .change_message_visibility()
            .queue_url(url)
            .receipt_handle(receipt)
            .visibility_timeout(0)
            .send()
            .await;
        if let Err(e) = restored {
            tracing::warn!(message_id = %id, error = %e, "could not make the message visible again; it reappears after {HIDE_SECONDS} s");
        }
    }
    let mut messages: Vec<(usize, String, String)> = seen
        .into_iter()
        .map(|(id, (order, _, body))| (order, id, body))
        .collect();
    messages.sort();
    Ok(messages
        .into_iter()
        .map(|(_, id, body)| (id, body))
        .collect())
}
