//! `fleetwright simulate`: the default scenario's acceptance numbers, read from its JSON report;
//! determinism for a seed; the example scenarios; bad scenarios.

mod common;

use std::collections::BTreeSet;
use std::process::Command;

use common::{fleetwright, repo, write_temp};
use serde_json::Value;

/// Runs `fleetwright simulate ARGS` with the default log filter; returns stdout.
fn simulate(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_fleetwright"))
        .arg("simulate")
        .args(args)
        .env_remove("FLEETWRIGHT_LOG")
        .output()
        .expect("run fleetwright");
    assert!(
        out.status.success(),
        "simulate {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

fn report(args: &[&str]) -> Value {
    let mut all = vec!["--output", "json"];
    all.extend_from_slice(args);
    serde_json::from_str(&simulate(&all)).expect("a JSON report")
}

/// The seconds at which the report's disruption commands of this kind (`empty/`, ...) were
/// carried out.
fn disruptions_at(report: &Value, prefix: &str) -> Vec<i64> {
    report["disruptionEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["command"].as_str().unwrap().starts_with(prefix))
        .map(|e| e["at"].as_i64().unwrap())
        .collect()
}

fn step<'a>(report: &'a Value, prefix: &str) -> &'a Value {
    report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["action"].as_str().unwrap().starts_with(prefix))
        .unwrap_or_else(|| panic!("a step {prefix:?} in {report:#}"))
}

#[test]
fn the_default_scenario_meets_the_hands_on_numbers() {
    let r = report(&[]);
    // All 10 inflate pods run within 90 simulated seconds of the scale-up.
    let up = step(&r, "scale deployment inflate to 10");
    let after = up["allRunningAfter"].as_i64().expect("all 10 running");
    assert!(after <= 90, "10 pods running after {after}s");
    // The interrupted node is replaced, and no pod waits more than 90 s.
    let interruptions = r["interruptions"].as_array().unwrap();
    assert_eq!(interruptions.len(), 1, "{interruptions:#?}");
    let i = &interruptions[0];
    assert!(i["podsDisplaced"].as_u64().unwrap() > 0, "{i:#}");
    assert!(i["replacement"].is_string(), "{i:#}");
    assert!(i["goneAt"].is_i64(), "{i:#}");
    let waited = i["maxPendingSeconds"].as_i64().unwrap();
    assert!(waited <= 90, "a displaced pod waited {waited}s");
    assert!(r["pendingLatency"]["max"].as_i64().unwrap() <= 90, "{r:#}");
    // The load drop is consolidated: cost falls, the node it emptied deleted. The node left
    // with 3 pods stays: as in Karpenter, spot-to-spot needs 15 spot types cheaper than it in
    // every zone the replacement may launch in, and it has 14.
    let drop = step(&r, "scale deployment inflate to 3");
    let (before, after) = (
        drop["costBefore"].as_f64().unwrap(),
        drop["costAfter"].as_f64().unwrap(),
    );
    assert!(after < before, "cost {before} -> {after}");
    assert_eq!(drop["nodesAfter"], 1, "{drop:#}");
    // Every node is removed after the deletion.
    let delete = step(&r, "delete deployment inflate");
    assert!(delete["nodesBefore"].as_u64().unwrap() > 0, "{delete:#}");
    assert_eq!(delete["nodesAfter"], 0, "{delete:#}");
    assert!(delete["noNodesAfter"].is_i64(), "{delete:#}");
    assert_eq!(r["finalNodes"], 0);
    assert_eq!(r["instancesLaunched"], r["instancesTerminated"]);
    // Cost is reported against the LP lower bound over time.
    let samples = r["samples"].as_array().unwrap();
    assert!(samples.len() > 10);
    assert!(samples
        .iter()
        .any(|s| s["lowerBound"].as_f64().unwrap() > 0.0
            && s["hourlyCost"].as_f64().unwrap() >= s["lowerBound"].as_f64().unwrap()));
}

#[test]
fn two_runs_with_the_same_seed_print_the_same_and_the_log_reads_like_karpenter() {
    let first = simulate(&[]);
    let second = simulate(&[]);
    assert_eq!(first, second);
    assert!(first.contains("\tINFO\ttick\tcomputed packing of 1 node(s) for 2 pod(s)"));
    assert!(first.contains("spot interruption warning"));
    assert!(first.contains("Pod pending latency: p50"));
    assert!(first.contains("Disruptions by reason:"));
    assert!(first.starts_with("2026-11-22T10:00:00.000Z\t"));
}

#[test]
fn another_seed_changes_the_run() {
    let one = report(&["--seed", "1"]);
    let two = report(&["--seed", "2"]);
    assert_eq!(two["seed"], 2);
    assert_ne!(
        one["samples"], two["samples"],
        "spot prices are drawn per seed"
    );
}

