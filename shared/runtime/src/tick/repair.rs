//! Node repair, as Karpenter's node health controller with the AWS provider's repair policies
//! (off unless `FLEETWRIGHT_NODE_REPAIR` is set, as Karpenter's `NodeRepair` feature gate is):
//! a node whose `Ready` condition has been `False` or `Unknown` for 30 minutes, or whose
//! node-monitoring-agent condition (`AcceleratedHardwareReady` 10 minutes, `StorageReady`,
//! `NetworkingReady`, `KernelReady`, `ContainerRuntimeReady` 30 minutes) has been `False` that
//! long, has its NodeClaim deleted. As in Karpenter v1.15, repair is paced by the NodePool's
//! disruption budgets under the reason `Unhealthy` (the nodes it may take at once, with those
//! already being disrupted counted), the nodes unhealthy longest first; `karpenter.sh/do-not-repair`
//! on the Node or NodeClaim vetoes it. The pool's health is a guard as well: no repair while
//! more than 20 % of a NodePool's nodes (rounded up, at least one) are unhealthy, since a fault
//! that wide is the cluster's, not the node's.
//!
//! A node that is not Ready (its kubelet is gone or broken) is repaired forcefully, as Karpenter
//! does: its NodeClaim's termination timestamp is set to now, so the deletion deletes its pods
//! instead of waiting on evictions that cannot complete. A Ready node with a failed
//! monitoring-agent condition is drained as any deleted NodeClaim is, through the Eviction API
//! (PodDisruptionBudgets and `do-not-disrupt` hold until its `terminationGracePeriod`): its pods
//! still run, so they get their graceful shutdown. Pure: the dump and `now` in, actions out.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Timelike, Utc};
use fleetwright_core::disruption::budget::{self, Reason};
use fleetwright_core::labels::{NODEPOOL, TAINT_DISRUPTED};
use fleetwright_core::model::NodePool;
use fleetwright_crds::NodeClaim;
use fleetwright_kube::dump::ClusterDump;
use k8s_openapi::api::core::v1::{Node, NodeCondition};

use super::action::Action;
use super::claims::name_of;
use fleetwright_crds::conditions;

/// On a NodeClaim: when its drain's grace is over (RFC 3339), as Karpenter writes it. The
/// deletion deletes the pods left on the node from then on.
pub const TERMINATION_TIMESTAMP: &str = "karpenter.sh/nodeclaim-termination-timestamp";
/// On a Node or NodeClaim: never repair it (Karpenter v1.15).
pub const DO_NOT_REPAIR: &str = "karpenter.sh/do-not-repair";
/// The share of a NodePool's nodes that may be unhealthy with repair still going on.
pub const ALLOWED_UNHEALTHY_PERCENT: u32 = 20;

/// One repair policy: a node condition, the status that is unhealthy, and how long it is
/// tolerated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RepairPolicy {
    pub condition: &'static str,
    pub status: &'static str,
    pub toleration: Duration,
}

const fn policy(condition: &'static str, status: &'static str, minutes: i64) -> RepairPolicy {
    RepairPolicy {
        condition,
        status,
        toleration: Duration::minutes(minutes),
    }
}

/// The AWS provider's repair policies (Karpenter v1.14): the kubelet's `Ready`, and the EKS
/// node monitoring agent's conditions.
pub const POLICIES: [RepairPolicy; 7] = [
    policy(conditions::READY, "False", 30),
    policy(conditions::READY, "Unknown", 30),
    policy("AcceleratedHardwareReady", "False", 10),
    policy("StorageReady", "False", 30),
    policy("NetworkingReady", "False", 30),
    policy("KernelReady", "False", 30),
    policy("ContainerRuntimeReady", "False", 30),
];

/// The repairs due at `now`: a [`Action::Repair`] for each managed node unhealthy past its
/// toleration in a pool healthy enough, within its pool's `Unhealthy` budget (the longest due
/// first); a [`Action::RepairBlocked`] for each held back by the pool's health, and an
/// [`Action::Blocked`] for each held back by the budget or `do-not-repair`. `pools` are the
/// NodePools as read (their budgets).
pub fn repairs(
    dump: &ClusterDump,
    claims: &[NodeClaim],
    pools: &[NodePool],
    now: DateTime<Utc>,
) -> Vec<Action> {
    let mut due: Vec<(DateTime<Utc>, Action)> = claims
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .filter_map(|claim| repair(dump, claim, now))
        .collect();
    due.sort_by_key(|(at, _)| *at);
    let mut left: BTreeMap<String, usize> = BTreeMap::new();
    let said = now.minute().is_multiple_of(5);
    due.into_iter()
        .map(|(_, action)| {
            let Action::Repair { node, nodepool, .. } = &action else {
                return action;
            };
            let n = left
                .entry(nodepool.clone())
                .or_insert_with(|| allowance(dump, claims, pools, nodepool, now));
            if *n == 0 {
                return Action::Blocked {
                    node: node.clone(),
                    reason: format!(
                        "unhealthy disruption budget of NodePool {nodepool} allows no more nodes now"
                    ),
                    changed: said,
                };
            }
            *n -= 1;
            action
        })
        .collect()
}

