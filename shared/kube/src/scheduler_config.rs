//! The scheduler configuration Karpenter v1.15 reads from `--scheduler-config` /
//! `SCHEDULER_CONFIG`: the parts of the cluster's kube-scheduler it must mirror, today only
//! `podTopologySpread.defaultConstraints`. Parsed strictly (an unknown field is an error) and
//! validated as kube-scheduler validates its PodTopologySpread arguments, each error naming the
//! field; and the objects the default constraints' selectors are deduced from, in the core's
//! shape.

use std::collections::BTreeMap;

use fleetwright_core::default_spread::{DefaultSpread, Selectors};
use fleetwright_core::model::InclusionPolicy;
use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{ReplicationController, Service};
use serde::Deserialize;

use crate::error::KubeError;

/// What the setting is called in errors.
pub const SETTING: &str = "scheduler config";

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Config {
    pod_topology_spread: Option<PodTopologySpread>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PodTopologySpread {
    #[serde(default)]
    default_constraints: Vec<Constraint>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Constraint {
    #[serde(default)]
    max_skew: i32,
    #[serde(default)]
    topology_key: String,
    #[serde(default)]
    when_unsatisfiable: String,
    label_selector: Option<serde_json::Value>,
    match_label_keys: Option<Vec<String>>,
    min_domains: Option<i32>,
    node_affinity_policy: Option<String>,
    node_taints_policy: Option<String>,
}

/// The default spread constraints of a scheduler configuration (YAML or JSON). Empty text is
/// no configuration.
pub fn parse(text: &str) -> Result<Vec<DefaultSpread>, KubeError> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let config: Config = serde_yaml::from_str(text)
        .map_err(|e| KubeError::field(SETTING, "(document)", e.to_string()))?;
    let constraints = config
        .pod_topology_spread
        .map(|p| p.default_constraints)
        .unwrap_or_default();
    let mut out: Vec<DefaultSpread> = Vec::new();
    for (i, c) in constraints.iter().enumerate() {
        let field = format!("podTopologySpread.defaultConstraints[{i}]");
        let spread = constraint(c, &field)?;
        if let Some(j) = out
            .iter()
            .position(|o| o.topology_key == spread.topology_key && o.hard == spread.hard)
        {
            return Err(KubeError::field(
                SETTING,
                field,
                format!(
                    "a duplicate of podTopologySpread.defaultConstraints[{j}] ({}, {})",
                    c.topology_key, c.when_unsatisfiable
                ),
            ));
        }
        out.push(spread);
    }
    Ok(out)
}

fn constraint(c: &Constraint, field: &str) -> Result<DefaultSpread, KubeError> {
    let bad =
        |sub: &str, reason: String| KubeError::field(SETTING, format!("{field}.{sub}"), reason);
    if c.max_skew <= 0 {
        return Err(bad("maxSkew", "must be greater than 0".into()));
    }
    if c.topology_key.is_empty() {
        return Err(bad("topologyKey", "must be set".into()));
    }
    if !qualified_name(&c.topology_key) {
        return Err(bad(
            "topologyKey",
            format!("{:?} is not a valid label name", c.topology_key),
        ));
    }
    let hard = match c.when_unsatisfiable.as_str() {
        "DoNotSchedule" => true,
        "ScheduleAnyway" => false,
        other => {
            return Err(bad(
                "whenUnsatisfiable",
                format!("{other:?} must be one of \"DoNotSchedule\" or \"ScheduleAnyway\""),
            ))
        }
    };
    if c.label_selector.is_some() {
        return Err(bad(
            "labelSelector",
            "must not be set, as selectors are deduced for each pod".into(),
        ));
    }
    if c.match_label_keys.as_ref().is_some_and(|k| !k.is_empty()) {
        return Err(bad(
            "matchLabelKeys",
            "must not be set, as it has no effect on default constraints".into(),
        ));
    }
    if c.min_domains.is_some_and(|m| m <= 0) {
        return Err(bad("minDomains", "must be greater than 0".into()));
    }
    let mut spread = DefaultSpread::new(c.max_skew, &c.topology_key, hard);
    spread.min_domains = c.min_domains;
    spread.node_affinity_policy = policy(c.node_affinity_policy.as_deref(), InclusionPolicy::Honor)
        .map_err(|r| bad("nodeAffinityPolicy", r))?;
    spread.node_taints_policy = policy(c.node_taints_policy.as_deref(), InclusionPolicy::Ignore)
        .map_err(|r| bad("nodeTaintsPolicy", r))?;
    Ok(spread)
}

fn policy(value: Option<&str>, default: InclusionPolicy) -> Result<InclusionPolicy, String> {
    match value {
        None => Ok(default),
        Some("Honor") => Ok(InclusionPolicy::Honor),
        Some("Ignore") => Ok(InclusionPolicy::Ignore),
        Some(other) => Err(format!("{other:?} must be one of \"Honor\" or \"Ignore\"")),
    }
}

/// A Kubernetes qualified name: an optional DNS-subdomain prefix and `/`, then 1–63 characters
/// of alphanumerics, `-`, `_` and `.`, starting and ending alphanumeric.
fn qualified_name(key: &str) -> bool {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let alnum_ends = |s: &str| {
        s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
            && s.chars().last().is_some_and(|c| c.is_ascii_alphanumeric())
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && alnum_ends(name)
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|part| {
                !part.is_empty()
                    && alnum_ends(part)
                    && part
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            })
    });
    name_ok && prefix_ok
}

/// The selectors default spread is deduced from, from the objects read. A ReplicaSet or
/// StatefulSet whose selector does not convert is left out (its pods get only their Services'
/// selector), as kube-scheduler goes on without an owner it cannot read.
pub fn selectors(
    services: &[Service],
    controllers: &[ReplicationController],
    replica_sets: &[ReplicaSet],
    stateful_sets: &[StatefulSet],
) -> Selectors {
    let mut out = Selectors::default();
    for s in services {
        if let Some(selector) = s.spec.as_ref().and_then(|spec| spec.selector.clone()) {
            out.add_service(&namespace(&s.metadata), selector.into_iter().collect());
        }
    }
    for rc in controllers {
        let selector: BTreeMap<String, String> = rc
            .spec
            .as_ref()
            .and_then(|s| s.selector.clone())
            .unwrap_or_default()
            .into_iter()
            .collect();
        if !selector.is_empty() {
            out.replication_controllers
                .insert((namespace(&rc.metadata), name(&rc.metadata)), selector);
        }
    }
    let sets = replica_sets
        .iter()
        .filter_map(|rs| Some(("ReplicaSet", &rs.metadata, &rs.spec.as_ref()?.selector)))
        .chain(
            stateful_sets
                .iter()
                .filter_map(|ss| Some(("StatefulSet", &ss.metadata, &ss.spec.as_ref()?.selector))),
        );
    for (kind, meta, selector) in sets {
        let object = format!("{kind} {}/{}", namespace(meta), name(meta));
        if let Ok(reqs) = crate::selectors::label_selector(selector, &object, "spec.selector") {
            out.sets
                .insert((namespace(meta), kind.to_string(), name(meta)), reqs);
        }
    }
    out
}

fn namespace(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    meta.namespace.clone().unwrap_or_else(|| "default".into())
}

fn name(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

#[cfg(test)]
#[path = "../tests/unit/scheduler_config.rs"]
mod tests;
