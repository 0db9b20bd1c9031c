//! What a pod's persistent volumes tell the scheduler: the zones a bound volume pins the pod to,
//! and the CSI driver each claim attaches through, counted against a node's attach limit per
//! driver (its CSINode), as Karpenter's volume usage counts them: a claim's driver is its bound
//! volume's (`spec.csi.driver`, or the in-tree EBS plugin's CSI name), else its StorageClass's
//! provisioner (an in-tree provisioner by its CSI name). A claim with neither is not counted.
//!
//! A pending pod whose claim kube-scheduler would never bind is no pod to provision for, as
//! Karpenter validates it: a claim that is missing, being deleted or lost, bound to a volume
//! that does not exist, or unbound with no StorageClass, a missing one, or one that binds
//! `Immediate`ly. Such a pod is named with the claim and left out, so it neither buys a node nor
//! holds disruption up. An unbound claim's StorageClass `allowedTopologies` pin its zones.

use std::collections::{BTreeMap, BTreeSet};

use fleetwright_core::labels::{EBS_CSI_ZONE, ZONE};
use fleetwright_core::model as core;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod, PodSpec};
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};

use crate::error::KubeError;

/// The annotation that makes a StorageClass the cluster's default, which admission gives a
/// claim that names none.
const DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";

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
    /// Why kube-scheduler would never bind a pod with each such claim.
    pub invalid: BTreeMap<(String, String), String>,
    /// Every claim read; None when the input holds none to check against (a dump written
    /// without claims).
    pub known: Option<BTreeSet<(String, String)>>,
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

impl Claims {
    /// For a pod not yet bound: the first of its claims kube-scheduler would never bind, named
    /// with its field. A pod a dump's workload stands in for may mount claims not made yet (a
    /// generic ephemeral volume's); only the faults of those that exist count for it.
    pub fn check(
        &self,
        pod: &Pod,
        spec: &PodSpec,
        object: &str,
        stand_in: bool,
    ) -> Result<(), KubeError> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        for (i, v) in spec.volumes.iter().flatten().enumerate() {
            let Some(claim) = claim_name(pod, v) else {
                continue;
            };
            let field = match v.ephemeral {
                Some(_) => format!("spec.volumes[{i}].ephemeral"),
                None => format!("spec.volumes[{i}].persistentVolumeClaim.claimName"),
            };
            let key = (namespace.to_string(), claim);
            let reason = match (&self.known, self.invalid.get(&key)) {
                (_, Some(why)) => why.clone(),
                (Some(known), None) if !stand_in && !known.contains(&key) => format!(
                    "persistentvolumeclaim {}/{} not found: kube-scheduler waits for it",
                    key.0, key.1
                ),
                _ => continue,
            };
            return Err(KubeError::field(object, field, reason));
        }
        Ok(())
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

/// The claims' zones, drivers and faults, from the claims, volumes and StorageClasses read.
/// `dump`: the input is a dump, whose claims are all there is when it holds any, so a pod's
/// claim not among them is missing. A live read lists claims before pods, so a claim made
/// since (a StatefulSet's, a generic ephemeral volume's) is not missing, only not read yet.
pub fn claims(
    pvcs: &[PersistentVolumeClaim],
    pvs: &[PersistentVolume],
    classes: &[StorageClass],
    dump: bool,
) -> Claims {
    let by_name: BTreeMap<&str, &PersistentVolume> = pvs
        .iter()
        .filter_map(|pv| Some((pv.metadata.name.as_deref()?, pv)))
        .collect();
    let classes = Classes::new(classes);
    // Claims made up for a StatefulSet's stand-in pods say nothing of whether the dump holds
    // the others.
    let read = pvcs.iter().any(|p| {
        !p.metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(crate::workloads::STAND_IN))
    });
    let mut out = Claims {
        known: (dump && read).then(BTreeSet::new),
        ..Default::default()
    };
    for pvc in pvcs {
        let key = (
            pvc.metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into()),
            pvc.metadata.name.clone().unwrap_or_default(),
        );
        if let Some(known) = &mut out.known {
            known.insert(key.clone());
        }
        let spec = pvc.spec.as_ref();
        let volume = spec
            .and_then(|s| s.volume_name.as_deref())
            .filter(|v| !v.is_empty());
        let class = spec
            .and_then(|s| s.storage_class_name.as_deref())
            .or(classes.default);
        if let Some(why) = fault(pvc, volume, class, &by_name, &classes) {
            out.invalid.insert(key.clone(), why);
        }
        let driver = match volume {
            // A bound claim is counted by its volume's driver, or not at all.
            Some(v) => by_name.get(v).and_then(|pv| volume_driver(pv)),
            None => class
                .and_then(|c| classes.by_name.get(c))
                .map(|c| csi_name(&c.provisioner)),
        };
        let zones = match volume {
            Some(v) => by_name.get(v).map(|pv| pv_zones(pv)),
            None => class
                .and_then(|c| classes.by_name.get(c))
                .map(|c| class_zones(c)),
        };
        if let Some(zones) = zones.filter(|z| !z.is_empty()) {
            out.zones.insert(key.clone(), zones);
        }
        if let Some(driver) = driver.filter(|d| !d.is_empty()) {
            out.drivers.insert(key, driver);
        }
    }
    out
}

