//! The tick's decisions, each a pure function of what was read (the cluster dump, the
//! NodeClaims known so far, the owned instances, `now`) returning [`Action`]s: provisioning,
//! launch, registration, initialization, hash re-stamping, liveness, deletion and termination, and garbage
//! collection. Nothing here calls Kubernetes or AWS; the disruption phases are in
//! [`super::disruption`].

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use fleetwright_core::disruption::{
    drift, CLASS_HASH_VERSION, LEGACY_HASH_VERSION, NODECLASS_HASH, NODECLASS_HASH_VERSION,
    NODEPOOL_HASH, NODEPOOL_HASH_VERSION, POOL_HASH_VERSION,
};
use fleetwright_core::labels::NODEPOOL;
use fleetwright_core::{Catalog, Snapshot};
use fleetwright_crds::NodeClaim;
use fleetwright_kube::dump::ClusterDump;
use fleetwright_kube::interruption::instance_id;
use fleetwright_kube::{convert, objects};
use k8s_openapi::api::core::v1::Node;

use super::action::Action;
use super::claims::{
    awaits_partition, has_any_condition, has_condition, label, name_of, node_for, node_provider_id,
    provider_id,
};
use fleetwright_crds::conditions;

/// A NodeClaim that is launched but not registered this long after creation is given up.
pub const REGISTRATION_TTL: Duration = Duration::minutes(15);

/// Launched, unregistered NodeClaims whose node has joined; one whose partition is not known
/// yet waits for it ([`partition_labels`]).
pub fn registrations(dump: &ClusterDump, claims: &[NodeClaim]) -> Vec<Action> {
    claims
        .iter()
        .filter_map(|claim| {
            let provider = provider_id(claim)?;
            if has_condition(claim, conditions::REGISTERED) || awaits_partition(claim) {
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
            (has_condition(c, conditions::REGISTERED) || just_registered(c))
                && !has_condition(c, conditions::INITIALIZED)
                // A reboot's node initializes again only once the reboot has ended: until then
                // the node as it was before could pass for initialized.
                && super::reboot::in_progress(c).is_none()
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
        if has_condition(claim, conditions::DRIFTED) || legacy_drifted {
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
            let drifted = has_condition(claim, conditions::LAUNCHED)
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
                    .find(|c| c.type_ == conditions::DRIFTED && c.status == "True")
                    .map(|c| c.reason.clone().unwrap_or_default())
            });
            let unmarked = has_any_condition(claim, conditions::DRIFTED) && drifted.is_none();
            (marked.as_deref() != drifted || unmarked).then(|| Action::MarkDrifted {
                nodeclaim: name,
                reason: drifted.map(str::to_string),
            })
        })
        .take(MAX_MARKS_PER_TICK)
        .collect()
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

/// How long after a NodeClaim's creation the tick polls for its node to join and initialize.
/// An EC2 node joins within a minute or two; one that takes longer waits for the schedule, so a
/// node that never initializes (a startup taint never removed, a broken CNI) does not keep the
/// tick polling.
pub const JOIN_POLL_FOR: Duration = Duration::minutes(3);

/// Whether a NodeClaim of one of `pools` has launched and its node has not yet initialized
/// (within [`JOIN_POLL_FOR`] of its creation): the pods waiting for it bind only once the tick
/// has registered and initialized it, so the tick looks again soon instead of at its schedule.
pub fn joining(claims: &[NodeClaim], pools: &[String], now: DateTime<Utc>) -> bool {
    claims.iter().any(|claim| {
        let created = claim
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.as_second());
        let fresh = created.is_some_and(|c| now.timestamp() - c < JOIN_POLL_FOR.num_seconds());
        let pool = claim.metadata.labels.as_ref().and_then(|l| l.get(NODEPOOL));
        fresh
            && pool.is_some_and(|p| pools.contains(p))
            && provider_id(claim).is_some()
            && !has_condition(claim, conditions::INITIALIZED)
            && claim.metadata.deletion_timestamp.is_none()
    })
}

/// NodeClaims whose instance launched but never joined within [`REGISTRATION_TTL`]. One
/// `registered` this tick has joined: after an outage of the tick, a node that joined while no
/// tick ran is registered, not given up in the same breath.
pub fn liveness(claims: &[NodeClaim], registered: &[String], now: DateTime<Utc>) -> Vec<Action> {
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
                && !has_condition(claim, conditions::REGISTERED)
                && !registered.contains(&name_of(claim))
                && claim.metadata.deletion_timestamp.is_none()
                && provider_id(claim).is_some()
        })
        .map(|claim| Action::GiveUp {
            nodeclaim: name_of(claim),
            instance_id: provider_id(claim).and_then(instance_id).map(str::to_string),
        })
        .collect()
}

/// Ready, and free of the unregistered taint and of the NodeClaim's startup taints.
fn node_initialized(node: &Node, claim: &NodeClaim, just_registered: bool) -> bool {
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| {
            c.iter()
                .any(|c| c.type_ == conditions::READY && c.status == "True")
        });
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let blocked = taints.iter().any(|t| {
        (t.key == fleetwright_core::labels::TAINT_UNREGISTERED && !just_registered)
            || fleetwright_core::labels::is_known_ephemeral_taint(&t.key, &t.effect)
            || claim
                .spec
                .startup_taints
                .iter()
                .any(|s| s.key == t.key && s.effect == t.effect)
    });
    ready && !blocked && requested_registered(node, claim)
}

/// Whether the node advertises every resource its NodeClaim was launched for: a GPU is there
/// only once its device plugin has registered it (the kubelet reports it as zero until then),
/// so the NodeClaim is not initialized before, as Karpenter's `RequestedResourcesRegistered`.
fn requested_registered(node: &Node, claim: &NodeClaim) -> bool {
    let allocatable = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
    let requests = claim.spec.resources.as_ref().map(|r| &r.requests);
    requests.into_iter().flatten().all(|(name, quantity)| {
        let wanted = quantity
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| quantity.to_string());
        !nonzero(&wanted)
            || allocatable
                .and_then(|a| a.get(name))
                .is_some_and(|q| nonzero(&q.0))
    })
}

/// Whether a quantity is more than zero (an unreadable one counts as zero).
fn nonzero(quantity: &str) -> bool {
    fleetwright_core::quantity::parse_scaled(quantity, 1000).is_ok_and(|v| v > 0)
}

#[cfg(test)]
#[path = "../../tests/unit/tick/decide.rs"]
mod tests;
