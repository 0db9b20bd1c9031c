//! The tick's disruption step: it carries out the core's disruption decisions
//! ([`fleetwright_core::disruption::plan`]) one command at a time, across ticks.
//!
//! 1. A decision is confirmed before it is acted on. The first tick that decides a command
//!    stores it in the state ConfigMap; a tick at least [`CONFIRM_AFTER`] later that decides the
//!    same command carries it out.
//! 2. Carrying out a command starts by tainting the candidates `karpenter.sh/disrupted:NoSchedule`
//!    and annotating their NodeClaims with [`DISRUPTION_ANNOTATION`]. A replacement NodeClaim is
//!    created too; the tick's launch step launches it.
//! 3. Later ticks wait until the replacement is initialized, then drain the candidates through the
//!    Eviction API (PodDisruptionBudgets are respected, and refused pods are retried on the next
//!    tick). When no evictable pod is left, they delete the NodeClaims. The deletion step then
//!    terminates the instances and removes the finalizers.
//! 4. If the replacement disappears before it initializes (a failed launch, say), the command is
//!    abandoned: the taints come off, the annotations go, and an Event says why.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use fleetwright_cloud::Cloud;
use fleetwright_core::disruption::{self, Command, Disruption};
use fleetwright_core::labels::TAINT_DISRUPTED;
use fleetwright_core::Snapshot;
use fleetwright_kube::crds::NodeClaim;
use fleetwright_kube::dump::ClusterDump;
use fleetwright_kube::{executor, state};
use k8s_openapi::api::core::v1::{Node, Pod};
use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use crate::error::RuntimeError;
use crate::tick::{has_condition, jiff, Tick, TickSummary};

/// On a candidate's NodeClaim: `<reason>/<command>[/<replacement NodeClaim>]`.
pub const DISRUPTION_ANNOTATION: &str = "fleetwright.io/disruption";
/// The state ConfigMap key of a decision waiting for confirmation.
pub const PENDING_KEY: &str = "pendingDisruption";
/// On a candidate's NodeClaim: when its drain started (RFC 3339). Its `terminationGracePeriod`
/// counts from here; at the deadline the pods still left are deleted.
pub const DRAIN_STARTED_ANNOTATION: &str = "fleetwright.io/drain-started";
/// The state ConfigMap key of the nodes last reported as blocked, with their reasons, so each
/// reason is evented once and not every minute.
pub const BLOCKED_KEY: &str = "blockedDisruptions";
/// How long a decision waits before it is confirmed and carried out.
pub const CONFIRM_AFTER: Duration = Duration::seconds(15);

/// A decision waiting for confirmation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingDisruption {
    /// What the command is: `<reason>/<command>:<nodes>`.
    pub key: String,
    pub decided_at: DateTime<Utc>,
}

fn command_key(d: &Disruption) -> String {
    format!(
        "{}/{}:{}",
        d.reason.as_str(),
        command_name(d.command),
        d.nodes.join(",")
    )
}

/// `Disrupting Node: Underutilized/Replace, savings $0.2100/h, replacement [m5.large, …]`.
fn taken_message(d: &Disruption) -> String {
    let mut message = format!(
        "Disrupting Node: {}/{}, savings ${:.4}/h",
        d.reason.as_str(),
        command_name(d.command),
        d.savings
    );
    if let Some(r) = &d.replacement {
        message.push_str(&format!(", replacement [{}]", r.instance_types.join(", ")));
    }
    message
}

/// When a drain that started at `started` must end: its `terminationGracePeriod` later (None
/// when the NodeClaim has none, or an unreadable one: then the drain waits for evictions).
fn grace_deadline(claim: &NodeClaim, started: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let text = claim.spec.termination_grace_period.as_deref()?;
    let seconds = fleetwright_kube::convert::duration_seconds(text).ok()??;
    Some(started + Duration::seconds(seconds))
}

/// The NodeClaims of the named nodes.
fn claims_of<'a>(dump: &'a ClusterDump, nodes: &[String]) -> Vec<&'a NodeClaim> {
    dump.nodeclaims
        .iter()
        .filter(|c| {
            c.status
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .is_some_and(|n| nodes.iter().any(|x| x == n))
        })
        .collect()
}

