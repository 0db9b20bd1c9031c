use super::*;
use std::collections::BTreeMap;

fn pod(name: &str, app: &str, node: &str) -> Value {
    json!({"metadata": {"name": name, "namespace": "shop", "labels": {"app": app}},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 20},
            "status": {"phase": if node.is_empty() { "Pending" } else { "Running" }}})
}

fn budget(name: &str, app: &str) -> Value {
    json!({"metadata": {"name": name, "namespace": "shop"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": app}}}})
}

fn state(pods: Vec<Value>, budgets: Vec<Value>, graceful: bool) -> State {
    let mut objects = BTreeMap::new();
    objects.insert(PODS.to_string(), pods);
    objects.insert(budget::BUDGETS.to_string(), budgets);
    State {
        objects,
        graceful_pods: graceful,
        now: Some("2026-11-22T10:00:00Z".into()),
        ..Default::default()
    }
}

#[test]
fn a_pod_two_budgets_select_is_refused_with_500_as_the_api_server_does() {
    for graceful in [false, true] {
        let mut s = state(
            vec![pod("a", "api", "n1"), pod("b", "api", "n1")],
            vec![budget("one", "api"), budget("two", "api")],
            graceful,
        );
        let r = evict(&mut s, "shop", "a", &Value::Null);
        assert_eq!(r.status, 500, "{r:?}");
        assert_eq!(r.body["message"], MULTIPLE_BUDGETS);
        assert!(s.evicted.is_empty());
    }
}

#[test]
fn a_graceful_eviction_leaves_the_pod_terminating_until_its_grace_and_updates_the_budget() {
    let mut s = state(
        vec![pod("a", "api", "n1"), pod("b", "api", "n1")],
        vec![budget("one", "api")],
        true,
    );
    assert_eq!(evict(&mut s, "shop", "a", &Value::Null).status, 201);
    let a = &s.objects[PODS][0];
    assert_eq!(a["metadata"]["deletionTimestamp"], "2026-11-22T10:00:20Z");
    assert_eq!(a["metadata"]["deletionGracePeriodSeconds"], 20);
    let b = &s.objects[budget::BUDGETS][0];
    assert_eq!(b["status"]["disruptionsAllowed"], 0, "{b}");
    assert_eq!(evict(&mut s, "shop", "b", &Value::Null).status, 429);
    // Evicting a pod already being deleted asks no budget.
    assert_eq!(evict(&mut s, "shop", "a", &Value::Null).status, 201);
    // The kubelet's final delete removes it.
    assert_eq!(
        delete(&mut s, "shop", "a", "gracePeriodSeconds=0", &Value::Null).status,
        200
    );
    assert_eq!(s.objects[PODS].len(), 1);
    assert_eq!(evict(&mut s, "shop", "gone", &Value::Null).status, 404);
}

#[test]
fn a_graceful_delete_of_a_running_pod_waits_and_an_unbound_pod_goes_at_once() {
    let mut s = state(
        vec![pod("a", "api", "n1"), pod("p", "api", "")],
        Vec::new(),
        true,
    );
    assert_eq!(delete(&mut s, "shop", "a", "", &Value::Null).status, 200);
    assert_eq!(s.objects[PODS].len(), 2);
    assert!(!s.objects[PODS][0]["metadata"]["deletionTimestamp"].is_null());
    assert_eq!(delete(&mut s, "shop", "p", "", &Value::Null).status, 200);
    assert_eq!(s.objects[PODS].len(), 1);
    let mut old = state(vec![pod("a", "api", "n1")], Vec::new(), false);
    assert_eq!(delete(&mut old, "shop", "a", "", &Value::Null).status, 200);
    assert!(
        old.objects[PODS].is_empty(),
        "without graceful pods, at once"
    );
}

#[test]
fn a_delete_honours_its_grace_and_its_uid_precondition() {
    let mut s = state(vec![pod("a", "api", "n1")], Vec::new(), true);
    s.objects.get_mut(PODS).unwrap()[0]["metadata"]["uid"] = json!("uid-a");
    let other = json!({"preconditions": {"uid": "uid-earlier-a"}});
    assert_eq!(delete(&mut s, "shop", "a", "", &other).status, 409);
    assert!(s.objects[PODS][0]["metadata"]["deletionTimestamp"].is_null());
    let options = json!({"gracePeriodSeconds": 7, "preconditions": {"uid": "uid-a"}});
    assert_eq!(delete(&mut s, "shop", "a", "", &options).status, 200);
    assert_eq!(
        s.objects[PODS][0]["metadata"]["deletionGracePeriodSeconds"],
        7
    );
}

/// An eviction with a UID precondition evicts only that pod: one recreated under its name is
/// another pod, and the request is answered 409.
#[test]
fn an_eviction_honours_its_uid_precondition() {
    let mut s = state(vec![pod("a", "api", "n1")], Vec::new(), true);
    s.objects.get_mut(PODS).unwrap()[0]["metadata"]["uid"] = json!("uid-a");
    let earlier = json!({"preconditions": {"uid": "uid-earlier-a"}});
    assert_eq!(evict(&mut s, "shop", "a", &earlier).status, 409);
    assert!(s.evicted.is_empty());
    let this = json!({"preconditions": {"uid": "uid-a"}});
    assert_eq!(evict(&mut s, "shop", "a", &this).status, 201);
    assert_eq!(s.evicted, ["shop/a"]);
}
