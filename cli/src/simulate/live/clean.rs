//! The end of a run against a real cluster: it deletes what it created and nothing else. Every
//! candidate comes from what the run recorded or from a list by its run label, and is checked
//! again, and deleted conditionally, through [`super::owned`]: the scenario's objects, the
//! NodeClaims and Nodes (their finalizers dropped: the simulated cloud ends with the run), the
//! tick's Lease and state ConfigMap, and the namespaces it created, when nothing of anyone
//! else's is in them. The CRDs it installed stay: deleting a CRD deletes every object of its
//! kind.

use std::collections::BTreeSet;

use fleetwright_crds::NodeClaim;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tracing::warn;

use super::owned::{self, Run};
use super::Live;

impl Live {
    /// Removes what the run created; a failure is logged, and the rest goes on.
    pub(super) async fn clean_up(&mut self) {
        if !self.prepared {
            return;
        }
        self.delete_applied().await;
        let claims: Api<NodeClaim> = Api::all(self.admin.clone());
        let left = self.ours(&claims, "NodeClaim", Vec::new()).await;
        for name in left {
            warn!(target: "simulate::cluster", nodeclaim = %name, "NodeClaim left at the end; removed with its finalizer");
            self.strip_and_delete(&claims, "NodeClaim", &name).await;
        }
        let nodes: Api<Node> = Api::all(self.admin.clone());
        let left = self
            .ours(&nodes, "Node", self.nodes.keys().cloned().collect())
            .await;
        for name in left {
            warn!(target: "simulate::cluster", node = %name, "node left at the end; removed");
            self.strip_and_delete(&nodes, "Node", &name).await;
        }
        self.nodes.clear();
        let leases: Api<Lease> = Api::namespaced(self.admin.clone(), &self.namespace);
        self.delete(&leases, "Lease", &self.lease.clone()).await;
        let maps: Api<ConfigMap> = Api::namespaced(self.admin.clone(), &self.namespace);
        self.delete(&maps, "ConfigMap", fleetwright_kube::state::STATE_CONFIGMAP)
            .await;
        for namespace in std::mem::take(&mut self.namespaces).iter().rev() {
            self.delete_namespace(namespace).await;
        }
    }

    /// The scenario's objects, last created first, and any other object of their kinds that
    /// carries the run label.
    async fn delete_applied(&mut self) {
        let applied = std::mem::take(&mut self.applied);
        for a in applied.iter().rev() {
            let api = dynamic(&self.admin, &a.resource, a.namespace.as_deref());
            self.delete(&api, &a.resource.kind, &a.name).await;
        }
        let mut kinds: Vec<&ApiResource> = Vec::new();
        for a in &applied {
            if !kinds.iter().any(|k| **k == a.resource) {
                kinds.push(&a.resource);
            }
        }
        for resource in kinds {
            let all: Api<DynamicObject> = Api::all_with(self.admin.clone(), resource);
            let found = match owned::list(&all, &self.run, &resource.kind).await {
                Ok(found) => found,
                Err(e) => {
                    warn!(target: "simulate::cluster", kind = %resource.kind, error = %format!("{e:#}"), "could not list this run's objects of the kind");
                    continue;
                }
            };
            for (namespace, name) in found {
                let api = dynamic(&self.admin, resource, namespace.as_deref());
                self.delete(&api, &resource.kind, &name).await;
            }
        }
    }

    /// `known` and the objects `api` lists by the run label, each checked to be this run's.
    async fn ours<K>(&self, api: &Api<K>, what: &str, known: Vec<String>) -> Vec<String>
    where
        K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
    {
        let mut names: BTreeSet<String> = known.into_iter().collect();
        match owned::list(api, &self.run, what).await {
            Ok(found) => names.extend(found.into_iter().map(|(_, n)| n)),
            Err(e) => {
                warn!(target: "simulate::cluster", kind = %what, error = %format!("{e:#}"), "could not list this run's objects of the kind")
            }
        }
        names.into_iter().collect()
    }

    /// Drops the finalizers of this run's `name`, then deletes it.
    async fn strip_and_delete<K>(&self, api: &Api<K>, what: &str, name: &str)
    where
        K: Resource + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
    {
        let stripped = owned::replace(api, &self.run, what, name, |o| {
            let finalizers = o.meta_mut().finalizers.take();
            finalizers.is_some_and(|f| !f.is_empty())
        })
        .await;
        if let Err(e) = stripped {
            warn!(target: "simulate::cluster", kind = %what, %name, error = %format!("{e:#}"), "could not drop the finalizers");
        }
        self.delete(api, what, name).await;
    }

    /// Deletes this run's `name` (in the background: its dependents follow), and logs why not.
    async fn delete<K>(&self, api: &Api<K>, what: &str, name: &str)
    where
        K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
    {
        let deleted = owned::delete(api, &self.run, what, name, &DeleteParams::background()).await;
        if let Err(e) = deleted {
            warn!(target: "simulate::cluster", kind = %what, %name, error = %format!("{e:#}"), "could not delete");
        }
    }

    /// Deletes a namespace the run created, unless something not of this run is in it.
    async fn delete_namespace(&self, name: &str) {
        match foreign_in(&self.admin, &self.run, name).await {
            Ok(None) => {
                let api: Api<Namespace> = Api::all(self.admin.clone());
                self.delete(&api, "Namespace", name).await;
            }
            Ok(Some(other)) => {
                warn!(target: "simulate::cluster", namespace = %name, holds = %other, "namespace left in place: it holds an object this run did not create")
            }
            Err(e) => {
                warn!(target: "simulate::cluster", namespace = %name, error = %format!("{e:#}"), "namespace left in place: could not check what it holds")
            }
        }
    }
}

fn dynamic(client: &Client, resource: &ApiResource, namespace: Option<&str>) -> Api<DynamicObject> {
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
        None => Api::all_with(client.clone(), resource),
    }
}

/// A pod, ConfigMap or Lease in `namespace` that is not this run's (the ConfigMap the
/// controller-manager puts in every namespace aside), if there is one.
async fn foreign_in(client: &Client, run: &Run, namespace: &str) -> anyhow::Result<Option<String>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let leases: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let mut found = first_foreign(&pods, run, "Pod").await?;
    if found.is_none() {
        found = first_foreign(&maps, run, "ConfigMap").await?;
    }
    if found.is_none() {
        found = first_foreign(&leases, run, "Lease").await?;
    }
    Ok(found)
}

async fn first_foreign<K>(api: &Api<K>, run: &Run, kind: &str) -> anyhow::Result<Option<String>>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let list = api.list(&ListParams::default()).await?;
    Ok(list
        .items
        .iter()
        .find(|o| !run.owns(*o) && o.name_any() != fleetwright_kube::dump::ROOT_CA_CONFIGMAP)
        .map(|o| format!("{kind} {}", o.name_any())))
}
