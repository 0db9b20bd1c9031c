//! One second of a live run, as the one simulation loop (`fleetwright_runtime::world`) drives
//! it: the pods as the second found them, the scenario's steps, the webhook for new pods, and
//! then either Karpenter's round or what the cluster has no part for (the interruption queue,
//! the kubelets joining) with Fleetwright's tick when it is due.

use std::collections::BTreeSet;

use chrono::{DateTime, Duration, Utc};
use fleetwright_runtime::tick::TickSummary;
use fleetwright_runtime::world::World;
use k8s_openapi::api::core::v1::Pod;
use kube::api::DeleteParams;
use serde_json::{json, Value};
use tracing::{info, warn};

use super::observe::{bound_at, workload};
use super::{karpenter, owned, stamp, Live, RECHECK};
use crate::simulate::deliver;
use crate::simulate::scenario::{Action, Step};

impl World for Live {
    type Error = anyhow::Error;

    fn schedule(&self) -> i64 {
        self.scenario.schedule
    }

    async fn next_second(&mut self) -> anyhow::Result<Option<(i64, DateTime<Utc>)>> {
        let now = Utc::now();
        let t = (now - self.start).num_seconds();
        if t > self.scenario.duration {
            return Ok(None);
        }
        self.clock.set(now);
        self.cloud.set_clock(now);
        // By elapsed time, not `t % RECHECK`: a round that takes over a second must not skip
        // the check for good.
        if t - self.checks.tried >= RECHECK {
            self.still_alone(t).await?;
        }
        Ok(Some((t, now)))
    }

    async fn second(&mut self, t: i64, now: DateTime<Utc>) -> bool {
        // The pods as this second found them, before its steps: a sample taken at a step's
        // second is the cluster the step acted on, whatever the controllers do next.
        let pods = self.pods().await;
        while let Some(step) = self
            .scenario
            .timeline
            .get(self.next_step)
            .filter(|s| s.at <= t)
        {
            let step = step.clone();
            self.next_step += 1;
            self.step(&step, t, now).await;
        }
        self.admit_new(&pods, now).await;
        self.second_pods = pods;
        if self.karpenter.is_some() {
            self.karpenter_round(t).await;
            return self.shadow.is_some();
        }
        self.reclaim(now).await;
        if let Err(e) = self.kubelet(now).await {
            warn!(target: "simulate::kubelet", error = %format!("{e:#}"), "the kubelets' round failed; the next second retries");
        }
        true
    }

    fn nudged(&mut self) -> bool {
        !self.nudges.take().is_empty()
    }

    async fn tick(&mut self, t: i64, now: DateTime<Utc>) -> Option<TickSummary> {
        if let (Some(_), Some(shadow)) = (&self.karpenter, &self.shadow) {
            return match shadow.run(now, &format!("shadow-{t}")).await {
                Ok(summary) => Some(summary),
                Err(e) => {
                    warn!(target: "simulate::shadow", error = %e, "the shadow tick failed; the next one retries");
                    None
                }
            };
        }
        let started = std::time::Instant::now();
        let summary = crate::simulate::run_tick(&self.tick, &mut self.watch, now, t).await;
        self.invoked("tick", started);
        summary
    }

    async fn end_second(&mut self, t: i64) {
        let pods = std::mem::take(&mut self.second_pods);
        self.observe(t, &pods).await;
        if let Some(bar) = &self.bar {
            bar.set_position(t.max(0) as u64);
        }
        let next = self.start + Duration::seconds(t + 1);
        if let Ok(wait) = (next - Utc::now()).to_std() {
            tokio::time::sleep(wait).await;
        }
    }
}

impl Live {
    pub(super) async fn step(&mut self, step: &Step, t: i64, now: DateTime<Utc>) {
        info!(target: "simulate::scenario", step = %step.action, "scenario step");
        let index = self
            .watch
            .step(t, step.action.to_string(), self.nodes.len(), self.hourly());
        if self.karpenter.is_some() && !karpenter::plays(&step.action) {
            warn!(target: "simulate::scenario", step = %step.action, "Karpenter's KWOK provider has no simulated cloud to play this step on; skipped");
            return;
        }
        let result = match &step.action {
            Action::Scale(s) => {
                self.watch
                    .scaling
                    .push((index, s.deployment.clone(), s.replicas));
                let replicas = Some(s.replicas as i32);
                owned::replace(
                    &self.deployment(&s.deployment),
                    &self.run,
                    "Deployment",
                    &s.deployment,
                    |d| {
                        let spec = d.spec.get_or_insert_with(Default::default);
                        let changed = spec.replicas != replicas;
                        spec.replicas = replicas;
                        changed
                    },
                )
                .await
                .map(|_| ())
            }
            Action::Delete(d) => owned::delete(
                &self.deployment(&d.deployment),
                &self.run,
                "Deployment",
                &d.deployment,
                &DeleteParams::background(),
            )
            .await
            .map(|_| ()),
            Action::Apply(o) => self.apply(o).await,
            Action::ChangeAmi(c) => {
                self.cloud.release_ami(c.nodeclass.as_deref());
                Ok(())
            }
            Action::Ice(i) => {
                self.cloud.add_ice(i.clone());
                Ok(())
            }
            Action::Interrupt(i) if self.karpenter.is_some() => {
                self.interrupt_karpenter(&i.nodepool, i.count, t).await;
                Ok(())
            }
            Action::Interrupt(i) => {
                self.interrupt(&i.nodepool, i.count, t, now).await;
                Ok(())
            }
            Action::Fail(_) => {
                // kwok owns the nodes' conditions on the control plane and would set them back.
                warn!(target: "simulate::scenario", step = %step.action, "node failures are simulated in memory only; skipped on the control plane");
                Ok(())
            }
        };
        if let Err(e) = result {
            warn!(target: "simulate::scenario", step = %step.action, error = %format!("{e:#}"), "the step failed");
        }
    }