#[test]
fn the_spot_storm_replaces_every_interrupted_node() {
    let r = report(&["--scenario", &repo("examples/simulate/spot-storm.yaml")]);
    let interruptions = r["interruptions"].as_array().unwrap();
    assert_eq!(interruptions.len(), 7);
    for i in interruptions {
        assert!(i["replacement"].is_string(), "{i:#}");
        assert!(i["maxPendingSeconds"].as_i64().unwrap() <= 90, "{i:#}");
    }
    // From 3m there is no spot capacity in us-east-1a: later launches go elsewhere.
    let later: Vec<&Value> = r["launches"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["at"].as_i64().unwrap() >= 180)
        .collect();
    assert!(!later.is_empty());
    assert!(
        r["insufficientCapacityErrors"].as_u64().unwrap() > 0,
        "{r:#}"
    );
    assert!(
        later
            .iter()
            .all(|l| !(l["zone"] == "us-east-1a" && l["capacityType"] == "spot")),
        "{later:#?}"
    );
    let last = r["samples"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["pendingPods"], 0, "{last:#}");
    assert_eq!(last["runningPods"], 24, "{last:#}");
}

#[test]
fn the_ami_release_rolls_every_node_without_stranding_pods() {
    let r = report(&["--scenario", &repo("examples/simulate/ami-drift.yaml")]);
    let before = r["steps"][0]["nodesBefore"].as_u64().unwrap();
    assert!(before > 1);
    assert_eq!(r["disruptions"]["drifted"].as_u64(), Some(before), "{r:#}");
    assert_eq!(r["instancesTerminated"].as_u64(), Some(before));
    assert_eq!(r["finalNodes"].as_u64(), Some(before));
    assert!(r["pendingLatency"]["max"].as_i64().unwrap() <= 90, "{r:#}");
}

/// A NodePool applied again at 3m narrowed from spot and on-demand to on-demand: every spot
/// node's labels fall outside its requirements (RequirementsDrifted), and each is replaced by
/// an on-demand node, one at a time, with no pod stranded.
#[test]
fn a_pool_narrowed_to_on_demand_replaces_every_spot_node() {
    let r = report(&[
        "--scenario",
        &repo("examples/simulate/requirements-drift.yaml"),
    ]);
    let applied = step(&r, "apply NodePool general");
    let before = applied["nodesBefore"].as_u64().unwrap();
    assert!(before > 1, "{r:#}");
    assert_eq!(r["disruptions"]["drifted"].as_u64(), Some(before), "{r:#}");
    assert_eq!(r["finalNodes"].as_u64(), Some(before));
    let launches = r["launches"].as_array().unwrap();
    let capacity = |early: bool| -> Vec<&str> {
        launches
            .iter()
            .filter(|l| (l["at"].as_i64().unwrap() < 180) == early)
            .map(|l| l["capacityType"].as_str().unwrap())
            .collect()
    };
    assert!(capacity(true).iter().all(|c| *c == "spot"), "{launches:?}");
    assert_eq!(capacity(false), vec!["on-demand"; before as usize]);
    assert!(r["pendingLatency"]["max"].as_i64().unwrap() <= 90, "{r:#}");
}

/// Static drift by Karpenter's own hashes (`examples/simulate/static-drift.yaml`): a label
/// added to the NodePool's template at 3m marks every node `NodePoolDrifted` and replaces each,
/// one at a time; a placement group added to the EC2NodeClass at 15m marks every replacement
/// `NodeClassDrift` and replaces it in turn. No pod waits long, and the fleet ends as large.
#[test]
fn template_and_nodeclass_changes_roll_every_node_by_karpenters_hashes() {
    let scenario = repo("examples/simulate/static-drift.yaml");
    let text = simulate(&["--scenario", &scenario]);
    let marked = |reason: &str| {
        text.lines()
            .filter(|l| l.contains("marking drifted") && l.contains(&format!("\"{reason}\"")))
            .count()
    };
    assert_eq!(marked("NodePoolDrifted"), 4, "{text}");
    assert_eq!(marked("NodeClassDrift"), 4, "{text}");
    let r = report(&["--scenario", &scenario]);
    assert_eq!(r["disruptions"]["drifted"].as_u64(), Some(8), "{r:#}");
    assert_eq!(r["finalNodes"].as_u64(), Some(4));
    assert!(r["pendingLatency"]["max"].as_i64().unwrap() <= 90, "{r:#}");
}

/// A partition placement group (`examples/simulate/partition-spread.yaml`): the six workers'
/// NodeClaims are pinned two to each of the three partitions by their spread and launched into
/// them; the four loaders' name none, so each is labelled with the partition EC2 chose before its
/// node registers. Every pod runs within the first two ticks.
#[test]
fn a_spread_over_partitions_launches_into_each_and_the_rest_learn_theirs_from_ec2() {
    let scenario = repo("examples/simulate/partition-spread.yaml");
    let text = simulate(&["--scenario", &scenario]);
    let learned = text
        .lines()
        .filter(|l| {
            l.contains("labelled the nodeclaim with its instance's placement group partition")
        })
        .count();
    assert_eq!(learned, 4, "{text}");
    let r = report(&["--scenario", &scenario]);
    let launches = r["launches"].as_array().unwrap();
    let mut per_partition = std::collections::BTreeMap::new();
    for l in launches {
        let p = l["partition"]
            .as_i64()
            .unwrap_or_else(|| panic!("no partition: {l}"));
        *per_partition.entry(p).or_insert(0) += 1;
    }
    assert_eq!(per_partition.keys().copied().collect::<Vec<_>>(), [1, 2, 3]);
    let counts: Vec<i32> = per_partition.values().copied().collect();
    assert!(
        counts.iter().max().unwrap() - counts.iter().min().unwrap() <= 1,
        "{per_partition:?}"
    );
    assert_eq!(r["finalNodes"].as_u64(), Some(10), "{r:#}");
    assert!(r["pendingLatency"]["max"].as_i64().unwrap() <= 90, "{r:#}");
    assert_eq!(
        r["samples"].as_array().unwrap().last().unwrap()["pendingPods"],
        0
    );
}

