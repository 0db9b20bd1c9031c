use super::*;

fn req(key: &str, op: Operator, values: &[&str]) -> Requirement {
    Requirement::new(key, op, values).unwrap()
}

#[test]
fn set_semantics() {
    let a = req("k", Operator::In, &["a", "b"]);
    let b = req("k", Operator::NotIn, &["b"]);
    let i = a.intersection(&b);
    assert_eq!(i.operator(), Operator::In);
    assert_eq!(i.values().iter().collect::<Vec<_>>(), vec!["a"]);
    let gt = req("k", Operator::Gt, &["4"]);
    let lt = req("k", Operator::Lt, &["8"]);
    let range = gt.intersection(&lt);
    assert!(range.has("5") && range.has("7"));
    assert!(!range.has("4") && !range.has("8") && !range.has("x"));
    let concrete = range.intersection(&req("k", Operator::In, &["3", "6", "9"]));
    assert_eq!(concrete.values().iter().collect::<Vec<_>>(), vec!["6"]);
    let empty = req("k", Operator::Gt, &["5"]).intersection(&req("k", Operator::Lt, &["6"]));
    assert!(empty.is_empty());
    assert!(req("k", Operator::Exists, &[]).has("anything"));
    assert!(!req("k", Operator::DoesNotExist, &[]).has("anything"));
}

#[test]
fn compatibility_rules() {
    let mut pool = Requirements::new();
    pool.add(req("team", Operator::In, &["a"]));
    let mut pod = Requirements::new();
    pod.add(req("team", Operator::In, &["a"]));
    assert!(pool.compatible(&pod).is_ok());
    let mut custom = Requirements::new();
    custom.add(req("undefined", Operator::In, &["x"]));
    let err = pool.compatible(&custom).unwrap_err();
    assert_eq!(err.key, "undefined");
    let mut negative = Requirements::new();
    negative.add(req("undefined", Operator::NotIn, &["x"]));
    assert!(pool.compatible(&negative).is_ok());
    let mut zone = Requirements::new();
    zone.add(req(
        "topology.kubernetes.io/zone",
        Operator::In,
        &["us-east-1a"],
    ));
    assert!(pool.compatible(&zone).is_ok());
    let mut dne = Requirements::new();
    dne.add(req("team", Operator::DoesNotExist, &[]));
    assert!(pool.compatible(&dne).is_err());
}

/// Karpenter's `Gte` and `Lte` are inclusive, and read as the `Gt`/`Lt` one past them.
#[test]
fn gte_and_lte_include_their_bound() {
    let gte = req("k", Operator::Gte, &["4"]);
    let lte = req("k", Operator::Lte, &["8"]);
    assert!(gte.has("4") && gte.has("5") && !gte.has("3"));
    assert!(lte.has("8") && lte.has("0") && !lte.has("9"));
    let range = gte.intersection(&lte);
    let inside: Vec<i64> = (0..12).filter(|n| range.has(&n.to_string())).collect();
    assert_eq!(inside, (4..=8).collect::<Vec<_>>());
    assert_eq!(
        gte.greater_than(),
        req("k", Operator::Gt, &["3"]).greater_than()
    );
    let single = req("k", Operator::Gte, &["8"]).intersection(&lte);
    assert!(single.has("8") && !single.has("7") && !single.is_empty());
    assert_eq!(Operator::parse("Gte"), Some(Operator::Gte));
    assert_eq!(Operator::parse("Lte"), Some(Operator::Lte));
    assert!(Requirement::new("k", Operator::Lte, &["a"]).is_err());
}

#[test]
fn bad_operator_values_are_named() {
    let err = Requirement::new("k", Operator::Gt, &["x"]).unwrap_err();
    assert!(err.to_string().contains("\"k\""));
    assert!(Requirement::new::<&str>("k", Operator::In, &[]).is_err());
}
