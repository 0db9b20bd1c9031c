//! Karpenter itself as the node autoscaler of a run against a real cluster
//! (`simulate --kubeconfig --karpenter BIN`): Karpenter's whole controller over kwok
//! nodes, from its KWOK cloud provider (built from Karpenter's Go module by
//! `scripts/peer-e2e.sh`), fed Fleetwright's catalog as its instance types. The scenario, the
//! cluster's controllers, kube-scheduler and kwok are the same as in a Fleetwright run; this
//! module owns what differs:
//! - Karpenter's own CRDs, installed from its module, and when its process starts (once the
//!   scenario's objects exist) and stops (before the clean-up; the process itself is
//!   [`super::karpenter_process`]'s);
//! - the scenario's node classes, written as KWOKNodeClasses whose registration delay is the
//!   simulated kubelets' [`JOIN_AFTER`], so nodes take as long to join under both autoscalers;
//! - the fleet, read back from the Nodes Karpenter made and priced from the same catalog, and
//!   the disruptions, from the events Karpenter records.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Context;
use fleetwright_cloud::Instance;
use fleetwright_core::labels::{CAPACITY_TYPE, INSTANCE_TYPE, NODEPOOL, ZONE};
use fleetwright_core::InstanceType;
use fleetwright_crds::NodeClaim;
use fleetwright_sim::SimInstance;
use k8s_openapi::api::core::v1::{Event, Node};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, PostParams};
use kube::Client;
use serde_json::{json, Value};
use tracing::{info, warn};

use super::super::report::{AutoscalerUsage, InterruptionOutcome, Invocations, Usage};
use super::super::scenario::Action;
use super::karpenter_process::Process;
use super::owned::{self, Run};
use super::{Live, JOIN_AFTER};

/// Karpenter's node class kind in its KWOK provider.
const KWOK_GROUP: &str = "karpenter.kwok.sh";
const KWOK_CLASS: &str = "KWOKNodeClass";
/// The label Karpenter's KWOK provider puts the offering's price in.
const PRICE_LABEL: &str = "eks-node-viewer/instance-price";

/// What to run as Karpenter: its KWOK controller and the directories of its CRDs.
#[derive(Clone, Debug)]
pub struct Karpenter {
    pub bin: PathBuf,
    pub crds: Vec<PathBuf>,
}

/// The scenario object as it is written for Karpenter's KWOK provider: an EC2NodeClass becomes
/// a KWOKNodeClass of the same name, and a NodePool refers to it; everything else is unchanged.
pub fn translate(object: &Value) -> Value {
    match object["kind"].as_str() {
        Some("EC2NodeClass") => json!({
            "apiVersion": format!("{KWOK_GROUP}/v1alpha1"),
            "kind": KWOK_CLASS,
            "metadata": {
                "name": object["metadata"]["name"],
                "labels": object["metadata"]["labels"].as_object().cloned().unwrap_or_default(),
            },
            "spec": {"nodeRegistrationDelay": format!("{}s", JOIN_AFTER.num_seconds())},
        }),
        Some("NodePool") => {
            let mut pool = object.clone();
            let reference = &mut pool["spec"]["template"]["spec"]["nodeClassRef"];
            let name = reference["name"].clone();
            *reference = json!({"group": KWOK_GROUP, "kind": KWOK_CLASS, "name": name});
            pool
        }
        _ => object.clone(),
    }
}

