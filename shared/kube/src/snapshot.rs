//! Reading the cluster for one invocation: every kind the core needs, listed concurrently and
//! paginated with `limit`/`continue`, then filtered to what scheduling should see (bound pods and
//! truly pending ones) and converted into the core's snapshot.
//!
//! Pods, nodes, NodeClaims, NodePools and EC2NodeClasses are consistent reads: a stale view of
//! them could launch capacity twice. DaemonSets, PodDisruptionBudgets (the Eviction API enforces
//! the live budget anyway), PVs and PVCs are read from the API server's watch cache
//! (`resourceVersion=0`), where slight staleness is safe and the read is cheaper.

use std::fmt::Debug;

use fleetwright_core::default_spread::{DefaultSpread, Selectors};
use fleetwright_core::Snapshot;
use fleetwright_crds::conditions::{POD_SCHEDULED, UNSCHEDULABLE};
use k8s_openapi::api::apps::v1::{DaemonSet, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{
    ConfigMap, Node, PersistentVolume, PersistentVolumeClaim, Pod, ReplicationController, Service,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, ListParams};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;

use crate::crds::{EC2NodeClass, NodeClaim, NodeOverlay, NodePool};
use crate::dump::{ca_bundle_of, ClusterDump, ReadTime, SlimPod, ROOT_CA_CONFIGMAP};
use crate::error::KubeError;
use crate::rejected::Rejected;

/// How fresh a list must be.
#[derive(Clone, Copy, Debug)]
enum Read {
    /// From etcd, paginated.
    Consistent,
    /// From the watch cache (`resourceVersion=0`).
    Cached,
    /// As fresh as [`Read::Consistent`], in one answer: no page, so no continue token to lose.
    Whole,
}

/// Items per list page. Measured on a real API server (docs/benchmarks.md): listing 200,000
/// pods took 23–26 s in pages of 500 and 14–16 s in pages of 5,000; at 50,000 and 100,000 pods
/// the two were within their noise. A page of 5,000 pods is tens of MB, once, in the tick.
pub const DEFAULT_PAGE_SIZE: u32 = 5000;

/// Awaited between two pages of one listing (see [`SnapshotReader::between_pages`]).
pub type PageHook =
    std::sync::Arc<dyn Fn() -> futures::future::BoxFuture<'static, ()> + Send + Sync>;

/// Where the cluster's CA bundle (for Karpenter's EC2NodeClass hash) comes from.
#[derive(Clone, Debug)]
enum CaBundle {
    /// Not read: the read's EC2NodeClass hashes are unknown.
    Unread,
    /// Given by a setting (Karpenter's `CLUSTER_CA_BUNDLE`).
    Given(String),
    /// The `kube-root-ca.crt` ConfigMap of this namespace.
    RootCa(String),
}

/// Lists the cluster through a real `kube::Client`.
#[derive(Clone)]
pub struct SnapshotReader {
    client: Client,
    page_size: u32,
    between_pages: Option<PageHook>,
    ca: CaBundle,
    node_class_cel: bool,
    default_spread: Vec<DefaultSpread>,
}

impl Debug for SnapshotReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotReader")
            .field("page_size", &self.page_size)
            .finish()
    }
}

impl SnapshotReader {
    pub fn new(client: Client) -> Self {
        SnapshotReader {
            client,
            page_size: DEFAULT_PAGE_SIZE,
            between_pages: None,
            ca: CaBundle::Unread,
            node_class_cel: false,
            default_spread: Vec::new(),
        }
    }

    /// Karpenter's `NodeClassCEL` feature gate for the read's EC2NodeClasses (off unless set):
    /// see [`ClusterDump::node_class_cel`].
    pub fn with_node_class_cel(mut self, on: bool) -> Self {
        self.node_class_cel = on;
        self
    }

    /// kube-scheduler's default topology spread (Karpenter's scheduler config). With any, the
    /// read also lists Services, ReplicationControllers, ReplicaSets and StatefulSets, which
    /// each pod's default selector is deduced from.
    pub fn with_default_spread(mut self, defaults: Vec<DefaultSpread>) -> Self {
        self.default_spread = defaults;
        self
    }

