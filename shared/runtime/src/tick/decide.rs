//! The tick's decisions, each a pure function of what was read (the cluster dump, the
//! NodeClaims known so far, the owned instances, `now`) returning [`Action`]s: provisioning,
//! launch, registration, initialization, hash re-stamping, liveness, deletion and termination, and garbage
//! collection. Nothing here calls Kubernetes or AWS; the disruption phases are in
//! [`super::disruption`].

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Duration, Utc};
use fleetwright_cloud::instances::{self, Instance};
use fleetwright_core::disruption::{
    drift, CLASS_HASH_VERSION, LEGACY_HASH_VERSION, NODECLASS_HASH, NODECLASS_HASH_VERSION,
    NODEPOOL_HASH, NODEPOOL_HASH_VERSION, POOL_HASH_VERSION,
};
use fleetwright_core::labels::PLACEMENT_GROUP_PARTITION;
use fleetwright_core::plan::NewNodeClaim;
use fleetwright_core::replicas::ReplicaPlan;
use fleetwright_core::{Catalog, Plan, Snapshot};
use fleetwright_kube::crds::NodeClaim;
use fleetwright_kube::dump::ClusterDump;
use fleetwright_kube::interruption::instance_id;
use fleetwright_kube::{convert, objects};
use k8s_openapi::api::core::v1::{Node, Pod};

use super::action::Action;

/// A NodeClaim that is launched but not registered this long after creation is given up.
pub const REGISTRATION_TTL: Duration = Duration::minutes(15);
/// How long after its launch a NodeClaim's instance may be missing from the cloud's listing
/// (DescribeInstances is eventually consistent) before the NodeClaim counts as stranded.
pub const INSTANCE_GRACE: Duration = Duration::minutes(1);
/// How long a NodeClaim whose launch ended in an unknown outcome (a timeout, a 5xx) is kept for
/// the next tick's launch to find its instance by tag, before it is deleted and planned again.
pub const UNKNOWN_LAUNCH_WINDOW: Duration = Duration::minutes(3);

/// Whether a NodeClaim whose launch failed with `error` is kept for another launch: the launch
/// may have happened, and the NodeClaim is young enough for its instance to be found.
pub fn keep_after_failed_launch(
    claim: &NodeClaim,
    error: &crate::RuntimeError,
    now: DateTime<Utc>,
) -> bool {
    let unknown = matches!(error, crate::RuntimeError::Cloud(e) if e.outcome_unknown());
    let young =
        claim.metadata.creation_timestamp.as_ref().is_none_or(|t| {
            now.timestamp() - t.0.as_second() < UNKNOWN_LAUNCH_WINDOW.num_seconds()
        });
    unknown && young
}

pub(crate) fn name_of(claim: &NodeClaim) -> String {
    claim.metadata.name.clone().unwrap_or_default()
}

pub(crate) fn provider_id(claim: &NodeClaim) -> Option<&str> {
    claim.status.as_ref().and_then(|s| s.provider_id.as_deref())
}

pub(crate) fn has_condition(claim: &NodeClaim, type_: &str) -> bool {
    claim.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == type_ && c.status == "True")
    })
}

/// The pods waiting for a node.
pub fn pending_pods(snapshot: &Snapshot) -> usize {
    snapshot
        .pods
        .iter()
        .filter(|p| p.node_name.is_none())
        .count()
}

/// A NodeClaim for each node the plan needs.
pub fn provision(dump: &ClusterDump, plan: &Plan) -> Vec<Action> {
    plan.nodeclaims
        .iter()
        .filter_map(|planned| create(dump, planned))
        .collect()
}

/// Creating the NodeClaim for a planned node, or None when its NodePool is gone from the dump.
pub fn create(dump: &ClusterDump, planned: &NewNodeClaim) -> Option<Action> {
    let claim = objects::nodeclaim_in(dump, planned)?;
    Some(Action::CreateNodeClaim {
        nodepool: planned.nodepool.clone(),
        requests: serde_json::to_value(planned.requests.to_map()).unwrap_or_default(),
        instance_types: planned.instance_types.clone(),
        claim: Box::new(claim),
    })
}

