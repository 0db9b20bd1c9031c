//! The reads a tick goes on without when they fail: the selectors default topology spread is
//! deduced from, and the storage objects volume attach limits are counted from (StorageClasses
//! and CSINodes). An RBAC that predates them, or a list that fails, leaves their feature out
//! with a warning instead of stopping the tick.

use k8s_openapi::api::storage::v1::{CSINode, StorageClass};

use super::*;

impl SnapshotReader {
    /// The selectors default spread is deduced from; none without default spread. Each kind is
    /// read page by page and only its selectors are kept (a cluster's ReplicaSets, templates
    /// and all, would be held at once otherwise). A list that fails leaves its kind out with a
    /// warning, as kube-scheduler goes on without it.
    pub(super) async fn selectors(&self) -> Selectors {
        if self.default_spread.is_empty() {
            return Selectors::default();
        }
        use crate::scheduler_config::selectors as of;
        let (mut out, controllers, replica_sets, stateful_sets) = futures::join!(
            self.selectors_of::<Service>(|p| of(p, &[], &[], &[])),
            self.selectors_of::<ReplicationController>(|p| of(&[], p, &[], &[])),
            self.selectors_of::<ReplicaSet>(|p| of(&[], &[], p, &[])),
            self.selectors_of::<StatefulSet>(|p| of(&[], &[], &[], p)),
        );
        for more in [controllers, replica_sets, stateful_sets] {
            out.merge(more);
        }
        out
    }

    async fn selectors_of<K>(&self, pick: fn(&[K]) -> Selectors) -> Selectors
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
    {
        let mut out = Selectors::default();
        let read = self
            .list_pages::<K>(Read::Consistent, |page, _, first| {
                if first {
                    out = Selectors::default();
                }
                out.merge(pick(&page));
                Ok(())
            })
            .await;
        match read {
            Ok(()) => out,
            Err(e) => {
                tracing::warn!(error = %e, "default topology spread goes on without this kind");
                Selectors::default()
            }
        }
    }

    /// The StorageClasses (a claim not yet bound has its CSI driver from its class) and the
    /// CSINodes (each node's attach limit per driver), each read whole; a list that fails is
    /// empty, and volumes are then not counted against limits.
    pub(super) async fn storage(&self) -> (Vec<StorageClass>, Vec<CSINode>) {
        let (classes, csinodes) = futures::join!(
            self.list::<StorageClass>(Read::Cached),
            self.list::<CSINode>(Read::Cached),
        );
        (
            or_empty("StorageClass", classes),
            or_empty("CSINode", csinodes),
        )
    }
}

/// The objects read, or none (with a warning) when the list failed.
fn or_empty<K>(kind: &str, read: Result<Vec<K>, KubeError>) -> Vec<K> {
    read.unwrap_or_else(|e| {
        tracing::warn!(kind, error = %e, "volume attach limits go on without this kind");
        Vec::new()
    })
}
