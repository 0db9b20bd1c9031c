//! Terminate-first drift (Karpenter v1.15's `TerminateFirstDrift` gate, the tick's
//! `FLEETWRIGHT_TERMINATE_FIRST_DRIFT`), run through the whole tick by `simulate`: a static pool
//! at its `limits.nodes` rolls its drifted nodes one at a time, each deleted before its refill
//! launches, and never runs a node over its limit; without the gate its nodes stay, blocked.

mod common;

use std::process::Command;

use common::{repo, write_temp};
use serde_json::Value;

const GATE_ON: &str = "FLEETWRIGHT_TERMINATE_FIRST_DRIFT: \"true\"";

/// The log and the JSON report of `simulate --scenario FILE`.
fn run(scenario: &str) -> (String, Value) {
    let simulate = |json: bool| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_fleetwright"));
        cmd.args(["simulate", "--scenario", scenario]);
        if json {
            cmd.args(["--output", "json"]);
        }
        let out = cmd.env_remove("FLEETWRIGHT_LOG").output().expect("run");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8")
    };
    let report = serde_json::from_str(&simulate(true)).expect("a JSON report");
    (simulate(false), report)
}

#[test]
fn a_static_pool_at_its_node_limit_deletes_each_drifted_node_first() {
    let scenario = repo("examples/simulate/terminate-first.yaml");
    let text = std::fs::read_to_string(&scenario).expect("the scenario");
    assert!(text.contains(GATE_ON), "the example turns the gate on");
    let (log, r) = run(&scenario);
    assert_eq!(r["disruptions"]["drifted"], 3, "{r:#}");
    let terminated_first = log
        .lines()
        .filter(|l| l.contains("disrupting node(s)") && l.contains("\"terminate-first\""))
        .count();
    assert_eq!(terminated_first, 3, "{log}");
    assert_eq!(r["peakNodes"], 3, "never a node over limits.nodes: {r:#}");
    // Nor a NodeClaim (one counts against the limit from its creation): each refill is created
    // after the NodeClaim it stands in for was deleted, its instance terminated.
    let mut live = 0;
    let mut most = 0;
    for line in log.lines() {
        if line.contains("\tcreated nodeclaim\t") {
            live += 1;
        } else if line.contains("\tdeleted nodeclaim\t") {
            live -= 1;
        }
        most = most.max(live);
    }
    assert_eq!((most, live), (3, 3), "{log}");
    assert_eq!(r["instancesLaunched"], 6, "{r:#}");
    assert_eq!(r["finalNodes"], 3, "{r:#}");
    // Each refill launches only once its node's instance is gone, so a pod waits for it.
    let waited = r["pendingLatency"]["max"].as_i64().expect("a latency");
    assert!((1..=180).contains(&waited), "{r:#}");
}

#[test]
fn without_the_gate_the_drifted_nodes_of_a_pool_at_its_limit_stay() {
    let text = std::fs::read_to_string(repo("examples/simulate/terminate-first.yaml")).unwrap();
    let off = text.replace(GATE_ON, "FLEETWRIGHT_TERMINATE_FIRST_DRIFT: \"false\"");
    let (log, r) = run(&write_temp("terminate-first-off.yaml", &off));
    assert_eq!(r["disruptions"], serde_json::json!({}), "{r:#}");
    assert_eq!(r["instancesTerminated"], 0, "{r:#}");
    assert!(
        log.contains(
            "static NodePool is at its node limit (limits.nodes 3) and cannot stage a replacement"
        ),
        "{log}"
    );
}
