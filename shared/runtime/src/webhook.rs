//! The admission webhook: it always admits (never mutates, never denies, so an outage of
//! Fleetwright cannot block the cluster) and, for a pod created without a node, nudges tick so
//! capacity is planned within about a second. Nudges are coalesced to one per second per warm
//! container; a nudge only starts an ordinary tick, which re-reads the truth from the API.

use std::sync::Mutex;

use chrono::{DateTime, Duration, Utc};
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use kube::core::DynamicObject;
use serde_json::{json, Value};
use tracing::{info, warn};

use crate::nudge::{Nudge, PENDING_POD};

/// Bodies above this are refused.
pub const MAX_BODY: usize = 1 << 20;
/// At most one nudge per this interval per container.
pub const COALESCE: Duration = Duration::seconds(1);

/// An HTTP answer: status and JSON body.
#[derive(Clone, Debug, PartialEq)]
pub struct HttpAnswer {
    pub status: u16,
    pub body: Value,
}

fn refuse(status: u16, reason: &str) -> HttpAnswer {
    HttpAnswer {
        status,
        body: json!({"error": reason}),
    }
}

/// The webhook use case.
#[derive(Debug)]
pub struct Webhook<N> {
    pub nudge: N,
    /// When set, only `/admit/<token>` is served.
    pub token: Option<String>,
    last_nudge: Mutex<Option<DateTime<Utc>>>,
}

/// Whether the request is a pod created without a node (the only case worth a nudge).
fn is_unscheduled_pod_create(req: &AdmissionRequest<DynamicObject>) -> bool {
    let pod = req.kind.group.is_empty() && req.kind.kind == "Pod";
    let node = req
        .object
        .as_ref()
        .and_then(|o| o.data.pointer("/spec/nodeName"))
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty());
    pod && req.operation == Operation::Create && node.is_none()
}

impl<N: Nudge> Webhook<N> {
    pub fn new(nudge: N, token: Option<String>) -> Self {
        Webhook {
            nudge,
            token,
            last_nudge: Mutex::new(None),
        }
    }

    fn path_allowed(&self, path: &str) -> bool {
        match &self.token {
            None => true,
            Some(token) => {
                path.trim_end_matches('/').strip_prefix("/admit/") == Some(token.as_str())
            }
        }
    }

    /// Whether to nudge now (and records it), keeping to one nudge per [`COALESCE`].
    fn take_nudge_slot(&self, now: DateTime<Utc>) -> bool {
        let mut last = self.last_nudge.lock().unwrap_or_else(|p| p.into_inner());
        if last.is_some_and(|t| now - t < COALESCE) {
            return false;
        }
        *last = Some(now);
        true
    }

    /// Answers one HTTP request with `path` and `body`.
    pub async fn handle(&self, path: &str, body: &[u8], now: DateTime<Utc>) -> HttpAnswer {
        if !self.path_allowed(path) {
            return refuse(403, "forbidden");
        }
        if body.len() > MAX_BODY {
            return refuse(400, "body is larger than 1 MiB");
        }
        let review: AdmissionReview<DynamicObject> = match serde_json::from_slice(body) {
            Ok(r) => r,
            Err(e) => {
                return refuse(
                    400,
                    &format!("not an admission.k8s.io/v1 AdmissionReview: {e}"),
                )
            }
        };
        let request: AdmissionRequest<DynamicObject> = match review.try_into() {
            Ok(r) => r,
            Err(e) => return refuse(400, &format!("AdmissionReview has no request: {e}")),
        };
        if is_unscheduled_pod_create(&request) && self.take_nudge_slot(now) {
            let detail =
                json!({"namespace": request.namespace, "name": request.name, "uid": request.uid});
            match self.nudge.nudge(PENDING_POD, detail).await {
                Ok(()) => {
                    info!(namespace = ?request.namespace, name = %request.name, "nudged tick for a pending pod")
                }
                Err(e) => {
                    warn!(error = %e, "could not nudge tick; the scheduled tick will pick the pod up")
                }
            }
        }
        let review = AdmissionResponse::from(&request).into_review();
        HttpAnswer {
            status: 200,
            body: serde_json::to_value(review).unwrap_or(Value::Null),
        }
    }
}
