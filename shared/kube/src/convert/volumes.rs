//! What a pod's persistent volumes tell the scheduler: the zones a bound volume pins the pod to,
//! and the CSI driver each claim attaches through, counted against a node's attach limit per
//! driver (its CSINode), as Karpenter's volume usage counts them: a claim's driver is its bound
//! volume's (`spec.csi.driver`, or the in-tree EBS plugin's CSI name), else its StorageClass's
//! provisioner (an in-tree provisioner by its CSI name). A claim with neither is not counted.

use std::collections::{BTreeMap, BTreeSet};

use fleetwright_core::labels::{EBS_CSI_ZONE, ZONE};
use fleetwright_core::model as core;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod, PodSpec};
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};

/// The EBS CSI driver, which the in-tree `kubernetes.io/aws-ebs` plugin migrated to.
const EBS_CSI_DRIVER: &str = "ebs.csi.aws.com";

/// In-tree provisioners and the CSI drivers that replaced them (the CSI translation library's
/// names for the plugins a cluster on AWS can hold).
const IN_TREE: [(&str, &str); 4] = [
    ("kubernetes.io/aws-ebs", EBS_CSI_DRIVER),
    ("kubernetes.io/gce-pd", "pd.csi.storage.gke.io"),
    ("kubernetes.io/azure-disk", "disk.csi.azure.com"),
    ("kubernetes.io/cinder", "cinder.csi.openstack.org"),
];

/// Facts about persistent volume claims, by (namespace, claim name).
#[derive(Clone, Debug, Default)]
pub struct Claims {
    /// The zones of each bound claim's volume.
    pub zones: BTreeMap<(String, String), BTreeSet<String>>,
    /// The CSI driver each claim attaches through.
    pub drivers: BTreeMap<(String, String), String>,
}

impl Claims {
    /// Puts the pod's volume zones and counted volumes on its conversion.
    pub fn apply(&self, pod: &Pod, spec: &PodSpec, out: &mut core::Pod) {
        for v in spec.volumes.iter().flatten() {
            let Some(claim) = claim_name(pod, v) else {
                continue;
            };
            let key = (out.namespace.clone(), claim);
            if let Some(z) = self.zones.get(&key) {
                let merged = match &out.volume_zones {
                    Some(prev) => prev.intersection(z).cloned().collect(),
                    None => z.clone(),
                };
                out.volume_zones = Some(merged);
            }
            if let Some(driver) = self.drivers.get(&key) {
                let id = format!("{}/{}", key.0, key.1);
                if !out.volumes.iter().any(|(d, i)| d == driver && *i == id) {
                    out.volumes.push((driver.clone(), id));
                }
            }
        }
    }
}

/// The claim a pod volume mounts: a PersistentVolumeClaim by name, or the claim of a generic
/// ephemeral volume (`<pod>-<volume>`).
fn claim_name(pod: &Pod, v: &k8s_openapi::api::core::v1::Volume) -> Option<String> {
    if let Some(claim) = &v.persistent_volume_claim {
        return Some(claim.claim_name.clone());
    }
    v.ephemeral.as_ref()?;
    Some(format!(
        "{}-{}",
        pod.metadata.name.as_deref().unwrap_or_default(),
        v.name
    ))
}

/// The claims' zones and drivers, from the claims, volumes and StorageClasses read.
pub fn claims(
    pvcs: &[PersistentVolumeClaim],
    pvs: &[PersistentVolume],
    classes: &[StorageClass],
) -> Claims {
    let by_name: BTreeMap<&str, &PersistentVolume> = pvs
        .iter()
        .filter_map(|pv| Some((pv.metadata.name.as_deref()?, pv)))
        .collect();
    let provisioners: BTreeMap<&str, &str> = classes
        .iter()
        .filter_map(|c| Some((c.metadata.name.as_deref()?, c.provisioner.as_str())))
        .collect();
    let mut out = Claims::default();
    for pvc in pvcs {
        let key = (
            pvc.metadata.namespace.clone().unwrap_or_default(),
            pvc.metadata.name.clone().unwrap_or_default(),
        );
        let spec = pvc.spec.as_ref();
        let volume = spec
            .and_then(|s| s.volume_name.as_deref())
            .filter(|v| !v.is_empty());
        let driver = match volume {
            // A bound claim is counted by its volume's driver, or not at all.
            Some(v) => by_name.get(v).and_then(|pv| volume_driver(pv)),
            None => spec
                .and_then(|s| s.storage_class_name.as_deref())
                .and_then(|c| provisioners.get(c))
                .map(|p| csi_name(p)),
        };
        if let Some(zones) = volume.and_then(|v| by_name.get(v)).map(|pv| pv_zones(pv)) {
            if !zones.is_empty() {
                out.zones.insert(key.clone(), zones);
            }
        }
        if let Some(driver) = driver.filter(|d| !d.is_empty()) {
            out.drivers.insert(key, driver);
        }
    }
    out
}

/// The CSI driver of a volume: its `csi.driver`, or EBS's for an in-tree EBS volume.
fn volume_driver(pv: &PersistentVolume) -> Option<String> {
    let spec = pv.spec.as_ref()?;
    if let Some(csi) = &spec.csi {
        return Some(csi.driver.clone());
    }
    spec.aws_elastic_block_store
        .as_ref()
        .map(|_| EBS_CSI_DRIVER.to_string())
}

/// A provisioner's CSI driver name: an in-tree plugin's replacement, or itself.
fn csi_name(provisioner: &str) -> String {
    IN_TREE
        .iter()
        .find(|(tree, _)| *tree == provisioner)
        .map_or(provisioner, |(_, csi)| csi)
        .to_string()
}

/// The zones a volume's node affinity or zone label pins it to.
fn pv_zones(pv: &PersistentVolume) -> BTreeSet<String> {
    let mut zones = BTreeSet::new();
    if let Some(z) = pv.metadata.labels.as_ref().and_then(|l| l.get(ZONE)) {
        zones.insert(z.clone());
    }
    let terms = pv
        .spec
        .as_ref()
        .and_then(|s| s.node_affinity.as_ref())
        .and_then(|a| a.required.as_ref());
    for term in terms
        .map(|t| t.node_selector_terms.as_slice())
        .unwrap_or_default()
    {
        for e in term.match_expressions.iter().flatten() {
            if (e.key == ZONE || e.key == EBS_CSI_ZONE) && e.operator == "In" {
                zones.extend(e.values.iter().flatten().cloned());
            }
        }
    }
    zones
}

/// Each node's attach limit per CSI driver, from its CSINode (a driver that reports no
/// `allocatable.count` has no limit).
pub fn volume_limits(csinodes: &[CSINode]) -> BTreeMap<String, BTreeMap<String, u32>> {
    csinodes
        .iter()
        .filter_map(|c| {
            let limits: BTreeMap<String, u32> = c
                .spec
                .drivers
                .iter()
                .filter_map(|d| {
                    let count = d.allocatable.as_ref()?.count?;
                    Some((d.name.clone(), u32::try_from(count).ok()?))
                })
                .collect();
            Some((c.metadata.name.clone()?, limits))
        })
        .filter(|(_, limits)| !limits.is_empty())
        .collect()
}

#[cfg(test)]
#[path = "../../tests/unit/convert/volumes.rs"]
mod tests;
