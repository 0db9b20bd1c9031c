//! A new user's first hour, command by command as README.md and docs/cli.md give them, on input
//! a user writes (the fixtures are the seed posts' YAML as posted): the main job, a plan of a
//! dump that holds only workloads, an explanation of one of its pods, the conversion of a legacy
//! Provisioner posted with a duplicated key (a warning, and an error under `--strict`), what the
//! next tick would do, and the shadow comparison. Against a real API server, the same verbs run
//! with `--kubeconfig` in tests/control_plane.rs (`plan_reads_a_live_cluster_…`,
//! `shadow_mode_beside_another_autoscaler_…`).

mod common;

use serde_json::Value;

use common::{fixture, fleetwright, success};

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn the_readme_and_cli_docs_walk_through_as_written() {
    // README command 1: the hands-on, replayed; it ends with every pod running.
    let out = fleetwright(&["simulate", "--output", "json"]);
    let report: Value = serde_json::from_str(&success(&out)).unwrap();
    assert!(report.is_object(), "{report}");

    // A dump with Deployments and a StatefulSet and no pods: planned from their templates.
    let dump = fixture("deployments-only.yaml");
    let out = fleetwright(&["plan", "--cluster", &dump]);
    let plan: Value = serde_json::from_str(&success(&out)).unwrap();
    let planned: Vec<&str> = plan["nodeclaims"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["pods"].as_array().unwrap())
        .filter_map(Value::as_str)
        .collect();
    assert!(
        planned.iter().any(|p| p.starts_with("default/inflate-")),
        "{planned:?}"
    );
    assert!(
        stderr(&out).contains("has none of its pods in the input"),
        "{}",
        stderr(&out)
    );

    // Explain one of those pods by the name the note gave it.
    let pod = planned
        .iter()
        .find(|p| p.starts_with("default/inflate-"))
        .unwrap()
        .to_string();
    let out = fleetwright(&["explain", "--cluster", &dump, "--pod", &pod]);
    assert!(success(&out).contains("default"), "{}", success(&out));

    // The legacy Provisioner as posted: its duplicated key is a warning, and an error under
    // --strict.
    let legacy = fixture("as-posted/karpenter-default-duplicate.yaml");
    let out = fleetwright(&["convert", &legacy]);
    let converted = success(&out);
    assert!(converted.contains("kind: NodePool"), "{converted}");
    assert!(stderr(&out).contains("duplicate"), "{}", stderr(&out));
    let strict = fleetwright(&["--strict", "convert", &legacy]);
    assert!(!strict.status.success(), "--strict refuses the duplicate");
    assert!(
        stderr(&strict).contains("requirements"),
        "{}",
        stderr(&strict)
    );

    // What the next tick would do, and the shadow comparison, on the same dump.
    let out = fleetwright(&["plan", "--cluster", &dump, "--actions"]);
    let actions: Value = serde_json::from_str(&success(&out)).unwrap();
    let kinds: Vec<&str> = actions["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["action"].as_str())
        .collect();
    assert!(
        kinds.contains(&"createNodeClaim") && kinds.contains(&"launch"),
        "{kinds:?}"
    );
    let out = fleetwright(&["shadow", "--cluster", &dump]);
    let shown = success(&out);
    assert!(
        shown.contains("Fleetwright would create") && shown.contains("cost:"),
        "{shown}"
    );
    let out = fleetwright(&["shadow"]);
    assert!(
        !out.status.success(),
        "shadow without a cluster says what it needs"
    );
    assert!(stderr(&out).contains("--kubeconfig"), "{}", stderr(&out));
}