    /// Also reads the cluster's CA bundle: `given` when set, else from the `kube-root-ca.crt`
    /// ConfigMap of `namespace` (what Karpenter hashes when it runs in the cluster). Without it
    /// the read's EC2NodeClass hashes are unknown, and no NodeClaim is found drifted by them.
    pub fn with_ca_bundle(mut self, given: Option<String>, namespace: &str) -> Self {
        self.ca = match given {
            Some(ca) => CaBundle::Given(ca),
            None => CaBundle::RootCa(namespace.to_string()),
        };
        self
    }

    /// Awaits `hook` before each page that continues a listing: how a test changes the cluster
    /// (or lets etcd compact it) while a listing is half read.
    pub fn between_pages(mut self, hook: PageHook) -> Self {
        self.between_pages = Some(hook);
        self
    }

    pub fn with_page_size(mut self, page_size: u32) -> Self {
        self.page_size = page_size.max(1);
        self
    }

    /// Every object, as a dump (pods already filtered to bound and pending ones). Pods are
    /// converted into the core model page by page and kept slim (see
    /// [`ClusterDump::converted_pods`]), so a large cluster is never held twice in full.
    pub async fn read_dump(&self) -> Result<ClusterDump, KubeError> {
        let started = std::time::Instant::now();
        let (volumes, (storage_classes, csinodes)) = futures::join!(
            async {
                futures::try_join!(
                    self.list::<PersistentVolumeClaim>(Read::Cached),
                    self.list::<PersistentVolume>(Read::Cached),
                )
            },
            self.storage(),
        );
        let (pvcs, pvs) = volumes?;
        let zones = crate::convert::claims(&pvcs, &pvs, &storage_classes, false);
        let (
            (pods, converted, mut rejected, convert_time),
            nodes,
            daemonsets,
            pdbs,
            (nodepools, bad_pools),
            (nodeclasses, bad_classes),
            (nodeclaims, bad_claims),
            nodeoverlays,
        ) = futures::try_join!(
            self.pods(&zones),
            self.list::<Node>(Read::Consistent),
            self.list::<DaemonSet>(Read::Cached),
            self.list::<PodDisruptionBudget>(Read::Cached),
            self.list_each::<NodePool>(),
            self.list_each::<EC2NodeClass>(),
            self.list_each::<NodeClaim>(),
            self.overlays(),
        )?;
        rejected.extend(bad_pools.into_iter().chain(bad_classes).chain(bad_claims));
        // Another provider's NodePools (EKS Auto Mode's) are not Fleetwright's to plan with,
        // nor to write a status to.
        let (mut nodepools, mut foreign_pools) = (nodepools, std::collections::BTreeSet::new());
        nodepools.retain(|p| {
            let theirs = crate::convert::foreign(p);
            if theirs {
                foreign_pools.extend(p.metadata.name.clone());
            }
            !theirs
        });
        let ca_bundle = self.ca_bundle().await?;
        let selectors = self.selectors().await;
        let mut foreign = ClusterDump {
            nodeclaims,
            ..Default::default()
        };
        foreign.foreign.pools = foreign_pools;
        crate::dump::drop_foreign_claims(&mut foreign);
        let ClusterDump {
            nodeclaims,
            foreign,
            ..
        } = foreign;
        tracing::debug!(
            kept = pods.len(),
            nodes = nodes.len(),
            nodeclaims = nodeclaims.len(),
            "read cluster"
        );
        Ok(ClusterDump {
            pods: Vec::new(),
            slim_pods: pods,
            nodes,
            daemonsets,
            pdbs,
            pvcs,
            pvs,
            storage_classes,
            csinodes,
            nodepools,
            nodeclasses,
            nodeclaims,
            nodeoverlays,
            skipped: Vec::new(),
            converted_pods: Some(converted),
            slim: true,
            notes: Vec::new(),
            ca_bundle,
            rejected,
            warnings: Vec::new(),
            expanded: Vec::new(),
            node_class_cel: self.node_class_cel,
            default_spread: self.default_spread.clone(),
            selectors,
            read_time: ReadTime {
                list: started.elapsed().saturating_sub(convert_time),
                convert: convert_time,
            },
            observed_at: None,
            foreign,
        })
    }

