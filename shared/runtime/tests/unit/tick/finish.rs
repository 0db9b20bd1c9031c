use super::*;
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

const NOW: &str = "2026-11-26T12:00:00Z";

fn now() -> DateTime<Utc> {
    NOW.parse().unwrap()
}

fn pod(name: &str, grace: Option<i64>) -> Pod {
    serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "shop", "uid": format!("uid-{name}")},
            "spec": {"nodeName": "node-a", "containers": [], "terminationGracePeriodSeconds": grace},
            "status": {"phase": "Running"}}))
        .unwrap()
}

fn names(pods: &[Pod]) -> Vec<&str> {
    pods.iter()
        .filter_map(|p| p.metadata.name.as_deref())
        .collect()
}

/// A NodeClaim deleted at `deleted` with this `terminationGracePeriod`, and its cordoned node.
fn deleting(deleted: &str, grace: &str) -> (NodeClaim, Node) {
    let claim = serde_json::from_value(json!({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "default-a", "finalizers": ["karpenter.sh/termination"],
                "deletionTimestamp": deleted, "labels": {"karpenter.sh/nodepool": "default"}},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                     "requirements": [], "terminationGracePeriod": grace},
            "status": {"nodeName": "node-a"}}))
        .unwrap();
    let node = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "node-a"},
            "spec": {"taints": [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]}}))
    .unwrap();
    (claim, node)
}

#[test]
fn a_pod_is_due_once_its_own_grace_would_run_past_the_deadline() {
    let deadline = now() + Duration::seconds(60);
    let mut leaving = pod("leaving", Some(600));
    leaving.metadata.deletion_timestamp = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(NOW.parse().unwrap()),
    );
    let pods = vec![
        pod("slow", Some(120)),
        pod("quick", Some(30)),
        pod("default", None),
        pod("exact", Some(60)),
        leaving,
    ];
    let (due, rest) = super::super::shutdown::due_before(pods.clone(), Some(deadline), now());
    let due = due.unwrap();
    assert_eq!(names(&due.pods), ["slow", "exact"]);
    assert_eq!(due.grace_seconds, 60);
    assert_eq!(names(&rest), ["quick", "default", "leaving"]);

    let (due, rest) = super::super::shutdown::due_before(pods.clone(), None, now());
    assert!(due.is_none());
    assert_eq!(rest.len(), 5);

    // A grace too long to count back from the deadline (the API server bounds it by nothing)
    // is due at once, and stops nothing.
    let huge = vec![
        pod("forever", Some(i64::MAX)),
        pod("long", Some(9_000_000_000_000)),
    ];
    let (due, _) = super::super::shutdown::due_before(huge.clone(), Some(deadline), now());
    assert_eq!(names(&due.unwrap().pods), ["forever", "long"]);
    assert_eq!(
        super::super::shutdown::next_due(&huge, Some(deadline), now()),
        Some(Duration::seconds(60))
    );

    // Past the deadline, what is left still gets a second, never a removal from etcd.
    let (due, _) =
        super::super::shutdown::due_before(pods, Some(now() - Duration::seconds(5)), now());
    assert_eq!(due.unwrap().grace_seconds, 1);
}

#[test]
fn a_deleting_nodeclaim_deletes_pods_early_and_evicts_the_others() {
    let (claim, node) = deleting("2026-11-26T11:51:00Z", "10m");
    let dump = ClusterDump {
        nodes: vec![node],
        pods: vec![pod("slow", Some(120)), pod("quick", Some(30))],
        ..Default::default()
    };
    // Deleted 9 minutes ago with 10 to go: 60 s are left, less than the slow pod's 120.
    let actions = deletions(&dump, &[claim], &BTreeSet::new(), now());
    let deleted = actions.iter().find_map(|a| match a {
        Action::DeletePods {
            pods,
            grace_seconds,
            ..
        } => Some((names(pods), *grace_seconds)),
        _ => None,
    });
    assert_eq!(deleted, Some((vec!["slow"], Some(60))));
    let evicted = actions.iter().find_map(|a| match a {
        Action::EvictForDeletion { pods, .. } => Some(names(pods)),
        _ => None,
    });
    assert_eq!(evicted, Some(vec!["quick"]));
    assert!(!actions
        .iter()
        .any(|a| matches!(a, Action::FinishDeletion { .. })));
}