/// What the static NodePools need: a NodeClaim for each missing replica, the deletion of each
/// one above them, and why a pool falls short.
pub fn replicas(dump: &ClusterDump, plan: &ReplicaPlan) -> Vec<Action> {
    let nodepool_of = |name: &str| {
        dump.nodeclaims
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(name))
            .and_then(|c| label(c, fleetwright_core::labels::NODEPOOL))
            .unwrap_or_default()
            .to_string()
    };
    let create = plan
        .create
        .iter()
        .filter_map(|planned| create(dump, planned));
    let delete = plan.delete.iter().map(|name| Action::ScaleDown {
        nodepool: nodepool_of(name),
        nodeclaim: name.clone(),
    });
    let short = plan
        .short
        .iter()
        .map(|(pool, why)| Action::ShortOfReplicas {
            nodepool: pool.clone(),
            reason: why.clone(),
        });
    create.chain(delete).chain(short).collect()
}

/// Every NodeClaim with no instance yet that is not being deleted.
pub fn unlaunched(claims: &[NodeClaim]) -> Vec<Action> {
    claims
        .iter()
        .filter(|c| provider_id(c).is_none() && c.metadata.deletion_timestamp.is_none())
        .map(|c| Action::Launch {
            nodeclaim: name_of(c),
        })
        .collect()
}

/// Launched, unregistered NodeClaims whose node has joined; one whose partition is not known
/// yet waits for it ([`partition_labels`]).
pub fn registrations(dump: &ClusterDump, claims: &[NodeClaim]) -> Vec<Action> {
    claims
        .iter()
        .filter_map(|claim| {
            let provider = provider_id(claim)?;
            if has_condition(claim, "Registered") || awaits_partition(claim) {
                return None;
            }
            let node = dump
                .nodes
                .iter()
                .find(|n| node_provider_id(n) == Some(provider))?;
            Some(Action::Register {
                nodeclaim: name_of(claim),
                node: node.metadata.name.clone().unwrap_or_default(),
                provider_id: provider.to_string(),
                claim: Box::new(claim.clone()),
            })
        })
        .collect()
}

/// Registered NodeClaims (earlier, or by `registered` this tick) whose node is Ready and carries
/// neither the unregistered taint nor any of the NodeClaim's startup taints.
pub fn initializations(
    dump: &ClusterDump,
    claims: &[NodeClaim],
    registered: &[String],
) -> Vec<Action> {
    // Registered by this tick: its status in the dump predates that, and the registration
    // has just removed the unregistered taint the dump still shows.
    let just_registered = |c: &NodeClaim| registered.contains(&name_of(c));
    claims
        .iter()
        .filter(|c| {
            (has_condition(c, "Registered") || just_registered(c))
                && !has_condition(c, "Initialized")
        })
        .filter_map(|c| {
            let node = node_for(dump, c)?;
            node_initialized(node, c, just_registered(c)).then(|| Action::Initialize {
                nodeclaim: name_of(c),
                node: node.metadata.name.clone().unwrap_or_default(),
            })
        })
        .collect()
}

/// At most this many NodeClaims are re-stamped, and at most this many `Drifted` conditions
/// written, in one tick: after a migration or a template change every NodeClaim needs one, and
/// 5,000 writes would take the tick past its deadline (35 s in `cargo bench --bench scale`)
/// and starve disruption and garbage collection. The rest follow on the next ticks; drift
/// itself is decided from the hashes, not from the condition, so nothing waits on them.
pub const MAX_MARKS_PER_TICK: usize = 200;

/// NodeClaims whose hash annotations another version wrote (or none wrote), re-stamped with
/// the current version, as Karpenter's hash controllers do when their version changes: the hash
/// is replaced only when the NodeClaim had not drifted under the one it carries (it has no
/// `Drifted` condition, and a hash of Fleetwright's own earlier version is still what that
/// version computes); a drifted one keeps its old hash under the new version, so it stays
/// drifted. NodeClaims Karpenter created carry its current versions already and are compared
/// as they are: a migration replaces only what Karpenter would. The EC2NodeClass hash waits
/// while the cluster's CA bundle is unknown. At most [`MAX_MARKS_PER_TICK`].
pub fn restamps(dump: &ClusterDump, claims: &[NodeClaim]) -> Vec<Action> {
    claims
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .filter_map(|claim| {
            let (pool, class) =
                dump.pool_and_class(label(claim, fleetwright_core::labels::NODEPOOL)?)?;
            let mut annotations = BTreeMap::new();
            annotations.extend(POOL_STAMP.restamp(
                claim,
                || objects::pool_hash(pool),
                || convert::legacy_template_hash(pool),
            ));
            if let (Some(class), Some(ca)) = (class, dump.ca_bundle.as_deref()) {
                annotations.extend(CLASS_STAMP.restamp(
                    claim,
                    || objects::class_hash(class, Some(ca)),
                    || convert::legacy_node_class_hash(class),
                ));
            }
            (!annotations.is_empty()).then(|| Action::Restamp {
                nodeclaim: name_of(claim),
                annotations,
            })
        })
        .take(MAX_MARKS_PER_TICK)
        .collect()
}