    /// The cluster's CA bundle, when this reader reads it. A ConfigMap that is not there (a
    /// cluster without the root CA publisher) or may not be read (RBAC from before this) leaves
    /// it unknown, with a warning; any other failure fails the read, since hashing with a wrong
    /// bundle would make every NodeClaim look drifted.
    async fn ca_bundle(&self) -> Result<Option<String>, KubeError> {
        let namespace = match &self.ca {
            CaBundle::Unread => return Ok(None),
            CaBundle::Given(ca) => return Ok(Some(ca.clone())),
            CaBundle::RootCa(namespace) => namespace,
        };
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), namespace);
        let read =
            crate::retry::with_retries("reading the cluster CA", || api.get_opt(ROOT_CA_CONFIGMAP))
                .await;
        let found = match read {
            Ok(found) => found,
            Err(kube::Error::Api(status)) if status.code == 403 => {
                tracing::warn!(%namespace, "may not read {ROOT_CA_CONFIGMAP}; EC2NodeClass drift by hash is off");
                None
            }
            Err(e) => return Err(crate::executor::api_error("ConfigMap", e)),
        };
        let ca = found.and_then(|cm| cm.data?.remove("ca.crt"));
        if ca.is_none() {
            tracing::warn!(%namespace, "no {ROOT_CA_CONFIGMAP} with a ca.crt; EC2NodeClass drift by hash is off");
        }
        Ok(ca.map(|ca| ca_bundle_of(&ca)))
    }

    /// The NodeOverlays; none when the cluster does not serve them (Karpenter's CRD not
    /// installed: 404) or the role may not read them (manifests from before them: 403).
    async fn overlays(&self) -> Result<Vec<NodeOverlay>, KubeError> {
        let api: Api<NodeOverlay> = Api::all(self.client.clone());
        let params = ListParams::default();
        match crate::retry::with_retries("listing NodeOverlay", || api.list(&params)).await {
            Ok(list) => Ok(list.items),
            Err(kube::Error::Api(status)) if status.code == 404 => {
                tracing::debug!("the cluster serves no NodeOverlays");
                Ok(Vec::new())
            }
            Err(kube::Error::Api(status)) if status.code == 403 => {
                tracing::warn!("may not list NodeOverlays (apply `fleetwright manifests` again); planning without them");
                Ok(Vec::new())
            }
            Err(e) => Err(KubeError::Api {
                kind: "listing NodeOverlay".into(),
                reason: e.to_string(),
            }),
        }
    }

    /// The schedulable pods, slim, and their core conversions; a pod that does not convert is
    /// left out and returned with its error.
    async fn pods(&self, zones: &crate::convert::Claims) -> Result<ReadPods, KubeError> {
        let mut slim = Vec::new();
        let mut converted = Vec::new();
        let mut rejected = Vec::new();
        let mut converting = std::time::Duration::ZERO;
        self.list_pages::<Pod>(Read::Consistent, |page, remaining, first| {
            let started = std::time::Instant::now();
            if first {
                slim.clear();
                converted.clear();
                rejected.clear();
            }
            slim.reserve(page.len() + remaining);
            converted.reserve(page.len() + remaining);
            for pod in page.into_iter().filter(schedulable_view) {
                match crate::convert::pod(&pod, zones) {
                    Ok(c) => {
                        converted.push(c);
                        slim.push(SlimPod::new(pod));
                    }
                    Err(e) => {
                        rejected.push(Rejected::new("Pod", &pod.metadata, e));
                        // Drains must still see a bound pod they cannot read, and the core
                        // must not take its node for empty.
                        if let Some(placeholder) = crate::convert::unreadable_pod(&pod) {
                            converted.push(placeholder);
                            slim.push(SlimPod::new(pod));
                        }
                    }
                }
            }
            converting += started.elapsed();
            Ok(())
        })
        .await?;
        Ok((slim, converted, rejected, converting))
    }

    /// Every object of a Karpenter kind, each deserialized on its own: one that does not fit the
    /// type (a field of the wrong type, written under an older or looser CRD) is returned as
    /// rejected, with the path of the field, instead of failing the whole listing.
    async fn list_each<K>(&self) -> Result<(Vec<K>, Vec<Rejected>), KubeError>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
    {
        let raw: Vec<Lenient<K>> = self.list(Read::Consistent).await?;
        let mut items = Vec::with_capacity(raw.len());
        let mut rejected = Vec::new();
        for item in raw {
            match item.typed() {
                Ok(k) => items.push(k),
                Err(r) => rejected.push(*r),
            }
        }
        Ok((items, rejected))
    }

    /// What an interruption needs of the cluster: the NodeClaims of these instances, their
    /// Nodes, and the pods on those Nodes. The NodeClaims are listed first; pods are read only for
    /// the nodes involved (none at all when no instance is this cluster's), so an EC2 event about
    /// some other instance of the account costs one list of NodeClaims, not a read of every pod.
    pub async fn read_for_instances(&self, ids: &[String]) -> Result<ClusterDump, KubeError> {
        let (claims, rejected) = self.list_each::<NodeClaim>().await?;
        let ours = |c: &NodeClaim| {
            let provider = c.status.as_ref().and_then(|s| s.provider_id.as_deref());
            let id = provider.and_then(|p| p.rsplit('/').next());
            id.is_some_and(|id| ids.iter().any(|i| i == id))
        };
        // Another provider's (EKS Auto Mode's) instances are its own to handle.
        let ours = |c: &NodeClaim| ours(c) && !crate::convert::foreign_claim(c);
        let nodeclaims: Vec<NodeClaim> = claims.into_iter().filter(ours).collect();
        let names: Vec<String> = nodeclaims
            .iter()
            .filter_map(|c| c.status.as_ref()?.node_name.clone())
            .collect();
        let nodes_api: Api<Node> = Api::all(self.client.clone());
        let pods_api: Api<Pod> = Api::all(self.client.clone());
        let mut nodes = Vec::new();
        let mut pods = Vec::new();
        for name in &names {
            let what = format!("reading Node {name}");
            let node = crate::retry::with_retries(&what, || nodes_api.get_opt(name))
                .await
                .map_err(|e| KubeError::Api {
                    kind: what.clone(),
                    reason: e.to_string(),
                })?;
            nodes.extend(node);
            let params = ListParams::default().fields(&format!("spec.nodeName={name}"));
            let what = format!("listing the pods of Node {name}");
            let on = crate::retry::with_retries(&what, || pods_api.list(&params))
                .await
                .map_err(|e| KubeError::Api {
                    kind: what.clone(),
                    reason: e.to_string(),
                })?;
            pods.extend(on.items.into_iter().filter(|p| {
                p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(name.as_str())
            }));
        }
        Ok(ClusterDump {
            pods,
            nodes,
            nodeclaims,
            rejected,
            ..Default::default()
        })
    }

    /// The core snapshot of the cluster now.
    pub async fn read(&self) -> Result<Snapshot, KubeError> {
        crate::convert::take_snapshot(&mut self.read_dump().await?)
    }

    async fn list<K>(&self, read: Read) -> Result<Vec<K>, KubeError>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
    {
        let mut items = Vec::new();
        self.list_pages::<K>(read, |page, remaining, first| {
            if first {
                items.clear();
            }
            // The API server counts what is left after each page; reserving it avoids doubling
            // the buffer (and holding both copies) as pages arrive.
            items.reserve(page.len() + remaining);
            items.extend(page);
            Ok(())
        })
        .await?;
        Ok(items)
    }

    /// Lists every page of a kind, handing each page (the count the server says remains, and
    /// whether the page starts a listing) to `on_page` as it arrives. When the server has dropped
    /// the listing's continue token (410 Gone: the snapshot it paged through was compacted), the
    /// listing starts again from the first page, up to [`RELISTS`] times; `on_page` is told, so
    /// it drops what it kept of the abandoned listing. After that (a listing that takes longer
    /// than etcd keeps its snapshots, every time) the list is read whole, in one consistent
    /// answer: as fresh as the pages, with no continue token to lose, at the cost of holding
    /// the whole answer at once.
    async fn list_pages<K>(
        &self,
        mut read: Read,
        mut on_page: impl FnMut(Vec<K>, usize, bool) -> Result<(), KubeError>,
    ) -> Result<(), KubeError>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
    {
        let api: Api<K> = Api::all(self.client.clone());
        let what = format!("listing {}", K::kind(&()));
        let mut token: Option<String> = None;
        let mut relists = 0;
        loop {
            let mut params = match read {
                Read::Consistent => ListParams::default().limit(self.page_size),
                // The watch cache serves the whole list at once; `limit` does not apply to it.
                Read::Cached => ListParams::default().match_any(),
                Read::Whole => ListParams::default(),
            };
            if let Some(t) = &token {
                params = params.continue_token(t);
                if let Some(hook) = &self.between_pages {
                    hook().await;
                }
            }
            let page = match crate::retry::with_retries(&what, || api.list(&params)).await {
                Err(kube::Error::Api(status)) if status.code == 410 && token.is_some() => {
                    token = None;
                    if relists < RELISTS {
                        tracing::warn!(%what, "the continue token expired; listing again from the start");
                        relists += 1;
                    } else {
                        tracing::warn!(%what, relists, "the continue token expired on every listing; reading the whole list in one answer");
                        read = Read::Whole;
                    }
                    continue;
                }
                other => other.map_err(|e| KubeError::Api {
                    kind: what.clone(),
                    reason: e.to_string(),
                })?,
            };
            let remaining = page.metadata.remaining_item_count.unwrap_or(0).max(0);
            on_page(
                page.items,
                usize::try_from(remaining).unwrap_or(0),
                token.is_none(),
            )?;
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(next) => token = Some(next),
                None => return Ok(()),
            }
        }
    }
}

