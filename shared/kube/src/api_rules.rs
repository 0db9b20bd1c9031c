//! What the API server refuses in an object written by hand, which a file never had admitted:
//! a pod with no containers, a request above its limit, a toleration operator that does not
//! exist, a workload whose selector does not select its own template, and the selector terms
//! an EC2NodeClass's CRD requires. A live read never meets these (the API server refused them),
//! so only the file readers apply them.
//!
//! A pod or workload the API server refuses never runs, so it is left out and named, as any
//! object that does not read. An EC2NodeClass without its selector terms changes nothing a plan
//! computes, so it is a warning that `--strict` makes an error.

use k8s_openapi::api::core::v1::{Container, PodSpec, Toleration};
use serde_json::Value;

use crate::error::KubeError;
use crate::strict::{InputWarning, Problem};

/// The first rule of the API server's that a pod spec breaks, named with its field under
/// `prefix` (`spec`, or `spec.template.spec` for a workload's template).
pub fn pod_spec(spec: &PodSpec, object: &str, prefix: &str) -> Result<(), KubeError> {
    if spec.containers.is_empty() {
        let why = "required: a pod needs at least one container";
        return Err(KubeError::field(
            object,
            format!("{prefix}.containers"),
            why,
        ));
    }
    let lists = [
        ("containers", spec.containers.as_slice()),
        (
            "initContainers",
            spec.init_containers.as_deref().unwrap_or_default(),
        ),
    ];
    for (list, containers) in lists {
        for (i, c) in containers.iter().enumerate() {
            let field = format!("{prefix}.{list}[{i}].resources.requests");
            requests_within_limits(c).map_err(|why| KubeError::field(object, &field, why))?;
        }
    }
    for (i, t) in spec.tolerations.iter().flatten().enumerate() {
        let field = format!("{prefix}.tolerations[{i}]");
        toleration(t)
            .map_err(|(at, why)| KubeError::field(object, format!("{field}.{at}"), why))?;
    }
    Ok(())
}

/// A request above the limit of the same resource, which the API server refuses.
fn requests_within_limits(c: &Container) -> Result<(), String> {
    let Some(resources) = &c.resources else {
        return Ok(());
    };
    let (Some(requests), Some(limits)) = (&resources.requests, &resources.limits) else {
        return Ok(());
    };
    for (name, request) in requests {
        let Some(limit) = limits.get(name) else {
            continue;
        };
        // Values that do not parse are named by the conversion, with their own field.
        let amount = |q: &str| fleetwright_core::quantity::parse_scaled(q, 1000).ok();
        if let (Some(r), Some(l)) = (amount(&request.0), amount(&limit.0)) {
            if r > l {
                return Err(format!(
                    "{name} {:?} must be less than or equal to its limit {:?}",
                    request.0, limit.0
                ));
            }
        }
    }
    Ok(())
}

/// The toleration rules of the API server: the field and why.
fn toleration(t: &Toleration) -> Result<(), (&'static str, String)> {
    let operator = t.operator.as_deref().unwrap_or_default();
    let key = t.key.as_deref().unwrap_or_default();
    let value = t.value.as_deref().unwrap_or_default();
    match operator {
        // Newer API servers also admit the numeric `Gt` and `Lt`: never refused here.
        "" | "Equal" | "Exists" | "Gt" | "Lt" => {}
        other => {
            let why = format!("{other:?} is not one of \"Equal\", \"Exists\"");
            return Err(("operator", why));
        }
    }
    if operator == "Exists" && !value.is_empty() {
        let why = format!("{value:?} must be empty when the operator is \"Exists\"");
        return Err(("value", why));
    }
    if key.is_empty() && operator != "Exists" {
        let why = "must be \"Exists\" when the key is empty (which tolerates every taint)";
        return Err(("operator", why.to_string()));
    }
    Ok(())
}

/// A Deployment's, ReplicaSet's or StatefulSet's selector, which the API server requires and
/// requires to select the workload's own template labels. `selects` is the selector's match.
pub fn workload_selector(
    w: &Value,
    object: &str,
    selects: impl Fn(&Value, &std::collections::BTreeMap<String, String>) -> bool,
) -> Result<(), KubeError> {
    if !matches!(
        w["kind"].as_str(),
        Some("Deployment" | "ReplicaSet" | "StatefulSet")
    ) {
        return Ok(());
    }
    let selector = &w["spec"]["selector"];
    let empty = |k: &str| {
        selector[k].as_object().is_none_or(|m| m.is_empty())
            && selector[k].as_array().is_none_or(|a| a.is_empty())
    };
    if empty("matchLabels") && empty("matchExpressions") {
        let why = "required: a selector that selects the template's labels";
        return Err(KubeError::field(object, "spec.selector", why));
    }
    let labels = serde_json::from_value(w["spec"]["template"]["metadata"]["labels"].clone())
        .unwrap_or_default();
    if !selects(selector, &labels) {
        let why = "the selector does not select them, which the API server refuses";
        return Err(KubeError::field(
            object,
            "spec.template.metadata.labels",
            why,
        ));
    }
    Ok(())
}

