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
        "status": {
            "nodeName": format!("n{i}"),
            "providerID": format!("aws:///us-east-1a/i-{i:017}"),
            "conditions": [{"type": conditions::INITIALIZED, "status": "True"}],
        },
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
    repairs(
        dump,
        &dump.nodeclaims,
        &pools("100%", &[]),
        now(),
        NodeRepair::On,
    )
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
    let actions = repairs(&dump, &dump.nodeclaims, &one, now(), NodeRepair::On);
    assert_eq!(repaired(&actions), ["c7"], "{actions:?}");
    assert!(actions
        .iter()
        .any(|a| matches!(a, Action::Blocked { node, reason, .. }
            if node == "n3" && reason.contains("unhealthy disruption budget of NodePool web"))));
    // A budget for other reasons does not hold repair back.
    let other = pools("0", &["Drifted"]);
    assert_eq!(
        repaired(&repairs(
            &dump,
            &dump.nodeclaims,
            &other,
            now(),
            NodeRepair::On
        ))
        .len(),
        2
    );
    // A pool without budgets has Karpenter's default, 10 %: one of ten.
    let mut unset = one.clone();
    unset.iter_mut().for_each(|p| p.budgets.clear());
    assert_eq!(
        repaired(&repairs(
            &dump,
            &dump.nodeclaims,
            &unset,
            now(),
            NodeRepair::On
        )),
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
    assert!(repaired(&repairs(
        &dump,
        &dump.nodeclaims,
        &one,
        now(),
        NodeRepair::On
    ))
    .is_empty());
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
    let bound = Some(now() + Duration::minutes(10));
    assert!(
        matches!(old.as_slice(), [Action::Repair { terminate_at, .. }] if *terminate_at == bound),
        "{old:?}"
    );
}

/// A node with `conditions` (type, status, reason, minutes since the transition) beside four
/// healthy ones: the drain bound of its repair, in minutes from now, if it is repaired.
fn drain_bound(conditions: &[(&str, &str, &str, i64)], mode: NodeRepair) -> Option<Option<i64>> {
    let (mut node, claim) = member("default", 0, &[]);
    let written: Vec<_> = conditions
        .iter()
        .map(|(t, s, reason, ago)| {
            let at = now() - Duration::minutes(*ago);
            json!({"type": t, "status": s, "reason": reason, "lastTransitionTime": at.to_rfc3339()})
        })
        .collect();
    node.status.as_mut().unwrap().conditions = serde_json::from_value(json!(written)).ok();
    let mut members = vec![(node, claim)];
    members.extend((1..5).map(|i| member("default", i, HEALTHY)));
    let dump = cluster(members);
    let got = repairs(&dump, &dump.nodeclaims, &pools("100%", &[]), now(), mode);
    assert!(got.len() <= 1, "only the unhealthy node: {got:?}");
    got.iter().find_map(|a| match a {
        Action::Repair {
            nodeclaim,
            terminate_at,
            ..
        } if nodeclaim == "c0" => Some(terminate_at.map(|t| (t - now()).num_minutes())),
        _ => None,
    })
}

/// A node's conditions (type, status, reason, minutes ago), and the drain bound expected.
type Case<'a> = (Vec<(&'a str, &'a str, &'a str, i64)>, Option<Option<i64>>);

/// Karpenter v1.15.0's AWS repair policies: each waits out its toleration, GPU faults by the
/// XID code in the condition's reason, and each bounds the drain (the shortest of those due).
#[test]
fn each_policy_waits_out_its_toleration_and_bounds_the_drain() {
    let ready = (conditions::READY, "True", "KubeletReady", 600);
    let gpu = "AcceleratedHardwareReady";
    let cases: Vec<Case> = vec![
        (
            vec![(conditions::READY, "Unknown", "NodeStatusUnknown", 31)],
            Some(Some(10)),
        ),
        (
            vec![(conditions::READY, "False", "KubeletNotReady", 30)],
            Some(Some(10)),
        ),
        (
            vec![(conditions::READY, "Unknown", "NodeStatusUnknown", 29)],
            None,
        ),
        (
            vec![ready, (gpu, "False", "NvidiaXID79Error", 11)],
            Some(Some(5)),
        ),
        (
            vec![ready, (gpu, "False", "XID48 double-bit ECC", 11)],
            Some(Some(5)),
        ),
        (vec![ready, (gpu, "False", "NvidiaXID79Error", 9)], None),
        // An unrecognised GPU fault falls back to 30 minutes.
        (vec![ready, (gpu, "False", "NvidiaXID13Error", 11)], None),
        (
            vec![ready, (gpu, "False", "NvidiaXID13Error", 31)],
            Some(Some(10)),
        ),
        (vec![ready, (gpu, "False", "", 31)], Some(Some(10))),
        // Not Ready as well: the shortest drain of the policies due, the GPU fault's.
        (
            vec![
                (conditions::READY, "False", "KubeletNotReady", 11),
                (gpu, "False", "NvidiaXID79Error", 11),
            ],
            Some(Some(5)),
        ),
        (
            vec![ready, ("StorageReady", "False", "DiskFailure", 45)],
            Some(Some(10)),
        ),
        (vec![ready, ("KernelReady", "Unknown", "", 45)], None),
        (vec![ready, ("MemoryPressure", "True", "", 90)], None),
    ];
    for (conditions, want) in cases {
        assert_eq!(
            drain_bound(&conditions, NodeRepair::On),
            want,
            "{conditions:?}"
        );
    }
}

