//! The invariants of [`super`] on hand-made clusters: each breaks on what it guards against and
//! holds on what is allowed.

use super::*;
use crate::simulate::chaos::{BASE, BASE_PATH, CHAOS_END, LEASE_SECONDS};
use crate::simulate::log;
use crate::simulate::scenario::Scenario;
use serde_json::json;

fn chaos() -> Chaos {
    let scenario = Scenario::parse(BASE, BASE_PATH).unwrap();
    let sim = Simulation::new(scenario, log::Clock::default(), None).unwrap();
    Chaos::new(sim, 1, true)
}

fn node(name: &str, instance: &str) -> Value {
    json!({"metadata": {"name": name, "labels": {NODEPOOL: "web"}},
        "spec": {"providerID": format!("aws:///us-east-1a/{instance}")}})
}

fn pod(name: &str, node: &str) -> Value {
    json!({"metadata": {"name": name, "namespace": "shop"}, "spec": {"nodeName": node},
        "status": {"phase": "Running"}})
}

fn instance(id: &str, instance_type: &str) -> SimInstance {
    SimInstance {
        instance: fleetwright_cloud::Instance {
            id: id.into(),
            instance_type: instance_type.into(),
            zone: "us-east-1a".into(),
            state: "running".into(),
            capacity_type: "on-demand".into(),
            image_id: String::new(),
            subnet_id: String::new(),
            security_groups: Vec::new(),
            launch_time: None,
            tags: [(NODEPOOL.to_string(), "web".to_string())].into(),
            capacity_reservation_id: None,
            partition: None,
        },
        price: 0.1,
        warned: None,
    }
}

/// A pod that leaves a node which was not interrupted breaks the check unless it was evicted,
/// scaled down, or its node was interrupted or deleted by hand.
#[tokio::test]
async fn a_pod_leaving_a_node_without_an_eviction_breaks() {
    let mut c = chaos();
    c.node_instance.insert("n1".into(), "i-1".into());
    let here = [pod("a", "n1"), pod("b", "n1"), pod("c", "n1")];
    assert!(c.departures(&here, &[], &[], &[]).is_none());
    let deleted = ["DELETE /api/v1/namespaces/shop/pods/a".to_string()];
    let broke = c.departures(&here[1..], &[], &deleted, &[]).unwrap();
    assert!(
        broke.contains("shop/a") && broke.contains("deleted outright"),
        "{broke}"
    );
    // b is evicted: fine. c goes with its node after the instance was interrupted: fine.
    let evicted = ["shop/b".to_string()];
    assert!(c.departures(&here[2..], &[], &deleted, &evicted).is_none());
    c.seen.interrupted.insert("i-1".into());
    assert!(c.departures(&[], &[], &deleted, &[]).is_none());
    // On a node of another instance, a pod removed with its node breaks.
    c.node_instance.insert("n2".into(), "i-2".into());
    assert!(c.departures(&[pod("d", "n2")], &[], &[], &[]).is_none());
    let broke = c.departures(&[], &[], &[], &[]).unwrap();
    assert!(broke.contains("removed with its node"), "{broke}");
}

/// A cordoned node breaks the check after 10 minutes with no pod leaving it; a pod leaving
/// counts the 10 minutes again.
#[tokio::test]
async fn a_node_cordoned_ten_minutes_without_a_pod_leaving_breaks() {
    let mut c = chaos();
    c.sim
        .cloud
        .adopt(instance("i-1", "m6i.large").instance, 0.1);
    let mut n = node("n1", "i-1");
    n["spec"]["unschedulable"] = json!(true);
    let nodes = [n];
    let two = [pod("a", "n1"), pod("b", "n1")];
    assert!(c.cordons(0, &nodes, &two, &BTreeSet::new()).is_none());
    assert!(
        c.cordons(300, &nodes, &two[1..], &BTreeSet::new())
            .is_none(),
        "a pod left"
    );
    assert!(c
        .cordons(900, &nodes, &two[1..], &BTreeSet::new())
        .is_none());
    let broke = c.cordons(901, &nodes, &two[1..], &BTreeSet::new()).unwrap();
    assert!(broke.contains("n1") && broke.contains("601 s"), "{broke}");
}

#[tokio::test]
async fn a_node_terminating_fifteen_minutes_breaks() {
    let mut c = chaos();
    let mut n = node("n1", "i-1");
    n["metadata"]["deletionTimestamp"] = json!("2026-11-22T10:00:00Z");
    n["metadata"]["finalizers"] = json!(["karpenter.sh/termination"]);
    let nodes = [n];
    assert!(c.terminating(10, &nodes, &BTreeSet::new()).is_none());
    assert!(c.terminating(910, &nodes, &BTreeSet::new()).is_none());
    assert!(c
        .terminating(911, &nodes, &BTreeSet::new())
        .unwrap()
        .contains("Terminating 901 s"));
}

