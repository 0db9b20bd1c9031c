//! The simulated cloud, the project's one: `fleetwright simulate`, the benchmarks and tests run
//! the use cases against it through the same [`Cloud`] trait the runtime uses against EC2, over
//! a catalog (the embedded one, usually) and its prices. A launch goes through the real CreateFleet override selection
//! ([`launch::capacity_type`], [`launch::overrides`]) and takes the cheapest offering that has
//! capacity; offerings short of capacity (ICE) are skipped and marked unavailable, as the EC2
//! cloud does with CreateFleet's errors. Instances can be warned of a spot interruption and are
//! reclaimed two minutes later. Termination checks the ownership tags, as EC2's does.
//!
//! Faults can be injected ([`SimCloud::inject`]): API errors on CreateFleet, TerminateInstances
//! and DescribeInstances (throttling, 5xx), a CreateFleet whose answer is lost after it launched,
//! and DescribeInstances' eventual consistency ([`SimCloud::set_listing_lag`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

use chrono::{DateTime, Duration, Utc};
use fleetwright_cloud::instances::{ownership_problem, Instance, Termination};
use fleetwright_cloud::nodeclass::{ResolvedNodeClass, ResolvedReservation};
use fleetwright_cloud::unavailable::{OfferingKey, UnavailableOfferings};
use fleetwright_cloud::{Cloud, CloudError, LaunchRequest, Launched};
use fleetwright_core::labels::NODEPOOL;
use fleetwright_core::Catalog;
use fleetwright_crds::EC2NodeClass;
use serde::Deserialize;
mod launch_now;
pub use launch_now::PARTITIONS;
use launch_now::{api_error, resolved};

/// Insufficient capacity from now on for the offerings matched (an unset field matches all).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Ice {
    pub instance_type: Option<String>,
    pub zone: Option<String>,
    pub capacity_type: Option<String>,
}

/// The zones the simulated VPC has subnets in, in us-east-1 (other regions: the first three
/// zones of their catalog, [`subnet_zones`]).
pub const ZONES: [&str; 3] = ["us-east-1a", "us-east-1b", "us-east-1c"];
/// How long AWS waits after a spot interruption warning before reclaiming the instance.
pub const SPOT_WARNING: Duration = Duration::minutes(2);

/// A live simulated instance.
#[derive(Clone, Debug)]
pub struct SimInstance {
    pub instance: Instance,
    pub price: f64,
    /// When a spot interruption warning was sent for it.
    pub warned: Option<DateTime<Utc>>,
}

impl SimInstance {
    pub fn nodepool(&self) -> &str {
        self.instance
            .tags
            .get(NODEPOOL)
            .map(String::as_str)
            .unwrap_or_default()
    }
}

/// An injected API fault: the next `times` calls of `operation` (`CreateFleet`,
/// `TerminateInstances`, `DescribeInstances`) fail with `code` (`RequestLimitExceeded`,
/// `InternalError`, `Unavailable`, …). With `after_launch`, a CreateFleet launches first and its
/// answer is lost: the caller sees the error, the instance runs. The operation
/// `DescribeInstancesListing` is a listing that succeeds but is wrong: empty with
/// [`EMPTY_LISTING`], any other code missing every other instance (a stale tag lookup).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CloudFault {
    pub operation: &'static str,
    pub code: String,
    pub times: usize,
    pub after_launch: bool,
}

/// The code of a `DescribeInstancesListing` fault whose listing comes back empty.
pub const EMPTY_LISTING: &str = "EmptyListing";