/// One hash a NodeClaim carries: its version annotation, the version written now, and its
/// hash annotation.
struct Stamp {
    version_key: &'static str,
    version: &'static str,
    hash_key: &'static str,
}

const POOL_STAMP: Stamp = Stamp {
    version_key: NODEPOOL_HASH_VERSION,
    version: POOL_HASH_VERSION,
    hash_key: NODEPOOL_HASH,
};

const CLASS_STAMP: Stamp = Stamp {
    version_key: NODECLASS_HASH_VERSION,
    version: CLASS_HASH_VERSION,
    hash_key: NODECLASS_HASH,
};

impl Stamp {
    /// The annotations that bring `claim` to this version: none when it is there already; the
    /// version alone when it had drifted under its hash; else `current` (version and hash).
    /// `legacy` is the hash Fleetwright's own earlier version computes now.
    fn restamp(
        &self,
        claim: &NodeClaim,
        current: impl FnOnce() -> Vec<(String, String)>,
        legacy: impl FnOnce() -> String,
    ) -> Vec<(String, String)> {
        let have = claim.metadata.annotations.as_ref();
        let get = |key: &str| have.and_then(|a| a.get(key)).map(String::as_str);
        let stamped = get(self.version_key);
        if stamped == Some(self.version) {
            return Vec::new();
        }
        let legacy_drifted = stamped == Some(LEGACY_HASH_VERSION)
            && get(self.hash_key).is_some_and(|hash| hash != legacy());
        if has_condition(claim, "Drifted") || legacy_drifted {
            return vec![(self.version_key.to_string(), self.version.to_string())];
        }
        current()
    }
}

/// NodeClaims whose `Drifted` condition no longer says why they have drifted (Karpenter's drift
/// controller): set to the reason for a launched NodeClaim that has drifted, removed from one
/// that has not (or is not launched). `snapshot` holds what the EC2NodeClasses resolve to now.
/// At most [`MAX_MARKS_PER_TICK`].
pub fn drift_marks(
    claims: &[NodeClaim],
    snapshot: &Snapshot,
    catalog: &Catalog,
    now: DateTime<Utc>,
) -> Vec<Action> {
    claims
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .filter_map(|claim| {
            let name = name_of(claim);
            let drifted = has_condition(claim, "Launched")
                .then(|| {
                    let core = snapshot.nodeclaims.iter().find(|c| c.name == name)?;
                    let pool = snapshot
                        .nodepools
                        .iter()
                        .find(|p| p.name == core.nodepool)?;
                    drift(core, pool, snapshot, catalog, now.timestamp())
                })
                .flatten();
            let marked = claim.status.as_ref().and_then(|s| {
                s.conditions
                    .iter()
                    .find(|c| c.type_ == "Drifted" && c.status == "True")
                    .map(|c| c.reason.clone().unwrap_or_default())
            });
            let unmarked = has_any_condition(claim, "Drifted") && drifted.is_none();
            (marked.as_deref() != drifted || unmarked).then(|| Action::MarkDrifted {
                nodeclaim: name,
                reason: drifted.map(str::to_string),
            })
        })
        .take(MAX_MARKS_PER_TICK)
        .collect()
}

/// Whether the NodeClaim has a condition of `type_`, whatever its status.
fn has_any_condition(claim: &NodeClaim, type_: &str) -> bool {
    claim
        .status
        .as_ref()
        .is_some_and(|s| s.conditions.iter().any(|c| c.type_ == type_))
}