/// How many more of the pool's nodes repair may take now: its budgets for `Unhealthy`, less
/// the nodes already going (see [`going`]). A pool not read (gone) allows none.
fn allowance(
    dump: &ClusterDump,
    claims: &[NodeClaim],
    pools: &[NodePool],
    pool: &str,
    now: DateTime<Utc>,
) -> usize {
    let Some(pool_spec) = pools.iter().find(|p| p.name == pool) else {
        return 0;
    };
    let nodes = pool_nodes(dump, pool);
    let going = going(claims, now);
    let disrupting = nodes
        .iter()
        .filter(|n| leaving(n) || n.metadata.name.as_ref().is_some_and(|m| going.contains(m)))
        .count();
    budget::allowed(
        pool_spec,
        Reason::Unhealthy,
        nodes.len(),
        disrupting,
        now.timestamp(),
    )
}

/// The nodes of NodeClaims already going though their node may not show it yet: deleted,
/// carrying a disruption command, or expiring now (the tick deletes it this minute).
fn going(claims: &[NodeClaim], now: DateTime<Utc>) -> std::collections::BTreeSet<String> {
    claims
        .iter()
        .filter(|c| {
            c.metadata.deletion_timestamp.is_some()
                || super::in_progress::annotation(c).is_some()
                || super::expiration::expires_at(c).is_some_and(|at| now >= at)
        })
        .filter_map(|c| c.status.as_ref().and_then(|s| s.node_name.clone()))
        .collect()
}

/// Whether the node is already going: deleted, or tainted by a disruption or a deletion.
fn leaving(node: &Node) -> bool {
    node.metadata.deletion_timestamp.is_some()
        || node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .is_some_and(|t| t.iter().any(|t| t.key == TAINT_DISRUPTED))
}

/// Whether `karpenter.sh/do-not-repair: "true"` is on these annotations.
fn vetoed(annotations: Option<&std::collections::BTreeMap<String, String>>) -> bool {
    annotations
        .and_then(|a| a.get(DO_NOT_REPAIR))
        .is_some_and(|v| v == "true")
}

fn repair(
    dump: &ClusterDump,
    claim: &NodeClaim,
    now: DateTime<Utc>,
) -> Option<(DateTime<Utc>, Action)> {
    let node = dump.node_of(claim)?;
    let (condition, due) = unhealthy_since(node)?;
    if now < due {
        return None;
    }
    let node_name = node.metadata.name.clone().unwrap_or_default();
    if vetoed(node.metadata.annotations.as_ref()) || vetoed(claim.metadata.annotations.as_ref()) {
        let reason = format!("node has {DO_NOT_REPAIR}");
        let changed = now.minute().is_multiple_of(5);
        return Some((
            due,
            Action::Blocked {
                node: node_name,
                reason,
                changed,
            },
        ));
    }
    let pool = claim
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(NODEPOOL))
        .cloned()
        .unwrap_or_default();
    let (unhealthy, total) = pool_health(dump, &pool);
    if unhealthy > allowed_unhealthy(total) {
        let blocked = Action::RepairBlocked {
            node: node_name,
            nodepool: pool,
            unhealthy,
            nodes: total,
            said: now.minute().is_multiple_of(5),
        };
        return Some((due, blocked));
    }
    let action = Action::Repair {
        nodeclaim: name_of(claim),
        node: node_name,
        nodepool: pool,
        condition: format!("{}={}", condition.type_, condition.status),
        forceful: !ready(node),
    };
    Some((due, action))
}

/// The node's unhealthy condition that is due first, and when it is due (its last transition
/// plus the policy's toleration). A node cannot have been unhealthy for longer than it has
/// existed: a condition without a transition time (a kubelet still registering writes
/// `Ready=False` so) counts from the Node's creation, and with neither known nothing is due.
fn unhealthy_since(node: &Node) -> Option<(&NodeCondition, DateTime<Utc>)> {
    let seconds = |t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time| {
        DateTime::from_timestamp(t.0.as_second(), 0)
    };
    let created = node.metadata.creation_timestamp.as_ref().and_then(seconds);
    POLICIES
        .iter()
        .filter_map(|p| {
            let c = matching(node, p)?;
            let changed = c.last_transition_time.as_ref().and_then(seconds);
            let since = match (changed, created) {
                (Some(changed), Some(created)) => changed.max(created),
                (known, None) | (None, known) => known?,
            };
            Some((c, since + p.toleration))
        })
        .min_by_key(|(_, due)| *due)
}

