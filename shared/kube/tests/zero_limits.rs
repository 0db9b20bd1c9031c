//! A limit of zero is a limit: `cpu: 0` (or `memory: 0`, `nodes: 0`) pauses a NodePool, as it
//! does Karpenter's, and a zero limit of an extended resource keeps out only the types that
//! have it.

use fleetwright_core::{schedule, Catalog, ScheduleOptions};

fn plan(limits: &str) -> fleetwright_core::Plan {
    let text = format!(
        r#"
apiVersion: v1
kind: List
items:
- apiVersion: karpenter.sh/v1
  kind: NodePool
  metadata: {{name: paused}}
  spec:
    limits: {limits}
    template:
      spec:
        nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
        requirements:
        - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
- apiVersion: v1
  kind: Pod
  metadata: {{name: web-0, namespace: default}}
  spec:
    containers: [{{name: c, image: nginx, resources: {{requests: {{cpu: "1", memory: 1Gi}}}}}}]
  status:
    phase: Pending
    conditions: [{{type: PodScheduled, status: "False", reason: Unschedulable}}]
"#
    );
    let snapshot = fleetwright_kube::snapshot_from_yaml(&text, "zero limits").unwrap();
    schedule(&snapshot, Catalog::embedded(), &ScheduleOptions::default())
}

#[test]
fn a_zero_limit_pauses_the_pool() {
    for limits in [
        r#"{cpu: "0"}"#,
        "{cpu: 0}",
        r#"{memory: "0"}"#,
        r#"{nodes: "0"}"#,
    ] {
        let plan = plan(limits);
        assert!(
            plan.nodeclaims.is_empty(),
            "{limits}: {:?}",
            plan.nodeclaims
        );
        assert_eq!(plan.unschedulable.len(), 1, "{limits}");
    }
}

#[test]
fn a_zero_gpu_limit_keeps_out_only_gpu_types() {
    let plan = plan(r#"{nvidia.com/gpu: "0"}"#);
    assert_eq!(plan.nodeclaims.len(), 1, "{plan:?}");
    let types = fleetwright_core::Catalog::embedded()
        .instance_types(&Default::default())
        .into_iter()
        .map(|t| (t.name.clone(), t))
        .collect::<std::collections::BTreeMap<_, _>>();
    for t in &plan.nodeclaims[0].instance_types {
        assert_eq!(types[t].capacity.get("nvidia.com/gpu"), 0, "{t}");
    }
}
