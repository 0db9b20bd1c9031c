//! What `kubectl describe` shows of EC2NodeClasses and NodePools, written as Karpenter writes
//! it, decided purely from what the cloud resolved this tick. An EC2NodeClass's status lists
//! its subnets, security groups, AMIs, instance profile and capacity reservations, with the
//! conditions `SubnetsReady`, `SecurityGroupsReady`, `AMIsReady`, `InstanceProfileReady`,
//! `CapacityReservationsReady`, `PlacementGroupReady`, `ValidationSucceeded` and `Ready`; a class that cannot be
//! resolved keeps its lists and says why in the condition of the part that failed. A NodePool's
//! conditions are `ValidationSucceeded`, `NodeClassReady` (its class's `Ready`) and `Ready`.
//! A condition keeps its `lastTransitionTime` while its status stays.

use std::collections::BTreeMap;

use chrono::{DateTime, SecondsFormat, Utc};
use fleetwright_cloud::nodeclass::ResolvedNodeClass;
use fleetwright_core::labels::ARCH;
use fleetwright_crds::{Condition, EC2NodeClass, EC2NodeClassStatus};
use fleetwright_kube::dump::ClusterDump;
use serde_json::json;

use super::action::Action;
use super::reservations;
use fleetwright_crds::conditions;

/// What each EC2NodeClass resolved to this tick, by name, or why it did not.
pub type Resolutions = BTreeMap<String, Result<ResolvedNodeClass, String>>;

/// The condition parts of an EC2NodeClass, each with the spec field that feeds it.
const PARTS: [(&str, &str, &str); 6] = [
    (
        conditions::SUBNETS_READY,
        "subnetSelectorTerms",
        "SubnetsNotFound",
    ),
    (
        conditions::SECURITY_GROUPS_READY,
        "securityGroupSelectorTerms",
        "SecurityGroupsNotFound",
    ),
    (conditions::AMIS_READY, "amiSelectorTerms", "AMINotFound"),
    (
        conditions::INSTANCE_PROFILE_READY,
        "role",
        "InstanceProfileNotReady",
    ),
    (
        conditions::CAPACITY_RESERVATIONS_READY,
        "capacityReservationSelectorTerms",
        "CapacityReservationsNotReady",
    ),
    (
        conditions::PLACEMENT_GROUP_READY,
        "placementGroupSelector",
        "PlacementGroupNotFound",
    ),
];

/// A status write for each EC2NodeClass whose status no longer says what it resolved to.
pub fn nodeclass_statuses(
    dump: &ClusterDump,
    resolved: &Resolutions,
    now: DateTime<Utc>,
) -> Vec<Action> {
    dump.nodeclasses
        .iter()
        .filter_map(|class| {
            let name = class.metadata.name.clone().unwrap_or_default();
            let wanted = nodeclass_status(class, resolved.get(&name)?, now);
            (class.status.as_ref() != Some(&wanted)).then(|| Action::NodeClassStatus {
                nodeclass: name,
                status: Box::new(wanted),
            })
        })
        .collect()
}

/// The status an EC2NodeClass should have, given what it resolved to (or why it did not).
pub fn nodeclass_status(
    class: &EC2NodeClass,
    resolved: &Result<ResolvedNodeClass, String>,
    now: DateTime<Utc>,
) -> EC2NodeClassStatus {
    let current = class.status.clone().unwrap_or_default();
    let mut status = current.clone();
    let mut wanted = Vec::new();
    match resolved {
        Ok(r) => {
            status.subnets = r
                .subnets
                .iter()
                .map(|s| json!({"id": s.id, "zone": s.zone}))
                .collect();
            status.security_groups = r
                .security_groups
                .iter()
                .map(|id| json!({"id": id}))
                .collect();
            status.amis = r
                .amis
                .iter()
                .map(|a| {
                    json!({"id": a.id, "name": a.id, "requirements": [
                        {"key": ARCH, "operator": "In", "values": [a.arch]}]})
                })
                .collect();
            status.instance_profile = Some(r.instance_profile.clone()).filter(|p| !p.is_empty());
            status.capacity_reservations = r
                .reservations
                .iter()
                .map(|x| reservations::status_entry(x, now))
                .collect();
            for (type_, _, _) in PARTS {
                wanted.push(condition(type_, true, "", ""));
            }
            wanted.push(condition(conditions::VALIDATION_SUCCEEDED, true, "", ""));
            wanted.push(condition(conditions::READY, true, "", ""));
        }
        Err(why) => {
            for (type_, field, reason) in PARTS {
                let failed = why.contains(field);
                wanted.push(condition(
                    type_,
                    !failed,
                    reason,
                    if failed { why } else { "" },
                ));
            }
            wanted.push(condition(conditions::VALIDATION_SUCCEEDED, true, "", ""));
            wanted.push(condition(
                conditions::READY,
                false,
                conditions::UNHEALTHY_DEPENDENTS,
                why,
            ));
        }
    }
    status.conditions = merged(&current.conditions, wanted, now);
    status
}