#[derive(Debug, Default)]
struct State {
    live: BTreeMap<String, SimInstance>,
    next_id: u64,
    /// AMI release number per EC2NodeClass (absent: 1).
    releases: BTreeMap<String, u32>,
    /// Release for classes not named in `releases`.
    release_all: u32,
    ice: Vec<Ice>,
    unavailable: UnavailableOfferings,
    composed: Option<(BTreeSet<OfferingKey>, Arc<Catalog>)>,
    /// Every instance launched, by the NodeClaim it was launched for.
    launched_for: BTreeMap<String, Instance>,
    launches: usize,
    terminations: usize,
    capacity_errors: usize,
    faults: Vec<CloudFault>,
    /// DescribeInstances lists an instance only this long after its launch.
    listing_lag: Duration,
    /// The simulation's clock, for the listing lag.
    clock: Option<DateTime<Utc>>,
    /// Capacity reservations in the account, with their tags (`available` is their size).
    reservations: Vec<(ResolvedReservation, BTreeMap<String, String>)>,
    /// How many times each instance was rebooted.
    rebooted: BTreeMap<String, u32>,
}

/// The simulated cloud.
#[derive(Debug)]
pub struct SimCloud {
    cluster: String,
    catalog: Arc<Catalog>,
    /// The zones of the simulated VPC's subnets.
    zones: Vec<String>,
    state: Mutex<State>,
}

/// The zones the simulated VPC has subnets in for a catalog: [`ZONES`] in us-east-1, else the
/// catalog's first three availability zones of its region (no local zones).
pub fn subnet_zones(catalog: &Catalog) -> Vec<String> {
    if catalog.region == "us-east-1" {
        return ZONES.iter().map(|z| z.to_string()).collect();
    }
    catalog
        .all_zones()
        .into_iter()
        .filter(|z| {
            z.strip_prefix(catalog.region.as_str())
                .is_some_and(|rest| rest.len() == 1)
        })
        .take(3)
        .collect()
}

fn matches(ice: &Ice, instance_type: &str, zone: &str, capacity_type: &str) -> bool {
    let ok = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
    ok(&ice.instance_type, instance_type)
        && ok(&ice.zone, zone)
        && ok(&ice.capacity_type, capacity_type)
}

