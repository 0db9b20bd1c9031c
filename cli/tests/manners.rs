//! The command's manners and regions, through the built binary: no colour codes in pipes,
//! `--quiet` and `-v`, one `explain` in the help; the catalog region inferred from the dump, and
//! a NodePool that matches no type naming the requirement and the region's catalog.

mod common;

use std::process::{Command, Output};

use common::{fixture, success};
use serde_json::Value;

/// Runs `fleetwright` with a pipe for stdout and stderr and no `FLEETWRIGHT_LOG`.
fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fleetwright"))
        .args(args)
        .env_remove("FLEETWRIGHT_LOG")
        .env_remove("NO_COLOR")
        .output()
        .expect("run fleetwright")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn logs_into_a_pipe_carry_no_colour_codes() {
    let out = run(&["plan", "--output", "table"]);
    success(&out);
    let err = stderr(&out);
    assert!(err.contains("INFO"), "{err}");
    assert!(!err.contains('\u{1b}'), "ANSI codes in a pipe: {err:?}");
}

#[test]
fn quiet_logs_nothing_and_v_logs_debug_lines() {
    let quiet = run(&["--quiet", "plan"]);
    success(&quiet);
    assert_eq!(stderr(&quiet), "");
    let plain = run(&["plan"]);
    let verbose = run(&["plan", "-v"]);
    success(&verbose);
    assert!(!stderr(&plain).contains("DEBUG"), "{}", stderr(&plain));
    assert!(stderr(&verbose).contains("DEBUG"), "{}", stderr(&verbose));
    let both = run(&["-q", "-v", "plan"]);
    assert!(!both.status.success(), "--quiet with -v must be refused");
}

#[test]
fn the_help_lists_each_verb_once() {
    let help = success(&run(&["--help"]));
    assert_eq!(help.matches("explain").count(), 2, "{help}"); // the about line and the list
    let listed: Vec<&str> = help
        .lines()
        .filter_map(|l| l.strip_prefix("  "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let mut unique = listed.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(listed.len(), unique.len(), "{help}");
    assert!(
        help.contains("-q, --quiet") && help.contains("-v, --verbose"),
        "{help}"
    );
}

fn plan(args: &[&str]) -> Value {
    let out = run(args);
    serde_json::from_str(&success(&out)).expect("plan JSON")
}

#[test]
fn a_korean_nodepool_pinned_to_ap_northeast_2a_is_planned_in_its_region() {
    let dump = fixture("korean-t4g.yaml");
    let plan = plan(&["plan", "--cluster", &dump]);
    assert_eq!(plan["region"], "ap-northeast-2");
    assert_eq!(plan["unschedulable"], serde_json::json!([]), "{plan:#}");
    let mut pods = 0;
    for claim in plan["nodeclaims"].as_array().unwrap() {
        pods += claim["pods"].as_array().unwrap().len();
        for t in claim["instanceTypes"].as_array().unwrap() {
            assert!(t.as_str().unwrap().starts_with("t4g."), "{t}");
        }
        let zones = claim["requirements"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["key"] == "topology.kubernetes.io/zone")
            .expect("a zone requirement");
        assert_eq!(zones["values"], serde_json::json!(["ap-northeast-2a"]));
    }
    assert_eq!(pods, 4);
    let explain = success(&run(&[
        "explain",
        "--cluster",
        &dump,
        "--pod",
        "api-7d9f8c6b5-00000",
    ]));
    assert!(explain.contains("t4g."), "{explain}");
}

#[test]
fn a_pool_that_matches_no_type_names_the_requirement_and_the_catalog() {
    let dump = fixture("korean-t4g.yaml");
    let plan = plan(&["plan", "--cluster", &dump, "--region", "us-east-1"]);
    let unschedulable = plan["unschedulable"].as_array().unwrap();
    assert_eq!(unschedulable.len(), 4);
    for u in unschedulable {
        let reason = u["reason"].as_str().unwrap();
        assert!(
            reason.contains("topology.kubernetes.io/zone In [ap-northeast-2a]")
                && reason.contains("us-east-1 catalog")
                && reason.contains("us-east-1a"),
            "{reason}"
        );
        assert!(!reason.contains("none of its 0 instance types"), "{reason}");
    }
    let out = run(&["plan", "--cluster", &dump, "--region", "mars-north-1"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("region mars-north-1 (--region) has no embedded catalog"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_report_path_that_cannot_be_written_fails_before_the_run() {
    let started = std::time::Instant::now();
    let out = run(&[
        "simulate",
        "--report",
        "/nonexistent-fleetwright-dir/run.html",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("--report") && err.contains("does not exist"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "nothing was simulated");
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
}

#[test]
fn an_empty_plan_costs_zero_dollars_not_minus_zero() {
    let out = run(&[
        "plan",
        "--cluster",
        &fixture("as-posted/t4g-limit.yaml"),
        "--output",
        "table",
    ]);
    let table = success(&out);
    assert!(!table.contains("$-0.0000"), "{table}");
    let empty = common::write_temp("empty.yaml", "apiVersion: v1\nkind: List\nitems: []\n");
    let out = run(&["plan", "--cluster", &empty, "--output", "table"]);
    let table = success(&out);
    assert!(table.contains("cost: $0.0000/h"), "{table}");
}

#[test]
fn the_version_names_the_commit_built() {
    let out = run(&["--version"]);
    let text = success(&out);
    let inside = text
        .trim()
        .split_once(" (")
        .and_then(|(_, rest)| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        inside == "unknown commit"
            || (inside.len() == 12 && inside.chars().all(|c| c.is_ascii_hexdigit())),
        "{text}"
    );
}

/// A reader that stops early (`fleetwright simulate | head -1`, with or without `2>&1`) ends
/// the command as SIGPIPE ends a Unix tool: status 141 and nothing on stderr, neither a panic
/// nor an error. (A write of a whole answer at once, as `--output json`, is the bare broken pipe
/// `closed_pipe` in `main.rs` takes; its own test covers it, since an answer that fits in the
/// pipe's buffer never meets the closed end.)
#[test]
fn a_reader_that_stops_early_ends_the_command_quietly() {
    use std::io::BufRead;
    for (args, both) in [(&["simulate"][..], false), (&["simulate"][..], true)] {
        let (reader, writer) = std::io::pipe().unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_fleetwright"));
        command
            .args(args)
            .env_remove("FLEETWRIGHT_LOG")
            .stdout(writer.try_clone().unwrap());
        if both {
            command.stderr(writer);
        } else {
            drop(writer);
            command.stderr(std::process::Stdio::piped());
        }
        let child = command.spawn().expect("run fleetwright");
        drop(command);
        let mut first = String::new();
        std::io::BufReader::new(reader)
            .read_line(&mut first)
            .unwrap();
        assert!(!first.is_empty(), "{args:?}: a first line");
        let out = child.wait_with_output().unwrap();
        let err = stderr(&out);
        assert!(err.is_empty(), "{args:?} (stderr too: {both}): {err}");
        let code = out.status.code();
        assert_eq!(code, Some(141), "{args:?} (stderr too: {both})");
    }
}
