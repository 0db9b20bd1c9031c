//! Which NodeClaims get their pod record written in a tick: only those of the NodePools read,
//! not being deleted, with a node, whose record no longer holds; departures first; at most
//! `MAX_RECORDS_PER_TICK`; and the status copy only when it changes.

use fleetwright_kube::convert::pod_events::{PodSet, Record, PODS_ANNOTATION};
use fleetwright_kube::dump::{parse, ClusterDump};
use fleetwright_runtime::tick::action::Action;
use fleetwright_runtime::tick::pod_records::{pod_records, MAX_RECORDS_PER_TICK};

const READ: i64 = 1_795_740_000;

fn claim(name: &str, pool: &str, node: &str, record: Option<String>, extra: &str) -> String {
    let annotations = record
        .map(|r| format!("  annotations: {{{PODS_ANNOTATION}: \"{r}\"}}\n"))
        .unwrap_or_default();
    format!(
        "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata:\n  name: {name}\n  labels: {{karpenter.sh/nodepool: {pool}}}\n{extra}{annotations}spec:\n  nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}\n  requirements: []\nstatus:\n  nodeName: {node}\n"
    )
}

fn pod(name: &str, node: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\n  creationTimestamp: \"2026-11-27T00:00:00Z\"\nspec:\n  nodeName: {node}\n  containers: [{{name: c, image: pause}}]\nstatus:\n  phase: Running\n"
    )
}

const POOL: &str = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: web\nspec:\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n      requirements: []\n";

fn dump(objects: &[String]) -> ClusterDump {
    parse(&objects.join("---\n"), "test").unwrap()
}

fn records(dump: &ClusterDump) -> Vec<(String, bool)> {
    let claims = dump.nodeclaims.clone();
    match pod_records(dump, &claims, READ).as_slice() {
        [] => Vec::new(),
        [Action::PodRecords { records }] => records
            .iter()
            .map(|r| (r.nodeclaim.clone(), r.last_pod_event.is_some()))
            .collect(),
        other => panic!("one PodRecords action, not {other:?}"),
    }
}

#[test]
fn only_the_pools_read_live_claims_with_a_changed_record() {
    let held = Record {
        set: PodSet::of(["default/b"]),
        read: READ - 60,
        last: Some(READ - 60),
    }
    .text();
    let deleting =
        "  deletionTimestamp: \"2026-11-27T00:00:00Z\"\n  finalizers: [karpenter.sh/termination]\n";
    let d = dump(&[
        POOL.to_string(),
        claim("new-pods", "web", "n1", None, ""),
        claim("holds", "web", "n2", Some(held), ""),
        claim("other-pool", "karpenters", "n3", None, ""),
        claim("deleting", "web", "n4", None, deleting),
        claim("never-held", "web", "n5", None, ""),
        pod("a", "n1"),
        pod("b", "n2"),
        pod("c", "n3"),
        pod("d", "n4"),
    ]);
    let names: Vec<String> = records(&d).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["new-pods"]);
}

#[test]
fn departures_go_first_and_a_tick_writes_at_most_its_cap() {
    let mut objects = vec![POOL.to_string()];
    for i in 0..MAX_RECORDS_PER_TICK + 10 {
        let node = format!("new-{i}");
        objects.push(claim(&format!("c-{i:04}"), "web", &node, None, ""));
        objects.push(pod(&format!("p-{i}"), &node));
    }
    let left = Record {
        set: PodSet::of(["default/gone"]),
        read: READ - 60,
        last: Some(READ - 60),
    }
    .text();
    objects.push(claim("z-emptied", "web", "emptied", Some(left), ""));
    let written = records(&dump(&objects));
    assert_eq!(written.len(), MAX_RECORDS_PER_TICK);
    assert_eq!(
        written[0],
        ("z-emptied".to_string(), true),
        "the departure first, with its time"
    );
    assert_eq!(written[1].0, "c-0000", "then the NodeClaims' own order");
}
