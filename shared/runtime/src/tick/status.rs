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
        "PlacementGroupReady",
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
                        {"key": "kubernetes.io/arch", "operator": "In", "values": [a.arch]}]})
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
                "UnhealthyDependents",
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
        condition(conditions::READY, ready, "UnhealthyDependents", why),
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
mod tests {
    use super::*;
    use fleetwright_cloud::ami::{Ami, AmiFamily};
    use fleetwright_cloud::nodeclass::{ResolvedReservation, Subnet};

    fn class() -> EC2NodeClass {
        serde_json::from_value(
            json!({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}], "role": "node",
                "subnetSelectorTerms": [{"tags": {"a": "b"}}],
                "securityGroupSelectorTerms": [{"tags": {"a": "b"}}]}}),
        )
        .unwrap()
    }

    fn resolved() -> ResolvedNodeClass {
        ResolvedNodeClass {
            name: "default".into(),
            family: AmiFamily::AL2023,
            subnets: vec![Subnet {
                id: "subnet-1".into(),
                zone: "us-east-1a".into(),
                available_ips: 100,
            }],
            security_groups: vec!["sg-1".into()],
            amis: vec![Ami {
                id: "ami-1".into(),
                arch: "amd64".into(),
                variant: None,
                created: None,
            }],
            instance_profile: "profile-1".into(),
            reservations: vec![ResolvedReservation {
                id: "cr-1".into(),
                instance_type: "m5.large".into(),
                zone: "us-east-1a".into(),
                kind: "default".into(),
                interruptible: false,
                owner_id: "123".into(),
                instance_match_criteria: "targeted".into(),
                end_time: None,
                available: 3,
            }],
            placement_group: None,
        }
    }

    fn of<'a>(status: &'a EC2NodeClassStatus, type_: &str) -> &'a Condition {
        status.conditions.iter().find(|c| c.type_ == type_).unwrap()
    }

    #[test]
    fn a_resolved_class_lists_what_it_selects_and_is_ready_with_stable_transition_times() {
        let t0: DateTime<Utc> = "2026-11-25T10:00:00Z".parse().unwrap();
        let status = nodeclass_status(&class(), &Ok(resolved()), t0);
        assert_eq!(
            status.subnets,
            vec![json!({"id": "subnet-1", "zone": "us-east-1a"})]
        );
        assert_eq!(status.security_groups, vec![json!({"id": "sg-1"})]);
        assert_eq!(status.amis[0]["id"], "ami-1");
        assert_eq!(status.instance_profile.as_deref(), Some("profile-1"));
        assert_eq!(
            status.capacity_reservations[0].available_instance_count,
            Some(3)
        );
        for type_ in [
            conditions::SUBNETS_READY,
            conditions::SECURITY_GROUPS_READY,
            conditions::AMIS_READY,
            "PlacementGroupReady",
            conditions::READY,
        ] {
            assert_eq!(of(&status, type_).status, "True", "{type_}");
        }
        let mut written = class();
        written.status = Some(status.clone());
        let later = t0 + chrono::Duration::minutes(5);
        let again = nodeclass_status(&written, &Ok(resolved()), later);
        assert_eq!(again, status, "nothing changed, nothing to write");
        let dump = ClusterDump {
            nodeclasses: vec![written.clone()],
            ..Default::default()
        };
        let ok = Resolutions::from([("default".to_string(), Ok(resolved()))]);
        assert!(nodeclass_statuses(&dump, &ok, later).is_empty());

        let why = "EC2NodeClass default: field subnetSelectorTerms: no subnet matches".to_string();
        let failed = nodeclass_status(&written, &Err(why.clone()), later);
        assert_eq!(of(&failed, conditions::SUBNETS_READY).status, "False");
        assert_eq!(
            of(&failed, conditions::SUBNETS_READY).reason.as_deref(),
            Some("SubnetsNotFound")
        );
        assert_eq!(
            of(&failed, conditions::SUBNETS_READY).message.as_deref(),
            Some(why.as_str())
        );
        assert_eq!(
            of(&failed, conditions::SECURITY_GROUPS_READY).status,
            "True"
        );
        assert_eq!(
            of(&failed, conditions::SECURITY_GROUPS_READY).last_transition_time,
            of(&status, conditions::SECURITY_GROUPS_READY).last_transition_time,
            "unchanged conditions keep their time"
        );
        assert_eq!(of(&failed, conditions::READY).status, "False");
        assert_eq!(
            failed.subnets, status.subnets,
            "the lists last resolved are kept"
        );
        // A placement group EC2 does not know: PlacementGroupReady says so, and the class is
        // not Ready (nothing launches for it).
        let why_group =
            "EC2NodeClass default: field placementGroupSelector: placement group \"pg-a\" not found";
        let unplaced = nodeclass_status(&written, &Err(why_group.to_string()), later);
        assert_eq!(of(&unplaced, "PlacementGroupReady").status, "False");
        assert_eq!(
            of(&unplaced, "PlacementGroupReady").reason.as_deref(),
            Some("PlacementGroupNotFound")
        );
        assert_eq!(of(&unplaced, conditions::SUBNETS_READY).status, "True");
        assert_eq!(of(&unplaced, conditions::READY).status, "False");
        let classes = classes_ready(&dump, &Resolutions::from([("default".into(), Err(why))]));
        assert!(!classes["default"]);
        assert!(
            classes_ready(&dump, &Resolutions::new())["default"],
            "from status"
        );
    }

    #[test]
    fn an_invalid_nodepool_says_which_field_and_is_not_ready() {
        let now = Utc::now();
        let why =
            "NodePool batch: spec.disruption.consolidateAfter: invalid duration \"30 seconds\"";
        let out = nodepool_conditions(&[], Some(true), Some(why), now);
        let of = |t: &str| out.iter().find(|c| c.type_ == t).unwrap();
        assert_eq!(of(conditions::VALIDATION_SUCCEEDED).status, "False");
        assert_eq!(
            of(conditions::VALIDATION_SUCCEEDED).reason.as_deref(),
            Some("NodePoolValidationFailed")
        );
        assert_eq!(
            of(conditions::VALIDATION_SUCCEEDED).message.as_deref(),
            Some(why)
        );
        assert_eq!(of(conditions::READY).status, "False");
    }

    #[test]
    fn a_nodepool_is_ready_only_while_its_class_is() {
        let now: DateTime<Utc> = "2026-11-25T10:00:00Z".parse().unwrap();
        let get = |c: &[Condition], t: &str| {
            c.iter()
                .find(|x| x.type_ == t)
                .map(|x| (x.status.clone(), x.reason.clone().unwrap_or_default()))
        };
        let ready = nodepool_conditions(&[], Some(true), None, now);
        assert_eq!(
            get(&ready, conditions::READY),
            Some(("True".into(), conditions::READY.into()))
        );
        assert_eq!(
            get(&ready, conditions::VALIDATION_SUCCEEDED).unwrap().0,
            "True"
        );
        let not = nodepool_conditions(&ready, Some(false), None, now);
        assert_eq!(
            get(&not, conditions::NODE_CLASS_READY),
            Some(("False".into(), "NodeClassNotReady".into()))
        );
        assert_eq!(get(&not, conditions::READY).unwrap().0, "False");
        let missing = nodepool_conditions(&[], None, None, now);
        assert_eq!(
            get(&missing, conditions::NODE_CLASS_READY).unwrap().1,
            "NodeClassNotFound"
        );
        assert_eq!(
            nodepool_conditions(&ready, Some(true), None, now + chrono::Duration::hours(1)),
            ready
        );
    }
}
