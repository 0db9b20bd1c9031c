//! A node that has joined but whose NodeClaim is not initialized yet (its GPU's device plugin
//! has not registered the GPU) holds the pods its NodeClaim was launched for: another plan does
//! not launch a second node for them, as Karpenter counts a starting node from its NodeClaim.

mod common;

use common::*;
use fleetwright_core::model::NodeClaim;
use fleetwright_core::resources::Resources;

const GPU: &str = "nvidia.com/gpu";

fn gpu_pod(name: &str) -> fleetwright_core::model::Pod {
    let mut p = pod(name, 1000, 4096);
    p.requests.set(GPU, 1);
    p
}

/// A g5.xlarge that joined (Ready) with no GPU advertised yet, its NodeClaim `initialized`.
fn planned(initialized: bool) -> fleetwright_core::Plan {
    let mut snap = snapshot(vec![gpu_pod("train-0")], vec![pool("default")]);
    let node = node("n1", "us-east-1a", "g5.xlarge", 3920, 14_000);
    let mut expected: Resources = node.allocatable.clone();
    expected.set(GPU, 1);
    snap.nodeclaims.push(NodeClaim {
        name: "default-abc".into(),
        nodepool: "default".into(),
        allocatable: Some(expected),
        node_name: Some("n1".into()),
        launched: true,
        registered: true,
        initialized,
        ..Default::default()
    });
    snap.nodes.push(node);
    plan(&snap)
}

#[test]
fn a_starting_node_holds_the_gpu_its_nodeclaim_was_launched_with() {
    let plan = planned(false);
    assert!(plan.nodeclaims.is_empty(), "{plan:?}");
    assert_eq!(plan.existing.len(), 1, "{plan:?}");
    // Once initialized, the node is what it reports: no GPU, so the pod needs another node.
    let plan = planned(true);
    assert_eq!(plan.nodeclaims.len(), 1, "{plan:?}");
}
