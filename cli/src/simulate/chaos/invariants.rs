//! The chaos run's invariants and its simulated SQS queue: what is remembered between simulated
//! seconds, and the checks that need no simulator (instances and NodeClaims paired, one instance
//! per NodeClaim, no node cordoned for good, every message handled or dead-lettered). The driver
//! in the parent module feeds them the cluster and the cloud each second.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use fleetwright_runtime::tick::DISRUPTION_ANNOTATION;

use super::{CORDON_LIMIT, UNPAIRED_LIMIT};

/// A message in the simulated SQS queue.
#[derive(Clone, Debug)]
pub(super) struct Message {
    pub(super) id: String,
    pub(super) body: String,
    pub(super) receives: u32,
    pub(super) due: i64,
}

/// The interruption queue: deliveries in flight, acknowledged, and dead-lettered.
#[derive(Debug, Default)]
pub(super) struct Queue {
    pub(super) waiting: Vec<Message>,
    pub(super) acked: BTreeSet<String>,
    pub(super) dead: BTreeSet<String>,
    pub(super) sent: BTreeSet<String>,
}

/// What the invariants remember between seconds.
#[derive(Debug, Default)]
pub(super) struct Invariants {
    /// Instance → the second it was first seen without a NodeClaim.
    pub(super) unclaimed: BTreeMap<String, i64>,
    /// NodeClaim → the second it was first seen without a live instance.
    pub(super) unbacked: BTreeMap<String, i64>,
    /// NodeClaim (its tag) → every instance ever launched for it.
    pub(super) launched_for: BTreeMap<String, BTreeSet<String>>,
    /// Node → the second it was first seen cordoned for disruption.
    pub(super) cordoned: BTreeMap<String, i64>,
    /// Instances warned, reclaimed or killed: their pods may be evicted whatever they say.
    pub(super) interrupted: BTreeSet<String>,
    /// Every instance ever seen live.
    pub(super) ever: BTreeSet<String>,
    /// The CPU the workload asked for (millicores), every 10 s.
    pub(super) needed: Vec<(i64, i64)>,
    /// How much of the API server's request log has been checked.
    pub(super) requests_read: usize,
    /// NodeClaims that disruption commands launched, for the no-churn check.
    pub(super) replacements: BTreeMap<String, Replacement>,
}

/// A NodeClaim a disruption command launched.
#[derive(Debug, Default)]
pub(super) struct Replacement {
    /// The command's annotation on the nodes it disrupts (`<reason>/<command>/<names>`).
    command: String,
    /// When the command's own nodes were all gone, and the pods on the replacement's node then.
    settled: Option<(i64, BTreeSet<String>)>,
}

/// The pods on each node (`namespace/name`), terminal pods left out.
fn pods_by_node(pods: &[Value]) -> BTreeMap<&str, BTreeSet<String>> {
    let mut out: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for p in pods {
        let phase = p["status"]["phase"].as_str().unwrap_or("");
        let Some(node) = p["spec"]["nodeName"].as_str() else {
            continue;
        };
        if phase == "Succeeded" || phase == "Failed" {
            continue;
        }
        let key = format!(
            "{}/{}",
            p["metadata"]["namespace"].as_str().unwrap_or(""),
            p["metadata"]["name"].as_str().unwrap_or("")
        );
        out.entry(node).or_default().insert(key);
    }
    out
}

fn disruption_annotation(node: &Value) -> Option<&str> {
    node["metadata"]["annotations"][DISRUPTION_ANNOTATION].as_str()
}

impl Invariants {
    /// PodDisruptionBudgets are respected: a pod leaves a node only through the Eviction API
    /// (which the simulated API server refuses when a budget does not allow it), never by a
    /// direct DELETE. The chaos pool sets no `terminationGracePeriod`, the one case where
    /// Karpenter deletes pods that their budgets still hold.
    pub(super) fn evictions_only(&mut self, requests: &[String]) -> Option<String> {
        let new = requests.get(self.requests_read..).unwrap_or_default();
        self.requests_read = requests.len();
        new.iter()
            .find(|r| {
                let path = r.strip_prefix("DELETE ").unwrap_or_default();
                path.starts_with("/api/v1/namespaces/") && path.contains("/pods/")
            })
            .map(|r| format!("a pod was deleted around its PodDisruptionBudget: {r}"))
    }

