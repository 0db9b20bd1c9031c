use super::*;
use crate::tick::repair::{repairs, NodeRepair};
use fleetwright_core::model::{Budget, NodePool};
use serde_json::{json, Value};

const NOW: &str = "2026-11-25T12:00:00Z";
const XID48: &str = "NvidiaXID48Error";

fn now() -> DateTime<Utc> {
    NOW.parse().unwrap()
}

fn ago(minutes: i64) -> String {
    (now() - Duration::minutes(minutes)).to_rfc3339()
}

/// Node `n<i>` of pool `web` with `conditions` (type, status, reason, minutes since the
/// transition), Ready unless a condition says otherwise, on boot `boot`.
fn node(i: usize, conditions: &[(&str, &str, &str, i64)], boot: &str) -> Value {
    let mut list: Vec<Value> = conditions
        .iter()
        .map(|(t, s, r, m)| json!({"type": t, "status": s, "reason": r, "lastTransitionTime": ago(*m)}))
        .collect();
    if !conditions.iter().any(|c| c.0 == conditions::READY) {
        list.push(
            json!({"type": conditions::READY, "status": "True", "lastTransitionTime": ago(600)}),
        );
    }
    json!({
        "metadata": {"name": format!("n{i}"), "labels": {"karpenter.sh/nodepool": "web"},
            "creationTimestamp": ago(600)},
        "spec": {"providerID": format!("aws:///us-east-1a/i-{i:017}")},
        "status": {"conditions": list, "nodeInfo": {"bootID": boot, "machineID": "", "systemUUID": "",
            "kernelVersion": "", "osImage": "", "containerRuntimeVersion": "", "kubeletVersion": "",
            "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"}},
    })
}

/// NodeClaim `c<i>`, initialized, with `annotations` and extra `conditions`.
fn claim(i: usize, annotations: Value, conditions: Vec<Value>) -> Value {
    let mut list = vec![
        json!({"type": conditions::INITIALIZED, "status": "True", "lastTransitionTime": ago(600)}),
    ];
    for c in conditions {
        list.retain(|x| x["type"] != c["type"]);
        list.push(c);
    }
    json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": format!("c{i}"), "labels": {"karpenter.sh/nodepool": "web"},
            "annotations": annotations},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []},
        "status": {"nodeName": format!("n{i}"), "providerID": format!("aws:///us-east-1a/i-{i:017}"),
            "conditions": list},
    })
}

fn rebooting(reason: &str, minutes: i64) -> Value {
    json!({"type": REBOOTING, "status": "True", "reason": reason, "message": "rebooting for AcceleratedHardwareReady=False",
        "lastTransitionTime": ago(minutes)})
}

fn pod(name: &str, node: &str) -> Value {
    json!({"metadata": {"name": name, "namespace": "default", "uid": name},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "pause"}]},
        "status": {"phase": "Running"}})
}

fn dump(nodes: Vec<Value>, claims: Vec<Value>, pods: Vec<Value>) -> ClusterDump {
    ClusterDump {
        nodes: nodes
            .into_iter()
            .map(|n| serde_json::from_value(n).unwrap())
            .collect(),
        nodeclaims: claims
            .into_iter()
            .map(|c| serde_json::from_value(c).unwrap())
            .collect(),
        pods: pods
            .into_iter()
            .map(|p| serde_json::from_value(p).unwrap())
            .collect(),
        ..Default::default()
    }
}

fn pools(nodes: &str) -> Vec<NodePool> {
    vec![NodePool {
        name: "web".into(),
        budgets: vec![Budget {
            nodes: nodes.into(),
            ..Default::default()
        }],
        ..Default::default()
    }]
}

fn decide(d: &ClusterDump, mode: NodeRepair) -> Vec<Action> {
    repairs(d, &d.nodeclaims, &pools("100%"), now(), mode)
}

fn healthy(i: usize) -> (Value, Value) {
    (node(i, &[], "b0"), claim(i, json!({}), vec![]))
}

/// Nine healthy nodes beside the ones given, so the pool's 20 % breaker never trips.
fn pool_with(sick: Vec<(Value, Value)>) -> (Vec<Value>, Vec<Value>) {
    let mut all: Vec<(Value, Value)> = (10..19).map(healthy).collect();
    all.extend(sick);
    all.into_iter().unzip()
}

fn step_of(actions: &[Action]) -> Vec<(&str, &RebootStep)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Reboot {
                nodeclaim, step, ..
            } => Some((nodeclaim.as_str(), step)),
            _ => None,
        })
        .collect()
}