fn matching<'a>(node: &'a Node, policy: &RepairPolicy) -> Option<&'a NodeCondition> {
    conditions(node).find(|c| c.type_ == policy.condition && c.status == policy.status)
}

fn conditions(node: &Node) -> impl Iterator<Item = &NodeCondition> {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
}

/// Whether the node's `Ready` condition is `True`.
fn ready(node: &Node) -> bool {
    conditions(node).any(|c| c.type_ == conditions::READY && c.status == "True")
}

/// Whether any repair policy's condition holds on the node, however briefly.
pub fn unhealthy(node: &Node) -> bool {
    POLICIES.iter().any(|p| matching(node, p).is_some())
}

/// The pool's unhealthy nodes and all its nodes (the nodes labelled with it).
fn pool_health(dump: &ClusterDump, pool: &str) -> (usize, usize) {
    let nodes = pool_nodes(dump, pool);
    let sick = nodes.iter().filter(|n| unhealthy(n)).count();
    (sick, nodes.len())
}

/// The nodes labelled with the pool.
fn pool_nodes<'a>(dump: &'a ClusterDump, pool: &str) -> Vec<&'a Node> {
    dump.nodes
        .iter()
        .filter(|n| {
            n.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(NODEPOOL))
                .is_some_and(|p| p == pool)
        })
        .collect()
}

/// How many of `total` nodes may be unhealthy with repair going on: 20 %, rounded up, as a
/// PodDisruptionBudget's percentages round (three nodes allow one).
pub fn allowed_unhealthy(total: usize) -> usize {
    (total * ALLOWED_UNHEALTHY_PERCENT as usize).div_ceil(100)
}