/// A pool's CPU limit counts its instances; a NodeClaim launched whose instance is not listed
/// yet counts with its recorded capacity.
#[tokio::test]
async fn a_pool_over_its_cpu_limit_counting_nodeclaims_in_flight_breaks() {
    let c = chaos();
    let pools = [json!({"metadata": {"name": "web"}, "spec": {"limits": {"cpu": "4"}}})];
    let (a, b) = (instance("i-1", "m6i.large"), instance("i-2", "m6i.large"));
    let (ia, ib) = ("i-1".to_string(), "i-2".to_string());
    let owned: Owned = [(&ia, &a), (&ib, &b)].into();
    assert!(c.limits(&owned, &[], &pools).is_none(), "4 CPU");
    let in_flight = json!({"metadata": {"name": "web-9", "labels": {NODEPOOL: "web"}},
        "status": {"capacity": {"cpu": "2"}}});
    let broke = c.limits(&owned, &[in_flight], &pools).unwrap();
    assert!(broke.contains("6000m"), "{broke}");
}

#[tokio::test]
async fn a_nodeclaim_planned_only_into_zones_without_a_subnet_breaks() {
    let c = chaos();
    let claim = |zones: Value| {
        json!({"metadata": {"name": "web-1"}, "spec": {"nodeClassRef": {"name": "default"},
            "requirements": [{"key": ZONE, "operator": "In", "values": zones}]}})
    };
    assert!(c
        .zones(&[claim(json!(["us-east-1a", "us-east-1d"]))])
        .is_none());
    let broke = c.zones(&[claim(json!(["us-east-1d"]))]).unwrap();
    assert!(broke.contains("us-east-1d"), "{broke}");
}

/// While a malformed object is applied, a pod may wait 4 minutes; a pod the last tick called
/// unschedulable is left out.
#[tokio::test]
async fn a_pod_pending_while_a_pool_is_broken_breaks_after_four_minutes() {
    let mut c = chaos();
    c.broken.push(json!({"kind": "NodePool"}));
    c.seen.broken_since = Some(60);
    let waiting = [json!({"metadata": {"name": "p", "namespace": "shop",
        "creationTimestamp": "2026-11-22T10:00:00Z"}, "spec": {}, "status": {"phase": "Pending"}})];
    assert!(c.pending(300, &waiting, &[]).is_none());
    assert!(c.pending(301, &waiting, &[]).unwrap().contains("malformed"));
    c.unschedulable.insert("shop/p".into());
    assert!(c.pending(301, &waiting, &[]).is_none());
    assert!(c
        .pending(CHAOS_END + LEASE_SECONDS + 181, &[], &[])
        .is_none());
}

/// When a limit binds, which replicas stay pending is the scheduler's choice: as many pods of
/// a workload as the tick named unschedulable are excused, whichever they are, and no more.
#[tokio::test]
async fn as_many_replicas_as_the_tick_named_unschedulable_may_wait() {
    let mut c = chaos();
    let pod = |name: &str| {
        json!({"metadata": {"name": name, "namespace": "jobs",
            "creationTimestamp": "2026-11-22T10:00:00Z"}, "spec": {}, "status": {"phase": "Pending"}})
    };
    c.unschedulable.insert("jobs/batch-7f9-aaaaa".into());
    let at = CHAOS_END + LEASE_SECONDS + 181;
    assert!(c.pending(at, &[pod("batch-7f9-bbbbb")], &[]).is_none());
    let two = [pod("batch-7f9-bbbbb"), pod("batch-7f9-ccccc")];
    assert!(c
        .pending(at, &two, &[])
        .unwrap()
        .contains("batch-7f9-ccccc"));
}

/// A node that registered and never initializes may hold pods until the product's
/// initialization grace has run out and a tick has passed; pending time counts from then, and
/// only while that node is there.
#[tokio::test]
async fn a_node_that_never_initializes_holds_pods_for_the_products_grace_only() {
    let mut c = chaos();
    c.sim.cluster.never_ready.insert("i-0stuck".into());
    let node = json!({"metadata": {"name": "n-stuck", "creationTimestamp": "2026-11-22T10:09:00Z"},
        "spec": {"providerID": "aws:///us-east-1a/i-0stuck"}});
    let waiting = [json!({"metadata": {"name": "p", "namespace": "shop",
        "creationTimestamp": "2026-11-22T10:09:00Z"}, "spec": {}, "status": {"phase": "Pending"}})];
    let grace = fleetwright_core::scheduler::INITIALIZATION_GRACE + 60;
    let from = 9 * 60 + grace;
    assert!(c
        .pending(from + 180, &waiting, std::slice::from_ref(&node))
        .is_none());
    let broke = c.pending(from + 181, &waiting, &[node]).unwrap();
    assert!(broke.contains("since the faults stopped"), "{broke}");
    assert!(c.pending(9 * 60 + 181, &waiting, &[]).is_some());
}