/// With the gate, a fault a reboot clears reboots the node (its drain bounded at 5 minutes);
/// without it, or beside a fault a reboot does not clear, the node is replaced.
#[test]
fn a_fault_a_reboot_clears_reboots_the_node_only_with_the_gate() {
    let xid = (ACCELERATED, "False", XID48, 11);
    let (nodes, claims) = pool_with(vec![(node(1, &[xid], "b0"), claim(1, json!({}), vec![]))]);
    let d = dump(nodes.clone(), claims.clone(), vec![]);
    let rebooted = decide(&d, NodeRepair::Reboot);
    let steps = step_of(&rebooted);
    assert!(
        matches!(steps.as_slice(), [("c1", RebootStep::Commit { grace_seconds: 300, condition, .. })]
            if condition == "AcceleratedHardwareReady=False"),
        "{rebooted:?}"
    );
    assert!(matches!(
        decide(&d, NodeRepair::On).as_slice(),
        [Action::Repair { .. }]
    ));
    assert!(matches!(
        decide(&d, NodeRepair::Legacy).as_slice(),
        [Action::Repair { .. }]
    ));
    // A fatal fault on the same node as well: replaced, the more disruptive action.
    let fatal = (
        ACCELERATED,
        "False",
        "NvidiaXID48Error NvidiaXID79Error",
        11,
    );
    let (nodes, claims) = pool_with(vec![(node(1, &[fatal], "b0"), claim(1, json!({}), vec![]))]);
    let d = dump(nodes, claims, vec![]);
    assert!(matches!(
        decide(&d, NodeRepair::Reboot).as_slice(),
        [Action::Repair { .. }]
    ));
}

const ACCELERATED: &str = "AcceleratedHardwareReady";

/// Two reboots within 24 hours and the third repair replaces the node; one older does not count.
/// A reboot that ended waits the toleration out again from its end.
#[test]
fn a_node_rebooted_twice_in_a_day_is_replaced_and_a_reboot_restarts_the_toleration() {
    let xid = (ACCELERATED, "False", XID48, 60);
    let history = |times: &[i64]| times.iter().map(|m| ago(*m)).collect::<Vec<_>>().join(",");
    let case = |times: &[i64], finished: i64| {
        let ended = json!({"type": REBOOTING, "status": "False", "reason": SUCCEEDED, "lastTransitionTime": ago(finished)});
        let c = claim(1, json!({HISTORY: history(times)}), vec![ended]);
        let (nodes, claims) = pool_with(vec![(node(1, &[xid], "b2"), c)]);
        decide(&dump(nodes, claims, vec![]), NodeRepair::Reboot)
    };
    assert!(matches!(
        case(&[200, 100], 30).as_slice(),
        [Action::Repair { .. }]
    ));
    let once_more = case(&[2000, 100], 30);
    assert!(
        matches!(step_of(&once_more).as_slice(), [("c1", RebootStep::Commit { history, .. })]
            if history.split(',').count() == 2),
        "{once_more:?}"
    );
    assert!(
        case(&[100], 5).is_empty(),
        "the toleration counts from the reboot's end"
    );
}

/// A node being rebooted is left to its reboot by repair, and takes its place in the budget.
#[test]
fn a_rebooting_node_is_not_repaired_and_counts_against_the_budget() {
    let down = (conditions::READY, "False", "KubeletNotReady", 40);
    let mut fenced = node(2, &[], "b0");
    fenced["spec"]["taints"] = json!([{"key": "karpenter.sh/rebooting", "effect": "NoSchedule"}]);
    let (nodes, claims) = pool_with(vec![
        (node(1, &[down], "b0"), claim(1, json!({}), vec![])),
        (
            node(3, &[down], "b0"),
            claim(3, json!({}), vec![rebooting(REQUESTED, 1)]),
        ),
        (fenced, claim(2, json!({}), vec![rebooting(ISSUED, 1)])),
    ]);
    let d = dump(nodes, claims, vec![]);
    let actions = repairs(&d, &d.nodeclaims, &pools("2"), now(), NodeRepair::Reboot);
    assert!(
        matches!(actions.as_slice(), [Action::Blocked { node, .. }] if node == "n1"),
        "{actions:?}"
    );
}

fn requested_claim(minutes: i64, annotations: Value) -> Value {
    claim(1, annotations, vec![rebooting(REQUESTED, minutes)])
}

fn next(nodes: Vec<Value>, claims: Vec<Value>, pods: Vec<Value>) -> Vec<Action> {
    let d = dump(nodes, claims, pods);
    steps(&d, &d.nodeclaims, now())
}

