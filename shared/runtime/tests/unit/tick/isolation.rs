use super::*;

fn rejected(name: &str, error: &str) -> Rejected {
    Rejected {
        kind: "NodePool".into(),
        name: name.into(),
        namespace: None,
        uid: None,
        error: error.into(),
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
