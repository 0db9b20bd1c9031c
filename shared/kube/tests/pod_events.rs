//! A node's last pod event, which `consolidateAfter` counts from, as Karpenter's pod events
//! define it: a pod bound (its `PodScheduled` time, not its creation), a pod that began to leave,
//! a pod that finished, and a pod gone between two reads (seen through the NodeClaim's record);
//! DaemonSet pods never count.

use fleetwright_kube::convert::pod_events::{
    departure, last_pod_event, pods_by_node, record_due, PodSet, Record, PODS_ANNOTATION,
};
use fleetwright_kube::convert::take_snapshot_isolating;
use fleetwright_kube::dump::{parse, ClusterDump};

const NODE_CREATED: &str = "2026-11-27T00:00:00Z";
const NODE_CREATED_S: i64 = 1_795_737_600;

fn node() -> String {
    format!(
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n  creationTimestamp: \"{NODE_CREATED}\"\n  labels: {{node.kubernetes.io/instance-type: m5.large}}\nstatus:\n  allocatable: {{cpu: \"2\", memory: 8Gi, pods: \"29\"}}\n"
    )
}

fn claim(record: Option<&str>, last: Option<&str>) -> String {
    let annotations = record
        .map(|r| format!("  annotations: {{{PODS_ANNOTATION}: \"{r}\"}}\n"))
        .unwrap_or_default();
    let last = last
        .map(|t| format!("  lastPodEventTime: \"{t}\"\n"))
        .unwrap_or_default();
    format!(
        "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata:\n  name: c1\n{annotations}spec:\n  nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}\n  requirements: []\nstatus:\n  nodeName: n1\n{last}"
    )
}

/// A pod on n1, created at `created` and bound at `scheduled`; `extra` lands under metadata.
fn pod(name: &str, created: &str, scheduled: &str, extra: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\n  creationTimestamp: \"{created}\"\n{extra}spec:\n  nodeName: n1\n  containers: [{{name: c, image: pause}}]\nstatus:\n  phase: Running\n  conditions:\n  - {{type: PodScheduled, status: \"True\", lastTransitionTime: \"{scheduled}\"}}\n"
    )
}

fn dump(objects: &[String], observed_at: Option<i64>) -> ClusterDump {
    let mut dump = parse(&objects.join("---\n"), "test").unwrap();
    dump.observed_at = observed_at;
    dump
}

fn last_event(dump: &ClusterDump) -> i64 {
    // The NodeClaim here is only a record: whether it converts is beside the point.
    let (snapshot, _) = take_snapshot_isolating(&mut dump.clone());
    snapshot.nodes[0].last_pod_event
}

const T1: &str = "2026-11-27T00:05:00Z";
const T2: &str = "2026-11-27T00:10:00Z";
const T2_S: i64 = NODE_CREATED_S + 600;

#[test]
fn a_pods_binding_counts_not_its_creation() {
    let d = dump(&[node(), pod("a", T1, T2, "")], None);
    assert_eq!(last_event(&d), T2_S);
}

/// A record of `keys` made by a read at `read`, with `last` its last pod event then.
fn record(keys: &[&str], read: i64, last: i64) -> String {
    let set = PodSet::of(keys.iter().copied());
    Record {
        set,
        read,
        last: Some(last),
    }
    .text()
}

const T1_S: i64 = NODE_CREATED_S + 300;

#[test]
fn a_node_that_never_held_a_pod_counts_from_its_creation() {
    let d = dump(&[node(), claim(None, None)], Some(T2_S + 3600));
    assert_eq!(last_event(&d), NODE_CREATED_S);
    let claim = &d.nodeclaims[0];
    assert_eq!(record_due(claim, None, T2_S + 3600), None, "no record");
}