fn label<'a>(claim: &'a NodeClaim, key: &str) -> Option<&'a str> {
    claim.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// NodePools whose status no longer says what they hold: `nodes`, the NodeClaims not being
/// deleted, and `resources`, their nodes' capacity with `nodes` among them, as Karpenter writes
/// them; and their conditions, from whether their EC2NodeClass is ready (`classes`).
pub fn pool_statuses(
    dump: &ClusterDump,
    claims: &[NodeClaim],
    classes: &BTreeMap<String, bool>,
    invalid: &BTreeMap<String, String>,
    now: DateTime<Utc>,
) -> Vec<Action> {
    dump.nodepools
        .iter()
        .filter_map(|pool| {
            let name = pool.metadata.name.clone()?;
            let mine: Vec<&NodeClaim> = claims
                .iter()
                .filter(|c| c.metadata.deletion_timestamp.is_none())
                .filter(|c| label(c, fleetwright_core::labels::NODEPOOL) == Some(name.as_str()))
                .collect();
            let mut capacity = fleetwright_core::Resources::default();
            for node in mine.iter().filter_map(|c| dump.node_of(c)) {
                if let Ok(n) = fleetwright_kube::convert::node(node) {
                    capacity.add(&n.capacity);
                }
            }
            let nodes = mine.len() as i64;
            let mut resources = capacity.to_map();
            resources.insert("nodes".into(), nodes.to_string());
            let status = pool.status.as_ref();
            let written: BTreeMap<String, String> = status
                .and_then(|s| s.resources.as_ref())
                .map(|r| {
                    r.iter()
                        .map(|(k, v)| {
                            (
                                k.clone(),
                                v.as_str().map_or_else(|| v.to_string(), str::to_string),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            let class = pool
                .spec
                .template
                .spec
                .node_class_ref
                .as_ref()
                .map(|r| &r.name);
            let ready = class.and_then(|c| classes.get(c)).copied();
            let had = status.map(|s| s.conditions.clone()).unwrap_or_default();
            let error = invalid.get(&name).map(String::as_str);
            let conditions = super::status::nodepool_conditions(&had, ready, error, now);
            let current = status.and_then(|s| s.nodes) == Some(nodes)
                && written == resources
                && conditions == had;
            (!current).then_some(Action::PoolStatus {
                nodepool: name,
                nodes,
                resources,
                conditions,
            })
        })
        .collect()
}

/// NodeClaims whose instance launched but never joined within [`REGISTRATION_TTL`].
pub fn liveness(claims: &[NodeClaim], now: DateTime<Utc>) -> Vec<Action> {
    claims
        .iter()
        .filter(|claim| {
            let created = claim
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|t| t.0.as_second());
            let stale =
                created.is_some_and(|c| now.timestamp() - c >= REGISTRATION_TTL.num_seconds());
            stale
                && !has_condition(claim, "Registered")
                && claim.metadata.deletion_timestamp.is_none()
                && provider_id(claim).is_some()
        })
        .map(|claim| Action::GiveUp {
            nodeclaim: name_of(claim),
            instance_id: provider_id(claim).and_then(instance_id).map(str::to_string),
        })
        .collect()
}

/// NodeClaims being deleted: once the pods a drain moves are off the node (or its
/// `terminationGracePeriod` since the deletion is over, when they are deleted), the instance is
/// terminated and the NodeClaim and node let go. Until then the pods are evicted again
/// (evictions are idempotent, and a NodeClaim deleted by hand is drained here first).
pub fn deletions(
    dump: &ClusterDump,
    claims: &[NodeClaim],
    gone: &BTreeSet<String>,
    now: DateTime<Utc>,
) -> Vec<Action> {
    let mut out = Vec::new();
    for claim in claims
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_some())
    {
        // By provider id too: a NodeClaim registered by this tick has no node name in the read.
        let node = node_for(dump, claim).and_then(|n| n.metadata.name.clone());
        // Pods on an instance that is gone run nowhere: nothing is left to wait for.
        let instance_gone = provider_id(claim)
            .and_then(instance_id)
            .is_some_and(|id| gone.contains(id));
        let pods = node
            .as_deref()
            .filter(|_| !instance_gone)
            .map(|n| pods_to_move(dump, n, now))
            .unwrap_or_default();
        // Cordoned first: else the pods evicted come back to the same node.
        out.extend(super::disruption::untainted(dump, &[claim]));
        if let (Some(node), false) = (&node, pods.is_empty()) {
            if !grace_over(claim, now) {
                out.push(Action::EvictForDeletion {
                    node: node.clone(),
                    nodeclaim: name_of(claim),
                    pods,
                });
                continue;
            }
            out.push(Action::DeletePods {
                node: node.clone(),
                pods,
            });
        }
        out.push(Action::FinishDeletion {
            nodeclaim: name_of(claim),
            instance_id: provider_id(claim).and_then(instance_id).map(str::to_string),
            node,
            reason: super::disruption::reason_of(claim)
                .unwrap_or("deleted")
                .to_string(),
        });
    }
    out
}

/// The pods on `node` that hold its instance up: not skipped by a drain, not finished, not
/// stuck terminating.
fn pods_to_move(dump: &ClusterDump, node: &str, now: DateTime<Utc>) -> Vec<Pod> {
    dump.pods_on(node)
        .into_iter()
        .filter(|p| !objects::skipped_by_drain(p) && !finished(p) && !stuck(p, now))
        .collect()
}

/// Whether a deleting NodeClaim's `terminationGracePeriod` since its deletion is over, or the
/// termination timestamp a repair wrote on it has come.
fn grace_over(claim: &NodeClaim, now: DateTime<Utc>) -> bool {
    if super::repair::termination_timestamp(claim).is_some_and(|t| now >= t) {
        return true;
    }
    // Evictions the API server has refused with an error (not a PDB's 429: a pod two PDBs
    // cover, a webhook that denies evictions) for this long will not start working: the node
    // is going away, so the pods are deleted with their own grace period instead of holding it
    // up for good.
    if eviction_failing_since(claim).is_some_and(|t| now - t >= EVICTION_FAILING) {
        return true;
    }
    let deleted_at = claim
        .metadata
        .deletion_timestamp
        .as_ref()
        .map(|t| t.0.as_second())
        .unwrap_or(now.timestamp());
    let grace = claim
        .spec
        .termination_grace_period
        .as_deref()
        .and_then(|g| {
            fleetwright_kube::convert::duration_seconds(g)
                .ok()
                .flatten()
        });
    grace.is_some_and(|g| now.timestamp() >= deleted_at + g)
}

/// On a deleting NodeClaim: since when (RFC 3339) the evictions of its node's pods have been
/// failing with errors other than a PDB's 429.
pub const EVICTION_FAILING_ANNOTATION: &str = "fleetwright.io/eviction-failing-since";
/// How long evictions may keep failing before a deleting NodeClaim's pods are deleted.
pub const EVICTION_FAILING: chrono::Duration = chrono::Duration::minutes(5);

fn eviction_failing_since(claim: &NodeClaim) -> Option<DateTime<Utc>> {
    let value = claim
        .metadata
        .annotations
        .as_ref()?
        .get(EVICTION_FAILING_ANNOTATION)?;
    Some(
        DateTime::parse_from_rfc3339(value)
            .ok()?
            .with_timezone(&Utc),
    )
}

/// Owned instances that no NodeClaim (nor a launch of this tick) accounts for, past their grace.
pub fn garbage(
    claims: &[NodeClaim],
    launched: &[String],
    owned: &[Instance],
    now: DateTime<Utc>,
) -> Vec<Action> {
    let mut claimed: BTreeSet<String> = claims
        .iter()
        .filter_map(provider_id)
        .filter_map(instance_id)
        .map(str::to_string)
        .collect();
    claimed.extend(launched.iter().cloned());
    // An instance tagged for a NodeClaim that has not recorded it yet (the write after CreateFleet
    // failed) is that NodeClaim's: its next launch adopts it by tag.
    let recording: BTreeSet<&str> = claims
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none() && provider_id(c).is_none())
        .filter_map(|c| c.metadata.name.as_deref())
        .collect();
    instances::orphans(owned, &claimed, now)
        .into_iter()
        .filter(|orphan| !orphan.nodeclaim().is_some_and(|n| recording.contains(n)))
        .map(|orphan| Action::CollectGarbage {
            instance_id: orphan.id.clone(),
            nodeclaim: orphan.nodeclaim().map(str::to_string),
        })
        .collect()
}

/// Whether a NodeClaim launched into a partition group still has the empty partition label
/// its launch wrote when no partition was asked for.
fn awaits_partition(claim: &NodeClaim) -> bool {
    let labels = claim.metadata.labels.as_ref();
    labels
        .and_then(|l| l.get(PLACEMENT_GROUP_PARTITION))
        .is_some_and(String::is_empty)
}

/// NodeClaims awaiting their partition whose instance EC2 now lists in one: each is labelled
/// with it, as Karpenter's placement-group registration hook does from DescribeInstances.
pub fn partition_labels(claims: &[NodeClaim], owned: &[Instance]) -> Vec<Action> {
    claims
        .iter()
        .filter(|c| awaits_partition(c))
        .filter_map(|c| {
            let id = provider_id(c).and_then(instance_id)?;
            let partition = owned.iter().find(|i| i.id == id)?.partition?;
            Some(Action::LabelPartition {
                nodeclaim: name_of(c),
                partition: partition.to_string(),
            })
        })
        .collect()
}

/// The instances of launched NodeClaims that the owned listing misses (past
/// [`INSTANCE_GRACE`], and not launched by this tick): each must be confirmed gone by id
/// ([`stranded`]) before anything is deleted for it.
pub fn missing_instances(
    claims: &[NodeClaim],
    launched: &[String],
    owned: &[Instance],
    now: DateTime<Utc>,
) -> Vec<String> {
    let live: BTreeSet<&str> = owned.iter().map(|i| i.id.as_str()).collect();
    claims
        .iter()
        .filter(|c| launched_at(c).is_some_and(|t| now - t >= INSTANCE_GRACE))
        .filter_map(|c| provider_id(c).and_then(instance_id))
        .filter(|id| !live.contains(id) && !launched.iter().any(|l| l == id))
        .map(str::to_string)
        .collect()
}

/// The instances among `missing` that a lookup by id (`described`) did not find live: gone.
pub fn gone(missing: &[String], described: &[Instance]) -> BTreeSet<String> {
    let alive: BTreeSet<&str> = described
        .iter()
        .filter(|i| fleetwright_cloud::instances::LIVE_STATES.contains(&i.state.as_str()))
        .map(|i| i.id.as_str())
        .collect();
    missing
        .iter()
        .filter(|m| !alive.contains(m.as_str()))
        .cloned()
        .collect()
}

/// The most stranded NodeClaims one tick deletes: a tenth of them, and at least this many. A
/// cloud that answers wrongly cannot take the whole fleet in one tick.
pub const STRANDED_PER_TICK: usize = 10;

/// Launched NodeClaims whose instance is gone (terminated outside Fleetwright, reclaimed without
/// a warning, failed): their capacity does not exist, so the NodeClaim (and its node) go, and the
/// next plan provisions for the pods again. `gone` are the instances confirmed gone ([`gone`]):
/// a listing can be stale, come back empty, or miss an instance whose tags were removed, so only
/// a lookup by id that does not find one live counts. At most [`STRANDED_PER_TICK`] (or a tenth
/// of the NodeClaims) go in one tick.
pub fn stranded(dump: &ClusterDump, claims: &[NodeClaim], gone: &BTreeSet<String>) -> Vec<Action> {
    let cap = STRANDED_PER_TICK.max(claims.len() / 10);
    claims
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .filter_map(|c| {
            let id = provider_id(c).and_then(instance_id)?;
            gone.contains(id).then(|| Action::ForgetNodeClaim {
                nodeclaim: name_of(c),
                instance_id: id.to_string(),
                node: node_for(dump, c).and_then(|n| n.metadata.name.clone()),
            })
        })
        .take(cap)
        .collect()
}

/// Nodes being deleted that carry the termination finalizer and a NodePool label but that no
/// NodeClaim accounts for (by name or provider id): nothing else will let them go, so the
/// finalizer comes off. Their instances, if any are left, are garbage collected.
pub fn orphaned_nodes(dump: &ClusterDump, claims: &[NodeClaim]) -> Vec<Action> {
    let claimed = |node: &Node| {
        let name = node.metadata.name.as_deref();
        let provider = node_provider_id(node);
        claims.iter().any(|c| {
            let status = c.status.as_ref();
            status.and_then(|s| s.node_name.as_deref()) == name
                || (provider.is_some() && provider_id(c) == provider)
        })
    };
    dump.nodes
        .iter()
        .filter(|n| n.metadata.deletion_timestamp.is_some())
        .filter(|n| {
            let finalizers = n.metadata.finalizers.as_deref().unwrap_or_default();
            finalizers
                .iter()
                .any(|f| f == objects::TERMINATION_FINALIZER)
        })
        .filter(|n| {
            n.metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key(fleetwright_core::labels::NODEPOOL))
        })
        .filter(|n| !claimed(n))
        .filter_map(|n| {
            Some(Action::ReleaseNode {
                node: n.metadata.name.clone()?,
            })
        })
        .collect()
}

/// Nodes being deleted (by hand, or by anything but Fleetwright) whose NodeClaim is not: the
/// NodeClaim is deleted, so the node is cordoned and drained, its instance terminated, and then
/// the node let go, as Karpenter's termination does.
pub fn deleted_nodes(dump: &ClusterDump, claims: &[NodeClaim]) -> Vec<Action> {
    claims
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .filter_map(|c| {
            let node = node_for(dump, c)?;
            node.metadata.deletion_timestamp.as_ref()?;
            Some(Action::NodeDeleted {
                node: node.metadata.name.clone()?,
                nodeclaim: name_of(c),
            })
        })
        .collect()
}

/// When a NodeClaim's instance was launched: its Launched condition, else its creation.
fn launched_at(claim: &NodeClaim) -> Option<DateTime<Utc>> {
    let condition = claim.status.as_ref().and_then(|s| {
        s.conditions
            .iter()
            .find(|c| c.type_ == "Launched" && c.status == "True")
            .and_then(|c| c.last_transition_time.as_deref())
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&Utc))
    });
    condition.or_else(|| {
        let created = claim.metadata.creation_timestamp.as_ref()?;
        DateTime::from_timestamp(created.0.as_second(), 0)
    })
}