/// A static NodePool keeps its replicas whatever the pods: two nodes from the start with no pod
/// asking, a third when scaled to 3, two deleted when scaled to 1 (their pods move, one onto a
/// node of the dynamic pool), and none of its nodes ever consolidated, even empty.
#[test]
fn a_static_pool_keeps_its_replicas_through_scaling() {
    let r = report(&["--scenario", &repo("examples/simulate/static-pool.yaml")]);
    let launches = r["launches"].as_array().unwrap();
    let of_pool = |pool: &str| -> Vec<i64> {
        launches
            .iter()
            .filter(|l| l["nodepool"] == pool)
            .map(|l| l["at"].as_i64().unwrap())
            .collect()
    };
    assert_eq!(of_pool("baseline"), vec![0, 0, 240], "{launches:?}");
    assert!(of_pool("burst").iter().all(|&at| at >= 540), "{launches:?}");
    assert_eq!(step(&r, "apply NodePool baseline")["nodesAfter"], 3);
    assert_eq!(r["instancesTerminated"], 2, "{r:#}");
    assert_eq!(
        r["disruptions"],
        serde_json::json!({}),
        "no static node is consolidated: {r:#}"
    );
    assert!(r["pendingLatency"]["max"].as_i64().unwrap() <= 90, "{r:#}");
}

