//! The instance catalog: EC2 instance types and their per-zone offerings and prices, read from the
//! exact shapes `aws ec2 describe-instance-types`, `describe-instance-type-offerings` and a price
//! table print, and resolved into schedulable types (labels, capacity, allocatable) with the
//! EKS/Karpenter formulas. A compressed catalog is embedded so everything works offline: the
//! instance types, the per-zone offerings of every region in `../shared/data/aws`
//! ([`EMBEDDED_REGIONS`]), and us-east-1's on-demand prices (the only price table there, used for
//! every region).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::sync::{Arc, OnceLock};

use crate::error::CoreError;
use crate::labels::*;
use crate::requirements::{Requirement, Requirements};
use crate::resources::Resources;

/// Spot prices default to this fraction of the on-demand price until real spot prices are supplied.
pub const DEFAULT_SPOT_PRICE_FRACTION: f64 = 0.35;
/// Share of memory the hypervisor keeps (Karpenter's `VM_MEMORY_OVERHEAD_PERCENT`).
pub const VM_MEMORY_OVERHEAD: f64 = 0.075;
/// Root volume size when the EC2NodeClass does not set one (Karpenter's default EBS volume).
pub const DEFAULT_ROOT_VOLUME_BYTES: i64 = 20 << 30;
const MIB: i64 = 1 << 20;

static EMBEDDED_TYPES: &[u8] = include_bytes!("../../data/describe-instance-types.json.gz");
/// The regions whose offerings are embedded.
pub const EMBEDDED_REGIONS: [&str; 4] = ["ap-northeast-2", "eu-west-1", "us-east-1", "us-west-2"];
static EMBEDDED_OFFERINGS: [&[u8]; 4] = [
    include_bytes!("../../data/instance-type-offerings-ap-northeast-2.json.gz"),
    include_bytes!("../../data/instance-type-offerings-eu-west-1.json.gz"),
    include_bytes!("../../data/instance-type-offerings-us-east-1.json.gz"),
    include_bytes!("../../data/instance-type-offerings-us-west-2.json.gz"),
];
static EMBEDDED_PRICES: &[u8] = include_bytes!("../../data/ondemand-prices-us-east-1.csv.gz");

mod expression;
mod raw;
mod resolve;
#[cfg(test)]
mod tests;

pub use self::expression::{
    default_pods, is_quantity, reserved_quantity, reserved_value, resolve_kubelet, Expression,
    ExpressionError, ExpressionVars, KubeletExpressions, ResolvedKubelet, MAX_PODS_FIELD,
    RESERVED_RESOURCES,
};
pub use self::raw::*;
pub use self::resolve::{architecture, eni_limited_pods, kube_reserved_cpu};
use self::resolve::{capacity, overhead, type_requirements};
use crate::model::NodeOverlay;

mod overlay;
pub use self::overlay::overlaid_price;

/// Where and how an instance type can be bought, and for how much.
#[derive(Clone, Debug, PartialEq)]
pub struct Offering {
    pub zone: String,
    pub capacity_type: String,
    /// USD per hour.
    pub price: f64,
    pub available: bool,
    /// For a `reserved` offering: the capacity reservation it launches into.
    pub reservation: Option<Reservation>,
}

/// The capacity reservation of a `reserved` offering, with the labels a node in it carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reservation {
    pub id: String,
    /// `default` or `capacity-block`.
    pub kind: String,
    pub interruptible: bool,
    /// Instances it can still take.
    pub available: usize,
}

/// A capacity reservation an EC2NodeClass selects (its `status.capacityReservations`, with the
/// instances it can still take).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct CapacityReservation {
    pub id: String,
    pub instance_type: String,
    pub zone: String,
    /// `default` or `capacity-block`.
    pub kind: String,
    pub interruptible: bool,
    /// `active`, or `expiring` (a capacity block within 40 minutes of its end): nothing
    /// launches into an expiring reservation.
    pub state: String,
    /// Instances it can still take (unknown counts as none, as Karpenter counts it).
    pub available: usize,
}

/// A reserved offering's price: the on-demand price divided by ten million, as Karpenter prices
/// it: all but free (the reservation is paid for whether it is used or not), while keeping the
/// types' order for consolidation.
pub fn reserved_price(on_demand: f64) -> f64 {
    on_demand / 10_000_000.0
}

