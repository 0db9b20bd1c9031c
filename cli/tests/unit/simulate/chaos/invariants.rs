use super::*;
use fleetwright_sim::ZONES;
use serde_json::json;

fn instance(id: &str, nodeclaim: &str) -> fleetwright_sim::SimInstance {
    let mut tags = BTreeMap::new();
    tags.insert("karpenter.sh/nodeclaim".to_string(), nodeclaim.to_string());
    fleetwright_sim::SimInstance {
        instance: fleetwright_cloud::Instance {
            id: id.into(),
            instance_type: "m6i.large".into(),
            zone: ZONES[0].into(),
            state: "running".into(),
            capacity_type: "spot".into(),
            image_id: String::new(),
            subnet_id: String::new(),
            security_groups: Vec::new(),
            launch_time: None,
            tags,
            capacity_reservation_id: None,
            partition: None,
        },
        price: 0.1,
        warned: None,
    }
}

#[test]
fn an_instance_without_a_nodeclaim_breaks_after_its_grace_and_a_tick() {
    let mut seen = Invariants::default();
    let i = instance("i-1", "web-1");
    let id = "i-1".to_string();
    let owned: BTreeMap<&String, &fleetwright_sim::SimInstance> = [(&id, &i)].into();
    let limit = unclaimed_grace() + TICK_PERIOD;
    assert_eq!(limit, 90);
    assert!(seen.pairs(0, &owned, &[]).is_none());
    assert!(seen.pairs(limit, &owned, &[]).is_none());
    let broken = seen.pairs(limit + 1, &owned, &[]).unwrap();
    assert!(broken.contains("i-1"), "{broken}");
    let claim =
        json!({"metadata": {"name": "web-1"}, "status": {"providerID": "aws:///us-east-1a/i-1"}});
    assert!(seen
        .pairs(limit + 2, &owned, std::slice::from_ref(&claim))
        .is_none());
    // The claim outlives its instance: the listing's grace and a tick.
    let none = BTreeMap::new();
    assert!(seen
        .pairs(1000, &none, std::slice::from_ref(&claim))
        .is_none());
    assert!(seen
        .pairs(1000 + 120, &none, std::slice::from_ref(&claim))
        .is_none());
    assert!(seen
        .pairs(1000 + 121, &none, &[claim])
        .unwrap()
        .contains("web-1"));
}

#[test]
fn a_tick_that_did_not_finish_extends_the_allowance_by_a_period() {
    let mut seen = Invariants::default();
    let i = instance("i-1", "web-1");
    let id = "i-1".to_string();
    let owned: BTreeMap<&String, &fleetwright_sim::SimInstance> = [(&id, &i)].into();
    assert!(seen.pairs(0, &owned, &[]).is_none());
    seen.failed_ticks.push(60);
    assert!(seen.pairs(150, &owned, &[]).is_none());
    assert!(seen.pairs(151, &owned, &[]).is_some());
    // An action that fails on every tick still breaks it, after a few periods.
    seen.failed_ticks.extend((1..20).map(|i| i * 60));
    let most = unclaimed_grace() + TICK_PERIOD * (1 + MAX_EXTRA_PERIODS);
    assert_eq!(seen.allowance(0, 2000, unclaimed_grace()), most);
}

#[test]
fn a_launch_being_recorded_pairs_by_tag_and_a_claim_never_launched_breaks() {
    let mut seen = Invariants::default();
    let i = instance("i-1", "web-1");
    let id = "i-1".to_string();
    let owned: BTreeMap<&String, &fleetwright_sim::SimInstance> = [(&id, &i)].into();
    let recording = json!({"metadata": {"name": "web-1"}});
    let never = json!({"metadata": {"name": "web-2"}});
    let claims = [recording, never];
    assert!(seen.pairs(0, &owned, &claims).is_none());
    assert!(seen.pairs(240, &owned, &claims).is_none());
    let broken = seen.pairs(241, &owned, &claims).unwrap();
    assert!(broken.contains("NodeClaim web-2"), "{broken}");
    // A recorded provider id that names another instance does not pair by tag.
    let mut seen = Invariants::default();
    let elsewhere =
        json!({"metadata": {"name": "web-1"}, "status": {"providerID": "aws:///us-east-1a/i-9"}});
    let claims = [elsewhere];
    assert!(seen.pairs(0, &owned, &claims).is_none());
    assert!(seen.pairs(91, &owned, &claims).is_some());
}