fn command_name(c: Command) -> &'static str {
    match c {
        Command::Delete => "delete",
        Command::Replace => "replace",
    }
}

fn annotation(claim: &NodeClaim) -> Option<&str> {
    claim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DISRUPTION_ANNOTATION))
        .map(String::as_str)
}

fn uncordoned(node: &Node) -> Option<Node> {
    let taints = node.spec.as_ref()?.taints.as_ref()?;
    if !taints.iter().any(|t| t.key == TAINT_DISRUPTED) {
        return None;
    }
    let mut out = node.clone();
    if let Some(spec) = out.spec.as_mut() {
        spec.taints = Some(
            taints
                .iter()
                .filter(|t| t.key != TAINT_DISRUPTED)
                .cloned()
                .collect(),
        );
    }
    Some(out)
}

fn with_annotation(value: Option<String>) -> impl Fn(&NodeClaim) -> Option<NodeClaim> {
    move |claim: &NodeClaim| {
        let mut out = claim.clone();
        let annotations = out
            .metadata
            .annotations
            .get_or_insert_with(Default::default);
        match &value {
            Some(v) if annotations.get(DISRUPTION_ANNOTATION) != Some(v) => {
                annotations.insert(DISRUPTION_ANNOTATION.into(), v.clone());
            }
            None if annotations.contains_key(DISRUPTION_ANNOTATION) => {
                annotations.remove(DISRUPTION_ANNOTATION);
            }
            _ => return None,
        }
        Some(out)
    }
}

impl<C: Cloud> Tick<C> {
    /// One disruption step: continue every command in progress, then decide (and confirm) the
    /// next one, which the core keeps clear of the nodes, budgets and pods of those in progress.
    /// Returns the replacement NodeClaim a confirmed command created, for the tick to launch.
    pub(crate) async fn disrupt(
        &self,
        dump: &ClusterDump,
        snapshot: &mut Snapshot,
        claims: &[NodeClaim],
        now: DateTime<Utc>,
        summary: &mut TickSummary,
    ) -> Result<Option<NodeClaim>, RuntimeError> {
        let mut commands: BTreeMap<&str, Vec<&NodeClaim>> = BTreeMap::new();
        for claim in claims
            .iter()
            .filter(|c| c.metadata.deletion_timestamp.is_none())
        {
            if let Some(value) = annotation(claim) {
                commands.entry(value).or_default().push(claim);
            }
        }
        for in_progress in commands.values() {
            self.continue_command(dump, claims, in_progress, now, summary)
                .await?;
        }
        if summary.pending_pods > 0 || !summary.nodeclaims_created.is_empty() {
            return Ok(None);
        }
        self.decide(dump, snapshot, now, summary).await
    }