/// Kubelet settings from the EC2NodeClass that change a node's allocatable resources.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct KubeletSettings {
    pub max_pods: Option<i64>,
    pub pods_per_core: Option<i64>,
    pub kube_reserved: Option<Resources>,
    pub system_reserved: Option<Resources>,
    /// `evictionHard` entries such as `memory.available: 5%`.
    pub eviction_hard: BTreeMap<String, String>,
    /// `evictionSoft` entries, where the AMI family honours them (all but Bottlerocket, as
    /// Karpenter reads them): the larger of the two thresholds is held back per signal.
    pub eviction_soft: BTreeMap<String, String>,
    /// `maxPods` and reservations written as CEL expressions, evaluated per type: `max_pods`
    /// and the reservations above then hold only what was written as numbers and quantities.
    pub expressions: KubeletExpressions,
}

/// The node-class facts that shape every instance type of a NodePool.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct NodeClassSettings {
    pub kubelet: KubeletSettings,
    /// Root volume size in bytes; None means the 20Gi default.
    pub root_volume_bytes: Option<i64>,
    /// `instanceStorePolicy: RAID0`: local NVMe becomes ephemeral storage.
    pub instance_store_raid0: bool,
    /// The capacity reservations the class selects: each adds a `reserved` offering to its
    /// instance type in its zone.
    pub reservations: Vec<CapacityReservation>,
    /// The placement group the class launches into: every type carries its id, and a
    /// partition group's partitions, as requirements (Karpenter's), so pods can select a
    /// partition or spread over them.
    pub placement_group: Option<PlacementGroup>,
    /// The zones of the class's subnets, as resolved: offerings elsewhere cannot launch, so
    /// they are left out (and a spread over zones has only these as domains). None when not
    /// known: every zone.
    pub zones: Option<BTreeSet<String>>,
    /// `enclaveOptions.enabled`: only types that support Nitro Enclaves can launch.
    pub enclaves: bool,
}

/// A placement group as the catalog needs it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct PlacementGroup {
    pub id: String,
    /// How many partitions a `partition` group has; 0 for other strategies.
    pub partitions: u32,
}

/// An instance type resolved for one node class: labels as requirements, capacity, allocatable.
#[derive(Clone, Debug)]
pub struct InstanceType {
    pub name: String,
    pub requirements: Requirements,
    pub capacity: Resources,
    pub overhead: Resources,
    pub allocatable: Resources,
    pub offerings: Vec<Offering>,
}

impl InstanceType {
    /// The cheapest available offering that the given requirements allow.
    pub fn cheapest_offering(&self, reqs: &Requirements) -> Option<&Offering> {
        self.offerings
            .iter()
            .filter(|o| o.available && offering_allowed(o, reqs))
            .min_by(|a, b| {
                a.price
                    .total_cmp(&b.price)
                    .then_with(|| a.zone.cmp(&b.zone))
            })
    }
}

/// A type launched into a placement group carries the group's id, and in a partition group
/// one of its partitions (1 to N): the domains a spread over partitions counts.
fn add_placement_group(reqs: &mut Requirements, group: &PlacementGroup) {
    reqs.add(Requirement::single(PLACEMENT_GROUP_ID, &group.id));
    if group.partitions > 0 {
        let partitions = (1..=group.partitions).map(|p| p.to_string());
        reqs.add(Requirement::in_values(
            PLACEMENT_GROUP_PARTITION,
            partitions,
        ));
    }
}

/// Whether requirements on zone, capacity type and reservation allow an offering. An offering
/// outside reservations has no reservation labels: only `NotIn` and `DoesNotExist` on them
/// allow it.
pub fn offering_allowed(o: &Offering, reqs: &Requirements) -> bool {
    reqs.get(ZONE).is_none_or(|r| r.has(&o.zone))
        && reqs
            .get(CAPACITY_TYPE)
            .is_none_or(|r| r.has(&o.capacity_type))
        && reservation_allowed(o.reservation.as_ref(), reqs)
}

