//! EC2NodeClasses into the node-class settings the core plans with: the kubelet settings
//! (Karpenter's CEL expressions among them, behind `NodeClassCEL`), block devices, AMI aliases
//! and capacity reservations.

use std::collections::BTreeMap;

use fleetwright_core::catalog::{
    is_quantity, CapacityReservation, KubeletExpressions, KubeletSettings, NodeClassSettings,
    MAX_PODS_FIELD,
};
use fleetwright_core::quantity::parse_units;
use fleetwright_core::resources::Resources;

use crate::crds::{EC2NodeClass, KubeletConfiguration, MaxPods};
use crate::error::KubeError;
use fleetwright_crds::validation::AMI_FAMILIES;

use super::{object, resource_list};

/// What Karpenter's CRD (and, for the schemaless kubelet settings, its validation) refuses in
/// an EC2NodeClass that did not pass an API server (a file): the field and why.
fn crd_rules(spec: &crate::crds::EC2NodeClassSpec) -> Result<(), (&'static str, String)> {
    // The CRD's rule holds for a spec that is written (one without any is admitted); every
    // written spec names its AMIs.
    let written = !spec.ami_selector_terms.is_empty();
    if spec.role.is_some() == spec.instance_profile.is_some() && written {
        let why = "must specify exactly one of role and instanceProfile".to_string();
        return Err(("spec", why));
    }
    if let Some(family) = spec.ami_family.as_deref() {
        if !AMI_FAMILIES.contains(&family) {
            let why = format!("{family:?} is not one of {}", AMI_FAMILIES.join(", "));
            return Err(("spec.amiFamily", why));
        }
    }
    let max_pods = spec.kubelet.as_ref().and_then(|k| k.max_pods.as_ref());
    if let Some(n) = max_pods.and_then(MaxPods::count).filter(|n| *n < 0) {
        return Err(("spec.kubelet.maxPods", format!("{n} is below 0")));
    }
    Ok(())
}

/// The node-class settings that shape allocatable resources. `node_class_cel` is Karpenter's
/// `NodeClassCEL` feature gate: without it, a class whose kubelet settings hold a CEL
/// expression is refused, as Karpenter marks it not ready.
pub fn nodeclass_settings(
    c: &EC2NodeClass,
    node_class_cel: bool,
) -> Result<NodeClassSettings, KubeError> {
    let obj = object("EC2NodeClass", &c.metadata);
    crd_rules(&c.spec).map_err(|(field, why)| KubeError::field(&obj, field, why))?;
    for (i, term) in c.spec.ami_selector_terms.iter().enumerate() {
        if let Some(alias) = &term.alias {
            check_alias(alias).map_err(|e| {
                KubeError::field(&obj, format!("spec.amiSelectorTerms[{i}].alias"), e)
            })?;
        }
    }
    let mut out = NodeClassSettings::default();
    if let Some(k) = &c.spec.kubelet {
        supported_kubelet_fields(&c.spec, k)
            .map_err(|e| KubeError::field(&obj, "spec.kubelet", e))?;
        // Reservations written as expressions are evaluated per type; the quantities are read
        // here. A map of expressions only leaves the defaults of the other resources alone.
        let list = |m: &Option<BTreeMap<String, String>>,
                    field: &str|
         -> Result<Option<Resources>, KubeError> {
            let quantities: Vec<(&String, &str)> = m
                .iter()
                .flatten()
                .map(|(k, v)| (k, v.as_str()))
                .filter(|(_, v)| is_quantity(v))
                .collect();
            match m {
                Some(m) if quantities.is_empty() && !m.is_empty() => Ok(None),
                Some(_) => Ok(Some(resource_list(quantities, &obj, field)?)),
                None => Ok(None),
            }
        };
        out.kubelet = KubeletSettings {
            max_pods: k.max_pods.as_ref().and_then(MaxPods::count),
            expressions: kubelet_expressions(k, &obj, node_class_cel)?,
            pods_per_core: k.pods_per_core,
            kube_reserved: list(&k.kube_reserved, "spec.kubelet.kubeReserved")?,
            system_reserved: list(&k.system_reserved, "spec.kubelet.systemReserved")?,
            eviction_hard: k.eviction_hard.clone().unwrap_or_default(),
            eviction_soft: if bottlerocket(&c.spec) {
                Default::default()
            } else {
                k.eviction_soft.clone().unwrap_or_default()
            },
        };
    }
    let devices = c.spec.block_device_mappings();
    let root = devices
        .iter()
        .enumerate()
        .find(|(_, b)| b.root_volume == Some(true))
        .or_else(|| devices.iter().enumerate().next());
    if let Some((i, b)) = root {
        if let Some(size) = b.ebs.as_ref().and_then(|e| e.volume_size.as_ref()) {
            let bytes = parse_units(size).map_err(|e| {
                KubeError::field(
                    &obj,
                    format!("spec.blockDeviceMappings[{i}].ebs.volumeSize"),
                    e,
                )
            })?;
            out.root_volume_bytes = Some(bytes);
        }
    }
    out.instance_store_raid0 = c.spec.instance_store_policy.as_deref() == Some("RAID0");
    out.enclaves = c.spec.enclave_options.as_ref().is_some_and(|e| e.enabled);
    out.reservations = reservations(c);
    Ok(out)
}