    async fn decide(
        &self,
        dump: &ClusterDump,
        snapshot: &mut Snapshot,
        now: DateTime<Utc>,
        summary: &mut TickSummary,
    ) -> Result<Option<NodeClaim>, RuntimeError> {
        for class in &dump.nodeclasses {
            if let Ok(resolved) = self.cloud.nodeclass(class, now).await {
                let state = snapshot.node_class_state.entry(resolved.name).or_default();
                state.images = resolved.amis.iter().map(|a| a.id.clone()).collect();
                state.subnets = resolved.subnets.iter().map(|s| s.id.clone()).collect();
                state.security_groups = resolved.security_groups.iter().cloned().collect();
            }
        }
        let catalog = self.cloud.catalog(now).await?;
        let plan = disruption::plan(snapshot, &catalog, now.timestamp());
        self.report_blocked(dump, &plan.blocked, now).await?;
        let ns = &self.settings.namespace;
        let Some(first) = plan.disruptions.into_iter().next() else {
            state::store(
                self.kube.clone(),
                ns,
                PENDING_KEY,
                &Option::<PendingDisruption>::None,
            )
            .await?;
            return Ok(None);
        };
        let key = command_key(&first);
        summary.disruptions.push(key.clone());
        let pending: Option<PendingDisruption> = state::load(self.kube.clone(), ns, PENDING_KEY)
            .await
            .ok()
            .flatten();
        let confirmed = pending
            .as_ref()
            .is_some_and(|p| p.key == key && now - p.decided_at >= CONFIRM_AFTER);
        if !confirmed {
            let decided_at = match pending {
                Some(p) if p.key == key => p.decided_at,
                _ => now,
            };
            info!(command = %key, savings = first.savings, "disruption decided; confirming on a later tick");
            if !self.settings.dry_run {
                let pending = Some(PendingDisruption { key, decided_at });
                state::store(self.kube.clone(), ns, PENDING_KEY, &pending).await?;
            }
            return Ok(None);
        }
        info!(
            command = command_name(first.command),
            reason = first.reason.as_str(),
            savings = format!("${:.4}/h", first.savings),
            replacement = first
                .replacement
                .as_ref()
                .map_or("none".to_string(), |r| r.instance_types.join(",")),
            "disrupting node(s) {}",
            first.nodes.join(", ")
        );
        if self.settings.dry_run {
            return Ok(None);
        }
        state::store(
            self.kube.clone(),
            ns,
            PENDING_KEY,
            &Option::<PendingDisruption>::None,
        )
        .await?;
        let message = taken_message(&first);
        for node in &first.nodes {
            self.node_event(dump, node, "DisruptionTerminating", &message, now)
                .await;
        }
        let replacement = self.start(dump, &first, summary).await?;
        if first.replacement.is_none() {
            // Nothing to wait for: the drain starts now, as Karpenter's would.
            let claims = claims_of(dump, &first.nodes);
            self.drain_and_delete(dump, &claims, now, summary).await?;
        }
        self.decide_next(snapshot, &catalog, &first, now).await?;
        Ok(replacement)
    }

    /// With `started` under way, decides the command after it now, so that it can be confirmed
    /// on the next tick instead of decided there.
    async fn decide_next(
        &self,
        snapshot: &mut Snapshot,
        catalog: &fleetwright_core::Catalog,
        started: &Disruption,
        now: DateTime<Utc>,
    ) -> Result<(), RuntimeError> {
        for node in snapshot
            .nodes
            .iter_mut()
            .filter(|n| started.nodes.contains(&n.name))
        {
            node.taints.push(fleetwright_core::model::Taint {
                key: TAINT_DISRUPTED.into(),
                value: String::new(),
                effect: fleetwright_core::model::TaintEffect::NoSchedule,
            });
        }
        let plan = disruption::plan(snapshot, catalog, now.timestamp());
        let Some(next) = plan.disruptions.first() else {
            return Ok(());
        };
        let key = command_key(next);
        info!(command = %key, savings = next.savings, "next disruption decided; confirming on a later tick");
        let pending = Some(PendingDisruption {
            key,
            decided_at: now,
        });
        state::store(
            self.kube.clone(),
            &self.settings.namespace,
            PENDING_KEY,
            &pending,
        )
        .await?;
        Ok(())
    }

    /// Logs every candidate left alone, and events it once per reason: the reasons last
    /// reported are kept in the state ConfigMap.
    async fn report_blocked(
        &self,
        dump: &ClusterDump,
        blocked: &[disruption::Blocked],
        now: DateTime<Utc>,
    ) -> Result<(), RuntimeError> {
        for b in blocked {
            info!(node = %b.node, reason = %b.reason, "not disrupting node");
        }
        if self.settings.dry_run {
            return Ok(());
        }
        let ns = &self.settings.namespace;
        let said: BTreeMap<String, String> = state::load(self.kube.clone(), ns, BLOCKED_KEY)
            .await
            .ok()
            .flatten()
            .unwrap_or_default();
        let current: BTreeMap<String, String> = blocked
            .iter()
            .map(|b| (b.node.clone(), b.reason.clone()))
            .collect();
        for (node, reason) in &current {
            if said.get(node) != Some(reason) {
                let message = format!("Cannot disrupt Node: {reason}");
                self.node_event(dump, node, "DisruptionBlocked", &message, now)
                    .await;
            }
        }
        if said != current {
            state::store(self.kube.clone(), ns, BLOCKED_KEY, &current).await?;
        }
        Ok(())
    }

