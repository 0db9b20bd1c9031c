use super::*;

#[test]
fn effective_requests_follow_kubernetes() {
    let r = |cpu: i64, mem: i64| Resources::new(cpu, mem);
    let reqs = ContainerRequests {
        containers: vec![r(100, 100), r(200, 100)],
        init_containers: vec![(r(500, 50), false)],
        overhead: Some(r(10, 10)),
    };
    let eff = reqs.effective();
    assert_eq!(eff.cpu, 510);
    assert_eq!(eff.memory, 210);
    assert_eq!(eff.pods, 1);
    let sidecar = ContainerRequests {
        containers: vec![r(100, 100)],
        init_containers: vec![(r(50, 50), true), (r(300, 10), false)],
        overhead: None,
    };
    assert_eq!(sidecar.effective().cpu, 350);
}

#[test]
fn tolerations() {
    let taint = Taint {
        key: "dedicated".into(),
        value: "gpu".into(),
        effect: TaintEffect::NoSchedule,
    };
    let exact = Toleration {
        key: Some("dedicated".into()),
        value: "gpu".into(),
        ..Default::default()
    };
    let wrong = Toleration {
        key: Some("dedicated".into()),
        value: "web".into(),
        ..Default::default()
    };
    let all = Toleration {
        exists: true,
        ..Default::default()
    };
    assert!(exact.tolerates(&taint));
    assert!(!wrong.tolerates(&taint));
    assert!(all.tolerates(&taint));
    assert_eq!(tolerates_all(&[wrong], [&taint]), Some(&taint));
}
