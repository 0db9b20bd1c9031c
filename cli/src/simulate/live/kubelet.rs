//! The kubelets of a run against a real cluster: a Node for each instance booted long enough,
//! named for this run (`simulated-<run>-ip-…`, a name no EC2 instance has) and labelled as
//! its own; its startup taints removed once kwok has made it Ready; deleted when its instance is
//! gone. A Node that cannot be created under its name is never taken over, and every change
//! and delete goes through [`super::owned`].

use std::collections::BTreeMap;

use anyhow::Context;
use chrono::{DateTime, Utc};
use fleetwright_crds::NodeClaim;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, ListParams};
use serde_json::{json, Value};
use tracing::{info, warn};

use super::observe::ready;
use super::owned::{self, Run};
use super::{Live, JOIN_AFTER, SIMULATED};

/// The name of the Node this run registers for the simulated cloud's node `simulated` (an EC2
/// style `ip-10-0-1-2.ec2.internal`): the run's id in it, and no EC2 domain, so that it can be
/// neither a real node's name nor another run's.
pub fn node_name(run: &Run, simulated: &str) -> String {
    let host = simulated.split('.').next().unwrap_or(simulated);
    format!("simulated-{}-{host}", run.id())
}

impl Live {
    /// One round of the kubelets.
    pub(super) async fn kubelet(&mut self, now: DateTime<Utc>) -> anyhow::Result<()> {
        let live = self.cloud.live();
        let providers: BTreeMap<String, &fleetwright_sim::SimInstance> = live
            .values()
            .map(|i| (format!("aws:///{}/{}", i.instance.zone, i.instance.id), i))
            .collect();
        let api: Api<Node> = Api::all(self.admin.clone());
        let gone: Vec<String> = self
            .nodes
            .iter()
            .filter(|(_, p)| !providers.contains_key(*p))
            .map(|(n, _)| n.clone())
            .collect();
        for name in gone {
            if owned::delete(&api, &self.run, "Node", &name, &DeleteParams::default()).await? {
                info!(target: "simulate::kubelet", node = %name, "node removed: its instance is gone");
            }
            self.nodes.remove(&name);
        }
        let claims: Vec<Value> = Api::<NodeClaim>::all(self.admin.clone())
            .list(&ListParams::default().labels(&self.run.selector()))
            .await
            .context("listing NodeClaims")?
            .items
            .iter()
            .filter(|c| self.run.owns(*c))
            .filter_map(|c| serde_json::to_value(c).ok())
            .collect();
        for (provider, instance) in &providers {
            let booted = instance
                .instance
                .launch_time
                .is_some_and(|l| now - l >= JOIN_AFTER);
            let known =
                self.nodes.values().any(|p| p == provider) || self.refused.contains(provider);
            if !booted || known {
                continue;
            }
            let node = fleetwright_sim::cluster::node_object(
                &self.types,
                provider,
                instance,
                &claims,
                now,
            );
            let node = self.registered(node);
            let name = node["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let typed: Node = serde_json::from_value(node.clone())?;
            match owned::create(&api, &self.run, "Node", &typed).await {
                Ok(_) => {
                    info!(target: "simulate::kubelet", node = %name, instance_id = %instance.instance.id, "node registered");
                    self.nodes.insert(name, provider.clone());
                    self.admit_node(&node, now).await;
                }
                Err(e) if e.downcast_ref::<owned::Taken>().is_some() => {
                    warn!(target: "simulate::kubelet", node = %name, error = %format!("{e:#}"), "the node is not registered: its name is taken by a node this run did not create");
                    self.refused.insert(provider.clone());
                }
                Err(e) => return Err(e),
            }
        }
        self.remove_startup_taints(&claims).await
    }

    /// The simulated cloud's Node as this run registers it: renamed for the run, labelled as
    /// its own, annotated for kwok, without conditions (kwok sets them).
    fn registered(&self, mut node: Value) -> Value {
        let simulated = node["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let name = node_name(&self.run, &simulated);
        let mut labels = node["metadata"]["labels"].clone();
        labels[fleetwright_core::labels::HOSTNAME] = json!(name);
        node["metadata"] = json!({"name": name, "labels": labels,
            "annotations": {"kwok.x-k8s.io/node": "fake", SIMULATED: "true"}});
        self.run.stamp(&mut node);
        if let Some(status) = node["status"].as_object_mut() {
            status.remove("conditions");
        }
        node
    }

    /// What a CNI or another agent does once the node is up: removes the startup taints.
    async fn remove_startup_taints(&self, claims: &[Value]) -> anyhow::Result<()> {
        let api: Api<Node> = Api::all(self.admin.clone());
        for (name, provider) in &self.nodes {
            let startup: Vec<&Value> = claims
                .iter()
                .filter(|c| c["status"]["providerID"] == provider.as_str())
                .flat_map(|c| c["spec"]["startupTaints"].as_array().into_iter().flatten())
                .collect();
            if startup.is_empty() {
                continue;
            }
            owned::replace(&api, &self.run, "Node", name, |node| {
                if !ready(node) {
                    return false;
                }
                let Some(spec) = node.spec.as_mut() else {
                    return false;
                };
                let taints = spec.taints.get_or_insert_with(Vec::new);
                let before = taints.len();
                taints.retain(|t| !startup.iter().any(|s| s["key"] == t.key.as_str()));
                taints.len() < before
            })
            .await
            .with_context(|| format!("removing node {name}'s startup taints"))?;
        }
        Ok(())
    }
}