#[test]
fn budgets_allow_the_fewest_nodes_rounded_up_and_a_schedule_leaves_the_pool_out() {
    let pool = |budgets: Value| json!({"spec": {"disruption": {"budgets": budgets}}});
    assert_eq!(
        allowed_disruptions(&pool(json!([{"nodes": "2"}])), 9),
        Some(2)
    );
    assert_eq!(
        allowed_disruptions(&pool(json!([{"nodes": "20%"}, {"nodes": "3"}])), 6),
        Some(2)
    );
    assert_eq!(allowed_disruptions(&json!({"spec": {}}), 11), Some(2));
    assert_eq!(
        allowed_disruptions(
            &pool(json!([{"nodes": "0", "schedule": "@daily", "duration": "1h"}])),
            4
        ),
        None
    );
}

#[test]
fn a_node_is_cordoned_by_the_disrupted_taint_or_unschedulable() {
    assert!(cordoned(&json!({"spec": {"unschedulable": true}})));
    assert!(cordoned(
        &json!({"spec": {"taints": [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]}})
    ));
    assert!(!cordoned(&json!({"spec": {"taints": []}})));
}

/// A node whose pods left are all do-not-disrupt is waited for, as Karpenter waits for them.
#[tokio::test]
async fn a_node_held_only_by_do_not_disrupt_pods_is_left_out_of_the_cordon_checks() {
    let mut c = chaos();
    c.sim
        .cloud
        .adopt(instance("i-1", "m6i.large").instance, 0.1);
    let mut n = node("n1", "i-1");
    n["spec"]["unschedulable"] = json!(true);
    n["metadata"]["deletionTimestamp"] = json!("2026-11-22T10:00:00Z");
    let nodes = [n];
    let mut pinned = pod("a", "n1");
    pinned["metadata"]["annotations"] = json!({DO_NOT_DISRUPT: "true"});
    let pods = [pinned];
    let waiting = waiting_for_protected(&pods, &[], &[]);
    assert!(c.cordons(0, &nodes, &pods, &waiting).is_none());
    assert!(c.terminating(0, &nodes, &waiting).is_none());
    assert!(c.cordons(2000, &nodes, &pods, &waiting).is_none());
    assert!(c.terminating(2000, &nodes, &waiting).is_none());
    let other = [pod("b", "n1")];
    let waiting = waiting_for_protected(&other, &[], &[]);
    assert!(c.cordons(2001, &nodes, &other, &waiting).is_none());
    assert!(c.cordons(2602, &nodes, &other, &waiting).is_some());
}

/// A pod two PodDisruptionBudgets cover is refused by the Eviction API for as long as they do,
/// and Karpenter waits for it: its node is left out while they do, and only while, and only
/// when its NodeClaim is being deleted with no `terminationGracePeriod` to end the drain.
#[test]
fn a_node_held_by_a_pod_two_budgets_cover_is_waited_for() {
    let budget = |name: &str| {
        json!({"metadata": {"name": name, "namespace": "shop"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}}})
    };
    let claim = |grace: Value| {
        json!({"metadata": {"name": "c1", "deletionTimestamp": "2026-11-22T10:00:00Z"},
            "spec": {"terminationGracePeriod": grace}, "status": {"nodeName": "n1"}})
    };
    let mut covered = pod("a", "n1");
    covered["metadata"]["labels"] = json!({"app": "web"});
    let pods = [covered];
    let both = [budget("web"), budget("overlap")];
    let deleted = [claim(Value::Null)];
    assert!(waiting_for_protected(&pods, &both, &deleted).contains("n1"));
    assert!(waiting_for_protected(&pods, &[budget("web")], &deleted).is_empty());
    assert!(waiting_for_protected(&pods, &both, &[claim(json!("10m"))]).is_empty());
    assert!(waiting_for_protected(&pods, &both, &[]).is_empty());
    let elsewhere = json!({"metadata": {"name": "x", "namespace": "other"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}}});
    assert!(waiting_for_protected(&pods, &[budget("web"), elsewhere], &deleted).is_empty());
}
