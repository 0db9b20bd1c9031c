//! The chaos run's incidents beyond API errors: evictions refused with 403 (a denying webhook)
//! and with 500 (a second PodDisruptionBudget over the same pods, which the Eviction API does
//! not support), replacements that register and never initialize, DescribeInstances listings
//! that succeed empty or stale, Nodes deleted by hand, malformed objects applied beside the
//! healthy ones, and AWS Health scheduled changes, rebalance recommendations and
//! capacity-reservation interruption warnings.

use chrono::{DateTime, Utc};
use fleetwright_runtime::tick::DISRUPTION_ANNOTATION;
use fleetwright_sim::cloud::{CloudFault, EMPTY_LISTING};
use fleetwright_sim::cluster::{NODECLAIMS, NODES};
use fleetwright_sim::memory::Fault;
use serde_json::{json, Value};

use super::additions::{malformed, BROKEN_PREFIX};
use super::{Chaos, CHAOS_END, FOREIGN};
use crate::simulate::{ec2_event, ACCOUNT};

const BUDGETS: &str = "/apis/policy/v1/poddisruptionbudgets";
const NODEPOOLS: &str = "/apis/karpenter.sh/v1/nodepools";
const NODECLASSES: &str = "/apis/karpenter.k8s.aws/v1/ec2nodeclasses";

impl Chaos {
    /// This second's incidents, each with its own small chance.
    pub(super) fn incidents(&mut self, t: i64, now: DateTime<Utc>) {
        if self.chance(0.003) {
            let fault = Fault {
                method: "POST".into(),
                path: "*/eviction".into(),
                status: 403,
                skip: self.rng.below(3),
                times: 1 + self.rng.below(4),
            };
            self.sim.cluster.api.lock().faults.push(fault);
            self.count("evictions denied by a webhook (403)");
        }
        if self.overlap_at == Some(t) {
            self.overlap_budgets();
        }
        self.never_initialize();
        for (code, label) in [
            (EMPTY_LISTING, "DescribeInstances listings empty"),
            ("StaleTags", "DescribeInstances listings stale"),
        ] {
            if self.chance(0.002) {
                self.sim.cloud.inject(CloudFault {
                    operation: "DescribeInstancesListing",
                    code: code.into(),
                    times: 1,
                    after_launch: false,
                });
                self.count(label);
            }
        }
        if self.chance(0.0015) {
            self.delete_node_by_hand();
        }
        if self.broken.is_empty() && (60..CHAOS_END - 240).contains(&t) && self.chance(0.004) {
            self.apply_malformed(t);
        }
        self.interruption_events(t, now);
    }

