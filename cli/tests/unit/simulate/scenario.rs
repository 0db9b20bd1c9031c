use super::*;

#[test]
fn the_default_scenario_parses_in_time_order() {
    let s = Scenario::parse(DEFAULT, "default").unwrap();
    assert!(s.duration > 0);
    assert!(s.timeline.windows(2).all(|w| w[0].at <= w[1].at));
    assert!(s
        .timeline
        .iter()
        .any(|t| matches!(t.action, Action::Interrupt(_))));
}

#[test]
fn a_step_with_two_actions_is_refused_with_its_index() {
    let text =
        "name: x\nduration: 1m\nobjects: []\ntimeline:\n- at: 0s\n  ice: {}\n  changeAmi: {}\n";
    let e = format!("{:#}", Scenario::parse(text, "x.yaml").unwrap_err());
    assert!(
        e.contains("timeline[0]") && e.contains("exactly one"),
        "{e}"
    );
}

#[test]
fn an_unknown_deployment_and_a_bad_duration_are_named() {
    let text = "name: x\nduration: 1m\nobjects: []\ntimeline:\n- at: 0s\n  scale: {deployment: web, replicas: 2}\n";
    let e = format!("{:#}", Scenario::parse(text, "x.yaml").unwrap_err());
    assert!(e.contains("\"web\""), "{e}");
    let text = "name: x\nduration: soon\nobjects: []\n";
    let e = format!("{:#}", Scenario::parse(text, "x.yaml").unwrap_err());
    assert!(e.contains("duration") && e.contains("soon"), "{e}");
    let text = "name: x\nduration: 1m\nobjects: []\ntimeline:\n- at: 0s\n  scale: {deployment: web, replica: 2}\n";
    let e = format!("{:#}", Scenario::parse(text, "x.yaml").unwrap_err());
    assert!(e.contains("timeline[0].scale"), "{e}");
}

#[test]
fn the_schedule_defaults_to_a_minute_and_a_zero_one_is_refused() {
    let text = "name: x\nduration: 1m\nobjects: []\n";
    assert_eq!(Scenario::parse(text, "x.yaml").unwrap().schedule, 60);
    let text = "name: x\nduration: 1m\nschedule: 10s\nobjects: []\n";
    assert_eq!(Scenario::parse(text, "x.yaml").unwrap().schedule, 10);
    let text = "name: x\nduration: 1m\nschedule: 0s\nobjects: []\n";
    let e = format!("{:#}", Scenario::parse(text, "x.yaml").unwrap_err());
    assert!(e.contains("schedule") && e.contains("x.yaml"), "{e}");
}
