use super::*;

#[test]
fn a_zone_default_is_read_with_kube_schedulers_defaults() {
    let got = parse(
            "podTopologySpread:\n  defaultConstraints:\n  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway}\n",
        )
        .unwrap();
    assert_eq!(
        got,
        vec![DefaultSpread::new(1, "topology.kubernetes.io/zone", false)]
    );
    assert_eq!(parse("").unwrap(), Vec::new());
    assert_eq!(parse(r#"{"podTopologySpread": {}}"#).unwrap(), Vec::new());
}

#[test]
fn each_mistake_names_its_field() {
    let cases = [
            ("podTopologySpread: {defaultConstraint: []}", "unknown field `defaultConstraint`"),
            ("podTopologySpread: {defaultConstraints: [{maxSkew: 0, topologyKey: a, whenUnsatisfiable: DoNotSchedule}]}", "defaultConstraints[0].maxSkew: must be greater than 0"),
            ("podTopologySpread: {defaultConstraints: [{maxSkew: 1, whenUnsatisfiable: DoNotSchedule}]}", "defaultConstraints[0].topologyKey: must be set"),
            ("podTopologySpread: {defaultConstraints: [{maxSkew: 1, topologyKey: 'bad key', whenUnsatisfiable: DoNotSchedule}]}", "not a valid label name"),
            ("podTopologySpread: {defaultConstraints: [{maxSkew: 1, topologyKey: a, whenUnsatisfiable: Never}]}", "defaultConstraints[0].whenUnsatisfiable"),
            ("podTopologySpread: {defaultConstraints: [{maxSkew: 1, topologyKey: a, whenUnsatisfiable: DoNotSchedule, labelSelector: {}}]}", "labelSelector: must not be set"),
            ("podTopologySpread: {defaultConstraints: [{maxSkew: 1, topologyKey: a, whenUnsatisfiable: DoNotSchedule, matchLabelKeys: [app]}]}", "matchLabelKeys: must not be set"),
            ("podTopologySpread: {defaultConstraints: [{maxSkew: 1, topologyKey: a, whenUnsatisfiable: DoNotSchedule}, {maxSkew: 2, topologyKey: a, whenUnsatisfiable: DoNotSchedule}]}", "defaultConstraints[1]: a duplicate of podTopologySpread.defaultConstraints[0]"),
        ];
    for (text, want) in cases {
        let err = parse(text).unwrap_err().to_string();
        assert!(err.contains(want), "{text}: {err}");
        assert!(err.contains(SETTING), "{err}");
    }
}

#[test]
fn label_names() {
    for ok in [
        "topology.kubernetes.io/zone",
        "kubernetes.io/hostname",
        "rack",
        "a_b.c-d",
    ] {
        assert!(qualified_name(ok), "{ok}");
    }
    for bad in ["", "-a", "a/", "/a", "Upper.Case/x", &"x".repeat(64)] {
        assert!(!qualified_name(bad), "{bad}");
    }
}
