//! The faults a chaos run injects, as methods of the driver: instances that die and warnings
//! for instances already gone, EC2 and Kubernetes API errors on reads and writes, webhook
//! floods, and the simulated SQS queue's late, duplicated, shuffled and poison deliveries with
//! redelivery and the DLQ.

use std::collections::BTreeSet;

use aws_lambda_events::event::sqs::SqsEvent;
use chrono::{DateTime, Utc};
use fleetwright_runtime::metrics::Metrics;
use fleetwright_sim::cloud::CloudFault;
use fleetwright_sim::cluster::{NODECLAIMS, NODES, PODS};
use fleetwright_sim::memory::Fault;
use serde_json::{json, Value};

use super::invariants::Message;
use super::{spot_warning, Chaos, FOREIGN, MAX_RECEIVES, VISIBILITY};
use crate::simulate::{ec2_event, ACCOUNT, CLUSTER};

impl Chaos {
    /// Instances that die without a warning, and warnings for instances already gone.
    pub(super) fn cloud_faults(&mut self, t: i64, now: DateTime<Utc>) {
        if self.chance(0.004) {
            let live: Vec<String> = self
                .sim
                .cloud
                .live()
                .into_keys()
                .filter(|id| id != FOREIGN)
                .collect();
            if !live.is_empty() {
                let id = self.rng.pick(&live).clone();
                self.sim.cloud.kill(&id);
                // No spot warning, but EC2 still reports the state change on the bus, as it does
                // for every instance; it may come late, twice or beside a poison message.
                let event = ec2_event(
                    "EC2 Instance State-change Notification",
                    &id,
                    json!({"instance-id": id, "state": "terminated"}),
                    now,
                );
                self.send(event, t, true);
                self.seen.interrupted.insert(id);
                self.count("instances killed without a warning");
                // Capacity lost for a reason other than a malformed object: the healthy pools'
                // pending time allows a tick for it, as for a refused launch.
                if self.seen.failed_elsewhere.last() != Some(&t) {
                    self.seen.failed_elsewhere.push(t);
                }
            }
        }
        if self.chance(0.004) {
            let live = self.sim.cloud.live();
            let gone: Vec<String> = self
                .seen
                .ever
                .iter()
                .filter(|id| !live.contains_key(*id))
                .cloned()
                .collect();
            if !gone.is_empty() {
                let id = self.rng.pick(&gone).clone();
                self.send(spot_warning(&id, now), t, true);
                self.count("warnings for gone instances");
            }
        }
    }

    /// EC2 API faults: throttling and 5xx on CreateFleet, TerminateInstances and
    /// DescribeInstances, and a CreateFleet that launches but whose answer is lost.
    pub(super) fn ec2_faults(&mut self) {
        const CODES: [&str; 3] = ["RequestLimitExceeded", "InternalError", "Unavailable"];
        for (operation, label) in [
            ("CreateFleet", "EC2 CreateFleet errors"),
            ("TerminateInstances", "EC2 TerminateInstances errors"),
            ("DescribeInstances", "EC2 DescribeInstances errors"),
        ] {
            // An outage is a moment, not a debt: faults do not pile up while nothing calls the
            // operation, to fail a run of later calls one after another.
            if self.chance(0.003) && !self.sim.cloud.faults_pending(operation) {
                let code = self.rng.pick(&CODES).to_string();
                let times = 1 + self.rng.below(2);
                self.sim.cloud.inject(CloudFault {
                    operation,
                    code,
                    times,
                    after_launch: false,
                });
                self.count(label);
            }
        }
        if self.chance(0.002) {
            self.sim.cloud.inject(CloudFault {
                operation: "CreateFleet",
                code: "RequestTimeout".into(),
                times: 1,
                after_launch: true,
            });
            self.count("CreateFleet answers lost after launching");
        }
    }