    /// Instances without NodeClaims and NodeClaims without instances, for 5 minutes. An
    /// instance and a NodeClaim are paired when the NodeClaim's `status.providerID` names the
    /// instance, or, while it names none yet (the launch is being recorded), when the instance's
    /// `karpenter.sh/nodeclaim` tag names the NodeClaim. A NodeClaim that never gets an instance
    /// counts from its creation.
    pub(super) fn pairs(
        &mut self,
        t: i64,
        owned: &BTreeMap<&String, &fleetwright_sim::SimInstance>,
        claims: &[Value],
    ) -> Option<String> {
        let by_tag: BTreeMap<&str, &String> = owned
            .iter()
            .filter_map(|(id, i)| Some((i.instance.nodeclaim()?, *id)))
            .collect();
        let mut paired: BTreeSet<String> = BTreeSet::new();
        let mut unbacked: BTreeSet<String> = BTreeSet::new();
        for claim in claims {
            let name = claim["metadata"]["name"].as_str().unwrap_or_default();
            let recorded = claim["status"]["providerID"]
                .as_str()
                .and_then(|p| p.rsplit('/').next())
                .filter(|id| !id.is_empty());
            let instance = match recorded {
                Some(id) => owned.contains_key(&id.to_string()).then(|| id.to_string()),
                None => by_tag.get(name).map(|id| (*id).clone()),
            };
            match instance {
                Some(id) => {
                    paired.insert(id);
                }
                None => {
                    unbacked.insert(name.to_string());
                }
            }
        }
        self.unclaimed
            .retain(|id, _| owned.contains_key(id) && !paired.contains(id));
        for id in owned.keys().filter(|id| !paired.contains(**id)) {
            let since = *self.unclaimed.entry((*id).clone()).or_insert(t);
            if t - since > UNPAIRED_LIMIT {
                return Some(format!(
                    "instance {id} has run {} s without a NodeClaim",
                    t - since
                ));
            }
        }
        self.unbacked.retain(|c, _| unbacked.contains(c));
        for claim in unbacked {
            let since = *self.unbacked.entry(claim.clone()).or_insert(t);
            if t - since > UNPAIRED_LIMIT {
                return Some(format!(
                    "NodeClaim {claim} has had no instance for {} s",
                    t - since
                ));
            }
        }
        None
    }

    /// No NodeClaim ever has two instances.
    pub(super) fn launches(
        &mut self,
        owned: &BTreeMap<&String, &fleetwright_sim::SimInstance>,
    ) -> Option<String> {
        for (id, i) in owned {
            let Some(claim) = i.instance.nodeclaim() else {
                continue;
            };
            let ids = self.launched_for.entry(claim.to_string()).or_default();
            ids.insert((*id).clone());
            if ids.len() > 1 {
                return Some(format!("NodeClaim {claim} got two instances: {ids:?}"));
            }
        }
        None
    }

    /// No node stays cordoned for disruption 10 minutes while its NodeClaim is not deleting.
    pub(super) fn cordons(&mut self, t: i64, nodes: &[Value], claims: &[Value]) -> Option<String> {
        let deleting: BTreeSet<&str> = claims
            .iter()
            .filter(|c| !c["metadata"]["deletionTimestamp"].is_null())
            .filter_map(|c| c["status"]["nodeName"].as_str())
            .collect();
        let cordoned: BTreeSet<String> = nodes
            .iter()
            .filter(|n| is_disrupted(n))
            .filter_map(|n| n["metadata"]["name"].as_str())
            .filter(|n| !deleting.contains(n))
            .map(str::to_string)
            .collect();
        self.cordoned.retain(|n, _| cordoned.contains(n));
        for node in cordoned {
            let since = *self.cordoned.entry(node.clone()).or_insert(t);
            if t - since > CORDON_LIMIT {
                return Some(format!(
                    "node {node} has been cordoned {} s with no command finishing it",
                    t - since
                ));
            }
        }
        None
    }
}

impl Invariants {
    /// No churn: a node that a disruption command launched is not itself disrupted as
    /// underutilized within `window` seconds (the pool's consolidateAfter plus five minutes) of
    /// the command finishing (its own nodes gone), unless its pods changed since then.
    pub(super) fn churn(
        &mut self,
        t: i64,
        nodes: &[Value],
        claims: &[Value],
        pods: &[Value],
        window: i64,
    ) -> Option<String> {
        let on = pods_by_node(pods);
        let annotations: BTreeSet<&str> = nodes.iter().filter_map(disruption_annotation).collect();
        for command in &annotations {
            let names = command.splitn(3, '/').nth(2).unwrap_or("");
            for name in names.split(',').filter(|n| !n.is_empty()) {
                self.replacements
                    .entry(name.to_string())
                    .or_insert_with(|| Replacement {
                        command: command.to_string(),
                        settled: None,
                    });
            }
        }
        let node_of = |claim: &str| {
            claims
                .iter()
                .find(|c| c["metadata"]["name"] == claim)
                .and_then(|c| c["status"]["nodeName"].as_str())
        };
        for (claim, r) in self.replacements.iter_mut() {
            if r.settled.is_some() || annotations.contains(r.command.as_str()) {
                continue;
            }
            if let Some(node) = node_of(claim) {
                r.settled = Some((t, on.get(node).cloned().unwrap_or_default()));
            }
        }
        for n in nodes {
            let Some(command) = disruption_annotation(n) else {
                continue;
            };
            if !command.starts_with("underutilized/") {
                continue;
            }
            let node = n["metadata"]["name"].as_str().unwrap_or("");
            let claim = claims
                .iter()
                .find(|c| c["status"]["nodeName"] == node)
                .and_then(|c| c["metadata"]["name"].as_str())
                .unwrap_or("");
            let Some((since, before)) = self
                .replacements
                .get(claim)
                .and_then(|r| r.settled.as_ref())
            else {
                continue;
            };
            let now = on.get(node).cloned().unwrap_or_default();
            if t - since < window && now == *before {
                return Some(format!(
                    "node {node} ({claim}), launched by a disruption command that finished at {since} s, \
                     is disrupted as underutilized {} s later with the same {} pod(s) ({command})",
                    t - since,
                    now.len()
                ));
            }
        }
        None
    }
}