#[test]
fn a_pod_gone_between_reads_counts_at_the_read_that_missed_it() {
    let two = record(&["default/a", "default/b"], T2_S, T1_S);
    let read_at = T2_S + 3600;
    let d = dump(
        &[node(), claim(Some(&two), None), pod("a", T1, T1, "")],
        Some(read_at),
    );
    assert_eq!(last_event(&d), read_at, "b left since the record");
    let pods = pods_by_node(&d);
    let due = record_due(&d.nodeclaims[0], pods.get("n1"), read_at).unwrap();
    assert_eq!(due.set, PodSet::of(["default/a"]));
    assert_eq!((due.read, due.last), (read_at, Some(read_at)));
    assert!(departure(&d.nodeclaims[0], pods.get("n1")));
}

#[test]
fn a_pod_gone_while_more_came_still_counts_at_the_read() {
    let two = record(&["default/a", "default/b"], T1_S, T1_S);
    let read_at = T2_S + 3600;
    let d = dump(
        &[
            node(),
            claim(Some(&two), None),
            pod("a", T1, T1, ""),
            pod("c", T2, T2, ""),
            pod("d", T2, T2, ""),
        ],
        Some(read_at),
    );
    assert_eq!(last_event(&d), read_at, "b left, though two came");
}

#[test]
fn a_node_emptied_since_its_record_counts_at_the_read() {
    let one = record(&["default/a"], T1_S, T1_S);
    let read_at = T2_S + 60;
    let d = dump(&[node(), claim(Some(&one), None)], Some(read_at));
    assert_eq!(last_event(&d), read_at);
    // Without the instant of the read, the record's own time stands.
    let file = dump(&[node(), claim(Some(&one), None)], None);
    assert_eq!(last_event(&file), T1_S);
}

#[test]
fn a_record_that_still_holds_changes_nothing() {
    let one = record(&["default/a"], T1_S, T1_S);
    let d = dump(
        &[node(), claim(Some(&one), None), pod("a", T1, T1, "")],
        Some(T2_S + 3600),
    );
    assert_eq!(last_event(&d), T1_S);
    let pods = pods_by_node(&d);
    assert_eq!(
        record_due(&d.nodeclaims[0], pods.get("n1"), T2_S + 3600),
        None
    );
}

#[test]
fn a_new_pod_counts_at_its_binding_not_at_the_read() {
    let one = record(&["default/a"], T1_S, T1_S);
    let d = dump(
        &[
            node(),
            claim(Some(&one), None),
            pod("a", T1, T1, ""),
            pod("b", T2, T2, ""),
        ],
        Some(T2_S + 3600),
    );
    assert_eq!(last_event(&d), T2_S);
    let pods = pods_by_node(&d);
    assert!(!departure(&d.nodeclaims[0], pods.get("n1")));
}

#[test]
fn status_last_pod_event_time_counts_too() {
    let d = dump(&[node(), claim(None, Some(T2))], None);
    assert_eq!(last_event(&d), T2_S);
}

#[test]
fn a_terminating_pod_counts_from_the_start_of_its_deletion() {
    // Deleted at T2 + 10s with 30s of grace: the API server sets deletionTimestamp to +40s.
    let extra = "  deletionTimestamp: \"2026-11-27T00:10:40Z\"\n  deletionGracePeriodSeconds: 30\n";
    let d = dump(&[node(), pod("a", T1, T1, extra)], None);
    assert_eq!(last_event(&d), T2_S + 10);
    let pods = pods_by_node(&d);
    assert!(
        pods["n1"].staying.is_empty(),
        "a leaving pod is not recorded as staying"
    );
}

#[test]
fn daemonset_pods_never_count() {
    let owner =
        "  ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: agent, uid: u1}]\n";
    let d = dump(&[node(), pod("agent-x", T2, T2, owner)], None);
    assert_eq!(last_event(&d), NODE_CREATED_S);
    assert!(pods_by_node(&d).is_empty());
}