/// Karpenter's `--legacy-node-repair`: v1.14's policies, a node that is not Ready repaired
/// forcefully (its pods deleted now), one that is Ready left to its own grace.
#[test]
fn legacy_repair_keeps_the_policies_and_force_of_before_v1_15() {
    let ready = (conditions::READY, "True", "KubeletReady", 600);
    let gpu = "AcceleratedHardwareReady";
    let cases: Vec<Case> = vec![
        (vec![(conditions::READY, "Unknown", "", 31)], Some(Some(0))),
        (
            vec![ready, (gpu, "False", "NvidiaXID13Error", 11)],
            Some(None),
        ),
        (vec![ready, ("StorageReady", "False", "", 45)], Some(None)),
        (vec![ready, (gpu, "False", "", 9)], None),
    ];
    for (conditions, want) in cases {
        assert_eq!(
            drain_bound(&conditions, NodeRepair::Legacy),
            want,
            "{conditions:?}"
        );
    }
    // No budget holds legacy repair back.
    let mut members: Vec<_> = (0..10).map(|i| member("web", i, HEALTHY)).collect();
    members[3] = sick(3, 40);
    members[7] = sick(7, 90);
    let dump = cluster(members);
    let none = pools("0", &[]);
    let got = repairs(&dump, &dump.nodeclaims, &none, now(), NodeRepair::Legacy);
    assert_eq!(repaired(&got), ["c7", "c3"], "{got:?}");
}

/// An uninitialized node runs no workload to protect: its repair takes no budget.
#[test]
fn a_node_not_yet_initialized_is_repaired_without_budget() {
    let mut members: Vec<_> = (0..10).map(|i| member("web", i, HEALTHY)).collect();
    members[3] = sick(3, 40);
    members[3].1.status.as_mut().unwrap().conditions.clear();
    let dump = cluster(members);
    let none = pools("0", &[]);
    let got = repairs(&dump, &dump.nodeclaims, &none, now(), NodeRepair::On);
    assert_eq!(repaired(&got), ["c3"], "{got:?}");
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
    let mut dump = cluster(members);
    let gpu = dump.nodes[0]
        .status
        .as_mut()
        .unwrap()
        .conditions
        .as_mut()
        .unwrap();
    gpu[1].reason = Some("NvidiaXID79Error".into());
    let got = decided(&dump);
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
                    Action::Repair { nodepool, .. } | Action::RepairBlocked { nodepool, .. } => {
                        nodepool == "web"
                    }
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
    claim.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
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

/// A NodeClaim whose own `terminationGracePeriod` ends before the policy's bound keeps it.
#[test]
fn the_nodeclaims_shorter_grace_bounds_the_drain() {
    let (node, mut claim) = sick(1, 40);
    claim.spec.termination_grace_period = Some("3m".into());
    let got = decided(&cluster(vec![(node, claim)]));
    assert!(
        matches!(&got[..], [Action::Repair { terminate_at: Some(t), .. }] if *t == now() + Duration::minutes(3)),
        "{got:?}"
    );
}

/// A NodeClaim that already carries a command (a disruption, or a repair cut off before its
/// delete) is left to that command: repair neither decides it again nor overwrites its bound.
#[test]
fn a_nodeclaim_carrying_a_command_is_left_to_it() {
    for command in ["underutilized/replace", "unhealthy/delete"] {
        let (node, mut claim) = sick(1, 40);
        claim.metadata.annotations = Some(
            [(
                super::super::in_progress::DISRUPTION_ANNOTATION.to_string(),
                command.to_string(),
            )]
            .into(),
        );
        let got = decided(&cluster(vec![(node, claim)]));
        assert!(repaired(&got).is_empty(), "{command}: {got:?}");
    }
}

/// A `Ready` node whose repair's replacements failed comes after every other repair while it
/// backs off, so it never holds the pool's `Unhealthy` budget place a dead node needs (the
/// pre-spin then holds it, if it would launch replacements again).
#[test]
fn a_backed_off_repair_leaves_the_budget_to_the_next_node() {
    let mut members: Vec<_> = (0..10).map(|i| member("web", i, HEALTHY)).collect();
    // n2 runs its pods with a bad network for 90 minutes, and failed a repair 5 minutes ago.
    members[2] = member(
        "web",
        2,
        &[
            (conditions::READY, "True", 300),
            ("NetworkingReady", "False", 90),
        ],
    );
    let mark = (now() - Duration::minutes(5)).to_rfc3339();
    (members[2].1.metadata.annotations.get_or_insert_default()).insert(
        super::super::repair_backoff::REPAIR_FAILED.into(),
        format!("1@{mark}"),
    );
    members[5] = sick(5, 40);
    let dump = cluster(members.clone());
    let one = pools("1", &["Unhealthy"]);
    let actions = repairs(&dump, &dump.nodeclaims, &one, now(), NodeRepair::On);
    assert_eq!(repaired(&actions), ["c5"], "{actions:?}");
    // Its backoff over, it is first again (due longest).
    let later = now() + Duration::minutes(6);
    let actions = repairs(&dump, &dump.nodeclaims, &one, later, NodeRepair::On);
    assert_eq!(repaired(&actions), ["c2"], "{actions:?}");
}