    pub(super) async fn interrupt(
        &mut self,
        nodepool: &str,
        count: usize,
        t: i64,
        now: DateTime<Utc>,
    ) {
        let pods = self.pods().await;
        // Which node kube-scheduler filled is wall-clock chance; a warning is only worth
        // sending in the story to a node that holds pods, while one does.
        let busy: BTreeSet<String> = pods
            .iter()
            .filter(|p| workload(p))
            .filter_map(|p| p.spec.as_ref()?.node_name.as_ref())
            .filter_map(|n| self.nodes.get(n).cloned())
            .collect();
        let rng = &mut self.rng;
        let warned = self.cloud.warn_spot_preferring(
            nodepool,
            count,
            now,
            |i| busy.contains(&format!("aws:///{}/{}", i.zone, i.id)),
            |n| rng.below(n),
        );
        if warned.is_empty() {
            warn!(target: "simulate::cloud", %nodepool, "no spot instance of the nodepool to interrupt");
        }
        let mut events = Vec::new();
        for instance in &warned {
            let provider = format!("aws:///{}/{}", instance.zone, instance.id);
            let node = self
                .nodes
                .iter()
                .find(|(_, p)| **p == provider)
                .map(|(n, _)| n.clone());
            info!(target: "simulate::cloud", instance_id = %instance.id, node = node.as_deref().unwrap_or("none"), "spot interruption warning; the instance is reclaimed in 2 minutes");
            let displaced = pods
                .iter()
                .filter(|p| {
                    workload(p)
                        && p.spec.as_ref().and_then(|s| s.node_name.as_ref()) == node.as_ref()
                })
                .count();
            let displaced = if node.is_some() { displaced } else { 0 };
            events.push(crate::simulate::spot_warning(
                &mut self.watch,
                (t, now),
                nodepool,
                instance,
                node,
                displaced,
            ));
        }
        self.deliver(events, now).await;
    }

    pub(super) async fn reclaim(&mut self, now: DateTime<Utc>) {
        let events = crate::simulate::reclaimed(&self.cloud, now);
        self.deliver(events, now).await;
    }

    /// Delivers events to the interruption function, its time counted.
    pub(super) async fn deliver(&mut self, events: Vec<Value>, now: DateTime<Utc>) {
        if events.is_empty() {
            return;
        }
        let started = std::time::Instant::now();
        deliver(&self.interruption, events, now).await;
        self.invoked("interruption", started);
    }

    /// Counts one invocation of `function` that began at `started`.
    pub(super) fn invoked(&mut self, function: &'static str, started: std::time::Instant) {
        let entry = self.invocations.entry(function).or_default();
        entry.0 += 1;
        entry.1 += started.elapsed().as_secs_f64();
    }

    /// Each new pod goes through the webhook as the API server would send it, and each
    /// workload pod's wait is kept for the report.
    pub(super) async fn admit_new(&mut self, pods: &[Pod], now: DateTime<Utc>) {
        for pod in pods {
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            if workload(pod) {
                let created = pod.metadata.creation_timestamp.as_ref().map_or(now, stamp);
                let entry = self.waits.entry(uid.clone()).or_insert((created, None));
                if entry.1.is_none() {
                    entry.1 = bound_at(pod).map(|b| (b - created).num_seconds().max(0));
                }
            }
            if self.karpenter.is_some()
                || !self.seen_pods.insert(uid)
                || pod.spec.as_ref().is_some_and(|s| s.node_name.is_some())
            {
                continue;
            }
            let Ok(value) = serde_json::to_value(pod) else {
                continue;
            };
            let started = std::time::Instant::now();
            crate::simulate::admit(&self.webhook, &value, now).await;
            self.invoked("webhook", started);
        }
    }

    /// A Node the kubelets registered goes through the webhook, as the API server sends it.
    pub(super) async fn admit_node(&mut self, node: &Value, now: DateTime<Utc>) {
        if !crate::simulate::node_reviewed(node) {
            return;
        }
        let mut node = node.clone();
        node["kind"] = json!("Node");
        let started = std::time::Instant::now();
        crate::simulate::admit(&self.webhook, &node, now).await;
        self.invoked("webhook", started);
    }
}