/// A deleting NodeClaim's `do-not-disrupt` pod is never sent to the Eviction API, and the
/// instance waits for it; one whose duration is over is evicted like the rest.
#[test]
fn a_deleting_nodeclaim_holds_its_do_not_disrupt_pods_apart() {
    let (claim, node) = deleting("2026-11-26T11:55:00Z", "1h");
    let annotated = |name: &str, value: &str, started: &str| {
        let mut p = pod(name, Some(30));
        p.metadata.annotations =
            Some([("karpenter.sh/do-not-disrupt".to_string(), value.to_string())].into());
        p.status.get_or_insert_with(Default::default).start_time = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(started.parse().unwrap()),
        );
        p
    };
    let dump = ClusterDump {
        nodes: vec![node],
        pods: vec![
            pod("web", Some(30)),
            annotated("keep", "true", "2026-11-26T10:00:00Z"),
            annotated("over", "10m", "2026-11-26T11:00:00Z"),
            annotated("fresh", "10m", "2026-11-26T11:58:00Z"),
        ],
        ..Default::default()
    };
    let actions = deletions(&dump, &[claim], &BTreeSet::new(), now());
    let evict = actions.iter().find_map(|a| match a {
        Action::EvictForDeletion { pods, held, .. } => Some((names(pods), names(held))),
        _ => None,
    });
    assert_eq!(evict, Some((vec!["web", "over"], vec!["keep", "fresh"])));
    assert!(!actions
        .iter()
        .any(|a| matches!(a, Action::FinishDeletion { .. })));
    let shown = actions
        .iter()
        .find(|a| matches!(a, Action::EvictForDeletion { .. }))
        .map(|a| serde_json::to_value(a).unwrap())
        .unwrap();
    assert_eq!(shown["pods"], json!(["shop/web", "shop/over"]));
    assert_eq!(shown["held"], json!(["shop/keep", "shop/fresh"]));
}

/// Evictions that keep failing with errors (a webhook denies them, say) do not hold the node for
/// good: a pod whose own evictions have failed for [`EVICTION_FAILING`] is given up on (deleted
/// with its own grace if its eviction fails so again in this pass). A pod a PodDisruptionBudget
/// covers is not, even when its evictions fail with errors (its protection ends only at a
/// deadline), nor one that started failing lately, nor a `do-not-disrupt` pod; and the instance
/// waits.
#[test]
fn failing_evictions_give_up_only_on_the_pods_that_fail() {
    let (mut claim, node) = deleting("2026-11-26T11:00:00Z", "");
    claim.spec.termination_grace_period = None;
    // `again` failed long ago as another pod of the same name: that record is not its own.
    let record = json!({"shop/web@uid-web": "2026-11-26T11:50:00Z",
        "shop/guarded@uid-guarded": "2026-11-26T11:54:00Z", "shop/keep@uid-keep": "2026-11-26T11:50:00Z",
        "shop/lately@uid-lately": "2026-11-26T11:58:00Z", "shop/again@uid-old": "2026-11-26T11:00:00Z"});
    claim.metadata.annotations =
        Some([(EVICTION_FAILING_ANNOTATION.to_string(), record.to_string())].into());
    let mut kept = pod("keep", Some(30));
    kept.metadata.annotations = Some(
        [(
            "karpenter.sh/do-not-disrupt".to_string(),
            "true".to_string(),
        )]
        .into(),
    );
    let mut guarded = pod("guarded", Some(30));
    guarded.metadata.labels = Some([("app".to_string(), "db".to_string())].into());
    let mut refused = pod("refused", Some(30));
    refused.metadata.labels = guarded.metadata.labels.clone();
    let pdb: k8s_openapi::api::policy::v1::PodDisruptionBudget = serde_json::from_value(json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "db", "namespace": "shop"},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "db"}}}}))
    .unwrap();
    let dump = ClusterDump {
        nodes: vec![node],
        pods: vec![
            pod("web", Some(30)),
            kept,
            guarded,
            refused,
            pod("lately", Some(30)),
            pod("again", Some(30)),
        ],
        pdbs: vec![pdb],
        ..Default::default()
    };
    let actions = deletions(&dump, &[claim.clone()], &BTreeSet::new(), now());
    assert!(!actions
        .iter()
        .any(|a| matches!(a, Action::DeletePods { .. } | Action::FinishDeletion { .. })));
    let evict = actions.iter().find_map(|a| match a {
        Action::EvictForDeletion {
            pods,
            held,
            given_up,
            ..
        } => Some((names(pods), names(held), given_up.clone())),
        _ => None,
    });
    let (pods, held, given_up) = evict.unwrap();
    assert_eq!(pods, ["web", "guarded", "refused", "lately", "again"]);
    assert_eq!(held, ["keep"]);
    assert_eq!(given_up, ["shop/web"]);
    let shown = actions
        .iter()
        .find(|a| matches!(a, Action::EvictForDeletion { .. }))
        .map(|a| serde_json::to_value(a).unwrap())
        .unwrap();
    assert_eq!(shown["givenUp"], json!(["shop/web"]));

    // With nothing left, the instance goes.
    let gone = ClusterDump {
        pods: Vec::new(),
        ..dump
    };
    let finishes = |a: &[Action]| a.iter().any(|a| matches!(a, Action::FinishDeletion { .. }));
    assert!(finishes(&deletions(
        &gone,
        &[claim],
        &BTreeSet::new(),
        now()
    )));
}