/// Ready, and free of the unregistered taint and of the NodeClaim's startup taints.
fn node_initialized(node: &Node, claim: &NodeClaim, just_registered: bool) -> bool {
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let blocked = taints.iter().any(|t| {
        (t.key == fleetwright_core::labels::TAINT_UNREGISTERED && !just_registered)
            || claim
                .spec
                .startup_taints
                .iter()
                .any(|s| s.key == t.key && s.effect == t.effect)
    });
    ready && !blocked
}

/// The claim's node: by the name its status records or, for a claim registered by this tick
/// (whose status in the dump predates it), by provider id.
fn node_for<'a>(dump: &'a ClusterDump, claim: &NodeClaim) -> Option<&'a Node> {
    dump.node_of(claim).or_else(|| {
        let provider = provider_id(claim)?;
        dump.nodes
            .iter()
            .find(|n| node_provider_id(n) == Some(provider))
    })
}

/// A pod still terminating a minute after its deletion deadline (the API server sets
/// `deletionTimestamp` to the request time plus the grace period): its kubelet is gone or
/// stuck, so waiting longer gives it nothing. Karpenter ignores such pods too.
fn stuck(pod: &Pod, now: DateTime<Utc>) -> bool {
    pod.metadata
        .deletion_timestamp
        .as_ref()
        .is_some_and(|t| t.0.as_second() + 60 < now.timestamp())
}