fn reservation_allowed(reservation: Option<&Reservation>, reqs: &Requirements) -> bool {
    let keys = [RESERVATION_ID, RESERVATION_TYPE, RESERVATION_INTERRUPTIBLE];
    if keys.iter().all(|k| !reqs.has_key(k)) {
        return true;
    }
    let mut labels = BTreeMap::new();
    if let Some(r) = reservation {
        labels.insert(RESERVATION_ID.to_string(), r.id.clone());
        labels.insert(RESERVATION_TYPE.to_string(), r.kind.clone());
        labels.insert(
            RESERVATION_INTERRUPTIBLE.to_string(),
            r.interruptible.to_string(),
        );
    }
    keys.iter().all(|k| match reqs.get(k) {
        None => true,
        Some(req) => {
            let mut one = Requirements::new();
            one.add(req.clone());
            one.matches_labels(&labels)
        }
    })
}

/// The region of the embedded on-demand price table.
pub const EMBEDDED_PRICE_REGION: &str = "us-east-1";

/// Where a catalog's on-demand prices come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OnDemandPrices {
    /// The embedded table of a region's public on-demand prices (Linux, shared tenancy).
    Table(String),
    /// The AWS Price List API, for the catalog's own region.
    PriceList,
    /// Given with the catalog (a price file, or a synthetic catalog's own prices).
    Given,
}

/// The raw catalog: instance facts, zones and prices for one region.
#[derive(Clone, Debug)]
pub struct Catalog {
    pub region: String,
    pub raw: Vec<RawInstanceType>,
    pub zones: BTreeMap<String, BTreeSet<String>>,
    pub on_demand: BTreeMap<String, f64>,
    /// Spot prices by (instance type, zone); missing ones default to a fraction of on-demand.
    pub spot: BTreeMap<(String, String), f64>,
    /// Offerings known to be unavailable (capacity type, instance type, zone), e.g. after an ICE.
    pub unavailable: BTreeSet<(String, String, String)>,
    /// Pre-resolved types (synthetic catalogs for benchmarks and tests); used as they are.
    pub fixed: Option<Vec<InstanceType>>,
    /// Spot price as a fraction of on-demand where no spot price is known: 0.35 for the embedded
    /// catalog, 1.0 for a live catalog before its first spot-price refresh.
    pub spot_fraction: f64,
    /// Where the on-demand prices come from.
    pub on_demand_prices: OnDemandPrices,
    /// Whether spot prices were read (DescribeSpotPriceHistory); without them each is
    /// `spot_fraction` × on-demand, an estimate.
    pub spot_prices_read: bool,
    /// NodeOverlays applied to every type this catalog resolves, highest weight first.
    pub overlays: Vec<NodeOverlay>,
    /// Each type's labels and where it is offered, built on first use (drift reads them for
    /// every NodeClaim of every tick).
    facts: Facts,
    /// The types resolved for each node class lately (every scheduling pass of a tick, and
    /// each consolidation move it tries, asks again).
    resolved: Resolved,
}

/// [`Catalog::instance_types_shared`]'s memory: node-class settings and a fingerprint of the
/// catalog's public fields (so a catalog changed after a lookup is never answered from before
/// the change), with the types resolved for them. A clone starts empty, as [`Facts`] does.
#[derive(Debug, Default)]
struct Resolved(std::sync::Mutex<Vec<ResolvedEntry>>);

/// Node-class settings, the catalog's fingerprint then, and the types they resolved to.
type ResolvedEntry = (NodeClassSettings, u64, Arc<Vec<InstanceType>>);

impl Clone for Resolved {
    fn clone(&self) -> Self {
        Resolved::default()
    }
}

/// How many node classes' types a catalog keeps resolved.
const RESOLVED_KEPT: usize = 16;

/// What [`Catalog::type_labels`] and [`Catalog::offered`] answer, by type, built once per
/// catalog. A clone starts empty: it may be composed with other unavailable offerings, which
/// decide whether a type resolves at all.
#[derive(Debug, Default)]
struct Facts(OnceLock<BTreeMap<String, TypeFacts>>);

impl Clone for Facts {
    fn clone(&self) -> Self {
        Facts::default()
    }
}

#[derive(Debug, Default)]
struct TypeFacts {
    /// Empty for a type that does not resolve (no offering available).
    labels: BTreeMap<String, String>,
    /// (zone, capacity type) of every offering, available or not.
    offered: BTreeSet<(String, String)>,
}