/// The pods of a read: slim, converted, those that did not convert, and the time converting
/// took.
type ReadPods = (
    Vec<SlimPod>,
    Vec<fleetwright_core::model::Pod>,
    Vec<Rejected>,
    std::time::Duration,
);

/// One object of kind `K` as the API server sent it, deserialized into `K` later and on its
/// own ([`Lenient::typed`]).
#[derive(Clone, Debug, serde::Deserialize)]
#[serde(bound = "")]
struct Lenient<K> {
    metadata: kube::api::ObjectMeta,
    #[serde(flatten)]
    rest: serde_json::Map<String, serde_json::Value>,
    #[serde(skip)]
    kind: std::marker::PhantomData<K>,
}

impl<K: Resource<DynamicType = ()> + DeserializeOwned> Lenient<K> {
    fn typed(self) -> Result<K, Box<Rejected>> {
        let meta = self.metadata.clone();
        let mut value = self.rest;
        value.insert(
            "metadata".into(),
            serde_json::to_value(&self.metadata).unwrap_or_default(),
        );
        serde_path_to_error::deserialize(serde_json::Value::Object(value)).map_err(|e| {
            let path = e.path().to_string();
            Box::new(Rejected::new(
                &K::kind(&()),
                &meta,
                format!("{path}: {}", e.into_inner()),
            ))
        })
    }
}