    /// A second budget selecting the pods of the scenario's first one: their evictions get 500
    /// until the faults stop.
    fn overlap_budgets(&mut self) {
        let first = {
            let state = self.sim.cluster.api.lock();
            state.objects.get(BUDGETS).and_then(|b| b.first()).cloned()
        };
        let Some(first) = first else {
            return;
        };
        let mut second = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": format!("{BROKEN_PREFIX}overlap"),
                "namespace": first["metadata"]["namespace"].clone()},
            "spec": {"maxUnavailable": 1, "selector": first["spec"]["selector"].clone()}});
        second["metadata"]["generation"] = json!(1);
        self.sim.cluster.apply(&second);
        self.broken.push(second);
        self.count("overlapping PodDisruptionBudgets (500 on eviction)");
    }

    /// A replacement NodeClaim of a disruption command, once it has an instance, sometimes gets
    /// one whose node registers and never becomes Ready.
    fn never_initialize(&mut self) {
        let replacements: Vec<(String, String)> = {
            let state = self.sim.cluster.api.lock();
            let none = Vec::new();
            let claims = state.objects.get(NODECLAIMS).unwrap_or(&none);
            let nodes = state.objects.get(NODES).unwrap_or(&none);
            let named: Vec<String> = claims
                .iter()
                .chain(nodes)
                .filter_map(|o| o["metadata"]["annotations"][DISRUPTION_ANNOTATION].as_str())
                .flat_map(|a| a.splitn(3, '/').nth(2).unwrap_or("").split(','))
                .filter(|n| !n.is_empty())
                .map(str::to_string)
                .collect();
            claims
                .iter()
                .filter(|c| named.iter().any(|n| c["metadata"]["name"] == n.as_str()))
                .filter_map(|c| {
                    let id = c["status"]["providerID"].as_str()?.rsplit('/').next()?;
                    let name = c["metadata"]["name"].as_str()?;
                    Some((name.to_string(), id.to_string()))
                })
                .collect()
        };
        for (claim, id) in replacements {
            if !self.seen.replacements_decided.insert(claim) {
                continue;
            }
            if self.chance(0.3) {
                self.sim.cluster.never_ready.insert(id);
                self.count("replacements that never initialize");
            }
        }
    }

    /// `kubectl delete node` on a node of this cluster.
    fn delete_node_by_hand(&mut self) {
        let rng = &mut self.rng;
        let Some((node, provider)) = self.sim.cluster.delete_node_by_hand(|n| rng.below(n)) else {
            return;
        };
        if let Some(id) = provider.rsplit('/').next() {
            self.seen.interrupted.insert(id.to_string());
        }
        self.seen.by_hand.insert(node);
        self.count("nodes deleted by hand");
    }

    /// One malformed object (or a pool and its malformed class), applied until the faults stop.
    fn apply_malformed(&mut self, t: i64) {
        let (pool, class) = {
            let state = self.sim.cluster.api.lock();
            let first = |path: &str| {
                state
                    .objects
                    .get(path)
                    .and_then(|o| o.iter().find(|o| !name_of(o).starts_with(BROKEN_PREFIX)))
                    .cloned()
            };
            (first(NODEPOOLS), first(NODECLASSES))
        };
        let Some(pool) = pool else {
            return;
        };
        let variants = malformed(&pool, class.as_ref());
        let (what, objects) = self.rng.pick(&variants).clone();
        for o in &objects {
            self.sim.cluster.apply(o);
        }
        self.broken.extend(objects);
        self.seen.broken_since.get_or_insert(t);
        tracing::info!(target: "simulate::scenario", %what, "malformed object applied");
        self.count("malformed objects applied");
    }

    /// AWS Health scheduled changes, rebalance recommendations and capacity-reservation
    /// interruption warnings, for live instances of this cluster.
    fn interruption_events(&mut self, t: i64, now: DateTime<Utc>) {
        let live: Vec<fleetwright_sim::SimInstance> = self
            .sim
            .cloud
            .live()
            .into_values()
            .filter(|i| i.instance.id != FOREIGN)
            .collect();
        if live.is_empty() {
            return;
        }
        if self.chance(0.0015) {
            let id = self.rng.pick(&live).instance.id.clone();
            self.seen.interrupted.insert(id.clone());
            self.send(health_event(&id, now), t, true);
            self.count("AWS Health scheduled changes");
        }
        if self.chance(0.002) {
            let id = self.rng.pick(&live).instance.id.clone();
            let event = ec2_event(
                "EC2 Instance Rebalance Recommendation",
                &id,
                json!({"instance-id": id}),
                now,
            );
            self.send(event, t, true);
            self.count("rebalance recommendations");
        }
        let reserved: Vec<String> = live
            .iter()
            .filter(|i| i.instance.capacity_reservation_id.is_some() && i.warned.is_none())
            .map(|i| i.instance.id.clone())
            .collect();
        if !reserved.is_empty() && self.chance(0.003) {
            let id = self.rng.pick(&reserved).clone();
            self.sim.cloud.warn(&id, now);
            self.seen.interrupted.insert(id.clone());
            let event = ec2_event(
                "EC2 Capacity Reservation Instance Interruption Warning",
                &id,
                json!({"instance-id": id}),
                now,
            );
            self.send(event, t, true);
            self.count("capacity-reservation interruptions");
        }
    }
}

fn name_of(o: &Value) -> &str {
    o["metadata"]["name"].as_str().unwrap_or_default()
}

/// An AWS Health scheduled change (an instance retirement) as EventBridge delivers it.
fn health_event(instance_id: &str, now: DateTime<Utc>) -> Value {
    let id = format!(
        "{:08x}-health-{}",
        fleetwright_sim::cluster::fnv(instance_id) & 0xffff_ffff,
        now.timestamp()
    );
    json!({"version": "0", "id": id, "detail-type": "AWS Health Event", "source": "aws.health",
        "account": ACCOUNT, "time": now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        "region": "us-east-1", "resources": [],
        "detail": {"service": "EC2", "eventTypeCategory": "scheduledChange",
            "eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
            "affectedEntities": [{"entityValue": instance_id}]}})
}