#[test]
fn records_ignore_order_and_round_trip_through_their_text() {
    let a = PodSet::of(["ns/a", "ns/b"]);
    assert_eq!(a, PodSet::of(["ns/b", "ns/a"]));
    assert_ne!(a, PodSet::of(["ns/a", "ns/c"]));
    let r = Record {
        set: a,
        read: 1_800_000_000,
        last: None,
    };
    assert_eq!(Record::parse(&r.text()), Some(r));
    assert_eq!(Record::parse("garbage"), None);
    assert_eq!(Record::parse("2-00ff-5-6-7"), None);
    assert_eq!(last_pod_event(None, None, Some(5)), None);
}

#[test]
fn a_node_that_never_held_a_pod_counts_from_its_initialization_as_karpenter_does() {
    let initialized = format!(
        "{}  conditions:\n  - {{type: Initialized, status: \"True\", lastTransitionTime: \"{T1}\"}}\n",
        claim(None, None)
    );
    let d = dump(&[node(), initialized], None);
    assert_eq!(last_event(&d), T1_S);
}

/// A pod bound a second after the read's instant (a read that began before it was bound, or
/// an API server's clock ahead of the tick's) is recorded as held, never taken for a newcomer:
/// otherwise every later read would find a "departure" and the node would never settle.
#[test]
fn a_pod_bound_after_the_reads_instant_is_never_taken_for_a_newcomer() {
    let bound = "2026-11-27T00:05:01Z";
    let first = dump(&[node(), claim(None, None), pod("a", T1, bound, "")], None);
    let pods = pods_by_node(&first);
    let due = record_due(&first.nodeclaims[0], pods.get("n1"), T1_S).unwrap();
    assert_eq!(due.read, T1_S + 1);
    let later = dump(
        &[
            node(),
            claim(Some(&due.text()), None),
            pod("a", T1, bound, ""),
        ],
        Some(T2_S),
    );
    let pods = pods_by_node(&later);
    assert!(!departure(&later.nodeclaims[0], pods.get("n1")));
    assert_eq!(record_due(&later.nodeclaims[0], pods.get("n1"), T2_S), None);
    assert_eq!(last_event(&later), T1_S + 1);
}

/// A pod deleted and created again under its name on the same node (a StatefulSet's) is one
/// pod gone and one come: the departure counts, and the record is made again so that the next
/// read does not find it again.
#[test]
fn a_pod_recreated_under_its_name_is_a_departure_once() {
    let old = pod("web-0", T1, T1, "  uid: u-old\n");
    let first = dump(&[node(), claim(None, None), old], None);
    let pods = pods_by_node(&first);
    let due = record_due(&first.nodeclaims[0], pods.get("n1"), T1_S).unwrap();
    let read_at = T2_S + 60;
    let new = || pod("web-0", T2, T2, "  uid: u-new\n");
    let later = dump(
        &[node(), claim(Some(&due.text()), None), new()],
        Some(read_at),
    );
    assert_eq!(last_event(&later), read_at);
    let pods = pods_by_node(&later);
    let again = record_due(&later.nodeclaims[0], pods.get("n1"), read_at).unwrap();
    let settled = dump(
        &[node(), claim(Some(&again.text()), None), new()],
        Some(read_at + 60),
    );
    let pods = pods_by_node(&settled);
    assert_eq!(
        record_due(&settled.nodeclaims[0], pods.get("n1"), read_at + 60),
        None
    );
    assert_eq!(last_event(&settled), read_at);
}

/// A pod of a file whose timestamp does not read stands in on its node with no time of its own:
/// the record it brings dates nothing, rather than the epoch.
#[test]
fn a_pod_that_did_not_read_dates_no_pod_event() {
    let unread = pod("a", "not a time", T1, "");
    let d = dump(&[node(), claim(None, None), unread], Some(T2_S));
    let pods = pods_by_node(&d);
    assert_eq!(pods.get("n1").map(|p| p.set().count), Some(1));
    let due = record_due(&d.nodeclaims[0], pods.get("n1"), T2_S).unwrap();
    assert_eq!(due.last, None);
}