impl<K: Resource<DynamicType = ()>> Resource for Lenient<K> {
    type DynamicType = ();
    type Scope = K::Scope;
    fn kind(_: &()) -> std::borrow::Cow<'_, str> {
        K::kind(&())
    }
    fn group(_: &()) -> std::borrow::Cow<'_, str> {
        K::group(&())
    }
    fn version(_: &()) -> std::borrow::Cow<'_, str> {
        K::version(&())
    }
    fn plural(_: &()) -> std::borrow::Cow<'_, str> {
        K::plural(&())
    }
    fn meta(&self) -> &kube::api::ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut kube::api::ObjectMeta {
        &mut self.metadata
    }
}

/// How many times one listing starts again after its continue token expired.
pub const RELISTS: u32 = 3;

/// Pods scheduling should see: bound, non-terminal pods, and pending ones.
fn schedulable_view(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded") | Some("Failed")) {
        return false;
    }
    let bound = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    bound || is_pending(pod)
}

/// A pod is pending for provisioning exactly when kube-scheduler marked it `PodScheduled=False`
/// with reason `Unschedulable`, it has no `nodeName` and no `nominatedNodeName`, and no
/// DaemonSet owns it.
pub fn is_pending(pod: &Pod) -> bool {
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    let unschedulable = status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| {
            c.type_ == POD_SCHEDULED
                && c.status == "False"
                && c.reason.as_deref() == Some(UNSCHEDULABLE)
        });
    let no_node = spec
        .and_then(|s| s.node_name.as_deref())
        .is_none_or(str::is_empty);
    let not_nominated = status
        .and_then(|s| s.nominated_node_name.as_deref())
        .is_none_or(str::is_empty);
    let daemonset = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "DaemonSet");
    unschedulable && no_node && not_nominated && !daemonset
}

mod optional;

#[cfg(test)]
#[path = "../tests/unit/snapshot.rs"]
mod tests;