/// The record of failing evictions keeps each pod's first failure while it goes on failing,
/// starts a new one now, forgets a pod that did not fail, and is removed once none fails.
#[test]
fn the_failing_evictions_record_is_kept_per_pod() {
    let (mut claim, _) = deleting("2026-11-26T11:00:00Z", "");
    let first = next_failing_evictions(&claim, &["shop/a".into()], now()).unwrap();
    assert_eq!(failing_key(&pod("x", None)), "shop/x@uid-x");
    assert_eq!(
        first.as_deref(),
        Some(r#"{"shop/a":"2026-11-26T12:00:00Z"}"#)
    );
    claim.metadata.annotations =
        Some([(EVICTION_FAILING_ANNOTATION.to_string(), first.unwrap())].into());
    let later = now() + chrono::Duration::minutes(2);
    assert_eq!(
        next_failing_evictions(&claim, &["shop/a".into()], later),
        None
    );
    let both = next_failing_evictions(&claim, &["shop/b".into(), "shop/a".into()], later);
    assert_eq!(
        both.unwrap().as_deref(),
        Some(r#"{"shop/a":"2026-11-26T12:00:00Z","shop/b":"2026-11-26T12:02:00Z"}"#)
    );
    assert_eq!(
        next_failing_evictions(&claim, &["shop/b".into()], later)
            .unwrap()
            .as_deref(),
        Some(r#"{"shop/b":"2026-11-26T12:02:00Z"}"#)
    );
    assert_eq!(next_failing_evictions(&claim, &[], later), Some(None));
    claim.metadata.annotations = Some(
        [(
            EVICTION_FAILING_ANNOTATION.to_string(),
            "2026-11-26T11:50:00Z".into(),
        )]
        .into(),
    );
    assert_eq!(next_failing_evictions(&claim, &[], later), Some(None));
    assert!(failing_evictions(&claim).is_empty());
}

/// A pod that tolerates `karpenter.sh/disrupted` would come back to the node it is evicted from:
/// the drain leaves it, and the instance does not wait for it (Karpenter's `IsWaitingEviction`),
/// so a deleting NodeClaim with no `terminationGracePeriod` is not held for good.
#[test]
fn a_pod_tolerating_the_disrupted_taint_does_not_hold_a_deletion() {
    let (mut claim, node) = deleting("2026-11-26T11:00:00Z", "");
    claim.spec.termination_grace_period = None;
    let mut everywhere = pod("everywhere", Some(30));
    everywhere.spec.as_mut().unwrap().tolerations =
        Some(vec![
            serde_json::from_value(json!({"operator": "Exists"})).unwrap()
        ]);
    let dump = ClusterDump {
        nodes: vec![node],
        pods: vec![everywhere],
        ..Default::default()
    };
    let actions = deletions(&dump, &[claim], &BTreeSet::new(), now());
    assert!(
        actions
            .iter()
            .any(|a| matches!(a, Action::FinishDeletion { .. })),
        "{actions:?}"
    );
    assert!(!actions.iter().any(|a| matches!(
        a,
        Action::EvictForDeletion { .. } | Action::DeletePods { .. }
    )));
}
