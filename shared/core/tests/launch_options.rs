//! Which instance types a NodeClaim offers its launch: bare-metal, GPU and accelerator types
//! only when nothing else holds its pods, as Karpenter's AWS provider launches.

mod common;

use common::*;
use fleetwright_core::labels::*;
use fleetwright_core::requirements::Operator;

fn exotic(name: &str) -> bool {
    let it = &catalog_types()[name];
    let size = it
        .requirements
        .get(INSTANCE_SIZE)
        .map(|r| r.values().clone());
    size.is_some_and(|s| s.iter().any(|v| v.contains("metal")))
        || [
            RESOURCE_NVIDIA_GPU,
            RESOURCE_AMD_GPU,
            RESOURCE_NEURON,
            RESOURCE_HABANA,
        ]
        .iter()
        .any(|r| it.capacity.get(r) > 0)
}

#[test]
fn a_plain_pod_is_never_offered_a_gpu_or_metal_type() {
    // About 3 vCPU and 6 GiB: inf1.xlarge would be among the 60 cheapest types that hold it.
    let snap = snapshot(pods("web", 1, 3000, 6144), vec![pool("open")]);
    let plan = plan(&snap);
    assert!(!plan.nodeclaims.is_empty());
    for claim in &plan.nodeclaims {
        assert!(
            claim.instance_types.len() >= 20,
            "{:?}",
            claim.instance_types
        );
        let odd: Vec<&String> = claim.instance_types.iter().filter(|t| exotic(t)).collect();
        assert!(odd.is_empty(), "{odd:?}");
    }
}

#[test]
fn a_pool_of_gpu_families_still_launches_them() {
    let gpu = pool_with(
        "gpu",
        vec![req(INSTANCE_FAMILY, Operator::In, &["g5", "g6"])],
    );
    let plan = plan(&snapshot(pods("train", 1, 1000, 4096), vec![gpu]));
    assert_eq!(plan.nodeclaims.len(), 1, "{:?}", plan.unschedulable);
    assert!(plan.nodeclaims[0].instance_types.iter().all(|t| exotic(t)));
}