/// When the NodeClaim's termination timestamp says its grace is over, if it says.
pub fn termination_timestamp(claim: &NodeClaim) -> Option<DateTime<Utc>> {
    let text = claim
        .metadata
        .annotations
        .as_ref()?
        .get(TERMINATION_TIMESTAMP)?;
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NOW: &str = "2026-11-25T12:00:00Z";

    fn now() -> DateTime<Utc> {
        NOW.parse().unwrap()
    }

    /// A node of `pool` named `n<i>` with `conditions` (type, status, minutes since the
    /// transition), and its NodeClaim `c<i>`.
    fn member(pool: &str, i: usize, conditions: &[(&str, &str, i64)]) -> (Node, NodeClaim) {
        let conditions: Vec<_> = conditions
            .iter()
            .map(|(t, s, ago)| {
                let at = now() - Duration::minutes(*ago);
                json!({"type": t, "status": s, "lastTransitionTime": at.to_rfc3339()})
            })
            .collect();
        let node = json!({
            "metadata": {"name": format!("n{i}"), "labels": {NODEPOOL: pool}},
            "spec": {"providerID": format!("aws:///us-east-1a/i-{i:017}")},
            "status": {"conditions": conditions},
        });
        let claim = json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": format!("c{i}"), "labels": {NODEPOOL: pool}},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []},
            "status": {"nodeName": format!("n{i}"), "providerID": format!("aws:///us-east-1a/i-{i:017}")},
        });
        (
            serde_json::from_value(node).unwrap(),
            serde_json::from_value(claim).unwrap(),
        )
    }

    fn cluster(members: Vec<(Node, NodeClaim)>) -> ClusterDump {
        let (nodes, claims) = members.into_iter().unzip();
        ClusterDump {
            nodes,
            nodeclaims: claims,
            ..Default::default()
        }
    }

    /// The pools `default`, `web` and `batch` with one budget of `nodes` for `reasons`.
    fn pools(nodes: &str, reasons: &[&str]) -> Vec<NodePool> {
        ["default", "web", "batch"]
            .into_iter()
            .map(|name| NodePool {
                name: name.into(),
                budgets: vec![fleetwright_core::model::Budget {
                    nodes: nodes.into(),
                    reasons: reasons.iter().map(|r| r.to_string()).collect(),
                    ..Default::default()
                }],
                ..Default::default()
            })
            .collect()
    }

    /// Decided with budgets that allow every node, so that only the pool's health holds repair.
    fn decided(dump: &ClusterDump) -> Vec<Action> {
        repairs(dump, &dump.nodeclaims, &pools("100%", &[]), now())
    }

    fn repaired(actions: &[Action]) -> Vec<&str> {
        actions
            .iter()
            .filter_map(|a| match a {
                Action::Repair { nodeclaim, .. } => Some(nodeclaim.as_str()),
                _ => None,
            })
            .collect()
    }

    fn sick(i: usize, minutes: i64) -> (Node, NodeClaim) {
        member("web", i, &[(conditions::READY, "False", minutes)])
    }

    /// Karpenter v1.15: repair is paced by the pool's budgets under `Unhealthy`, the nodes
    /// unhealthy longest going first, and the nodes already being disrupted counted.
    #[test]
    fn repair_is_paced_by_the_unhealthy_budget_longest_unhealthy_first() {
        let mut members: Vec<_> = (0..10).map(|i| member("web", i, HEALTHY)).collect();
        members[3] = sick(3, 40);
        members[7] = sick(7, 90);
        let dump = cluster(members.clone());
        let one = pools("1", &["Unhealthy"]);
        let actions = repairs(&dump, &dump.nodeclaims, &one, now());
        assert_eq!(repaired(&actions), ["c7"], "{actions:?}");
        assert!(actions
            .iter()
            .any(|a| matches!(a, Action::Blocked { node, reason, .. }
            if node == "n3" && reason.contains("unhealthy disruption budget of NodePool web"))));
        // A budget for other reasons does not hold repair back.
        let other = pools("0", &["Drifted"]);
        assert_eq!(
            repaired(&repairs(&dump, &dump.nodeclaims, &other, now())).len(),
            2
        );
        // A pool without budgets has Karpenter's default, 10 %: one of ten.
        let mut unset = one.clone();
        unset.iter_mut().for_each(|p| p.budgets.clear());
        assert_eq!(
            repaired(&repairs(&dump, &dump.nodeclaims, &unset, now())),
            ["c7"]
        );
        // A node already being disrupted takes the only slot.
        let mut busy = members;
        busy[0].0.spec.as_mut().unwrap().taints = Some(vec![k8s_openapi::api::core::v1::Taint {
            key: TAINT_DISRUPTED.into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        }]);
        let dump = cluster(busy);
        assert!(repaired(&repairs(&dump, &dump.nodeclaims, &one, now())).is_empty());
    }

    #[test]
    fn do_not_repair_on_the_node_or_its_nodeclaim_vetoes_repair() {
        for on_node in [true, false] {
            let mut members: Vec<_> = (0..5).map(|i| member("web", i, HEALTHY)).collect();
            members[1] = sick(1, 60);
            let veto = [(DO_NOT_REPAIR.to_string(), "true".to_string())].into();
            match on_node {
                true => members[1].0.metadata.annotations = Some(veto),
                false => members[1].1.metadata.annotations = Some(veto),
            }
            let actions = decided(&cluster(members));
            assert!(repaired(&actions).is_empty(), "{actions:?}");
            assert!(actions
                .iter()
                .any(|a| matches!(a, Action::Blocked { reason, .. }
                if reason.contains(DO_NOT_REPAIR))));
        }
    }

    const HEALTHY: &[(&str, &str, i64)] = &[(conditions::READY, "True", 600)];

    /// A kubelet registering writes `Ready=False` with no transition time: the node is as old
    /// as its creation, and is not repaired (forcefully, pods deleted) before its toleration.
    #[test]
    fn a_registering_node_with_no_transition_time_is_not_repaired_before_its_toleration() {
        let (mut node, claim) = member("web", 1, &[]);
        let condition =
            json!([{"type": conditions::READY, "status": "False", "reason": "KubeletNotReady"}]);
        node.status.as_mut().unwrap().conditions = serde_json::from_value(condition).ok();
        let created = |minutes: i64| {
            let at = now() - Duration::minutes(minutes);
            serde_json::from_value(json!(at.to_rfc3339())).unwrap()
        };
        node.metadata.creation_timestamp = Some(created(1));
        let young = cluster(vec![(node.clone(), claim.clone())]);
        assert!(decided(&young).is_empty(), "{:?}", decided(&young));
        node.metadata.creation_timestamp = None;
        assert!(decided(&cluster(vec![(node.clone(), claim.clone())])).is_empty());
        node.metadata.creation_timestamp = Some(created(31));
        let old = decided(&cluster(vec![(node, claim)]));
        assert!(
            matches!(old.as_slice(), [Action::Repair { forceful: true, .. }]),
            "{old:?}"
        );
    }

    #[test]
    fn each_policy_waits_out_its_toleration_and_only_a_node_not_ready_goes_forcefully() {
        let cases = [
            (vec![(conditions::READY, "Unknown", 31)], Some(true)),
            (vec![(conditions::READY, "False", 30)], Some(true)),
            (vec![(conditions::READY, "Unknown", 29)], None),
            (
                vec![
                    (conditions::READY, "True", 600),
                    ("AcceleratedHardwareReady", "False", 11),
                ],
                Some(false),
            ),
            (
                vec![
                    (conditions::READY, "True", 600),
                    ("AcceleratedHardwareReady", "False", 9),
                ],
                None,
            ),
            (
                vec![
                    (conditions::READY, "True", 600),
                    ("StorageReady", "False", 45),
                ],
                Some(false),
            ),
            (
                vec![
                    (conditions::READY, "True", 600),
                    ("KernelReady", "Unknown", 45),
                ],
                None,
            ),
            (
                vec![
                    (conditions::READY, "True", 600),
                    ("MemoryPressure", "True", 90),
                ],
                None,
            ),
        ];
        for (conditions, want) in cases {
            let mut members = vec![member("default", 0, &conditions)];
            members.extend((1..5).map(|i| member("default", i, HEALTHY)));
            let got = decided(&cluster(members));
            let forceful = got.iter().find_map(|a| match a {
                Action::Repair {
                    nodeclaim,
                    forceful,
                    ..
                } if nodeclaim == "c0" => Some(*forceful),
                _ => None,
            });
            assert_eq!(forceful, want, "{conditions:?}: {got:?}");
            assert!(got.len() <= 1, "only the unhealthy node: {got:?}");
        }
    }

    #[test]
    fn the_earliest_due_condition_names_the_repair() {
        let members = vec![member(
            "default",
            0,
            &[
                (conditions::READY, "False", 40),
                ("AcceleratedHardwareReady", "False", 35),
            ],
        )];
        let got = decided(&cluster(members));
        assert!(
            matches!(&got[..], [Action::Repair { condition, .. }] if condition == "AcceleratedHardwareReady=False"),
            "{got:?}"
        );
    }

    /// Every pool size up to 15 and every count of unhealthy nodes in it: all of them are
    /// repaired while at most 20 % (rounded up) are unhealthy, and none are after. Nodes
    /// unhealthy too briefly count towards the share but are not repaired; other pools' nodes do
    /// not count at all.
    #[test]
    fn no_repair_while_more_than_a_fifth_of_the_pool_is_unhealthy() {
        for total in 1..=15usize {
            for sick in 0..=total {
                for young in 0..=sick.min(2) {
                    let mut members: Vec<_> = (0..total)
                        .map(|i| {
                            let ago = if i < young { 5 } else { 45 };
                            let cond: &[(&str, &str, i64)] = if i < sick {
                                &[(conditions::READY, "Unknown", ago)]
                            } else {
                                HEALTHY
                            };
                            member("web", i, cond)
                        })
                        .collect();
                    members.extend(
                        (100..104).map(|i| member("batch", i, &[(conditions::READY, "False", 90)])),
                    );
                    let got = decided(&cluster(members));
                    let web = |a: &&Action| match a {
                        Action::Repair { nodepool, .. }
                        | Action::RepairBlocked { nodepool, .. } => nodepool == "web",
                        _ => false,
                    };
                    let repaired = got
                        .iter()
                        .filter(web)
                        .filter(|a| matches!(a, Action::Repair { .. }))
                        .count();
                    let blocked = got
                        .iter()
                        .filter(web)
                        .filter(|a| matches!(a, Action::RepairBlocked { .. }))
                        .count();
                    let allowed = (total as f64 * 0.2).ceil() as usize;
                    let due = sick - young;
                    let case = format!("{sick} of {total} unhealthy, {young} briefly: {got:?}");
                    if sick <= allowed {
                        assert_eq!((repaired, blocked), (due, 0), "{case}");
                    } else {
                        assert_eq!((repaired, blocked), (0, due), "{case}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_node_already_being_deleted_or_without_a_claim_is_left_alone() {
        let (node, mut claim) = member("default", 0, &[(conditions::READY, "Unknown", 60)]);
        claim.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2026-11-25T11:59:00Z".parse().unwrap(),
            ));
        let dump = cluster(vec![(node.clone(), claim)]);
        assert!(decided(&dump).is_empty());
        let orphan = ClusterDump {
            nodes: vec![node],
            ..Default::default()
        };
        assert!(decided(&orphan).is_empty());
    }
}
