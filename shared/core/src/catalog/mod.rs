//! The instance catalog: EC2 instance types and their per-zone offerings and prices, read from the
//! exact shapes `aws ec2 describe-instance-types`, `describe-instance-type-offerings` and a price
//! table print, and resolved into schedulable types (labels, capacity, allocatable) with the
//! EKS/Karpenter formulas. A compressed catalog is embedded so everything works offline: the
//! instance types, the per-zone offerings of every region in `../shared/data/aws`
//! ([`EMBEDDED_REGIONS`]), and us-east-1's on-demand prices (the only price table there, used for
//! every region).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

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

mod embedded;
mod expression;
mod memo;
mod offerings;
mod overlay;
mod raw;
mod resolve;
#[cfg(test)]
#[path = "../../tests/unit/catalog.rs"]
mod tests;

pub use self::embedded::{EMBEDDED_PRICE_REGION, EMBEDDED_REGIONS};
pub use self::expression::{
    default_pods, is_quantity, reserved_quantity, reserved_value, resolve_kubelet, Expression,
    ExpressionError, ExpressionVars, KubeletExpressions, ResolvedKubelet, MAX_PODS_FIELD,
    RESERVED_RESOURCES,
};
use self::memo::{Facts, Resolved};
pub use self::offerings::{
    offering_allowed, reserved_price, CapacityReservation, Offering, Reservation,
};
pub use self::overlay::{overlaid_price, NodeOverlay, PriceChange};
pub use self::raw::*;
pub use self::resolve::{architecture, eni_limited_pods, kube_reserved_cpu};
use self::resolve::{capacity, overhead, type_requirements};

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
    /// The architectures the class's AMIs are built for, as resolved: a type of another has no
    /// image to boot, so it is left out, as Karpenter lists a class's types. None when not
    /// known: every architecture.
    pub architectures: Option<BTreeSet<String>>,
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
    /// [`Catalog::marked_types`] for each node class lately: a pool emptied by the marks asks
    /// for them in every scheduling pass.
    marked: Resolved,
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
            marked: Resolved::default(),
        }
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
            marked: Resolved::default(),
        }
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
        self.resolve_marked(raw, settings, true)
    }

    /// The types insufficient-capacity marks hold (those of [`Catalog::unavailable`]), resolved
    /// as if the marks were lifted: what a pool would have without them. A handful of types,
    /// resolved on their own, so cheap enough for an error path inside every simulation.
    pub fn marked_types(&self, settings: &NodeClassSettings) -> Arc<Vec<InstanceType>> {
        if self.unavailable.is_empty() {
            return Arc::default();
        }
        self.marked.get_or_insert(settings, self.fingerprint(), || {
            self.resolve_unmarked(settings)
        })
    }

    fn resolve_unmarked(&self, settings: &NodeClassSettings) -> Vec<InstanceType> {
        let names: BTreeSet<&str> = (self.unavailable.iter())
            .map(|(_, name, _)| name.as_str())
            .collect();
        (self.raw.iter())
            .filter(|raw| names.contains(raw.instance_type.as_str()))
            .filter_map(|raw| self.resolve_marked(raw, settings, false).ok().flatten())
            .collect()
    }

    /// A raw type resolved for a node class; `marks`: whether insufficient-capacity marks make
    /// offerings unavailable.
    fn resolve_marked(
        &self,
        raw: &RawInstanceType,
        settings: &NodeClassSettings,
        marks: bool,
    ) -> Result<Option<InstanceType>, ExpressionError> {
        let Some(arch) = architecture(raw) else {
            return Ok(None);
        };
        if settings.enclaves && raw.nitro_enclaves_support.as_deref() != Some("supported") {
            return Ok(None);
        }
        if settings
            .architectures
            .as_ref()
            .is_some_and(|a| !a.contains(arch))
        {
            return Ok(None);
        }
        let kubelet = resolve_kubelet(raw, &settings.kubelet, false)?;
        let mut offerings = self.offerings(raw);
        if !marks {
            // Priced on-demand and spot offerings are available but for a mark.
            for o in &mut offerings {
                o.available = o.price < f64::MAX;
            }
        }
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