    /// Transient API errors on reads (retried) and on writes (the tick fails; the next repairs),
    /// and latency: a few requests held up to 200 ms, so concurrent writers interleave.
    pub(super) fn api_faults(&mut self) {
        const READS: [&str; 4] = [PODS, NODES, NODECLAIMS, "/apis/karpenter.sh/v1/nodepools"];
        if self.chance(0.003) {
            let fault = Fault {
                method: "GET".into(),
                path: self.rng.pick(&READS).to_string(),
                status: *self.rng.pick(&[429, 500, 503]),
                skip: 0,
                times: 1,
            };
            self.sim.cluster.api.lock().faults.push(fault);
            self.count("API read errors");
        }
        if self.chance(0.003) {
            let fault = Fault {
                method: "WRITE".into(),
                path: "/".into(),
                status: *self.rng.pick(&[409, 500, 503]),
                skip: self.rng.below(5),
                times: 1 + self.rng.below(3),
            };
            self.sim.cluster.api.lock().faults.push(fault);
            self.count("API write errors");
        }
        if self.chance(0.003) {
            let delay = std::time::Duration::from_millis(20 + self.rng.below(181) as u64);
            let requests = 1 + self.rng.below(5);
            self.sim.cluster.api.lock().latency = Some((delay, requests));
            self.count("API latency");
        }
    }

    /// A webhook flood: the same pod's CREATE reviewed 30 times.
    pub(super) async fn flood(&mut self, now: DateTime<Utc>) {
        let pods = self.sim.cluster.workload_as_pending();
        if pods.is_empty() {
            return;
        }
        let pod = self.rng.pick(&pods).clone();
        for _ in 0..30 {
            self.sim.admit(&pod, now).await;
        }
        self.count("webhook floods");
    }

    /// Puts an event on the queue: late, sometimes twice, sometimes beside a poison message.
    pub(super) fn send(&mut self, event: Value, t: i64, chaos: bool) {
        let id = event["id"].as_str().unwrap_or_default().to_string();
        let late = if chaos { self.rng.below(30) as i64 } else { 0 };
        let message = Message {
            id: id.clone(),
            body: event.to_string(),
            receives: 0,
            due: t + late,
        };
        self.queue.sent.insert(id.clone());
        if chaos && self.chance(0.2) {
            let mut again = message.clone();
            again.due += self.rng.below(20) as i64;
            self.queue.waiting.push(again);
            self.count("duplicate deliveries");
        }
        self.queue.waiting.push(message);
        if chaos && self.chance(0.1) {
            let poison = format!("poison-{id}");
            self.queue.sent.insert(poison.clone());
            self.queue.waiting.push(Message {
                id: poison,
                body: "{\"detail-type\": 42".into(),
                receives: 0,
                due: t + late,
            });
            self.count("poison messages");
        }
    }

    /// Delivers the messages due, in a shuffled batch of up to ten; failures come back after
    /// the visibility timeout or go to the DLQ.
    pub(super) async fn receive(&mut self, t: i64, now: DateTime<Utc>) {
        let (mut due, rest): (Vec<Message>, Vec<Message>) = std::mem::take(&mut self.queue.waiting)
            .into_iter()
            .partition(|m| m.due <= t);
        self.queue.waiting = rest;
        // Out of order.
        for i in (1..due.len()).rev() {
            let j = self.rng.below(i + 1);
            due.swap(i, j);
        }
        for batch in due.chunks(10) {
            let records: Vec<Value> = batch
                .iter()
                .map(|m| {
                    json!({"messageId": m.id, "receiptHandle": format!("rh-{}-{}", m.id, m.receives),
                        "body": m.body, "attributes": {"ApproximateReceiveCount": (m.receives + 1).to_string()},
                        "messageAttributes": {}, "md5OfBody": "", "eventSource": "aws:sqs", "awsRegion": "us-east-1",
                        "eventSourceARN": format!("arn:aws:sqs:us-east-1:{ACCOUNT}:fleetwright-{CLUSTER}-interruption")})
                })
                .collect();
            let Ok(event) = serde_json::from_value::<SqsEvent>(json!({ "Records": records }))
            else {
                continue;
            };
            let response = self
                .sim
                .interruption
                .handle_sqs(event, now, &mut Metrics::default())
                .await;
            let failed: BTreeSet<String> = response
                .batch_item_failures
                .into_iter()
                .map(|f| f.item_identifier)
                .collect();
            for m in batch {
                if !failed.contains(&m.id) {
                    // A poison message acknowledged is reported by check_queue.
                    self.queue.acked.insert(m.id.clone());
                    continue;
                }
                let mut m = m.clone();
                m.receives += 1;
                if m.receives >= MAX_RECEIVES {
                    self.queue.dead.insert(m.id.clone());
                } else {
                    m.due = t + VISIBILITY;
                    self.queue.waiting.push(m);
                }
            }
        }
    }
}