/// A condition as Karpenter writes it: reason `<Type>` when True, the failure's reason when not.
fn condition(type_: &str, ok: bool, reason: &str, message: &str) -> Condition {
    Condition {
        type_: type_.to_string(),
        status: if ok { "True" } else { "False" }.into(),
        reason: Some(if ok { type_ } else { reason }.to_string()),
        message: Some(message.to_string()).filter(|m| !m.is_empty()),
        last_transition_time: None,
        observed_generation: None,
    }
}

/// The wanted conditions, each keeping the transition time of the one it replaces when its
/// status is the same (else stamped `now`), followed by the current ones of other types.
pub fn merged(current: &[Condition], wanted: Vec<Condition>, now: DateTime<Utc>) -> Vec<Condition> {
    let stamp = now.to_rfc3339_opts(SecondsFormat::Secs, true);
    let mut out: Vec<Condition> = wanted
        .into_iter()
        .map(|mut c| {
            let before = current.iter().find(|x| x.type_ == c.type_);
            c.last_transition_time = match before {
                Some(b) if b.status == c.status => b.last_transition_time.clone(),
                _ => Some(stamp.clone()),
            };
            c
        })
        .collect();
    for c in current {
        if !out.iter().any(|x| x.type_ == c.type_) {
            out.push(c.clone());
        }
    }
    out
}

/// A NodePool's conditions: valid (it converted), its EC2NodeClass ready (as the class's own
/// `Ready` says: resolved this tick, or its status when it was not resolved), and ready when
/// both are.
pub fn nodepool_conditions(
    current: &[Condition],
    class_ready: Option<bool>,
    invalid: Option<&str>,
    now: DateTime<Utc>,
) -> Vec<Condition> {
    let class = match class_ready {
        Some(true) => condition(conditions::NODE_CLASS_READY, true, "", ""),
        Some(false) => condition(
            conditions::NODE_CLASS_READY,
            false,
            "NodeClassNotReady",
            "EC2NodeClass is not ready",
        ),
        None => condition(
            conditions::NODE_CLASS_READY,
            false,
            "NodeClassNotFound",
            "EC2NodeClass not found",
        ),
    };
    let valid = condition(
        conditions::VALIDATION_SUCCEEDED,
        invalid.is_none(),
        "NodePoolValidationFailed",
        invalid.unwrap_or_default(),
    );
    let ready = class_ready == Some(true) && invalid.is_none();
    let why = match (invalid, class_ready == Some(true)) {
        (Some(_), _) => "ValidationSucceeded=False",
        (None, false) => "NodeClassReady=False",
        (None, true) => "",
    };
    let wanted = vec![
        valid,
        class,
        condition(
            conditions::READY,
            ready,
            conditions::UNHEALTHY_DEPENDENTS,
            why,
        ),
    ];
    merged(current, wanted, now)
}

/// Whether each EC2NodeClass is ready: resolved this tick, or (not resolved) its status's
/// `Ready`.
pub fn classes_ready(dump: &ClusterDump, resolved: &Resolutions) -> BTreeMap<String, bool> {
    dump.nodeclasses
        .iter()
        .map(|c| {
            let name = c.metadata.name.clone().unwrap_or_default();
            let ready = match resolved.get(&name) {
                Some(r) => r.is_ok(),
                None => c.status.as_ref().is_some_and(|s| {
                    s.conditions
                        .iter()
                        .any(|x| x.type_ == conditions::READY && x.status == "True")
                }),
            };
            (name, ready)
        })
        .collect()
}

#[cfg(test)]
#[path = "../../tests/unit/tick/status.rs"]
mod tests;