#[test]
fn two_instances_for_one_nodeclaim_break_at_once() {
    let mut seen = Invariants::default();
    let (a, b) = (instance("i-a", "web-1"), instance("i-b", "web-1"));
    let (ia, ib) = ("i-a".to_string(), "i-b".to_string());
    assert!(seen.launches(&[(&ia, &a)].into()).is_none());
    assert!(seen.launches(&[(&ib, &b)].into()).is_some());
}

/// A replacement disrupted as underutilized with the pods it had when its command
/// finished breaks the no-churn check inside the window; after the window, or with
/// different pods, it does not.
#[test]
fn a_replacement_consolidated_again_with_the_same_load_inside_the_window_breaks() {
    let node = |name: &str, annotation: Option<&str>| {
        let mut n = json!({"metadata": {"name": name, "annotations": {}}});
        if let Some(a) = annotation {
            n["metadata"]["annotations"][DISRUPTION_ANNOTATION] = json!(a);
        }
        n
    };
    let claim =
        |name: &str, node: &str| json!({"metadata": {"name": name}, "status": {"nodeName": node}});
    let pod = |name: &str, node: &str| json!({"metadata": {"namespace": "default", "name": name}, "spec": {"nodeName": node}, "status": {"phase": "Running"}});
    let run = |later: i64, pods_then: Vec<Value>| {
        let mut seen = Invariants::default();
        let claims = [claim("old", "n-old"), claim("new", "n-new")];
        let during = [
            node("n-old", Some("underutilized/replace/new")),
            node("n-new", None),
        ];
        let pods = [pod("a", "n-old")];
        assert!(seen.churn(0, &during, &claims, &pods, 330).is_none());
        let after = [node("n-new", None)];
        let moved = [pod("a", "n-new")];
        assert!(seen.churn(60, &after, &claims[1..], &moved, 330).is_none());
        let again = [node("n-new", Some("underutilized/delete/"))];
        seen.churn(60 + later, &again, &claims[1..], &pods_then, 330)
    };
    let broke = run(120, vec![pod("a", "n-new")]).expect("churn inside the window");
    assert!(
        broke.contains("n-new") && broke.contains("120 s later"),
        "{broke}"
    );
    assert!(
        run(400, vec![pod("a", "n-new")]).is_none(),
        "after the window"
    );
    assert!(
        run(120, vec![pod("b", "n-new")]).is_none(),
        "its load changed"
    );
}

#[test]
fn a_message_neither_handled_nor_dead_lettered_or_an_acknowledged_poison_breaks() {
    let mut queue = Queue::default();
    queue.sent.insert("m-1".into());
    assert!(queue.check(900).unwrap().contains("m-1"));
    queue.dead.insert("m-1".into());
    assert!(queue.check(900).is_none());
    queue.sent.insert("poison-m-2".into());
    queue.acked.insert("poison-m-2".into());
    assert!(queue.check(900).unwrap().contains("poison"));
}

#[test]
fn a_message_waiting_out_its_visibility_past_the_end_is_no_loss_but_one_left_due_is() {
    let mut queue = Queue::default();
    queue.sent.insert("m-1".into());
    queue.waiting.push(Message {
        id: "m-1".into(),
        body: String::new(),
        receives: 2,
        due: 1000,
    });
    assert!(queue.check(900).is_none());
    assert!(queue.check(1000).unwrap().contains("undelivered"));
}