/// A requested reboot fences and drains its node while pods are left and its bound is not
/// over; then the instance is rebooted, the boot ID before it recorded.
#[test]
fn a_requested_reboot_drains_within_its_bound_then_reboots() {
    let fenced = |mut n: Value| {
        n["spec"]["taints"] = json!([{"key": "karpenter.sh/rebooting", "effect": "NoSchedule"}]);
        n
    };
    let grace = json!({GRACE: "300s"});
    let pods = vec![pod("a", "n1")];
    let draining = next(
        vec![fenced(node(1, &[], "b0"))],
        vec![requested_claim(1, grace.clone())],
        pods.clone(),
    );
    assert!(
        matches!(step_of(&draining).as_slice(), [(_, RebootStep::Drain { pods, until_bound: Some(left), .. })] if pods.len() == 1 && *left == Duration::minutes(4)),
        "{draining:?}"
    );
    // The bound is over: the pods left ride the reboot.
    let over = next(
        vec![fenced(node(1, &[], "b0"))],
        vec![requested_claim(6, grace.clone())],
        pods,
    );
    assert!(
        matches!(step_of(&over).as_slice(), [(_, RebootStep::Issue { instance_id: Some(id), boot_id, grace_seconds: Some(300) })]
            if id == "i-00000000000000001" && boot_id == "b0"),
        "{over:?}"
    );
    // Drained, but not fenced yet (the commit's fence failed): fenced first.
    let unfenced = next(
        vec![node(1, &[], "b0")],
        vec![requested_claim(6, grace.clone())],
        vec![],
    );
    assert!(
        matches!(step_of(&unfenced).as_slice(), [(_, RebootStep::Drain { pods, .. })] if pods.is_empty())
    );
    // Asked before (the boot ID recorded) and booted since: not asked again.
    let booted = next(
        vec![fenced(node(1, &[], "b1"))],
        vec![requested_claim(
            6,
            json!({GRACE: "300s", PRE_BOOT_ID: "b0", ISSUANCE_STARTED: ago(1)}),
        )],
        vec![],
    );
    assert!(matches!(
        step_of(&booted).as_slice(),
        [(
            _,
            RebootStep::Issue {
                instance_id: None,
                ..
            }
        )]
    ));
    // Asked, and not known to have failed (a tick cut off after the call): not asked again,
    // though the node has not rebooted yet. Known to have failed: asked again.
    let cut_off =
        json!({GRACE: "300s", PRE_BOOT_ID: "b0", ISSUANCE_STARTED: ago(1), ASKED: ago(1)});
    let asked = next(
        vec![fenced(node(1, &[], "b0"))],
        vec![requested_claim(6, cut_off)],
        vec![],
    );
    assert!(
        matches!(
            step_of(&asked).as_slice(),
            [(
                _,
                RebootStep::Issue {
                    instance_id: None,
                    ..
                }
            )]
        ),
        "{asked:?}"
    );
    let failed = json!({GRACE: "300s", PRE_BOOT_ID: "b0", ISSUANCE_STARTED: ago(1)});
    let retried = next(
        vec![fenced(node(1, &[], "b0"))],
        vec![requested_claim(6, failed)],
        vec![],
    );
    assert!(
        matches!(
            step_of(&retried).as_slice(),
            [(
                _,
                RebootStep::Issue {
                    instance_id: Some(_),
                    ..
                }
            )]
        ),
        "{retried:?}"
    );
    // A forceful reboot (bound 0) drains nothing, but is fenced first.
    let forceful = next(
        vec![node(1, &[], "b0")],
        vec![requested_claim(0, json!({GRACE: "0s"}))],
        vec![pod("a", "n1")],
    );
    assert!(
        matches!(step_of(&forceful).as_slice(), [(_, RebootStep::Drain { pods, .. })] if pods.is_empty())
    );
    let forceful = next(
        vec![fenced(node(1, &[], "b0"))],
        vec![requested_claim(0, json!({GRACE: "0s"}))],
        vec![pod("a", "n1")],
    );
    assert!(matches!(
        step_of(&forceful).as_slice(),
        [(
            _,
            RebootStep::Issue {
                instance_id: Some(_),
                ..
            }
        )]
    ));
    // A condition with no time to count from fails the request, without replacing the node;
    // until then it is a reboot in progress (not repaired, not initialized again).
    let mut untimed = requested_claim(1, json!({GRACE: "300s"}));
    for c in untimed["status"]["conditions"].as_array_mut().unwrap() {
        c.as_object_mut().unwrap().remove("lastTransitionTime");
    }
    let failed = next(vec![node(1, &[], "b0")], vec![untimed.clone()], vec![]);
    assert!(
        matches!(
            step_of(&failed).as_slice(),
            [(_, RebootStep::Fail { replace: false, .. })]
        ),
        "{failed:?}"
    );
    assert!(in_progress(&serde_json::from_value(untimed).unwrap()).is_some());
    // Asked, not yet taken, for longer than the issuance timeout: failed and replaced.
    let timed_out = next(
        vec![fenced(node(1, &[], "b0"))],
        vec![requested_claim(
            9,
            json!({GRACE: "300s", PRE_BOOT_ID: "b0", ISSUANCE_STARTED: ago(6)}),
        )],
        vec![],
    );
    assert!(
        matches!(step_of(&timed_out).as_slice(), [(_, RebootStep::Fail { replace: true, terminate_at: Some(at), .. })]
            if *at == now() + Duration::minutes(5)),
        "{timed_out:?}"
    );
    // A bound that does not read fails the request without replacing the node.
    let invalid = next(
        vec![node(1, &[], "b0")],
        vec![requested_claim(1, json!({GRACE: "soon"}))],
        vec![],
    );
    assert!(matches!(
        step_of(&invalid).as_slice(),
        [(_, RebootStep::Fail { replace: false, .. })]
    ));
}