/// The selector terms (and AMI family) Karpenter's EC2NodeClass CRD requires of a written
/// spec, each a warning naming the field. A class with no `spec` at all is admitted, and gets
/// none.
pub fn nodeclass_required(value: &Value, object: &str) -> Vec<InputWarning> {
    let Some(spec) = value.get("spec").filter(|s| s.is_object()) else {
        return Vec::new();
    };
    let mut missing = Vec::new();
    for terms in [
        "amiSelectorTerms",
        "subnetSelectorTerms",
        "securityGroupSelectorTerms",
    ] {
        if spec[terms].as_array().is_none_or(|a| a.is_empty()) {
            missing.push(format!("spec.{terms}"));
        }
    }
    let aliased = (spec["amiSelectorTerms"].as_array())
        .is_some_and(|terms| terms.iter().any(|t| t.get("alias").is_some()));
    let has_terms = !missing.contains(&"spec.amiSelectorTerms".to_string());
    if has_terms && !aliased && spec.get("amiFamily").is_none() {
        missing.push("spec.amiFamily".to_string());
    }
    missing
        .into_iter()
        .map(|path| InputWarning {
            object: object.to_string(),
            path,
            problem: Problem::Required,
        })
        .collect()
}

/// The class reference Karpenter's NodePool CRD requires in full (`group`, `kind` and `name`),
/// each part missing or empty a warning naming the field. A reference written with `name` alone
/// (as v1beta1 allowed) still reads as the EC2NodeClass of that name.
pub fn nodepool_required(value: &Value, object: &str) -> Vec<InputWarning> {
    let warning = |path: String| InputWarning {
        object: object.to_string(),
        path,
        problem: Problem::Required,
    };
    let at = "spec.template.spec.nodeClassRef";
    match value.pointer("/spec/template/spec/nodeClassRef") {
        Some(r) if r.is_object() => {
            let mut out: Vec<InputWarning> = ["group", "kind", "name"]
                .into_iter()
                .filter(|k| r[k].as_str().is_none_or(str::is_empty))
                .map(|k| warning(format!("{at}.{k}")))
                .collect();
            if r["group"].as_str().is_some_and(|g| g.contains('/')) {
                out.push(InputWarning {
                    problem: Problem::VersionedGroup,
                    ..warning(format!("{at}.group"))
                });
            }
            out
        }
        Some(_) => Vec::new(),
        None if value.pointer("/spec/template/spec").is_some() => vec![warning(at.into())],
        None => Vec::new(),
    }
}

/// The budget schedules Karpenter's CRD admits (any five space-separated parts) but that no
/// cron parser reads: each a warning naming its field. Its NodePool then allows no disruption
/// for any reason, as Karpenter's does.
pub fn nodepool_schedules(value: &Value, object: &str) -> Vec<InputWarning> {
    let budgets = value
        .pointer("/spec/disruption/budgets")
        .and_then(Value::as_array);
    (budgets.into_iter().flatten().enumerate())
        .filter_map(|(i, b)| Some((i, b.get("schedule")?.as_str()?)))
        .filter(|(_, s)| fleetwright_core::budget::Cron::parse(s).is_none())
        .map(|(i, _)| InputWarning {
            object: object.to_string(),
            path: format!("spec.disruption.budgets[{i}].schedule"),
            problem: Problem::BadSchedule,
        })
        .collect()
}

/// The same rule over the NodePools a live read took: one record per NodePool with budget
/// schedules no cron parser reads (each named), which the tick reports (a warning, and a
/// Warning Event) while the NodePool is still read and provisions; its disruption fails closed.
pub fn unreadable_schedules(pools: &[crate::crds::NodePool]) -> Vec<crate::rejected::Rejected> {
    let unreadable = |s: &str| fleetwright_core::budget::Cron::parse(s).is_none();
    let mut out = Vec::new();
    for pool in pools {
        let object = format!(
            "NodePool {}",
            pool.metadata.name.as_deref().unwrap_or_default()
        );
        let budgets = pool.spec.disruption.as_ref().map(|d| d.budgets.as_slice());
        let warnings: Vec<String> = (budgets.unwrap_or_default().iter().enumerate())
            .filter(|(_, b)| b.schedule.as_deref().is_some_and(unreadable))
            .map(|(i, _)| {
                let warning = InputWarning {
                    object: object.clone(),
                    path: format!("spec.disruption.budgets[{i}].schedule"),
                    problem: Problem::BadSchedule,
                };
                warning.to_string()
            })
            .collect();
        if warnings.is_empty() {
            continue;
        }
        let error = warnings.join("; ");
        let mut record = crate::rejected::Rejected::new("NodePool", &pool.metadata, error);
        record.kept = true;
        out.push(record);
    }
    out
}

#[cfg(test)]
#[path = "../tests/unit/api_rules.rs"]
mod tests;
