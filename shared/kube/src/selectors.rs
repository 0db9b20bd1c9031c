//! Kubernetes' selectors as the core's requirements: label selectors, node selector terms and
//! the requirement expressions in them. The dump reader (the workloads' selectors that default
//! topology spread is deduced from), the scheduler config and the conversion of pods, PDBs and
//! NodePools all read them, so they sit apart from each.

use fleetwright_core::requirements::{Operator, Requirement, Requirements};
use k8s_openapi::api::core::v1::NodeSelectorTerm;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::error::KubeError;

fn operator(op: &str, obj: &str, field: &str) -> Result<Operator, KubeError> {
    Operator::parse(op)
        .ok_or_else(|| KubeError::field(obj, field, format!("unknown operator {op:?}")))
}

pub(crate) fn requirement(
    key: &str,
    op: &str,
    vals: &[String],
    obj: &str,
    field: &str,
) -> Result<Requirement, KubeError> {
    Requirement::new(key, operator(op, obj, field)?, vals)
        .map_err(|e| KubeError::field(obj, field, e))
}

pub(crate) fn node_selector_term(
    term: &NodeSelectorTerm,
    obj: &str,
    field: &str,
) -> Result<Requirements, KubeError> {
    let mut reqs = Requirements::new();
    let expressions = term.match_expressions.iter().flatten();
    add_expressions(
        &mut reqs,
        expressions.map(|e| (&e.key, &e.operator, &e.values)),
        obj,
        field,
    )?;
    Ok(reqs)
}

/// Adds `matchExpressions` (key, operator, values) to `reqs`, each named with its index.
fn add_expressions<'a>(
    reqs: &mut Requirements,
    expressions: impl Iterator<Item = (&'a String, &'a String, &'a Option<Vec<String>>)>,
    obj: &str,
    field: &str,
) -> Result<(), KubeError> {
    for (i, (key, op, values)) in expressions.enumerate() {
        let f = format!("{field}.matchExpressions[{i}]");
        let values = values.as_deref().unwrap_or_default();
        reqs.add(requirement(key, op, values, obj, &f)?);
    }
    Ok(())
}

/// A label selector as requirements (`matchLabels` as `In`, `matchExpressions` as written).
pub fn label_selector(
    sel: &LabelSelector,
    obj: &str,
    field: &str,
) -> Result<Requirements, KubeError> {
    let mut reqs = Requirements::new();
    for (k, v) in sel.match_labels.iter().flatten() {
        reqs.add(Requirement::single(k, v));
    }
    let expressions = sel.match_expressions.iter().flatten();
    add_expressions(
        &mut reqs,
        expressions.map(|e| (&e.key, &e.operator, &e.values)),
        obj,
        field,
    )?;
    Ok(reqs)
}

/// A selector that matches nothing (a null selector in an affinity term).
pub(crate) fn match_nothing() -> Requirements {
    let mut r = Requirements::new();
    r.add(Requirement::does_not_exist("fleetwright.io/never"));
    r.add(Requirement::exists("fleetwright.io/never"));
    r
}