/// An issued reboot waits for a new boot ID; then its fence goes, and once Ready it succeeded;
/// a node not back within 20 minutes fails it.
#[test]
fn an_issued_reboot_ends_when_the_node_is_back_or_fails_after_the_window() {
    let issued = |minutes: i64| {
        claim(
            1,
            json!({GRACE: "300s", PRE_BOOT_ID: "b0"}),
            vec![
                rebooting(ISSUED, minutes),
                json!({"type": conditions::INITIALIZED, "status": "Unknown", "reason": "Rebooting", "lastTransitionTime": ago(minutes)}),
            ],
        )
    };
    assert!(next(vec![node(1, &[], "b0")], vec![issued(3)], vec![]).is_empty());
    let back = next(vec![node(1, &[], "b1")], vec![issued(3)], vec![]);
    assert!(matches!(
        step_of(&back).as_slice(),
        [(_, RebootStep::Observed { ready: true })]
    ));
    let not_ready = (conditions::READY, "False", "KubeletNotReady", 1);
    let mut booting = node(1, &[not_ready], "b1");
    assert!(next(vec![booting.clone()], vec![issued(3)], vec![]).is_empty());
    booting["spec"]["taints"] = json!([{"key": "karpenter.sh/rebooting", "effect": "NoSchedule"}]);
    let unfence = next(vec![booting], vec![issued(3)], vec![]);
    assert!(matches!(
        step_of(&unfence).as_slice(),
        [(_, RebootStep::Observed { ready: false })]
    ));
    let lost = next(vec![node(1, &[], "b0")], vec![issued(21)], vec![]);
    assert!(
        matches!(step_of(&lost).as_slice(), [(_, RebootStep::Fail { replace: true, message, .. })]
            if message.contains("observation window")),
        "{lost:?}"
    );
    // Its node gone: failed once the window is over, not before.
    assert!(next(vec![], vec![issued(3)], vec![]).is_empty());
    assert!(matches!(
        step_of(&next(vec![], vec![issued(21)], vec![])).as_slice(),
        [(_, RebootStep::Fail { .. })]
    ));
}

/// The read sees a rebooting node fenced whether or not its fence is written yet (a commit cut
/// off before it, or a node back with a new boot and not Ready yet): it is no candidate for
/// another disruption, and it counts against every budget.
#[test]
fn a_rebooting_node_is_read_as_fenced_whatever_its_taints_say() {
    let mut d = dump(
        vec![node(1, &[], "b0"), node(2, &[], "b0")],
        vec![
            claim(1, json!({}), vec![rebooting(REQUESTED, 1)]),
            claim(2, json!({}), vec![]),
        ],
        vec![],
    );
    let snapshot = fleetwright_kube::convert::take_snapshot(&mut d).unwrap();
    let fenced = |name: &str| {
        snapshot
            .nodes
            .iter()
            .find(|n| n.name == name)
            .unwrap()
            .taints
            .iter()
            .any(|t| t.key == fleetwright_core::labels::TAINT_REBOOTING)
    };
    assert!(fenced("n1"));
    assert!(!fenced("n2"));
}