/// A pod that has run to completion (or failed) holds nothing up.
fn finished(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

fn node_provider_id(node: &Node) -> Option<&str> {
    node.spec.as_ref().and_then(|s| s.provider_id.as_deref())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn dump(ca_bundle: Option<&str>) -> ClusterDump {
        let pool = json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
            "spec": {"template": {"metadata": {"labels": {"team": "web"}},
                "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                         "requirements": [], "expireAfter": "720h"}}}});
        let class = json!({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
            "spec": {"role": "R", "amiSelectorTerms": [{"alias": "al2023@latest"}]}});
        ClusterDump {
            nodepools: vec![serde_json::from_value(pool).unwrap()],
            nodeclasses: vec![serde_json::from_value(class).unwrap()],
            ca_bundle: ca_bundle.map(str::to_string),
            ..Default::default()
        }
    }

    fn claim(name: &str, annotations: &[(&str, &str)], drifted: bool) -> NodeClaim {
        let annotations: BTreeMap<&str, &str> = annotations.iter().copied().collect();
        let conditions = if drifted {
            json!([{"type": "Drifted", "status": "True", "reason": "AMIDrift"}])
        } else {
            json!([])
        };
        serde_json::from_value(json!({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "default"}, "annotations": annotations},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []},
            "status": {"conditions": conditions}}))
        .unwrap()
    }

    fn stamped(actions: &[Action], name: &str) -> BTreeMap<String, String> {
        actions
            .iter()
            .find_map(|a| match a {
                Action::Restamp {
                    nodeclaim,
                    annotations,
                } if nodeclaim == name => Some(annotations.clone()),
                _ => None,
            })
            .unwrap_or_default()
    }

    /// Karpenter's hash controllers' rule, for every way a NodeClaim can carry another version:
    /// the hash is replaced only when the NodeClaim had not drifted under the one it carries.
    #[test]
    fn restamping_keeps_a_drifted_nodeclaims_old_hash_under_the_new_version() {
        let dump = dump(Some("Y2E="));
        let pool = &dump.nodepools[0];
        let class = &dump.nodeclasses[0];
        let pool_hash = convert::template_hash(pool).unwrap();
        let class_hash = convert::node_class_hash(class, "Y2E=").unwrap();
        let legacy = convert::legacy_template_hash(pool);
        let claims = vec![
            claim(
                "current",
                &[
                    (NODEPOOL_HASH, &pool_hash),
                    (NODEPOOL_HASH_VERSION, "v3"),
                    (NODECLASS_HASH, &class_hash),
                    (NODECLASS_HASH_VERSION, "v5"),
                ],
                false,
            ),
            claim("bare", &[], false),
            claim(
                "legacy",
                &[
                    (NODEPOOL_HASH, &legacy),
                    (NODEPOOL_HASH_VERSION, LEGACY_HASH_VERSION),
                ],
                false,
            ),
            claim(
                "legacy-drifted",
                &[
                    (NODEPOOL_HASH, "0123abcd"),
                    (NODEPOOL_HASH_VERSION, LEGACY_HASH_VERSION),
                ],
                false,
            ),
            claim(
                "karpenter-v4-drifted",
                &[(NODECLASS_HASH, "42"), (NODECLASS_HASH_VERSION, "v4")],
                true,
            ),
        ];
        let actions = restamps(&dump, &claims);
        assert!(stamped(&actions, "current").is_empty());
        let both: BTreeMap<String, String> = [
            (NODEPOOL_HASH, pool_hash.as_str()),
            (NODEPOOL_HASH_VERSION, "v3"),
            (NODECLASS_HASH, class_hash.as_str()),
            (NODECLASS_HASH_VERSION, "v5"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(stamped(&actions, "bare"), both);
        assert_eq!(stamped(&actions, "legacy"), both);
        let only_pool_version = stamped(&actions, "legacy-drifted");
        assert_eq!(only_pool_version[NODEPOOL_HASH_VERSION], "v3");
        assert!(!only_pool_version.contains_key(NODEPOOL_HASH));
        let karpenter = stamped(&actions, "karpenter-v4-drifted");
        assert_eq!(karpenter[NODECLASS_HASH_VERSION], "v5");
        assert!(!karpenter.contains_key(NODECLASS_HASH));
        assert_eq!(karpenter[NODEPOOL_HASH_VERSION], "v3");
        assert!(!karpenter.contains_key(NODEPOOL_HASH));

        // A fleet that all needs re-stamping is re-stamped a tick's share at a time.
        let many: Vec<NodeClaim> = (0..MAX_MARKS_PER_TICK + 5)
            .map(|i| claim(&format!("bare-{i}"), &[], false))
            .collect();
        assert_eq!(restamps(&dump, &many).len(), MAX_MARKS_PER_TICK);

        // Without the cluster's CA bundle the EC2NodeClass hash cannot be Karpenter's: it waits.
        let unknown = restamps(&super::tests::dump(None), &claims);
        assert!(!stamped(&unknown, "bare").contains_key(NODECLASS_HASH));
        assert_eq!(stamped(&unknown, "bare")[NODEPOOL_HASH], pool_hash);
    }
}
