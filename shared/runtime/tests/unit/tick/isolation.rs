use super::*;

fn rejected(name: &str, error: &str) -> Rejected {
    Rejected {
        kind: "NodePool".into(),
        name: name.into(),
        namespace: None,
        uid: None,
        error: error.into(),
        kept: false,
    }
}

#[test]
fn a_flood_of_rejected_objects_is_evented_a_few_at_a_time() {
    let flood: Vec<Rejected> = (0..100)
        .map(|i| rejected(&format!("p{i:03}"), "bad quantity"))
        .collect();
    let first = report(&flood, &BTreeMap::new());
    let evented = |a: &[Action]| {
        a.iter()
            .filter(|x| matches!(x, Action::Rejected { event: true, .. }))
            .count()
    };
    assert_eq!(evented(&first), EVENTS_PER_TICK);
    let said = match first.last() {
        Some(Action::SaveRejected { said }) => said.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(evented(&report(&flood, &said)), EVENTS_PER_TICK);
}

#[test]
fn each_error_is_evented_once_and_a_new_one_again() {
    let bad = vec![rejected(
        "batch",
        "spec.disruption.consolidateAfter: invalid duration",
    )];
    let first = report(&bad, &BTreeMap::new());
    assert!(matches!(&first[0], Action::Rejected { event: true, .. }));
    let said = match first.last() {
        Some(Action::SaveRejected { said }) => said.clone(),
        other => panic!("{other:?}"),
    };
    let again = report(&bad, &said);
    assert!(matches!(
        again.as_slice(),
        [Action::Rejected { event: false, .. }]
    ));
    let changed = vec![rejected("batch", "spec.limits.cpu: invalid quantity")];
    assert!(matches!(
        &report(&changed, &said)[0],
        Action::Rejected { event: true, .. }
    ));
}

/// A NodePool still read, with a budget schedule no parser reads, is reported and evented as a
/// rejected one is, but it is no invalid NodePool: its conditions stay as they are.
#[test]
fn a_pool_with_a_schedule_that_does_not_read_is_evented_but_not_invalid() {
    let pool: fleetwright_crds::NodePool = serde_json::from_value(serde_json::json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "tz"},
        "spec": {"disruption": {"budgets": [
            {"nodes": "0", "schedule": "CRON_TZ=Asia/Seoul 0 9 * * *", "duration": "8h"},
            {"nodes": "0", "schedule": "0 9 * * mon-fri", "duration": "8h"},
            {"nodes": "0", "schedule": "0 9 * * 7", "duration": "8h"}]},
            "template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []}}}
    }))
    .unwrap();
    let kept = fleetwright_kube::api_rules::unreadable_schedules(&[pool]);
    // One record per NodePool, naming each budget: the Event is posted once, not every tick.
    assert_eq!(kept.len(), 1, "{kept:?}");
    let error = &kept[0].error;
    assert!(kept[0].kept && error.contains("spec.disruption.budgets[0].schedule"));
    assert!(
        error.contains("budgets[2]") && !error.contains("budgets[1]"),
        "{error}"
    );
    assert!(errors_of(&kept, "NodePool").is_empty());
    let actions = report(&kept, &BTreeMap::new());
    assert!(matches!(&actions[0], Action::Rejected { event: true, .. }));
}