impl Queue {
    /// Every message was handled or dead-lettered; none is lost, and no poison was acknowledged.
    pub(super) fn check(&self) -> Option<String> {
        if let Some(m) = self.waiting.first() {
            return Some(format!("message {} is still in flight at the end", m.id));
        }
        for id in &self.sent {
            if id.starts_with("poison-") && self.acked.contains(id) {
                return Some(format!("poison message {id} was acknowledged"));
            }
            if !self.acked.contains(id) && !self.dead.contains(id) {
                return Some(format!(
                    "message {id} was neither handled nor dead-lettered"
                ));
            }
        }
        None
    }
}

pub(super) fn is_disrupted(node: &Value) -> bool {
    node["spec"]["taints"]
        .as_array()
        .is_some_and(|t| t.iter().any(|t| t["key"] == "karpenter.sh/disrupted"))
}

#[cfg(test)]
mod tests {
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
    fn an_instance_without_a_nodeclaim_breaks_after_five_minutes() {
        let mut seen = Invariants::default();
        let i = instance("i-1", "web-1");
        let id = "i-1".to_string();
        let owned: BTreeMap<&String, &fleetwright_sim::SimInstance> = [(&id, &i)].into();
        assert!(seen.pairs(0, &owned, &[]).is_none());
        assert!(seen.pairs(UNPAIRED_LIMIT, &owned, &[]).is_none());
        let broken = seen.pairs(UNPAIRED_LIMIT + 1, &owned, &[]).unwrap();
        assert!(broken.contains("i-1"), "{broken}");
        let claim = json!({"metadata": {"name": "web-1"}, "status": {"providerID": "aws:///us-east-1a/i-1"}});
        assert!(seen
            .pairs(UNPAIRED_LIMIT + 2, &owned, std::slice::from_ref(&claim))
            .is_none());
        // The claim outlives its instance.
        let none = BTreeMap::new();
        assert!(seen
            .pairs(1000, &none, std::slice::from_ref(&claim))
            .is_none());
        assert!(seen
            .pairs(1000 + UNPAIRED_LIMIT + 1, &none, &[claim])
            .unwrap()
            .contains("web-1"));
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
        let broken = seen.pairs(UNPAIRED_LIMIT + 1, &owned, &claims).unwrap();
        assert!(broken.contains("NodeClaim web-2"), "{broken}");
        // A recorded provider id that names another instance does not pair by tag.
        let mut seen = Invariants::default();
        let elsewhere = json!({"metadata": {"name": "web-1"}, "status": {"providerID": "aws:///us-east-1a/i-9"}});
        let claims = [elsewhere];
        assert!(seen.pairs(0, &owned, &claims).is_none());
        assert!(seen.pairs(UNPAIRED_LIMIT + 1, &owned, &claims).is_some());
    }

    #[test]
    fn two_instances_for_one_nodeclaim_break_at_once() {
        let mut seen = Invariants::default();
        let (a, b) = (instance("i-a", "web-1"), instance("i-b", "web-1"));
        let (ia, ib) = ("i-a".to_string(), "i-b".to_string());
        assert!(seen.launches(&[(&ia, &a)].into()).is_none());
        assert!(seen.launches(&[(&ib, &b)].into()).is_some());
    }

    #[test]
    fn a_node_cordoned_ten_minutes_without_a_deletion_breaks() {
        let mut seen = Invariants::default();
        let node = json!({"metadata": {"name": "n1"}, "spec": {"taints": [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]}});
        assert!(seen.cordons(0, std::slice::from_ref(&node), &[]).is_none());
        let deleting = json!({"metadata": {"name": "c1", "deletionTimestamp": "2026-11-22T10:00:00Z"}, "status": {"nodeName": "n1"}});
        assert!(
            seen.cordons(CORDON_LIMIT + 1, std::slice::from_ref(&node), &[deleting])
                .is_none(),
            "a deletion is finishing it"
        );
        assert!(
            seen.cordons(CORDON_LIMIT + 2, std::slice::from_ref(&node), &[])
                .is_none(),
            "counted again from now"
        );
        assert!(seen.cordons(2 * CORDON_LIMIT + 3, &[node], &[]).is_some());
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
        let claim = |name: &str, node: &str| json!({"metadata": {"name": name}, "status": {"nodeName": node}});
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
        assert!(queue.check().unwrap().contains("m-1"));
        queue.dead.insert("m-1".into());
        assert!(queue.check().is_none());
        queue.sent.insert("poison-m-2".into());
        queue.acked.insert("poison-m-2".into());
        assert!(queue.check().unwrap().contains("poison"));
    }
}