/// A NodeOverlay price (a savings plan for m6i.xlarge) is believed by the plan and honoured by
/// the launch: every node is an m6i.xlarge, though EC2's own prices would pick another type.
#[test]
fn a_node_overlay_price_decides_what_launches() {
    let r = report(&["--scenario", &repo("examples/simulate/node-overlay.yaml")]);
    let launched: Vec<&str> = r["launches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["instanceType"].as_str().unwrap())
        .collect();
    assert!(!launched.is_empty());
    assert!(launched.iter().all(|t| *t == "m6i.xlarge"), "{launched:?}");
    let without = std::fs::read_to_string(repo("examples/simulate/node-overlay.yaml"))
        .unwrap()
        .replace("kind: NodeOverlay", "kind: NodeOverlayNotRead");
    let path = write_temp("no-overlay.yaml", &without);
    let plain = report(&["--scenario", &path]);
    assert!(
        plain["launches"]
            .as_array()
            .unwrap()
            .iter()
            .all(|l| l["instanceType"] != "m6i.xlarge"),
        "{plain:#}"
    );
}

#[test]
fn the_batch_burst_is_packed_and_then_removed() {
    let r = report(&["--scenario", &repo("examples/simulate/batch-burst.yaml")]);
    let burst = step(&r, "scale deployment workers to 80");
    assert!(
        burst["allRunningAfter"].as_i64().unwrap() <= 90,
        "{burst:#}"
    );
    let nodes = burst["nodesAfter"].as_u64().unwrap();
    assert!(nodes > 0 && nodes < 20, "80 one-CPU pods on {nodes} nodes");
    assert_eq!(r["finalNodes"], 0);
}

/// `karpenter.sh/do-not-disrupt: "5m"` keeps the job's node from consolidation until five
/// minutes after the job started; without the annotation the node goes as soon as
/// consolidateAfter allows, and with `"true"` it never does.
#[test]
fn a_do_not_disrupt_duration_holds_consolidation_back_until_it_has_passed() {
    let scenario = std::fs::read_to_string(repo("examples/simulate/do-not-disrupt-for.yaml"))
        .expect("the scenario");
    let run = |annotation: &str| {
        let text = scenario.replace(
            r#"annotations: {karpenter.sh/do-not-disrupt: "5m"}"#,
            annotation,
        );
        let path = write_temp(&format!("dnd-{}.yaml", annotation.len()), &text);
        report(&["--scenario", &path])
    };
    let underutilized = |r: &Value| -> Vec<i64> {
        r["disruptionEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["command"].as_str().unwrap().starts_with("underutilized/"))
            .map(|e| e["at"].as_i64().unwrap())
            .collect()
    };
    let protected = run(r#"annotations: {karpenter.sh/do-not-disrupt: "5m"}"#);
    let job = step(&protected, "scale deployment job to 1");
    let started = job["at"].as_i64().unwrap() + job["allRunningAfter"].as_i64().unwrap();
    let at = underutilized(&protected);
    assert!(!at.is_empty(), "consolidated in the end: {protected:#}");
    assert!(
        at[0] >= started + 300,
        "not before {} s: {at:?}",
        started + 300
    );

    let plain = underutilized(&run("annotations: {}"));
    assert!(
        plain.first().is_some_and(|t| *t < started + 300),
        "{plain:?}"
    );
    let pinned = underutilized(&run(
        r#"annotations: {karpenter.sh/do-not-disrupt: "true"}"#,
    ));
    assert!(pinned.is_empty(), "{pinned:?}");
}

/// Node repair: a dead kubelet (Ready Unknown) is repaired 30 minutes after it went, a bad disk
/// (StorageReady False) 30 minutes after the agent said so, and their pods run again on new
/// nodes, launched before the repaired nodes go; a pool whose every node failed is left alone.
/// Off by default: without the setting nothing is repaired.
#[test]
fn unhealthy_nodes_are_repaired_after_their_toleration_unless_their_pool_is_failing() {
    let path = repo("examples/simulate/node-repair.yaml");
    let r = report(&["--scenario", &path]);
    let repairs: Vec<i64> = disruptions_at(&r, "unhealthy/");
    let failed_at = |prefix: &str| step(&r, prefix)["at"].as_i64().unwrap();
    let kubelet = failed_at("fail a node of nodepool web (Ready=Unknown)");
    let disk = failed_at("fail a node of nodepool web (StorageReady=False)");
    assert_eq!(repairs.len(), 2, "the two web nodes, not batch's: {r:#}");
    // Each replacement launches when the repair is due, and the node goes once it is ready.
    let web_launches: Vec<i64> = r["launches"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["nodepool"] == "web")
        .map(|l| l["at"].as_i64().unwrap())
        .collect();
    assert_eq!(
        web_launches.len(),
        5,
        "three, then one per repair: {web_launches:?}"
    );
    for (failed, (launch, repair)) in [kubelet, disk]
        .into_iter()
        .zip(web_launches[3..].iter().zip(&repairs))
    {
        let due = failed + 1800;
        assert!((due..due + 60).contains(launch), "{web_launches:?}");
        assert!((launch + 1..launch + 180).contains(repair), "{repairs:?}");
    }
    let last = r["samples"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["pendingPods"], 0, "{last}");
    assert_eq!(last["runningPods"], 10, "{last}");
    assert_eq!(r["instancesTerminated"], 2, "{r:#}");

    let text = std::fs::read_to_string(&path).unwrap();
    let off = text.replace("  FLEETWRIGHT_NODE_REPAIR: \"true\"\n", "");
    assert_ne!(off, text);
    let r = report(&["--scenario", &write_temp("node-repair-off.yaml", &off)]);
    assert_eq!(r["disruptions"], serde_json::json!({}), "{r:#}");
    assert_eq!(r["instancesTerminated"], 0, "{r:#}");

    // A GPU fault the AWS provider names by its XID code is repaired after 10 minutes, one it
    // does not name after 30 (its fallback).
    for (reason, after) in [("NvidiaXID79Error", 600), ("NvidiaXID13Error", 1800)] {
        let gpu = text.replacen(
            "fail: {nodepool: web}",
            &format!(
                "fail: {{nodepool: web, condition: AcceleratedHardwareReady, status: \"False\", reason: {reason}}}"
            ),
            1,
        );
        assert_ne!(gpu, text);
        let r = report(&[
            "--scenario",
            &write_temp(&format!("xid-{reason}.yaml"), &gpu),
        ]);
        let failed = step(
            &r,
            "fail a node of nodepool web (AcceleratedHardwareReady=False)",
        )["at"]
            .as_i64()
            .unwrap();
        // Due then; the node goes once its replacement is ready.
        let first = disruptions_at(&r, "unhealthy/")[0];
        assert!(
            (failed + after..failed + after + 180).contains(&first),
            "{reason}: failed at {failed}, repaired at {first}"
        );
    }
}

/// Reboot for repair (Karpenter's `RebootForRepair`): a GPU fault a reboot clears reboots its
/// node in place after the 10-minute toleration, with nothing launched or terminated; one that
/// outlives its reboots is rebooted twice, each toleration counted from the last reboot's end,
/// and replaced the third time. Without the setting both nodes are replaced.
#[test]
fn a_fault_a_reboot_clears_is_rebooted_in_place_and_one_that_outlives_two_reboots_replaced() {
    let path = repo("examples/simulate/reboot-repair.yaml");
    let r = report(&["--scenario", &path]);
    let failed_at = |prefix: &str| step(&r, prefix)["at"].as_i64().unwrap();
    let web = failed_at("fail a node of nodepool web");
    let gpu = failed_at("fail a node of nodepool gpu");
    let reboots = disruptions_at(&r, "unhealthy/reboot:");
    let replaced = disruptions_at(&r, "unhealthy/delete:");
    assert_eq!(reboots.len(), 3, "{:#}", r["disruptionEvents"]);
    assert!((web + 600..web + 660).contains(&reboots[0]), "{reboots:?}");
    assert!((gpu + 600..gpu + 660).contains(&reboots[1]), "{reboots:?}");
    // The second waits its toleration out from the end of the first (about two minutes on).
    assert!(
        (reboots[1] + 600 + 60..reboots[1] + 600 + 240).contains(&reboots[2]),
        "{reboots:?}"
    );
    assert_eq!(replaced.len(), 1, "{replaced:?}");
    assert!(replaced[0] >= reboots[2] + 600, "{replaced:?} {reboots:?}");
    let launched = |pool: &str| {
        r["launches"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|l| l["nodepool"] == pool)
            .count()
    };
    assert_eq!(
        (launched("web"), launched("gpu")),
        (3, 5),
        "{:#}",
        r["launches"]
    );
    assert_eq!(r["instancesTerminated"], 1, "{r:#}");
    let last = r["samples"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        (last["pendingPods"].as_i64(), last["runningPods"].as_i64()),
        (Some(0), Some(12)),
        "{last}"
    );

    let text = std::fs::read_to_string(&path).unwrap();
    let off = text.replace("  FLEETWRIGHT_REBOOT_FOR_REPAIR: \"true\"\n", "");
    assert_ne!(off, text);
    let r = report(&["--scenario", &write_temp("reboot-repair-off.yaml", &off)]);
    assert!(disruptions_at(&r, "unhealthy/reboot:").is_empty());
    assert_eq!(disruptions_at(&r, "unhealthy/delete:").len(), 2, "{r:#}");
    assert_eq!(r["instancesTerminated"], 2, "{r:#}");
}

/// Reserved capacity: the first nodes launch into the EC2NodeClass's two reservations (no more
/// than they hold), the rest on demand; the capacity block's node is deleted 40 minutes before
/// the block ends and its pods run again on capacity outside it; the lower bound stays under the
/// cost (the reservations' capacity is free in it, not unlimited).
#[test]
fn reservations_are_used_first_and_a_capacity_block_is_drained_before_its_end() {
    let r = report(&[
        "--scenario",
        &repo("examples/simulate/reserved-capacity.yaml"),
    ]);
    let launches = r["launches"].as_array().unwrap();
    let reserved: Vec<(&str, &str)> = launches
        .iter()
        .filter(|l| l["capacityType"] == "reserved")
        .map(|l| {
            (
                l["instanceType"].as_str().unwrap(),
                l["zone"].as_str().unwrap(),
            )
        })
        .collect();
    let mut sorted = reserved.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        [
            ("m6i.2xlarge", "us-east-1b"),
            ("m6i.xlarge", "us-east-1a"),
            ("m6i.xlarge", "us-east-1a")
        ],
        "{launches:?}"
    );
    assert!(launches.iter().all(|l| l["capacityType"] != "spot"));
    let expiring: Vec<i64> = r["disruptionEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            e["command"]
                .as_str()
                .unwrap()
                .starts_with("reservation-expiring/")
        })
        .map(|e| e["at"].as_i64().unwrap())
        .collect();
    assert_eq!(expiring.len(), 1, "{r:#}");
    assert!(
        (1200..1260).contains(&expiring[0]),
        "60m - 40m: {expiring:?}"
    );
    let later: Vec<&Value> = launches
        .iter()
        .filter(|l| l["at"].as_i64().unwrap() > 1200)
        .collect();
    assert!(!later.is_empty() && later.iter().all(|l| l["capacityType"] == "on-demand"));
    // Not while the expiring block's node drains: a plan from scratch can no longer use it.
    let samples = r["samples"].as_array().unwrap();
    for s in samples
        .iter()
        .filter(|s| s["t"].as_i64() < Some(1200))
        .chain(samples.last())
    {
        let (cost, bound) = (
            s["hourlyCost"].as_f64().unwrap(),
            s["lowerBound"].as_f64().unwrap(),
        );
        assert!(bound <= cost + 1e-6, "{s}");
    }
    let last = r["samples"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        (last["runningPods"].as_i64(), last["pendingPods"].as_i64()),
        (Some(12), Some(0))
    );
}

/// `consolidationPolicy: Balanced` on a slow scale-down: it makes the move worth its disruption
/// and refuses the marginal ones WhenEmptyOrUnderutilized makes, so it moves pods fewer times
/// (here for the same final cost; it may be dearer, never cheaper); the refusals are logged
/// with their scores.
#[test]
fn balanced_consolidation_moves_less_than_underutilized_on_a_slow_scale_down() {
    let path = repo("examples/simulate/balanced.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let eager = text.replace(
        "consolidationPolicy: Balanced",
        "consolidationPolicy: WhenEmptyOrUnderutilized",
    );
    assert_ne!(eager, text);
    let moves = |r: &Value| r["disruptions"]["underutilized"].as_u64().unwrap_or(0);
    let balanced = report(&["--scenario", &path]);
    let underutilized = report(&["--scenario", &write_temp("balanced-eager.yaml", &eager)]);
    assert!(
        moves(&balanced) >= 1,
        "the worthwhile move is made: {balanced:#}"
    );
    assert!(
        moves(&balanced) < moves(&underutilized),
        "{} moves, against {}",
        moves(&balanced),
        moves(&underutilized)
    );
    let cost = |r: &Value| r["finalHourlyCost"].as_f64().unwrap();
    assert!(cost(&balanced) >= cost(&underutilized) - 1e-9);
    let log = simulate(&["--scenario", &path]);
    assert!(
        log.contains("Balanced: nodepool default scores") && log.contains("under 0.50"),
        "{log}"
    );
}

#[test]
fn bad_scenarios_fail_with_the_field_named() {
    let path = write_temp(
        "bad-scenario.yaml",
        "name: x\nduration: 5m\nobjects: []\ntimeline:\n- at: 1m\n  scale: {deployment: web, replicas: 3}\n",
    );
    let out = fleetwright(&["simulate", "--scenario", &path]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("timeline[0]") && err.contains("\"web\""),
        "{err}"
    );
    // A fault on a pool the scenario does not have (a typo) is named before anything runs.
    let gpus = std::fs::read_to_string(repo("examples/simulate/reboot-repair.yaml"))
        .unwrap()
        .replace("fail: {nodepool: gpu,", "fail: {nodepool: gpus,");
    let out = fleetwright(&["simulate", "--scenario", &write_temp("gpus.yaml", &gpus)]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("timeline[3]: nodepool \"gpus\""), "{err}");
    let path = write_temp(
        "bad-setting.yaml",
        "name: x\nduration: 5m\nobjects: []\nsettings: {FLEETWRIGHT_NODE_REPAIR: maybe}\n",
    );
    let err = String::from_utf8_lossy(&fleetwright(&["simulate", "--scenario", &path]).stderr)
        .to_string();
    assert!(
        err.contains("FLEETWRIGHT_NODE_REPAIR") && err.contains("maybe"),
        "{err}"
    );
    let path = write_temp(
        "unknown-setting.yaml",
        "name: x\nduration: 5m\nobjects: []\nsettings: {FLEETWRIGHT_KUBE_API_URL: x}\n",
    );
    let err = String::from_utf8_lossy(&fleetwright(&["simulate", "--scenario", &path]).stderr)
        .to_string();
    assert!(err.contains("settings.FLEETWRIGHT_KUBE_API_URL"), "{err}");
    let out = fleetwright(&["simulate", "--scenario", "/nonexistent/scenario.yaml"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/scenario.yaml"));
    let typo = std::fs::read_to_string(repo("examples/simulate/teardown.yaml"))
        .unwrap()
        .replace("consolidateAfter: 0s", "consolidateAfter: 5 m");
    let path = write_temp("typo.yaml", &typo);
    let out = fleetwright(&["simulate", "--scenario", &path]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    for named in [
        path.as_str(),
        "NodePool workers",
        "spec.disruption.consolidateAfter",
        "\"5m\"",
    ] {
        assert!(err.contains(named), "{named} in {err}");
    }
}

/// Chaos mode runs its seeds with faults injected, reports what it injected, and keeps every
/// invariant (CI runs 50 seeds with the release build; this is the quick check).
/// Under faults, no node goes before its pool's `consolidateAfter` has passed since its last pod
/// event (the chaos mode's own record of them). With 3 minutes, longer than a tick's interval, a
/// pod gone between ticks matters: the product's record of its nodes' pods must see it (seed 1
/// consolidated a node 117 s after its pods went when it did not).
#[test]
fn chaos_keeps_consolidate_after_from_the_last_pod_event() {
    let text = std::fs::read_to_string(repo("examples/simulate/chaos.yaml"))
        .unwrap()
        .replace("consolidateAfter: 30s", "consolidateAfter: 3m");
    assert!(text.contains("consolidateAfter: 3m"), "chaos.yaml changed");
    let path = write_temp("chaos-3m.yaml", &text);
    let out = simulate(&[
        "--chaos",
        "--scenario",
        &path,
        "--seed",
        "1",
        "--seeds",
        "2",
    ]);
    assert!(out.contains("chaos: 2 seed(s), 0 violation(s)"), "{out}");
}

#[test]
fn chaos_seeds_inject_faults_and_keep_every_invariant() {
    let out = simulate(&["--chaos", "--seed", "3", "--seeds", "2"]);
    assert!(out.contains("chaos: 2 seed(s), 0 violation(s)"), "{out}");
    let faults = out
        .lines()
        .find_map(|l| l.strip_prefix("chaos: faults injected: "))
        .unwrap_or_else(|| panic!("no fault line in {out}"));
    let injected: usize = faults
        .split(", ")
        .filter_map(|f| f.rsplit(' ').next()?.parse::<usize>().ok())
        .sum();
    assert!(injected > 10, "{faults}");
}

#[test]
fn the_html_report_embeds_the_run_and_needs_no_network() {
    let path = write_temp("report.html", "");
    let json = report(&["--report", &path]);
    let html = std::fs::read_to_string(&path).unwrap();
    let start = html
        .find(r#"<script type="application/json" id="report-data">"#)
        .unwrap();
    let data = &html[start..];
    let data = &data[data.find('>').unwrap() + 1..data.find("</script>").unwrap()];
    let embedded: Value = serde_json::from_str(&data.replace("<\\/", "</")).unwrap();
    assert_eq!(
        embedded, json,
        "the page carries the same report as --output json"
    );
    for id in [
        "plot-nodes",
        "plot-cost",
        "plot-pods",
        "timeline",
        "summary",
    ] {
        assert!(html.contains(&format!("id=\"{id}\"")), "no #{id}");
    }
    assert!(
        html.contains("default-src 'none'"),
        "a CSP that forbids fetches"
    );
    assert!(!html.contains("<script src") && !html.contains("<link"));
    assert!(!json["disruptionEvents"].as_array().unwrap().is_empty());
}

#[test]
fn a_scenario_in_ap_northeast_2_runs_on_that_regions_catalog() {
    let korean = std::fs::read_to_string(repo("cli/tests/fixtures/korean-t4g.yaml")).unwrap();
    let dump: serde_yaml::Value = serde_yaml::from_str(&korean).unwrap();
    let objects: Vec<&serde_yaml::Value> = dump["items"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter(|o| o["kind"] != "Pod")
        .collect();
    let scenario = serde_json::json!({
        "name": "korean-t4g",
        "seed": 3,
        "duration": "6m",
        "objects": objects.into_iter().cloned().chain([serde_yaml::from_str(
            "{apiVersion: apps/v1, kind: Deployment, metadata: {name: api, namespace: default},
              spec: {replicas: 0, selector: {matchLabels: {app: api}}, template: {metadata:
              {labels: {app: api}}, spec: {containers: [{name: api, image: api, resources:
              {requests: {cpu: 500m, memory: 1Gi}}}]}}}}").unwrap()]).collect::<Vec<_>>(),
        "timeline": [{"at": "30s", "scale": {"deployment": "api", "replicas": 4}}],
    });
    let path = write_temp("korean.yaml", &serde_yaml::to_string(&scenario).unwrap());
    let r = report(&["--scenario", &path]);
    assert_eq!(r["region"], "ap-northeast-2");
    let launches = r["launches"].as_array().unwrap();
    assert!(!launches.is_empty());
    for l in launches {
        assert_eq!(l["zone"], "ap-northeast-2a");
        assert!(
            l["instanceType"].as_str().unwrap().starts_with("t4g."),
            "{l}"
        );
    }
    assert!(
        step(&r, "scale")["allRunningAfter"].as_i64().is_some(),
        "{r:#}"
    );
}

/// Expiration is forceful, as in Karpenter v1: six nodes of a pool whose budget allows one
/// disruption at a time expire together and all go in the same tick, with no replacement
/// launched before them; the pods they shed are placed by provisioning afterwards.
#[test]
fn expired_nodes_all_go_at_once_whatever_the_budget_and_provisioning_replaces_them() {
    let r = report(&["--scenario", &repo("examples/simulate/expiration.yaml")]);
    let events = r["disruptionEvents"].as_array().unwrap();
    let expired_at: Vec<i64> = events
        .iter()
        .filter(|e| e["command"].as_str().unwrap().starts_with("expired/"))
        .map(|e| e["at"].as_i64().unwrap())
        .collect();
    // The first nodes launch once the Deployment's burst of pods is planned (within the batch
    // window of 10 s), so they expire in the tick at or after 10 minutes later: 600 or 660.
    let expiry = expired_at[0];
    assert!(
        (600..=660).contains(&expiry) && expired_at[..6] == [expiry; 6],
        "{events:?}"
    );
    let launches: Vec<i64> = r["launches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["at"].as_i64().unwrap())
        .collect();
    assert!(
        !launches.iter().any(|&at| at > 10 && at < expiry),
        "no replacement before the expiry: {launches:?}"
    );
    assert_eq!(
        launches
            .iter()
            .filter(|&&at| (expiry..expiry + 100).contains(&at))
            .count(),
        6,
        "{launches:?}"
    );
}

/// The pods of an expired node that PDBs let out one at a time get their new capacity in one
/// batch, the tick after the node goes, as Karpenter's provisioner plans the pods of deleting
/// nodes: no node per eviction step, and nothing for consolidation to undo.
#[test]
fn an_expired_nodes_pods_get_their_capacity_in_one_batch_while_pdbs_pace_the_drain() {
    let r = report(&["--scenario", &repo("examples/simulate/expiry-drain.yaml")]);
    let events = r["disruptionEvents"].as_array().unwrap();
    let reasons: BTreeSet<&str> = events
        .iter()
        .map(|e| e["command"].as_str().unwrap().split('/').next().unwrap())
        .collect();
    assert_eq!(reasons, BTreeSet::from(["expired"]), "{events:?}");
    let expired = events.len();
    let after: Vec<i64> = r["launches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["at"].as_i64().unwrap())
        .filter(|&at| at >= 600)
        .collect();
    assert!(
        !after.is_empty() && after.len() <= expired,
        "no more nodes than expired: {after:?}"
    );
    assert!(
        after.iter().all(|&at| at == after[0]),
        "one batch: {after:?}"
    );
    let samples = r["samples"].as_array().unwrap();
    let cost_at = |t: i64| {
        samples
            .iter()
            .find(|s| s["t"].as_i64() == Some(t))
            .map(|s| s["hourlyCost"].as_f64().unwrap())
            .unwrap()
    };
    assert!((cost_at(540) - r["finalHourlyCost"].as_f64().unwrap()).abs() < 1e-9);
    assert_eq!(samples.last().unwrap()["pendingPods"], 0);
}

/// Teardown under a one-node budget (`examples/simulate/teardown.yaml`): the tick follows up on
/// its own decisions (confirmed 15 s later, a removal in flight looked at every 10 s) instead of
/// waiting for the minute, so each of the four empty nodes goes within 90 simulated seconds,
/// at least twice as fast as with the follow-ups off, and one command at a time.
#[test]
fn a_teardown_under_a_one_node_budget_takes_at_most_90_seconds_a_node() {
    let path = repo("examples/simulate/teardown.yaml");
    let r = report(&["--scenario", &path]);
    let delete = step(&r, "delete deployment workers");
    assert_eq!(delete["nodesBefore"], 4, "{delete:#}");
    let gone = delete["noNodesAfter"].as_i64().expect("every node removed");
    assert!(gone <= 4 * 90, "four nodes removed in {gone} s: {delete:#}");
    let text = std::fs::read_to_string(&path).unwrap().replace(
        "seed: 5\n",
        "seed: 5\nsettings: {FLEETWRIGHT_FOLLOW_UP: \"false\"}\n",
    );
    let scheduled = report(&["--scenario", &write_temp("teardown-scheduled.yaml", &text)]);
    let delete = step(&scheduled, "delete deployment workers");
    let on_schedule = delete["noNodesAfter"].as_i64().expect("every node removed");
    assert!(
        2 * gone <= on_schedule,
        "{gone} s with follow-ups, {on_schedule} s on the schedule alone"
    );
    let empty: Vec<i64> = disruptions_at(&r, "empty/");
    assert_eq!(empty.len(), 4, "one command a node: {empty:?}");
    assert_eq!(r["finalNodes"], 0);
}

/// `consolidateAfter` counts from a node's last pod event, and a pod that goes is one (as
/// Karpenter's `lastPodEventTime`): pods that ran for half an hour, then scaled away, leave
/// their nodes standing for the whole `consolidateAfter` after they went, not after they came.
#[test]
fn consolidate_after_counts_from_the_pods_that_went_not_from_those_that_came() {
    let text = std::fs::read_to_string(repo("examples/simulate/teardown.yaml"))
        .unwrap()
        .replace("consolidateAfter: 0s", "consolidateAfter: 5m")
        .replace("nodes: \"1\"", "nodes: \"100%\"")
        .replace("duration: 20m", "duration: 50m")
        .replace(
            "- at: 4m\n  delete: {deployment: workers}",
            "- at: 30m\n  scale: {deployment: workers, replicas: 2}\n- at: 40m\n  delete: {deployment: workers}",
        );
    for edited in ["consolidateAfter: 5m", "nodes: \"100%\"", "replicas: 2}"] {
        assert!(
            text.contains(edited),
            "teardown.yaml changed: {edited} not set"
        );
    }
    let r = report(&["--scenario", &write_temp("consolidate-after.yaml", &text)]);
    let empty: Vec<i64> = disruptions_at(&r, "empty/");
    assert!(!empty.is_empty(), "the empty nodes go in the end: {r:#}");
    let scaled = 30 * 60;
    let deleted = 40 * 60;
    for at in &empty {
        assert!(
            (scaled + 300..deleted).contains(at) || *at >= deleted + 300,
            "an empty node went at {at} s, within 5m of its pods going: {empty:?}"
        );
    }
    assert!(
        empty.iter().any(|at| *at < deleted),
        "the two nodes the scale-down emptied go before the deletion: {empty:?}"
    );
    assert_eq!(r["finalNodes"], 0);
}

/// Reservations first (`examples/simulate/reserved-first.yaml`): a NodePool that allows only
/// `reserved`, weighted above an on-demand one. The reservation's one instance is taken at the
/// first scale-up, and every other pod falls through to on-demand at once, then and at the
/// second scale-up: none waits for the full reservation, and nothing launches twice.
#[test]
fn a_reserved_only_pool_fills_its_reservation_and_the_rest_falls_through_at_once() {
    let r = report(&["--scenario", &repo("examples/simulate/reserved-first.yaml")]);
    let launches = r["launches"].as_array().unwrap();
    let of = |pool: &str, capacity: &str| {
        launches
            .iter()
            .filter(|l| l["nodepool"] == pool && l["capacityType"] == capacity)
            .map(|l| l["at"].as_i64().unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(of("reserved", "reserved"), vec![31], "{launches:?}");
    assert_eq!(of("od", "on-demand").len(), 4, "{launches:?}");
    assert_eq!(launches.len(), 5, "one node per 3-CPU pod: {launches:?}");
    assert!(r["pendingLatency"]["max"].as_i64().unwrap() <= 90, "{r:#}");
}
