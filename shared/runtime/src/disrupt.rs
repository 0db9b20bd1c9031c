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

use chrono::{DateTime, Duration, Utc};
use fleetwright_aws::cloud::Cloud;
use fleetwright_core::disruption::{self, Command, Disruption};
use fleetwright_core::labels::TAINT_DISRUPTED;
use fleetwright_core::Snapshot;
use fleetwright_kube::crds::NodeClaim;
use fleetwright_kube::dump::ClusterDump;
use fleetwright_kube::{executor, state};
use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod};
use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use crate::error::RuntimeError;
use crate::tick::{has_condition, jiff, Tick, TickSummary};

/// On a candidate's NodeClaim: `<reason>/<command>[/<replacement NodeClaim>]`.
pub const DISRUPTION_ANNOTATION: &str = "fleetwright.io/disruption";
/// The state ConfigMap key of a decision waiting for confirmation.
pub const PENDING_KEY: &str = "pendingDisruption";
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
    /// One disruption step: continue the command in progress, or decide (and confirm) the next.
    pub(crate) async fn disrupt(
        &self,
        dump: &ClusterDump,
        snapshot: &mut Snapshot,
        claims: &[NodeClaim],
        now: DateTime<Utc>,
        summary: &mut TickSummary,
    ) -> Result<(), RuntimeError> {
        let in_progress: Vec<&NodeClaim> = claims
            .iter()
            .filter(|c| c.metadata.deletion_timestamp.is_none() && annotation(c).is_some())
            .collect();
        if !in_progress.is_empty() {
            return self
                .continue_command(dump, claims, &in_progress, now, summary)
                .await;
        }
        if summary.pending_pods > 0 || !summary.nodeclaims_created.is_empty() {
            return Ok(());
        }
        self.decide(dump, snapshot, now, summary).await
    }

    async fn decide(
        &self,
        dump: &ClusterDump,
        snapshot: &mut Snapshot,
        now: DateTime<Utc>,
        summary: &mut TickSummary,
    ) -> Result<(), RuntimeError> {
        for class in &dump.nodeclasses {
            if let Ok(resolved) = self.cloud.nodeclass(class, now).await {
                let images = resolved.amis.iter().map(|a| a.id.clone()).collect();
                snapshot.node_class_images.insert(resolved.name, images);
            }
        }
        let catalog = self.cloud.catalog(now).await?;
        let plan = disruption::plan(snapshot, &catalog, now.timestamp());
        for b in &plan.blocked {
            info!(node = %b.node, reason = %b.reason, "not disrupting node");
        }
        let ns = &self.settings.namespace;
        let Some(first) = plan.disruptions.into_iter().next() else {
            state::store(
                self.kube.clone(),
                ns,
                PENDING_KEY,
                &Option::<PendingDisruption>::None,
            )
            .await?;
            return Ok(());
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
            return Ok(());
        }
        info!(
            command = command_name(first.command),
            reason = first.reason.as_str(),
            savings = format!("${:.4}/h", first.savings),
            replacement = ?first.replacement.as_ref().map(|r| &r.instance_types),
            "disrupting node(s) {}",
            first.nodes.join(", ")
        );
        if self.settings.dry_run {
            return Ok(());
        }
        state::store(
            self.kube.clone(),
            ns,
            PENDING_KEY,
            &Option::<PendingDisruption>::None,
        )
        .await?;
        self.start(dump, &first, summary).await
    }

    /// Creates the replacement, then taints and annotates the candidates.
    async fn start(
        &self,
        dump: &ClusterDump,
        command: &Disruption,
        summary: &mut TickSummary,
    ) -> Result<(), RuntimeError> {
        let mut value = format!(
            "{}/{}",
            command.reason.as_str(),
            command_name(command.command)
        );
        if let Some(replacement) = &command.replacement {
            let planned = &replacement.nodeclaim;
            let Some(pool) = dump
                .nodepools
                .iter()
                .find(|p| p.metadata.name.as_deref() == Some(planned.nodepool.as_str()))
            else {
                return Ok(());
            };
            let claim = executor::nodeclaim_for(pool, planned);
            let created = executor::create_nodeclaim(self.kube.clone(), &claim).await?;
            let name = created.metadata.name.clone().unwrap_or_default();
            info!(nodeclaim = %name, "created nodeclaim (replacement)");
            summary.nodeclaims_created.push(name.clone());
            value = format!("{value}/{name}");
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
        Ok(())
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
                Some(c) if !has_condition(c, "Initialized") => {
                    info!(replacement = %name, "waiting for the replacement to initialize");
                    return Ok(());
                }
                Some(_) => {}
            }
        }
        if self.settings.dry_run {
            return Ok(());
        }
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
            let drained = executor::drain(self.kube.clone(), &pods).await?;
            info!(node = %node_name, evicted = drained.evicted.len(), blocked = drained.blocked.len(), "draining node");
            if drained.blocked.is_empty() && drained.deferred.is_empty() {
                executor::delete_nodeclaim(self.kube.clone(), &name(claim), false).await?;
                summary.disrupted.push(name(claim));
            }
        }
        Ok(())
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
            let reference = ObjectReference {
                api_version: Some("karpenter.sh/v1".into()),
                kind: Some("NodeClaim".into()),
                name: claim.metadata.name.clone(),
                uid: claim.metadata.uid.clone(),
                ..Default::default()
            };
            let message =
                format!("Abandoned disruption: replacement {replacement} failed to launch");
            if let Err(e) = executor::record_event(
                self.kube.clone(),
                &reference,
                true,
                "DisruptionBlocked",
                &message,
                jiff(now),
            )
            .await
            {
                warn!(error = %e, "could not record the event");
            }
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
