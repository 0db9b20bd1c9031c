//! Volume attach limits on existing nodes: a pod whose claims would take a CSI driver past a
//! node's limit (its CSINode) is planned elsewhere, while a claim the node already holds, or a
//! driver without a limit, costs nothing against it.

mod common;

use common::*;
use fleetwright_core::model::Pod;

const EBS: &str = "ebs.csi.aws.com";

fn with_claims(mut p: Pod, driver: &str, claims: &[&str]) -> Pod {
    p.volumes = claims
        .iter()
        .map(|c| (driver.to_string(), format!("default/{c}")))
        .collect();
    p
}

/// A node with room for every pod's CPU and memory, an EBS limit of two, and a bound pod that
/// mounts `data-0`; then `pending` planned beside it.
fn planned(pending: Vec<Pod>) -> fleetwright_core::Plan {
    let mut bound = with_claims(pod("db-0", 100, 100), EBS, &["data-0"]);
    bound.node_name = Some("n1".into());
    let mut pods = vec![bound];
    pods.extend(pending);
    let mut snap = snapshot(pods, vec![pool("default")]);
    let mut n1 = node("n1", "us-east-1a", "m5.xlarge", 3920, 14_000);
    n1.volume_limits = [(EBS.to_string(), 2)].into();
    snap.nodes.push(n1);
    plan(&snap)
}

fn on_n1(plan: &fleetwright_core::Plan) -> Vec<&str> {
    plan.existing
        .iter()
        .filter(|e| e.node == "n1")
        .map(|e| e.pod.as_str())
        .collect()
}

#[test]
fn a_pod_that_would_pass_the_nodes_attach_limit_gets_a_new_node() {
    let pending = vec![
        with_claims(pod("db-1", 100, 100), EBS, &["data-1"]),
        with_claims(pod("db-2", 100, 100), EBS, &["data-2"]),
    ];
    let plan = planned(pending);
    assert_eq!(on_n1(&plan).len(), 1, "{plan:?}");
    assert_eq!(plan.nodeclaims.len(), 1, "{plan:?}");
    assert_eq!(plan.nodeclaims[0].pods.len(), 1);
}

#[test]
fn a_claim_the_node_holds_and_other_drivers_take_nothing_from_the_limit() {
    let pending = vec![
        with_claims(pod("reader-a", 100, 100), EBS, &["data-0"]),
        with_claims(pod("reader-b", 100, 100), EBS, &["data-0"]),
        with_claims(pod("db-1", 100, 100), EBS, &["data-1"]),
        with_claims(pod("shared", 100, 100), "efs.csi.aws.com", &["a", "b", "c"]),
        pod("plain", 100, 100),
    ];
    let plan = planned(pending);
    assert_eq!(on_n1(&plan).len(), 5, "{plan:?}");
    assert!(plan.nodeclaims.is_empty(), "{plan:?}");
}

#[test]
fn without_a_limit_volumes_are_not_counted() {
    let pending: Vec<Pod> = (1..6)
        .map(|i| {
            with_claims(
                pod(&format!("db-{i}"), 100, 100),
                EBS,
                &[&format!("data-{i}")],
            )
        })
        .collect();
    let mut bound = with_claims(pod("db-0", 100, 100), EBS, &["data-0"]);
    bound.node_name = Some("n1".into());
    let mut pods = vec![bound];
    pods.extend(pending);
    let mut snap = snapshot(pods, vec![pool("default")]);
    snap.nodes
        .push(node("n1", "us-east-1a", "m5.xlarge", 3920, 14_000));
    let plan = plan(&snap);
    assert_eq!(on_n1(&plan).len(), 5, "{plan:?}");
}