/// The kubelet settings' CEL expressions, compiled. Refused without the `NodeClassCEL` gate
/// (before they are compiled, as Karpenter checks the gate first), and where one does not
/// compile.
fn kubelet_expressions(
    k: &KubeletConfiguration,
    obj: &str,
    node_class_cel: bool,
) -> Result<KubeletExpressions, KubeError> {
    let written = |m: &Option<BTreeMap<String, String>>| {
        m.iter()
            .flatten()
            .find(|(_, v)| !is_quantity(v))
            .map(|(r, _)| r.clone())
    };
    let first = match (
        k.max_pods.as_ref().and_then(MaxPods::expression),
        written(&k.kube_reserved),
        written(&k.system_reserved),
    ) {
        (Some(_), _, _) => Some(MAX_PODS_FIELD.to_string()),
        (None, Some(r), _) => Some(format!("spec.kubelet.kubeReserved.{r}")),
        (None, None, Some(r)) => Some(format!("spec.kubelet.systemReserved.{r}")),
        (None, None, None) => None,
    };
    let Some(field) = first else {
        return Ok(KubeletExpressions::default());
    };
    if !node_class_cel {
        return Err(KubeError::field(
            obj,
            field,
            format!("is a CEL expression, which Karpenter evaluates only with its NodeClassCEL feature gate on (off by default); turn it on with {NODE_CLASS_CEL_SETTING}: \"true\" (the functions' setting, or a simulate scenario's `settings:`), or `--node-class-cel` on `plan` and `explain`"),
        ));
    }
    KubeletExpressions::read(
        k.max_pods.as_ref().and_then(MaxPods::expression),
        k.kube_reserved.as_ref(),
        k.system_reserved.as_ref(),
    )
    .map_err(|e| KubeError::field(obj, e.field, e.reason))
}

/// The setting that turns Karpenter's `NodeClassCEL` feature gate on for the functions.
pub const NODE_CLASS_CEL_SETTING: &str = "FLEETWRIGHT_NODE_CLASS_CEL";

/// The capacity reservations the class's status lists.
fn reservations(c: &EC2NodeClass) -> Vec<CapacityReservation> {
    let Some(status) = &c.status else {
        return Vec::new();
    };
    status
        .capacity_reservations
        .iter()
        .filter_map(reservation)
        .collect()
}

/// One reservation of an EC2NodeClass's status, with its type, zone and count (the type
/// `default`, the state `active` and the count 0 when unset); one without an instance type or
/// a zone is no offering, and None.
pub fn reservation(r: &fleetwright_crds::CapacityReservation) -> Option<CapacityReservation> {
    Some(CapacityReservation {
        id: r.id.clone(),
        instance_type: r.instance_type.clone()?,
        zone: r.availability_zone.clone()?,
        kind: r
            .reservation_type
            .clone()
            .unwrap_or_else(|| "default".into()),
        interruptible: r.interruptible.unwrap_or(false),
        state: r.state.clone().unwrap_or_else(|| "active".into()),
        available: r.available_instance_count.unwrap_or(0) as usize,
    })
}

/// The kubelet fields Karpenter maps itself; AL2023 nodes also take any other upstream field
/// (through nodeadm's inline configuration), the other families only these.
const MAPPED_KUBELET_FIELDS: [&str; 12] = [
    "clusterDNS",
    "maxPods",
    "podsPerCore",
    "systemReserved",
    "kubeReserved",
    "evictionHard",
    "evictionSoft",
    "evictionSoftGracePeriod",
    "evictionMaxPodGracePeriod",
    "imageGCHighThresholdPercent",
    "imageGCLowThresholdPercent",
    "cpuCFSQuota",
];