impl Catalog {
    /// Builds a catalog from the three AWS documents.
    pub fn from_documents(
        region: &str,
        instance_types_json: &[u8],
        offerings_json: &[u8],
        prices: &[u8],
    ) -> Result<Self, CoreError> {
        let types: DescribeInstanceTypes = serde_json::from_slice(instance_types_json)
            .map_err(|e| CoreError::input("describe-instance-types", "InstanceTypes", e))?;
        let offerings: DescribeOfferings = serde_json::from_slice(offerings_json).map_err(|e| {
            CoreError::input(
                "describe-instance-type-offerings",
                "InstanceTypeOfferings",
                e,
            )
        })?;
        let offerings = offerings
            .instance_type_offerings
            .into_iter()
            .map(|o| (o.instance_type, o.location));
        Ok(Catalog::from_raw(
            region,
            types.instance_types,
            offerings,
            parse_prices(prices)?,
        ))
    }

    /// Builds a catalog from instance facts already read (e.g. from the live EC2 API), with
    /// `(instance type, zone)` offerings and on-demand prices.
    pub fn from_raw(
        region: &str,
        raw: Vec<RawInstanceType>,
        offerings: impl IntoIterator<Item = (String, String)>,
        on_demand: BTreeMap<String, f64>,
    ) -> Self {
        let mut zones: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (instance_type, zone) in offerings {
            zones.entry(instance_type).or_default().insert(zone);
        }
        Catalog {
            region: region.to_string(),
            raw,
            zones,
            on_demand,
            spot: BTreeMap::new(),
            unavailable: BTreeSet::new(),
            fixed: None,
            spot_fraction: DEFAULT_SPOT_PRICE_FRACTION,
            on_demand_prices: OnDemandPrices::Given,
            spot_prices_read: false,
            overlays: Vec::new(),
            facts: Facts::default(),
            resolved: Resolved::default(),
        }
    }

    /// The embedded on-demand price table (us-east-1; used as the fallback for other regions).
    pub fn embedded_prices() -> BTreeMap<String, f64> {
        // Only the price table is read (not the whole catalog): the functions call this while
        // they start, and a cold start should not parse 1,395 instance types it may not need.
        parse_prices(&gunzip(EMBEDDED_PRICES)).expect("the embedded price table parses")
    }

    /// A catalog of already resolved instance types (node-class settings do not change them).
    pub fn from_types(region: &str, types: Vec<InstanceType>) -> Self {
        Catalog {
            region: region.to_string(),
            raw: Vec::new(),
            zones: BTreeMap::new(),
            on_demand: BTreeMap::new(),
            spot: BTreeMap::new(),
            unavailable: BTreeSet::new(),
            fixed: Some(types),
            spot_fraction: DEFAULT_SPOT_PRICE_FRACTION,
            on_demand_prices: OnDemandPrices::Given,
            spot_prices_read: false,
            overlays: Vec::new(),
            facts: Facts::default(),
            resolved: Resolved::default(),
        }
    }