/// The StorageClasses read, by name, and the default one.
struct Classes<'a> {
    by_name: BTreeMap<&'a str, &'a StorageClass>,
    default: Option<&'a str>,
}

impl<'a> Classes<'a> {
    fn new(classes: &'a [StorageClass]) -> Self {
        let by_name = classes
            .iter()
            .filter_map(|c| Some((c.metadata.name.as_deref()?, c)))
            .collect();
        let default = classes
            .iter()
            .find(|c| {
                c.metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(DEFAULT_CLASS))
                    .is_some_and(|v| v == "true")
            })
            .and_then(|c| c.metadata.name.as_deref());
        Classes { by_name, default }
    }
}

/// Why kube-scheduler would never bind a pod with this claim, if it would not (volumes and
/// classes are checked only when some were read).
fn fault(
    pvc: &PersistentVolumeClaim,
    volume: Option<&str>,
    class: Option<&str>,
    volumes: &BTreeMap<&str, &PersistentVolume>,
    classes: &Classes,
) -> Option<String> {
    let name = format!(
        "persistentvolumeclaim {}/{}",
        pvc.metadata.namespace.as_deref().unwrap_or_default(),
        pvc.metadata.name.as_deref().unwrap_or_default()
    );
    if pvc.metadata.deletion_timestamp.is_some() {
        return Some(format!("{name} is being deleted"));
    }
    if pvc.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Lost") {
        return Some(format!("{name} lost its persistentvolume"));
    }
    if let Some(v) = volume {
        let missing = !volumes.is_empty() && !volumes.contains_key(v);
        return missing
            .then(|| format!("{name} is bound to persistentvolume {v}, which does not exist"));
    }
    // Classes are checked only against the classes read (a dump may hold none).
    if classes.by_name.is_empty() {
        return None;
    }
    let Some(class) = class.filter(|c| !c.is_empty()) else {
        return Some(match class {
            Some(_) => format!(
                "{name} is not bound and its storageClassName is \"\" (it binds only to a persistentvolume of no class, and none is bound to it)"
            ),
            None => format!(
                "{name} is not bound and names no storageClassName (the cluster has no default StorageClass)"
            ),
        });
    };
    let Some(found) = classes.by_name.get(class) else {
        return Some(format!(
            "{name} names storageClassName {class}, which does not exist"
        ));
    };
    let stand_in = pvc
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(crate::workloads::STAND_IN));
    (found.volume_binding_mode.as_deref() == Some("Immediate") && !stand_in).then(|| {
        format!("{name} is not bound yet, and StorageClass {class} binds it Immediate: the pod waits for its volume, not for a node")
    })
}

/// The zones a StorageClass's `allowedTopologies` allow: any term's zone values (each term is
/// an alternative), and none to pin when a term names no zone (that term allows every zone).
fn class_zones(class: &StorageClass) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for term in class.allowed_topologies.iter().flatten() {
        let zones: Vec<&String> = term
            .match_label_expressions
            .iter()
            .flatten()
            .filter(|e| e.key == ZONE || e.key == EBS_CSI_ZONE)
            .flat_map(|e| e.values.iter())
            .collect();
        if zones.is_empty() {
            return BTreeSet::new();
        }
        out.extend(zones.into_iter().cloned());
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