/// Refuses kubelet settings the class's AMI family would drop silently at bootstrap, as
/// Karpenter v1.15 marks such a class `ValidationSucceeded=False` with reason
/// `UnsupportedKubeletConfiguration`: on AL2, Bottlerocket and Windows, a field outside the
/// twelve Karpenter maps, `podsPerCore` on Bottlerocket, and more than one `clusterDNS` entry.
fn supported_kubelet_fields(
    spec: &fleetwright_crds::EC2NodeClassSpec,
    k: &KubeletConfiguration,
) -> Result<(), String> {
    let family = ami_family(spec);
    if family == "AL2023" || family == "Custom" {
        return Ok(());
    }
    let mut unsupported: Vec<&str> = k
        .extra
        .keys()
        .map(String::as_str)
        .filter(|f| !MAPPED_KUBELET_FIELDS.contains(f))
        .collect();
    if family == "Bottlerocket" && k.pods_per_core.is_some() {
        unsupported.push("podsPerCore");
    }
    unsupported.sort_unstable();
    let mut messages = Vec::new();
    if !unsupported.is_empty() {
        messages.push(format!(
            "UnsupportedKubeletConfiguration: spec.kubelet has fields not applied by the {family} AMI family that would be silently dropped: {}",
            unsupported.join(", ")
        ));
    }
    let dns = k.cluster_dns.as_ref().map_or(0, Vec::len);
    if dns > 1 {
        messages.push(format!(
            "UnsupportedKubeletConfiguration: spec.kubelet.clusterDNS: the {family} AMI family doesn't accept multiple entries, only one, but {dns} were set"
        ));
    }
    match messages.is_empty() {
        true => Ok(()),
        false => Err(messages.join("; ")),
    }
}

/// The class's AMI family as Karpenter names it: `amiFamily`, else the family of its first AMI
/// alias (`al2023@latest` is `AL2023`), else `Custom`.
fn ami_family(spec: &fleetwright_crds::EC2NodeClassSpec) -> String {
    const FAMILIES: [&str; 6] = [
        "AL2",
        "AL2023",
        "Bottlerocket",
        "Windows2019",
        "Windows2022",
        "Windows2025",
    ];
    if let Some(family) = &spec.ami_family {
        return family.clone();
    }
    let alias = spec
        .ami_selector_terms
        .iter()
        .find_map(|t| t.alias.as_deref());
    let Some(family) = alias.and_then(|a| a.split_once('@')).map(|(f, _)| f) else {
        return "Custom".into();
    };
    FAMILIES
        .iter()
        .find(|f| f.to_ascii_lowercase() == family)
        .map_or_else(|| family.to_string(), |f| f.to_string())
}

/// Whether the class's nodes run Bottlerocket, whose kubelet Karpenter gives no soft
/// eviction thresholds: by `amiFamily`, else by the family of its first AMI alias.
fn bottlerocket(spec: &fleetwright_crds::EC2NodeClassSpec) -> bool {
    match &spec.ami_family {
        Some(family) => family.eq_ignore_ascii_case("bottlerocket"),
        None => spec
            .ami_selector_terms
            .iter()
            .filter_map(|t| t.alias.as_deref())
            .next()
            .is_some_and(|a| a.to_ascii_lowercase().starts_with("bottlerocket@")),
    }
}

/// An AMI alias as Karpenter accepts it: `family@version`, the family one of Karpenter's
/// (`al2023`, `al2`, `bottlerocket`, `windows2019`, `windows2022`, `windows2025`), the version
/// `latest` or a release.
fn check_alias(alias: &str) -> Result<(), String> {
    let Some((family, version)) = alias.split_once('@') else {
        return Err(format!(
            "{alias:?} is not of the form family@version (al2023@latest, bottlerocket@v1.20.3)"
        ));
    };
    if version.is_empty() {
        return Err(format!("{alias:?} names no version (al2023@latest)"));
    }
    let family = family.to_ascii_lowercase();
    let windows = family
        .strip_prefix("windows")
        .is_some_and(|year| !year.is_empty() && year.chars().all(|c| c.is_ascii_digit()));
    match family.as_str() {
        "al2023" | "al2" | "bottlerocket" => Ok(()),
        _ if windows => Ok(()),
        _ => Err(format!(
            "{alias:?}: the family must be al2023, al2, bottlerocket or windows<year>"
        )),
    }
}

#[cfg(test)]
#[path = "../../tests/unit/convert/nodeclass.rs"]
mod tests;
