use super::*;
use serde_json::json;

#[test]
fn requests_of_running_pods_over_allocatable() {
    let node: Node = serde_json::from_value(json!({"metadata": {"name": "n1"},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi"}}}))
    .unwrap();
    let pod = |node: &str, phase: &str, cpu: &str| -> Pod {
        serde_json::from_value(json!({"metadata": {"name": format!("p-{cpu}")},
                "spec": {"nodeName": node, "containers": [{"name": "c",
                    "resources": {"requests": {"cpu": cpu, "memory": "2Gi"}}}]},
                "status": {"phase": phase}}))
        .unwrap()
    };
    let pods = [
        pod("n1", "Running", "1"),
        pod("n1", "Succeeded", "2"),
        pod("other", "Running", "3"),
    ];
    assert_eq!(utilization(&[node], &pods), Some((0.25, 0.25)));
    assert_eq!(utilization(&[], &pods), None);
}