    /// A Normal Event on a node (by name; its uid from the dump).
    async fn node_event(
        &self,
        dump: &ClusterDump,
        node: &str,
        reason: &str,
        message: &str,
        now: DateTime<Utc>,
    ) {
        let uid = dump
            .nodes
            .iter()
            .find(|n| n.metadata.name.as_deref() == Some(node))
            .and_then(|n| n.metadata.uid.clone());
        let reference = executor::reference("v1", "Node", node, uid);
        executor::record_event_or_warn(
            self.kube.clone(),
            &reference,
            false,
            reason,
            message,
            jiff(now),
        )
        .await;
    }

    /// Creates the replacement, then taints and annotates the candidates.
    async fn start(
        &self,
        dump: &ClusterDump,
        command: &Disruption,
        summary: &mut TickSummary,
    ) -> Result<Option<NodeClaim>, RuntimeError> {
        let mut value = format!(
            "{}/{}",
            command.reason.as_str(),
            command_name(command.command)
        );
        let mut replacement_claim = None;
        if let Some(replacement) = &command.replacement {
            let planned = &replacement.nodeclaim;
            let Some(claim) = executor::nodeclaim_in(dump, planned) else {
                return Ok(None);
            };
            let created = executor::create_nodeclaim(self.kube.clone(), &claim).await?;
            let name = created.metadata.name.clone().unwrap_or_default();
            info!(nodeclaim = %name, "created nodeclaim (replacement)");
            summary.nodeclaims_created.push(name.clone());
            value = format!("{value}/{name}");
            replacement_claim = Some(created);
        }
        for node in &command.nodes {
            let Some(claim) = dump.nodeclaims.iter().find(|c| {
                c.status.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node.as_str())
            }) else {
                continue;
            };
            let claim_name = claim.metadata.name.clone().unwrap_or_default();
            executor::update_node(self.kube.clone(), node, executor::cordoned).await?;
            executor::update_nodeclaim(
                self.kube.clone(),
                &claim_name,
                with_annotation(Some(value.clone())),
            )
            .await?;
        }
        Ok(replacement_claim)
    }

    /// Waits for the replacement, drains, and deletes; or abandons the command.
    async fn continue_command(
        &self,
        dump: &ClusterDump,
        claims: &[NodeClaim],
        in_progress: &[&NodeClaim],
        now: DateTime<Utc>,
        summary: &mut TickSummary,
    ) -> Result<(), RuntimeError> {
        let value = annotation(in_progress[0]).unwrap_or_default().to_string();
        let replacement = value.split('/').nth(2);
        if let Some(name) = replacement {
            match claims
                .iter()
                .find(|c| c.metadata.name.as_deref() == Some(name))
            {
                None => return self.abandon(dump, in_progress, name, now).await,
                Some(c)
                    if !has_condition(c, "Initialized")
                        && !summary.initialized.iter().any(|n| n == name) =>
                {
                    info!(replacement = %name, "waiting for the replacement to initialize");
                    return Ok(());
                }
                Some(_) => {}
            }
        }
        if self.settings.dry_run {
            return Ok(());
        }
        self.drain_and_delete(dump, in_progress, now, summary).await
    }

    /// Drains the candidates' nodes and deletes the NodeClaims whose nodes have nothing
    /// evictable left (or whose `terminationGracePeriod` is over).
    async fn drain_and_delete(
        &self,
        dump: &ClusterDump,
        in_progress: &[&NodeClaim],
        now: DateTime<Utc>,
        summary: &mut TickSummary,
    ) -> Result<(), RuntimeError> {
        for claim in in_progress {
            let Some(node) = dump.node_of(claim) else {
                executor::delete_nodeclaim(self.kube.clone(), &name(claim), false).await?;
                continue;
            };
            let node_name = node.metadata.name.clone().unwrap_or_default();
            let pods: Vec<Pod> = dump
                .pods
                .iter()
                .filter(|p| {
                    p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node_name.as_str())
                })
                .filter(|p| !executor::skipped_by_drain(p))
                .cloned()
                .collect();
            let started = self.drain_started(claim, now).await?;
            let drained = executor::drain(self.kube.clone(), &pods).await?;
            info!(node = %node_name, evicted = drained.evicted.len(), blocked = drained.blocked.len(), "draining node");
            let mut done = drained.blocked.is_empty() && drained.deferred.is_empty();
            if !done && grace_deadline(claim, started).is_some_and(|d| now >= d) {
                let left: Vec<Pod> = pods
                    .into_iter()
                    .filter(|p| {
                        !drained
                            .evicted
                            .contains(&fleetwright_kube::interruption::pod_key(p))
                    })
                    .collect();
                warn!(node = %node_name, pods = left.len(), "terminationGracePeriod is over; deleting the pods still on the node");
                executor::delete_pods(self.kube.clone(), &left).await?;
                done = true;
            }
            if done {
                executor::delete_nodeclaim(self.kube.clone(), &name(claim), false).await?;
                summary.disrupted.push(name(claim));
            }
        }
        Ok(())
    }

    /// When the claim's drain started: the annotation, or now (and the annotation is written).
    async fn drain_started(
        &self,
        claim: &NodeClaim,
        now: DateTime<Utc>,
    ) -> Result<DateTime<Utc>, RuntimeError> {
        let recorded = claim
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(DRAIN_STARTED_ANNOTATION))
            .and_then(|v| DateTime::parse_from_rfc3339(v).ok())
            .map(|t| t.with_timezone(&Utc));
        if let Some(t) = recorded {
            return Ok(t);
        }
        let stamp = now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        executor::update_nodeclaim(self.kube.clone(), &name(claim), |current| {
            let mut next = current.clone();
            let annotations = next
                .metadata
                .annotations
                .get_or_insert_with(Default::default);
            if annotations.contains_key(DRAIN_STARTED_ANNOTATION) {
                return None;
            }
            annotations.insert(DRAIN_STARTED_ANNOTATION.into(), stamp.clone());
            Some(next)
        })
        .await?;
        Ok(now)
    }

    async fn abandon(
        &self,
        dump: &ClusterDump,
        in_progress: &[&NodeClaim],
        replacement: &str,
        now: DateTime<Utc>,
    ) -> Result<(), RuntimeError> {
        warn!(%replacement, "the replacement is gone before it initialized; abandoning the disruption");
        if self.settings.dry_run {
            return Ok(());
        }
        for claim in in_progress {
            if let Some(node) = dump.node_of(claim).and_then(|n| n.metadata.name.clone()) {
                executor::update_node(self.kube.clone(), &node, uncordoned).await?;
            }
            executor::update_nodeclaim(self.kube.clone(), &name(claim), with_annotation(None))
                .await?;
            let reference = executor::reference(
                "karpenter.sh/v1",
                "NodeClaim",
                &name(claim),
                claim.metadata.uid.clone(),
            );
            let message =
                format!("Abandoned disruption: replacement {replacement} failed to launch");
            executor::record_event_or_warn(
                self.kube.clone(),
                &reference,
                true,
                "DisruptionBlocked",
                &message,
                jiff(now),
            )
            .await;
        }
        Ok(())
    }
}

fn name(claim: &NodeClaim) -> String {
    claim.metadata.name.clone().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeSpec, Taint};

    #[test]
    fn uncordoning_removes_only_the_disrupted_taint() {
        let taint = |key: &str| Taint {
            key: key.into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        };
        let node = Node {
            spec: Some(NodeSpec {
                taints: Some(vec![taint(TAINT_DISRUPTED), taint("team")]),
                ..Default::default()
            }),
            ..Default::default()
        };
        let out = uncordoned(&node).unwrap();
        let keys: Vec<String> = out
            .spec
            .unwrap()
            .taints
            .unwrap()
            .into_iter()
            .map(|t| t.key)
            .collect();
        assert_eq!(keys, ["team"]);
        assert!(uncordoned(&Node::default()).is_none());
    }

    #[test]
    fn annotations_are_set_once_and_removed() {
        let claim = NodeClaim::new("c", Default::default());
        let set = with_annotation(Some("empty/delete".into()))(&claim).unwrap();
        assert_eq!(annotation(&set), Some("empty/delete"));
        assert!(with_annotation(Some("empty/delete".into()))(&set).is_none());
        let cleared = with_annotation(None)(&set).unwrap();
        assert_eq!(annotation(&cleared), None);
    }
}
