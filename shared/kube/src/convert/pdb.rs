//! PodDisruptionBudgets into the core model: the pods a budget selects, the evictions its status
//! allows, and whether its spec allows none ever.

use fleetwright_core::model as core;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::error::KubeError;
use crate::selectors::{label_selector, match_nothing};

use super::object;

/// Converts a PodDisruptionBudget.
pub fn pdb(p: &PodDisruptionBudget) -> Result<core::Pdb, KubeError> {
    let obj = object("PodDisruptionBudget", &p.metadata);
    if let Some(spec) = p.spec.as_ref() {
        budget_value(&spec.min_available, &obj, "spec.minAvailable")?;
        budget_value(&spec.max_unavailable, &obj, "spec.maxUnavailable")?;
        if spec.min_available.is_some() && spec.max_unavailable.is_some() {
            let why = "minAvailable and maxUnavailable cannot both be set";
            return Err(KubeError::field(&obj, "spec.maxUnavailable", why));
        }
    }
    let selector = match p.spec.as_ref().and_then(|s| s.selector.as_ref()) {
        Some(s) => label_selector(s, &obj, "spec.selector")?,
        None => match_nothing(),
    };
    Ok(core::Pdb {
        namespace: p.metadata.namespace.clone().unwrap_or_default(),
        name: p.metadata.name.clone().unwrap_or_default(),
        selector,
        disruptions_allowed: p
            .status
            .as_ref()
            .map(|s| s.disruptions_allowed)
            .unwrap_or(0),
        fully_blocking: p.spec.as_ref().is_some_and(blocks_every_eviction),
    })
}

/// A PodDisruptionBudget that does not read, as one that allows no eviction ever, over the pods
/// its selector selects (none when that does not read either): its pods stay protected while
/// the error is reported, rather than lose a protection their owner asked for.
pub(super) fn fail_closed(p: &PodDisruptionBudget) -> Option<core::Pdb> {
    let obj = object("PodDisruptionBudget", &p.metadata);
    let selector = p.spec.as_ref()?.selector.as_ref()?;
    Some(core::Pdb {
        namespace: p.metadata.namespace.clone().unwrap_or_default(),
        name: p.metadata.name.clone().unwrap_or_default(),
        selector: label_selector(selector, &obj, "spec.selector").ok()?,
        disruptions_allowed: 0,
        fully_blocking: true,
    })
}

/// A PodDisruptionBudget's `minAvailable` or `maxUnavailable`: a count, or a whole percentage,
/// as the API server validates it. Anything else (`"four"`) is an error naming the field, where
/// it would otherwise read as a budget that blocks every eviction.
fn budget_value(value: &Option<IntOrString>, obj: &str, field: &str) -> Result<(), KubeError> {
    let bad = match value {
        Some(IntOrString::Int(n)) => *n < 0,
        Some(IntOrString::String(s)) => s
            .strip_suffix('%')
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .is_none_or(|n| n.parse::<u64>().map_or(true, |n| n > 100)),
        None => false,
    };
    match bad {
        true => Err(KubeError::field(
            obj,
            field,
            "must be a non-negative integer or a percentage from 0% to 100%, such as \"50%\"",
        )),
        false => Ok(()),
    }
}

/// Whether a PodDisruptionBudget's spec allows no eviction ever, as Karpenter reads it: such a
/// PDB's pods are not planned ahead of their eviction, which may never come.
fn blocks_every_eviction(spec: &k8s_openapi::api::policy::v1::PodDisruptionBudgetSpec) -> bool {
    matches!(&spec.max_unavailable, Some(IntOrString::Int(0)))
        || matches!(&spec.max_unavailable, Some(IntOrString::String(s)) if s == "0%")
        || matches!(&spec.min_available, Some(IntOrString::String(s)) if s == "100%")
}