    /// The us-east-1 catalog embedded in the binary (1,395 types, per-zone offerings, on-demand prices).
    pub fn embedded() -> &'static Catalog {
        Catalog::embedded_region("us-east-1").expect("us-east-1 is embedded")
    }

    /// The embedded catalog of one of [`EMBEDDED_REGIONS`]: its offerings, with us-east-1's
    /// on-demand prices. None for a region not embedded.
    pub fn embedded_region(region: &str) -> Option<&'static Catalog> {
        static CATALOGS: [OnceLock<Catalog>; 4] = [const { OnceLock::new() }; 4];
        let index = EMBEDDED_REGIONS.iter().position(|r| *r == region)?;
        Some(CATALOGS[index].get_or_init(|| {
            let types = gunzip(EMBEDDED_TYPES);
            let offerings = gunzip(EMBEDDED_OFFERINGS[index]);
            let prices = gunzip(EMBEDDED_PRICES);
            let mut catalog = Catalog::from_documents(region, &types, &offerings, &prices)
                .expect("the embedded catalog is valid");
            catalog.on_demand_prices = OnDemandPrices::Table(EMBEDDED_PRICE_REGION.into());
            catalog
        }))
    }

    /// Where this catalog's prices come from, one line each, estimates marked as such: what
    /// `plan`, `explain` and the simulation report say about the prices they show.
    pub fn price_notes(&self) -> Vec<String> {
        let on_demand = match &self.on_demand_prices {
            OnDemandPrices::Table(region) if *region == self.region => {
                format!("on-demand prices: the embedded {region} price table")
            }
            OnDemandPrices::Table(region) => format!(
                "on-demand prices are estimates: the embedded {region} price table stands in for {}",
                self.region
            ),
            OnDemandPrices::PriceList => format!(
                "on-demand prices: the AWS Price List API for {} (a type it does not list is priced from the embedded {EMBEDDED_PRICE_REGION} table scaled to the region's prices, an estimate)",
                self.region
            ),
            OnDemandPrices::Given => "on-demand prices: as given with the catalog".to_string(),
        };
        let mut out = vec![on_demand];
        if !self.spot_prices_read && self.fixed.is_none() {
            out.push(format!(
                "spot prices are estimates: {} × on-demand (no spot price history was read)",
                self.spot_fraction
            ));
        }
        out
    }

    /// The zones this catalog offers any type in.
    pub fn all_zones(&self) -> BTreeSet<String> {
        self.zones.values().flatten().cloned().collect()
    }

    pub fn spot_price(&self, instance_type: &str, zone: &str) -> Option<f64> {
        self.spot
            .get(&(instance_type.to_string(), zone.to_string()))
            .copied()
            .or_else(|| {
                self.on_demand
                    .get(instance_type)
                    .map(|p| p * self.spot_fraction)
            })
    }

    /// This catalog with `overlays` applied to every type it resolves (itself when there are
    /// none). Overlays are sorted by weight, highest first, then by name, as Karpenter orders
    /// them.
    pub fn with_overlays(&self, overlays: &[NodeOverlay]) -> std::borrow::Cow<'_, Catalog> {
        if overlays.is_empty() {
            return std::borrow::Cow::Borrowed(self);
        }
        let mut out = self.clone();
        out.overlays = overlays.to_vec();
        out.overlays
            .sort_by(|a, b| b.weight.cmp(&a.weight).then_with(|| a.name.cmp(&b.name)));
        std::borrow::Cow::Owned(out)
    }

    /// Resolves every usable instance type for one node class.
    pub fn instance_types(&self, settings: &NodeClassSettings) -> Vec<InstanceType> {
        self.instance_types_shared(settings).as_ref().clone()
    }

    /// [`Catalog::instance_types`], resolved once per node class and shared.
    pub fn instance_types_shared(&self, settings: &NodeClassSettings) -> Arc<Vec<InstanceType>> {
        let fingerprint = self.fingerprint();
        let mut kept = self.resolved.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, _, types)) = kept
            .iter()
            .find(|(s, f, _)| *f == fingerprint && s == settings)
        {
            return types.clone();
        }
        let types = Arc::new(self.resolve_all(settings));
        if kept.len() >= RESOLVED_KEPT {
            kept.remove(0);
        }
        kept.push((settings.clone(), fingerprint, types.clone()));
        types
    }

    /// A hash of the public fields that change what a node class resolves to.
    fn fingerprint(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.region.hash(&mut h);
        self.raw.len().hash(&mut h);
        self.zones.hash(&mut h);
        for (k, v) in &self.on_demand {
            (k, v.to_bits()).hash(&mut h);
        }
        for (k, v) in &self.spot {
            (k, v.to_bits()).hash(&mut h);
        }
        self.unavailable.hash(&mut h);
        self.fixed.as_ref().map(Vec::len).hash(&mut h);
        self.spot_fraction.to_bits().hash(&mut h);
        format!("{:?}", self.overlays).hash(&mut h);
        h.finish()
    }

    fn resolve_all(&self, settings: &NodeClassSettings) -> Vec<InstanceType> {
        if let Some(fixed) = &self.fixed {
            let mut types = fixed.clone();
            for t in &mut types {
                overlay::apply(&self.overlays, t);
            }
            return types;
        }
        let mut types = Vec::new();
        for raw in &self.raw {
            match self.resolve(raw, settings) {
                Ok(Some(t)) => types.push(t),
                Ok(None) => {}
                // As Karpenter lists a node class's types: a maxPods expression that cannot be
                // evaluated for one type fails them all, so nothing launches from a class
                // configured wrong ([`Catalog::check_kubelet`] names the error).
                Err(_) => return Vec::new(),
            }
        }
        types
    }

    /// Karpenter's validation of a node class's kubelet expressions: each evaluated for every
    /// type of the catalog, in name order; the first failure (an evaluation error, a negative
    /// reservation, a maxPods outside int32) is the error.
    pub fn check_kubelet(&self, kubelet: &KubeletSettings) -> Result<(), ExpressionError> {
        if kubelet.expressions.is_empty() {
            return Ok(());
        }
        let mut raw: Vec<&RawInstanceType> = self.raw.iter().collect();
        raw.sort_by(|a, b| a.instance_type.cmp(&b.instance_type));
        for t in raw {
            resolve_kubelet(t, kubelet, true)?;
        }
        Ok(())
    }

    fn resolve(
        &self,
        raw: &RawInstanceType,
        settings: &NodeClassSettings,
    ) -> Result<Option<InstanceType>, ExpressionError> {
        let Some(arch) = architecture(raw) else {
            return Ok(None);
        };
        if settings.enclaves && raw.nitro_enclaves_support.as_deref() != Some("supported") {
            return Ok(None);
        }
        let kubelet = resolve_kubelet(raw, &settings.kubelet, false)?;
        let mut offerings = self.offerings(raw);
        offerings.extend(self.reserved_offerings(raw, &settings.reservations));
        if let Some(zones) = &settings.zones {
            offerings.retain(|o| zones.contains(&o.zone));
        }
        if offerings.iter().all(|o| !o.available) {
            return Ok(None);
        }
        let capacity = capacity(raw, arch, settings, kubelet.pods);
        let overhead = overhead(raw, &capacity, settings, &kubelet);
        let mut allocatable = capacity.minus(&overhead);
        allocatable.cpu = allocatable.cpu.max(0);
        allocatable.memory = allocatable.memory.max(0);
        allocatable.ephemeral = allocatable.ephemeral.max(0);
        let mut requirements = type_requirements(raw, arch, &offerings, &self.region);
        if let Some(group) = &settings.placement_group {
            add_placement_group(&mut requirements, group);
        }
        let mut resolved = InstanceType {
            name: raw.instance_type.clone(),
            requirements,
            capacity,
            overhead,
            allocatable,
            offerings,
        };
        overlay::apply(&self.overlays, &mut resolved);
        Ok(Some(resolved))
    }

    /// The labels a node of `instance_type` carries for its type (arch, OS, family, size, CPU,
    /// memory, ...: every single-valued label of the type's requirements), as Karpenter writes
    /// them onto a NodeClaim at launch. Empty for a type the catalog does not know.
    pub fn type_labels(&self, instance_type: &str) -> BTreeMap<String, String> {
        self.facts()
            .get(instance_type)
            .map(|f| f.labels.clone())
            .unwrap_or_default()
    }

    /// Whether `instance_type` is offered in `zone` with `capacity_type` (either unset: any),
    /// available or not (Karpenter's `Offerings.HasCompatible`); None when the catalog does
    /// not know the type.
    pub fn offered(
        &self,
        instance_type: &str,
        zone: Option<&str>,
        capacity_type: Option<&str>,
    ) -> Option<bool> {
        let facts = self.facts().get(instance_type)?;
        Some(facts.offered.iter().any(|(z, c)| {
            zone.is_none_or(|want| want == z) && capacity_type.is_none_or(|want| want == c)
        }))
    }

    fn facts(&self) -> &BTreeMap<String, TypeFacts> {
        self.facts.0.get_or_init(|| {
            let single = |t: &InstanceType| {
                let mut labels = t.requirements.single_valued_labels();
                labels.retain(|k, _| k != ZONE && k != CAPACITY_TYPE);
                labels
            };
            let offered = |offerings: &[Offering]| {
                offerings
                    .iter()
                    .map(|o| (o.zone.clone(), o.capacity_type.clone()))
                    .collect()
            };
            if let Some(fixed) = &self.fixed {
                return fixed
                    .iter()
                    .map(|t| {
                        let facts = TypeFacts {
                            labels: single(t),
                            offered: offered(&t.offerings),
                        };
                        (t.name.clone(), facts)
                    })
                    .collect();
            }
            self.raw
                .iter()
                .map(|raw| {
                    let resolved = self
                        .resolve(raw, &NodeClassSettings::default())
                        .ok()
                        .flatten();
                    let facts = TypeFacts {
                        labels: resolved.as_ref().map(single).unwrap_or_default(),
                        offered: offered(&self.offerings(raw)),
                    };
                    (raw.instance_type.clone(), facts)
                })
                .collect()
        })
    }

    /// Every offering of a type: each zone it is offered in × each capacity type it supports.
    pub fn offerings(&self, raw: &RawInstanceType) -> Vec<Offering> {
        let name = &raw.instance_type;
        let mut out = Vec::new();
        let Some(zones) = self.zones.get(name) else {
            return out;
        };
        for zone in zones {
            for class in [CAPACITY_ON_DEMAND, CAPACITY_SPOT] {
                if !raw.supported_usage_classes.iter().any(|c| c == class) {
                    continue;
                }
                let price = if class == CAPACITY_SPOT {
                    self.spot_price(name, zone)
                } else {
                    self.on_demand.get(name).copied()
                };
                let blocked =
                    self.unavailable
                        .contains(&(class.to_string(), name.clone(), zone.clone()));
                out.push(Offering {
                    zone: zone.clone(),
                    capacity_type: class.to_string(),
                    price: price.unwrap_or(f64::MAX),
                    available: price.is_some() && !blocked,
                    reservation: None,
                });
            }
        }
        out
    }

    /// The `reserved` offerings of a type: one per reservation of it, in the reservation's zone,
    /// available while the reservation is active, has instances left, and the type is offered
    /// in that zone (and not marked unavailable there).
    pub fn reserved_offerings(
        &self,
        raw: &RawInstanceType,
        reservations: &[CapacityReservation],
    ) -> Vec<Offering> {
        let name = &raw.instance_type;
        let offered = |zone: &str| self.zones.get(name).is_some_and(|z| z.contains(zone));
        reservations
            .iter()
            .filter(|r| &r.instance_type == name)
            .map(|r| {
                let blocked = self.unavailable.contains(&(
                    CAPACITY_RESERVED.to_string(),
                    name.clone(),
                    r.zone.clone(),
                ));
                Offering {
                    zone: r.zone.clone(),
                    capacity_type: CAPACITY_RESERVED.to_string(),
                    price: reserved_price(self.on_demand.get(name).copied().unwrap_or(0.0)),
                    available: r.state == "active"
                        && r.available > 0
                        && offered(&r.zone)
                        && !blocked,
                    reservation: Some(Reservation {
                        id: r.id.clone(),
                        kind: r.kind.clone(),
                        interruptible: r.interruptible,
                        available: r.available,
                    }),
                }
            })
            .collect()
    }
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut out)
        .expect("embedded data is valid gzip");
    out
}

/// Parses a price table: CSV `instance_type,usd_per_hour` (header optional) or a JSON object
/// `{"m5.large": 0.096}`.
pub fn parse_prices(bytes: &[u8]) -> Result<BTreeMap<String, f64>, CoreError> {
    let text =
        std::str::from_utf8(bytes).map_err(|e| CoreError::input("price table", "encoding", e))?;
    if text.trim_start().starts_with('{') {
        return serde_json::from_str(text).map_err(|e| CoreError::input("price table", "json", e));
    }
    let mut out = BTreeMap::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut cols = line.split(',');
        let (Some(name), Some(price)) = (cols.next(), cols.next()) else {
            return Err(CoreError::input(
                "price table",
                format!("line {}", number + 1),
                "expected instance_type,usd_per_hour",
            ));
        };
        match price.trim().parse::<f64>() {
            Ok(p) if p.is_finite() && p >= 0.0 => {
                out.insert(name.trim().to_string(), p);
            }
            _ if number == 0 => continue, // header
            _ => {
                return Err(CoreError::input(
                    "price table",
                    format!("line {} ({name})", number + 1),
                    format!("price {price:?} is not a non-negative number"),
                ))
            }
        }
    }
    Ok(out)
}
