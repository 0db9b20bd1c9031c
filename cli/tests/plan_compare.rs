//! `fleetwright plan --compare karpenter`: Karpenter's own provisioning scheduler beside
//! Fleetwright's plan on a user's cluster. The comparison needs the Go harness
//! (`scripts/peer-bench.sh` builds it); CI runs the ignored test after its peer stage has built
//! it: `FLEETWRIGHT_KARPENTER_PEER=$PWD/target/peers/karpenter-peer cargo test --test
//! plan_compare -- --ignored` (an absolute path: the test runs in the crate's directory). Without the harness the command says how to build it.

mod common;

use std::process::Command;

#[test]
fn without_the_harness_it_says_how_to_build_it_and_fails() {
    let given = common::fleetwright(&[
        "plan",
        "--cluster",
        &common::fixture("mixed-cluster.yaml"),
        "--compare",
        "karpenter",
        "--peer-bin",
        "/nonexistent/karpenter-peer",
    ]);
    assert!(!given.status.success());
    let stderr = String::from_utf8_lossy(&given.stderr);
    assert!(
        stderr.contains("--peer-bin /nonexistent/karpenter-peer"),
        "{stderr}"
    );
    assert!(stderr.contains("scripts/peer-bench.sh"), "{stderr}");
    // No --peer-bin: nothing found on its own is run.
    let elsewhere = std::env::temp_dir().join(format!("plan-compare-{}", std::process::id()));
    std::fs::create_dir_all(&elsewhere).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_fleetwright"))
        .args(["plan", "--cluster", &common::fixture("mixed-cluster.yaml")])
        .args(["--compare", "karpenter"])
        .current_dir(&elsewhere)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("give it with --peer-bin"), "{stderr}");
    assert!(stderr.contains("go build"), "{stderr}");
}

/// A cluster as users write it (two pools with limits, a tainted Graviton pool, zone spread,
/// anti-affinity, spot-only and arm64 pods, a DaemonSet): both plans are checked by the
/// independent checker (the command fails on a broken constraint), Fleetwright places every pod,
/// and its plan is not dearer than Karpenter's (which leaves ten pods pending: it counts each
/// NodeClaim at its largest option against the default pool's limit).
#[test]
#[ignore = "needs Karpenter's scheduler harness: FLEETWRIGHT_KARPENTER_PEER=$PWD/target/peers/karpenter-peer"]
fn a_real_cluster_mix_is_compared_pod_by_pod() {
    let peer = std::env::var("FLEETWRIGHT_KARPENTER_PEER")
        .expect("FLEETWRIGHT_KARPENTER_PEER: the harness scripts/peer-bench.sh builds");
    let out = common::fleetwright(&[
        "plan",
        "--cluster",
        &common::fixture("mixed-cluster.yaml"),
        "--compare",
        "karpenter",
        "--peer-bin",
        &peer,
    ]);
    let stdout = common::success(&out);
    assert!(
        stdout.contains("Fleetwright vs Karpenter v1.15"),
        "{stdout}"
    );
    let row = stdout
        .lines()
        .find(|l| l.contains("mixed-cluster.yaml") && l.contains('|'))
        .unwrap_or_else(|| panic!("no row: {stdout}"));
    let cells: Vec<&str> = row.split('|').map(str::trim).collect();
    let pods: usize = cells[0].split_whitespace().last().unwrap().parse().unwrap();
    assert_eq!(pods, 39, "{row}");
    let cost: Vec<f64> = cells[2]
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect();
    let (fleetwright, karpenter) = (cost[0], cost[1]);
    assert!(fleetwright > 0.0 && karpenter > 0.0, "{row}");
    let unplaced: Vec<usize> = cells[5]
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect();
    assert_eq!(unplaced[0], 0, "Fleetwright places every pod: {stdout}");
    assert!(
        fleetwright <= karpenter + 1e-9,
        "Fleetwright ${fleetwright}/h against Karpenter's ${karpenter}/h: {stdout}"
    );
    assert!(stdout.contains("pod "), "the pod-by-pod table: {stdout}");
}