impl SimCloud {
    pub fn new(cluster: &str, catalog: Arc<Catalog>) -> Self {
        SimCloud {
            cluster: cluster.to_string(),
            zones: subnet_zones(&catalog),
            catalog,
            state: Mutex::new(State {
                release_all: 1,
                ..Default::default()
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes over an instance that was running before the simulation started (the fleet of a
    /// cluster a benchmark or a test starts from), at `price` an hour.
    pub fn adopt(&self, instance: Instance, price: f64) {
        self.state().live.insert(
            instance.id.clone(),
            SimInstance {
                instance,
                price,
                warned: None,
            },
        );
    }

    /// The instance dies without a warning or an event (a hardware failure, a terminate by
    /// hand): it is simply gone. Returns whether it was live.
    pub fn kill(&self, instance_id: &str) -> bool {
        self.state().live.remove(instance_id).is_some()
    }

    /// The live instances, by id.
    pub fn live(&self) -> BTreeMap<String, SimInstance> {
        self.state().live.clone()
    }

    /// How many times each instance was rebooted.
    pub fn reboots(&self) -> BTreeMap<String, u32> {
        self.state().rebooted.clone()
    }

    /// Injects an API fault (see [`CloudFault`]).
    pub fn inject(&self, fault: CloudFault) {
        self.state().faults.push(fault);
    }

    /// Whether a fault on `operation` is still waiting for its calls.
    pub fn faults_pending(&self, operation: &str) -> bool {
        self.state().faults.iter().any(|f| f.operation == operation)
    }

    /// DescribeInstances lists an instance only `lag` after its launch, from the clock set by
    /// [`SimCloud::set_clock`].
    pub fn set_listing_lag(&self, lag: Duration) {
        self.state().listing_lag = lag;
    }

    pub fn set_clock(&self, now: DateTime<Utc>) {
        self.state().clock = Some(now);
    }

    /// No injected fault from now on, and no listing lag.
    pub fn clear_faults(&self) {
        let mut s = self.state();
        s.faults.clear();
        s.listing_lag = Duration::zero();
    }

    /// The injected fault for one call of `operation`, if any (and one fewer of it left).
    fn take_fault(&self, operation: &str) -> Option<CloudFault> {
        let mut s = self.state();
        let index = s
            .faults
            .iter()
            .position(|f| f.operation == operation && f.times > 0)?;
        let fault = &mut s.faults[index];
        fault.times -= 1;
        let taken = fault.clone();
        if fault.times == 0 {
            s.faults.remove(index);
        }
        Some(taken)
    }

    /// The hourly price of the live fleet.
    pub fn hourly(&self) -> f64 {
        self.state().live.values().fold(0.0, |sum, i| sum + i.price)
    }

    /// Launches, terminations and insufficient-capacity errors so far.
    pub fn counts(&self) -> (usize, usize, usize) {
        let s = self.state();
        (s.launches, s.terminations, s.capacity_errors)
    }

    /// A new AMI release, for one EC2NodeClass or all.
    pub fn release_ami(&self, nodeclass: Option<&str>) {
        let mut s = self.state();
        match nodeclass {
            Some(name) => {
                let next = s.releases.get(name).copied().unwrap_or(s.release_all) + 1;
                s.releases.insert(name.to_string(), next);
            }
            None => {
                s.release_all += 1;
                s.releases.clear();
            }
        }
    }

    /// A capacity reservation in the account: `reservation.available` instances of its type in
    /// its zone, found by EC2NodeClasses that select its id or its `tags`. A capacity block's
    /// instances are reclaimed at its end.
    pub fn add_reservation(
        &self,
        reservation: ResolvedReservation,
        tags: BTreeMap<String, String>,
    ) {
        self.state().reservations.push((reservation, tags));
    }

    /// The reservations an EC2NodeClass selects, each with the instances it can still take.
    fn reservations_for(&self, nodeclass: &EC2NodeClass) -> Vec<ResolvedReservation> {
        let s = self.state();
        let terms = &nodeclass.spec.capacity_reservation_selector_terms;
        s.reservations
            .iter()
            .filter(|(r, tags)| {
                terms.iter().any(|t| {
                    let by_id = t.id.as_ref().is_none_or(|id| *id == r.id);
                    let by_tags = t.tags.iter().all(|(k, v)| tags.get(k) == Some(v));
                    by_id && by_tags && (t.id.is_some() || !t.tags.is_empty())
                })
            })
            .map(|(r, _)| {
                let used = s
                    .live
                    .values()
                    .filter(|i| i.instance.capacity_reservation_id.as_ref() == Some(&r.id))
                    .count();
                ResolvedReservation {
                    available: r.available.saturating_sub(used),
                    ..r.clone()
                }
            })
            .collect()
    }

    /// Offerings matching `ice` have no capacity from now on.
    pub fn add_ice(&self, ice: Ice) {
        self.state().ice.push(ice);
    }

    /// Sends a spot interruption warning to `count` live, unwarned spot instances of `nodepool`,
    /// chosen with `pick` (an index below the number of candidates). Returns them.
    pub fn warn_spot(
        &self,
        nodepool: &str,
        count: usize,
        now: DateTime<Utc>,
        pick: impl FnMut(usize) -> usize,
    ) -> Vec<Instance> {
        self.warn_spot_preferring(nodepool, count, now, |_| true, pick)
    }

    /// As [`Self::warn_spot`], choosing among the candidates `preferred` accepts while any
    /// remain (say, those whose node holds pods), and among all of them after.
    pub fn warn_spot_preferring(
        &self,
        nodepool: &str,
        count: usize,
        now: DateTime<Utc>,
        preferred: impl Fn(&Instance) -> bool,
        mut pick: impl FnMut(usize) -> usize,
    ) -> Vec<Instance> {
        let mut s = self.state();
        let mut warned = Vec::new();
        for _ in 0..count {
            let unwarned: Vec<&Instance> = s
                .live
                .values()
                .filter(|i| {
                    i.warned.is_none()
                        && i.nodepool() == nodepool
                        && i.instance.capacity_type == "spot"
                })
                .map(|i| &i.instance)
                .collect();
            let mut candidates: Vec<String> = unwarned
                .iter()
                .filter(|i| preferred(i))
                .map(|i| i.id.clone())
                .collect();
            if candidates.is_empty() {
                candidates = unwarned.iter().map(|i| i.id.clone()).collect();
            }
            if candidates.is_empty() {
                break;
            }
            let id = &candidates[pick(candidates.len())];
            if let Some(i) = s.live.get_mut(id) {
                i.warned = Some(now);
                warned.push(i.instance.clone());
            }
        }
        warned
    }

    /// Warns one live instance that it is reclaimed in two minutes (a spot interruption or a
    /// capacity reservation's interruption). Returns whether it was live and unwarned.
    pub fn warn(&self, instance_id: &str, now: DateTime<Utc>) -> bool {
        let mut s = self.state();
        match s.live.get_mut(instance_id) {
            Some(i) if i.warned.is_none() => {
                i.warned = Some(now);
                true
            }
            _ => false,
        }
    }

    /// Reclaims the instances whose interruption warning has run out, and those of capacity
    /// blocks that have ended; returns them.
    pub fn reclaim(&self, now: DateTime<Utc>) -> Vec<Instance> {
        let mut s = self.state();
        let ended: BTreeSet<String> = s
            .reservations
            .iter()
            .filter(|(r, _)| r.kind == "capacity-block" && r.end_time.is_some_and(|e| now >= e))
            .map(|(r, _)| r.id.clone())
            .collect();
        let due: Vec<String> = s
            .live
            .values()
            .filter(|i| {
                i.warned.is_some_and(|w| now - w >= SPOT_WARNING)
                    || i.instance
                        .capacity_reservation_id
                        .as_ref()
                        .is_some_and(|id| ended.contains(id))
            })
            .map(|i| i.instance.id.clone())
            .collect();
        due.iter()
            .filter_map(|id| s.live.remove(id))
            .map(|i| i.instance)
            .collect()
    }

    fn release_of(&self, nodeclass: &str) -> u32 {
        let s = self.state();
        s.releases.get(nodeclass).copied().unwrap_or(s.release_all)
    }

    /// The instance already launched for a NodeClaim, live or not: as EC2 answers a retried
    /// CreateFleet with its client token, and as `Ec2Cloud` finds it by tag in any state. A
    /// NodeClaim gets one instance for life.
    fn existing(&self, nodeclaim: &str) -> Option<Instance> {
        let s = self.state();
        let live = s
            .live
            .values()
            .map(|i| &i.instance)
            .find(|i| i.nodeclaim() == Some(nodeclaim));
        match live {
            Some(i) => Some(i.clone()),
            None => s.launched_for.get(nodeclaim).map(|i| Instance {
                state: "terminated".into(),
                ..i.clone()
            }),
        }
    }

    fn has_capacity(&self, instance_type: &str, zone: &str, capacity_type: &str) -> bool {
        !self
            .state()
            .ice
            .iter()
            .any(|i| matches(i, instance_type, zone, capacity_type))
    }
}

impl Cloud for SimCloud {
    async fn catalog(&self, now: DateTime<Utc>) -> Result<Arc<Catalog>, CloudError> {
        let mut s = self.state();
        let unavailable = s.unavailable.active(now);
        if let Some((key, catalog)) = &s.composed {
            if *key == unavailable {
                return Ok(catalog.clone());
            }
        }
        let mut catalog = (*self.catalog).clone();
        catalog.unavailable = unavailable.clone();
        let catalog = Arc::new(catalog);
        s.composed = Some((unavailable, catalog.clone()));
        Ok(catalog)
    }

    async fn nodeclass(
        &self,
        nodeclass: &EC2NodeClass,
        _now: DateTime<Utc>,
    ) -> Result<ResolvedNodeClass, CloudError> {
        let name = nodeclass.metadata.name.clone().unwrap_or_default();
        let mut out = resolved(nodeclass, self.release_of(&name), &self.zones);
        out.reservations = self.reservations_for(nodeclass);
        Ok(out)
    }

    async fn launch(
        &self,
        req: &LaunchRequest,
        nodeclass: &EC2NodeClass,
        now: DateTime<Utc>,
    ) -> Result<Launched, CloudError> {
        // As on EC2: an instance already tagged for the NodeClaim is found by DescribeInstances
        // and adopted; only a new launch calls CreateFleet, and only it can meet its faults.
        if self.existing(&req.nodeclaim).is_some() {
            let launched = self.launch_now(req, nodeclass, now).await?;
            return Ok(launched.labelled(&self.catalog));
        }
        let fault = self.take_fault("CreateFleet");
        if let Some(f) = fault.as_ref().filter(|f| !f.after_launch) {
            return Err(api_error(f));
        }
        let launched = self.launch_now(req, nodeclass, now).await?;
        match fault {
            Some(lost) => Err(api_error(&lost)),
            None => Ok(launched.labelled(&self.catalog)),
        }
    }

    async fn terminate(&self, instance_id: &str) -> Result<Termination, CloudError> {
        if let Some(f) = self.take_fault("TerminateInstances") {
            return Err(api_error(&f));
        }
        let mut s = self.state();
        let Some(found) = s.live.get(instance_id) else {
            return Ok(Termination::AlreadyGone);
        };
        if let Some(reason) = ownership_problem(&found.instance.tags, &self.cluster) {
            return Err(CloudError::Refused {
                action: "terminate",
                instance_id: instance_id.to_string(),
                reason,
            });
        }
        s.live.remove(instance_id);
        s.terminations += 1;
        Ok(Termination::Terminating)
    }

    async fn reboot(&self, instance_id: &str, nodeclaim: &str) -> Result<bool, CloudError> {
        if let Some(f) = self.take_fault("RebootInstances") {
            return Err(api_error(&f));
        }
        let mut s = self.state();
        let Some(found) = s.live.get(instance_id) else {
            return Ok(false);
        };
        let other = (found.instance.nodeclaim() != Some(nodeclaim))
            .then(|| format!("it was not launched for NodeClaim {nodeclaim}"));
        if let Some(reason) = ownership_problem(&found.instance.tags, &self.cluster).or(other) {
            return Err(CloudError::Refused {
                action: "reboot",
                instance_id: instance_id.to_string(),
                reason,
            });
        }
        *s.rebooted.entry(instance_id.to_string()).or_default() += 1;
        Ok(true)
    }

    async fn instances(&self) -> Result<Vec<Instance>, CloudError> {
        if let Some(f) = self.take_fault("DescribeInstances") {
            return Err(api_error(&f));
        }
        let listing = self.take_fault("DescribeInstancesListing");
        let s = self.state();
        let listed = |i: &&SimInstance| match (s.clock, i.instance.launch_time) {
            (Some(now), Some(launched)) => now - launched >= s.listing_lag,
            _ => true,
        };
        let all = s.live.values().filter(listed).map(|i| i.instance.clone());
        Ok(match listing.as_ref().map(|f| f.code.as_str()) {
            // A tag-filtered listing that succeeds and finds nothing.
            Some(EMPTY_LISTING) => Vec::new(),
            // A stale tag index: every other instance is missing from the answer.
            Some(_) => all.step_by(2).collect(),
            None => all.collect(),
        })
    }

    async fn describe(&self, ids: &[String]) -> Result<Vec<Instance>, CloudError> {
        let s = self.state();
        Ok(ids
            .iter()
            .filter_map(|id| s.live.get(id))
            .map(|i| i.instance.clone())
            .collect())
    }

    fn mark_unavailable(
        &self,
        capacity_type: &str,
        instance_type: &str,
        zone: &str,
        now: DateTime<Utc>,
    ) {
        self.state()
            .unavailable
            .mark(capacity_type, instance_type, zone, now);
    }

    fn unavailable(&self) -> UnavailableOfferings {
        self.state().unavailable.clone()
    }

    fn restore_unavailable(&self, saved: &UnavailableOfferings) {
        self.state().unavailable.merge(saved);
    }
}

#[cfg(test)]
#[path = "../../tests/unit/cloud.rs"]
mod tests;