/// Creates the CRDs in `dirs` (every `*.yaml`) that the cluster lacks, labelled as this run's;
/// returns the names of all of them, to wait for.
pub async fn install_crds(
    admin: &Client,
    run: &Run,
    dirs: &[PathBuf],
) -> anyhow::Result<Vec<String>> {
    let api: Api<CustomResourceDefinition> = Api::all(admin.clone());
    let mut names = Vec::new();
    for dir in dirs {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .with_context(|| format!("--karpenter-crds {}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
            .collect();
        files.sort();
        for file in files {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("reading {}", file.display()))?;
            let mut crd: CustomResourceDefinition = serde_yaml::from_str(&text)
                .with_context(|| format!("{}: not a CustomResourceDefinition", file.display()))?;
            let name = crd.metadata.name.clone().unwrap_or_default();
            names.push(name.clone());
            if api.get_opt(&name).await?.is_some() {
                continue;
            }
            crd.metadata
                .labels
                .get_or_insert_with(Default::default)
                .insert(owned::RUN_LABEL.into(), run.id().into());
            api.create(&PostParams::default(), &crd)
                .await
                .with_context(|| format!("installing Karpenter's CRD {name}"))?;
            info!(target: "simulate::karpenter", crd = %name, "Karpenter's CustomResourceDefinition installed");
        }
    }
    Ok(names)
}

/// The run's Nodes that Karpenter made, as the instances they stand for (id: the Node's name),
/// priced from `types` (the offering of the Node's zone and capacity type), else from the price
/// label Karpenter's provider writes.
pub fn fleet(
    nodes: &[Node],
    types: &BTreeMap<String, InstanceType>,
) -> BTreeMap<String, SimInstance> {
    nodes
        .iter()
        .filter_map(|node| {
            let labels = node.metadata.labels.as_ref()?;
            let label = |k: &str| labels.get(k).cloned().unwrap_or_default();
            let name = node.metadata.name.clone()?;
            let (instance_type, zone, capacity) =
                (label(INSTANCE_TYPE), label(ZONE), label(CAPACITY_TYPE));
            let price = types
                .get(&instance_type)
                .and_then(|t| {
                    t.offerings
                        .iter()
                        .find(|o| o.zone == zone && o.capacity_type == capacity)
                })
                .map(|o| o.price)
                .or_else(|| label(PRICE_LABEL).parse().ok())
                .unwrap_or(0.0);
            let instance = Instance {
                id: name.clone(),
                instance_type,
                zone,
                state: "running".into(),
                capacity_type: capacity,
                image_id: String::new(),
                subnet_id: String::new(),
                security_groups: Vec::new(),
                launch_time: None,
                tags: BTreeMap::from([(NODEPOOL.to_string(), label(NODEPOOL))]),
                capacity_reservation_id: None,
                partition: None,
            };
            Some((
                name,
                SimInstance {
                    instance,
                    price,
                    warned: None,
                },
            ))
        })
        .collect()
}

/// The nodes Karpenter began to disrupt, from its `DisruptionTerminating` events on Nodes:
/// `Reason/delete:node`, each node once.
pub async fn disruptions(admin: &Client) -> anyhow::Result<Vec<String>> {
    let events: Api<Event> = Api::all(admin.clone());
    let params =
        ListParams::default().fields("reason=DisruptionTerminating,involvedObject.kind=Node");
    let mut found = Vec::new();
    for event in events.list(&params).await?.items {
        let reason = event
            .message
            .as_deref()
            .and_then(|m| m.strip_prefix("Disrupting Node: "))
            .unwrap_or("Unknown");
        let node = event.involved_object.name.unwrap_or_default();
        found.push(format!("{reason}/delete:{node}"));
    }
    Ok(found)
}

/// Whether Karpenter's run can play `action`: its KWOK provider has no AMIs, no capacity errors
/// and no node conditions to fail.
pub fn plays(action: &Action) -> bool {
    matches!(
        action,
        Action::Scale(_) | Action::Delete(_) | Action::Apply(_) | Action::Interrupt(_)
    )
}

impl Live {
    /// Installs Karpenter's CRDs (in place of Fleetwright's) before the scenario's objects;
    /// returns their names.
    pub(super) async fn install_karpenter_crds(&self) -> anyhow::Result<Vec<String>> {
        match &self.karpenter {
            Some(karpenter) => install_crds(&self.admin, &self.run, &karpenter.crds).await,
            None => Ok(Vec::new()),
        }
    }

    /// Starts Karpenter once the scenario's objects exist, and waits until it is healthy.
    pub(super) async fn start_karpenter(&mut self) -> anyhow::Result<()> {
        let Some(karpenter) = &self.karpenter else {
            return Ok(());
        };
        let types: Vec<InstanceType> = self.types.values().cloned().collect();
        let file = crate::peer::kwok::instance_types(&types)?;
        let mut process = Process::start(
            &karpenter.bin,
            &self.controller_kubeconfig,
            &file,
            &self.run,
        )
        .await?;
        let ready = process.ready().await;
        self.process = Some(process);
        ready
    }

    /// Stops Karpenter, if it runs, and returns what it used.
    pub(super) fn stop_karpenter(&mut self) -> Option<Usage> {
        let process = self.process.take()?;
        let log = process.log.clone();
        let usage = process.stop();
        info!(target: "simulate::karpenter", log = %log.display(), "Karpenter's log");
        Some(usage)
    }

    /// What the autoscaler used: Karpenter's process, or Fleetwright's invocations.
    pub(super) fn autoscaler_usage(&self, karpenter: Option<Usage>) -> AutoscalerUsage {
        match (&self.karpenter, karpenter) {
            (Some(_), usage) => AutoscalerUsage {
                name: "karpenter".into(),
                karpenter: usage,
                invocations: BTreeMap::new(),
            },
            (None, _) => AutoscalerUsage {
                name: "fleetwright".into(),
                karpenter: None,
                invocations: self
                    .invocations
                    .iter()
                    .map(|(f, (count, seconds))| {
                        let invocations = Invocations {
                            count: *count,
                            seconds: *seconds,
                        };
                        (f.to_string(), invocations)
                    })
                    .collect(),
            },
        }
    }

    /// Each second of a Karpenter run: the disruptions it began, every few seconds.
    pub(super) async fn karpenter_round(&mut self, t: i64) {
        if t % 5 != 0 {
            return;
        }
        match disruptions(&self.admin).await {
            Ok(found) => self.watch.note_disruptions(found, t),
            Err(e) => {
                warn!(target: "simulate::karpenter", error = %e, "listing Karpenter's disruption events failed")
            }
        }
    }

    /// The fleet Karpenter runs: this run's Nodes, priced.
    pub(super) async fn karpenter_fleet(&mut self) -> BTreeMap<String, SimInstance> {
        let api: Api<Node> = Api::all(self.admin.clone());
        let params = ListParams::default().labels(&self.run.selector());
        let nodes = match api.list(&params).await {
            Ok(list) => list.items,
            Err(e) => {
                warn!(target: "simulate::karpenter", error = %e, "listing the nodes failed; the fleet is as it was");
                return self.last_fleet.clone();
            }
        };
        let nodes: Vec<Node> = nodes.into_iter().filter(|n| self.run.owns(n)).collect();
        self.nodes = nodes
            .iter()
            .filter_map(|n| {
                let name = n.metadata.name.clone()?;
                let provider = n.spec.as_ref()?.provider_id.clone().unwrap_or_default();
                Some((name, provider))
            })
            .collect();
        self.last_fleet = fleet(&nodes, &self.types);
        self.last_fleet.clone()
    }

    /// A spot interruption under Karpenter: what its interruption controller does with the
    /// warning, deleting the NodeClaim of a spot node of the pool that holds workload pods
    /// (chosen as the simulated cloud chooses), so that the node is drained and replaced.
    pub(super) async fn interrupt_karpenter(&mut self, nodepool: &str, count: usize, t: i64) {
        let pods = self.pods().await;
        let mut busy: BTreeMap<String, usize> = BTreeMap::new();
        for pod in pods.iter().filter(|p| super::observe::workload(p)) {
            if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) {
                *busy.entry(node).or_default() += 1;
            }
        }
        let fleet = self.karpenter_fleet().await;
        let mut spot: Vec<&SimInstance> = fleet
            .values()
            .filter(|i| i.nodepool() == nodepool && i.instance.capacity_type == "spot")
            .collect();
        // Busy nodes first, as the simulated cloud warns them first.
        spot.sort_by_key(|i| (!busy.contains_key(&i.instance.id), i.instance.id.clone()));
        let busy_count = spot
            .iter()
            .filter(|i| busy.contains_key(&i.instance.id))
            .count();
        let mut chosen = Vec::new();
        while chosen.len() < count && !spot.is_empty() {
            let pool = if busy_count > chosen.len() {
                busy_count - chosen.len()
            } else {
                spot.len()
            };
            let pick = self.rng.below(pool.min(spot.len()));
            chosen.push(spot.remove(pick).clone());
        }
        if chosen.is_empty() {
            warn!(target: "simulate::cloud", %nodepool, "no spot node of the nodepool to interrupt");
        }
        let claims: Api<NodeClaim> = Api::all(self.admin.clone());
        for instance in chosen {
            let node = instance.instance.id.clone();
            let claim = self.claim_of(&node).await;
            self.watch.interruptions.push(InterruptionOutcome {
                at: t,
                instance_id: node.clone(),
                instance_type: instance.instance.instance_type.clone(),
                pods_displaced: busy.get(&node).copied().unwrap_or(0),
                node: Some(node.clone()),
                nodepool: nodepool.to_string(),
                ..Default::default()
            });
            let Some(claim) = claim else {
                warn!(target: "simulate::karpenter", %node, "no NodeClaim of this run for the interrupted node");
                continue;
            };
            info!(target: "simulate::cloud", %node, nodeclaim = %claim, "spot interruption warning; Karpenter's interruption controller deletes the NodeClaim");
            let deleted =
                owned::delete(&claims, &self.run, "NodeClaim", &claim, &Default::default()).await;
            if let Err(e) = deleted {
                warn!(target: "simulate::karpenter", %claim, error = %format!("{e:#}"), "deleting the interrupted NodeClaim failed");
            }
        }
    }

    /// The name of this run's NodeClaim whose Node is `node`.
    async fn claim_of(&self, node: &str) -> Option<String> {
        let claims: Api<NodeClaim> = Api::all(self.admin.clone());
        let params = ListParams::default().labels(&self.run.selector());
        let list = claims.list(&params).await.ok()?;
        list.items
            .into_iter()
            .filter(|c| self.run.owns(c))
            .find(|c| c.status.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
            .and_then(|c| c.metadata.name)
    }
}

#[cfg(test)]
#[path = "../../../tests/unit/simulate/live/karpenter.rs"]
mod tests;
