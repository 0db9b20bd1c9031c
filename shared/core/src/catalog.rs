//! The instance catalog: EC2 instance types and their per-zone offerings and prices, read from the
//! exact shapes `aws ec2 describe-instance-types`, `describe-instance-type-offerings` and a price
//! table print, and resolved into schedulable types (labels, capacity, allocatable) with the
//! EKS/Karpenter formulas. A compressed us-east-1 catalog is embedded so everything works offline.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::sync::OnceLock;

use serde::Deserialize;

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

static EMBEDDED_TYPES: &[u8] = include_bytes!("../data/describe-instance-types.json.gz");
static EMBEDDED_OFFERINGS: &[u8] =
    include_bytes!("../data/instance-type-offerings-us-east-1.json.gz");
static EMBEDDED_PRICES: &[u8] = include_bytes!("../data/ondemand-prices-us-east-1.csv.gz");

// ---- AWS input shapes (only the fields Fleetwright reads; unknown fields are ignored) ----

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct DescribeInstanceTypes {
    instance_types: Vec<RawInstanceType>,
}

/// One entry of `DescribeInstanceTypes`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct RawInstanceType {
    pub instance_type: String,
    #[serde(default)]
    pub bare_metal: bool,
    pub hypervisor: Option<String>,
    #[serde(default)]
    pub supported_usage_classes: Vec<String>,
    pub v_cpu_info: RawVCpu,
    pub memory_info: RawMemory,
    pub processor_info: RawProcessor,
    pub network_info: RawNetwork,
    pub gpu_info: Option<RawGpuInfo>,
    pub inference_accelerator_info: Option<RawAcceleratorInfo>,
    pub neuron_info: Option<RawNeuronInfo>,
    pub instance_storage_info: Option<RawStorage>,
    pub ebs_info: Option<RawEbs>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct RawVCpu {
    pub default_v_cpus: i64,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct RawMemory {
    #[serde(rename = "SizeInMiB")]
    pub size_in_mib: i64,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct RawProcessor {
    #[serde(default)]
    pub supported_architectures: Vec<String>,
    pub manufacturer: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct RawNetwork {
    pub maximum_network_interfaces: i64,
    pub ipv4_addresses_per_interface: i64,
    #[serde(default)]
    pub default_network_card_index: usize,
    #[serde(default)]
    pub network_cards: Vec<RawNetworkCard>,
    pub efa_info: Option<RawEfa>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct RawNetworkCard {
    pub maximum_network_interfaces: Option<i64>,
    pub baseline_bandwidth_in_gbps: Option<f64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct RawEfa {
    pub maximum_efa_interfaces: Option<i64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct RawGpuInfo {
    #[serde(default)]
    pub gpus: Vec<RawGpu>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct RawGpu {
    pub name: String,
    pub manufacturer: String,
    pub count: i64,
    pub memory_info: Option<RawMemory>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct RawAcceleratorInfo {
    #[serde(default)]
    pub accelerators: Vec<RawAccelerator>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct RawAccelerator {
    pub name: String,
    pub manufacturer: String,
    pub count: i64,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct RawNeuronInfo {
    #[serde(default)]
    pub neuron_devices: Vec<RawNeuronDevice>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct RawNeuronDevice {
    pub name: String,
    pub count: i64,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct RawStorage {
    #[serde(rename = "TotalSizeInGB")]
    pub total_size_in_gb: Option<i64>,
    pub nvme_support: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct RawEbs {
    pub ebs_optimized_support: Option<String>,
    pub ebs_optimized_info: Option<RawEbsOptimized>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct RawEbsOptimized {
    pub maximum_bandwidth_in_mbps: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct DescribeOfferings {
    instance_type_offerings: Vec<RawOffering>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawOffering {
    instance_type: String,
    location: String,
}

// ---- Resolved types ----

/// Where and how an instance type can be bought, and for how much.
#[derive(Clone, Debug, PartialEq)]
pub struct Offering {
    pub zone: String,
    pub capacity_type: String,
    /// USD per hour.
    pub price: f64,
    pub available: bool,
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
}

/// The node-class facts that shape every instance type of a NodePool.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct NodeClassSettings {
    pub kubelet: KubeletSettings,
    /// Root volume size in bytes; None means the 20Gi default.
    pub root_volume_bytes: Option<i64>,
    /// `instanceStorePolicy: RAID0`: local NVMe becomes ephemeral storage.
    pub instance_store_raid0: bool,
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

/// Whether requirements on zone and capacity type allow an offering.
pub fn offering_allowed(o: &Offering, reqs: &Requirements) -> bool {
    reqs.get(ZONE).is_none_or(|r| r.has(&o.zone))
        && reqs
            .get(CAPACITY_TYPE)
            .is_none_or(|r| r.has(&o.capacity_type))
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
        }
    }

    /// The us-east-1 catalog embedded in the binary (1,395 types, per-zone offerings, on-demand prices).
    pub fn embedded() -> &'static Catalog {
        static CATALOG: OnceLock<Catalog> = OnceLock::new();
        CATALOG.get_or_init(|| {
            let types = gunzip(EMBEDDED_TYPES);
            let offerings = gunzip(EMBEDDED_OFFERINGS);
            let prices = gunzip(EMBEDDED_PRICES);
            Catalog::from_documents("us-east-1", &types, &offerings, &prices)
                .expect("the embedded catalog is valid")
        })
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

    /// Resolves every usable instance type for one node class.
    pub fn instance_types(&self, settings: &NodeClassSettings) -> Vec<InstanceType> {
        if let Some(fixed) = &self.fixed {
            return fixed.clone();
        }
        self.raw
            .iter()
            .filter_map(|raw| self.resolve(raw, settings))
            .collect()
    }

    fn resolve(&self, raw: &RawInstanceType, settings: &NodeClassSettings) -> Option<InstanceType> {
        let arch = architecture(raw)?;
        let offerings = self.offerings(raw);
        if offerings.iter().all(|o| !o.available) {
            return None;
        }
        let capacity = capacity(raw, arch, settings);
        let overhead = overhead(raw, &capacity, settings);
        let mut allocatable = capacity.minus(&overhead);
        allocatable.cpu = allocatable.cpu.max(0);
        allocatable.memory = allocatable.memory.max(0);
        allocatable.ephemeral = allocatable.ephemeral.max(0);
        let requirements = type_requirements(raw, arch, &offerings, &self.region);
        Some(InstanceType {
            name: raw.instance_type.clone(),
            requirements,
            capacity,
            overhead,
            allocatable,
            offerings,
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
                });
            }
        }
        out
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

/// The Kubernetes architecture (`amd64`, `arm64`) of a type, None for others (i386, mac).
pub fn architecture(raw: &RawInstanceType) -> Option<&'static str> {
    raw.processor_info
        .supported_architectures
        .iter()
        .find_map(|a| match a.as_str() {
            "x86_64" => Some("amd64"),
            "arm64" => Some("arm64"),
            _ => None,
        })
}

fn kebab(s: &str) -> String {
    s.to_lowercase().replace(' ', "-")
}

/// Memory the kubelet sees: capacity minus the Graviton CMA reservation and the VM overhead.
fn memory_capacity(raw: &RawInstanceType, arch: &str) -> i64 {
    let mut mib = raw.memory_info.size_in_mib;
    if arch == "arm64" {
        mib -= 64;
    }
    let overhead = (mib as f64 * VM_MEMORY_OVERHEAD).ceil() as i64;
    (mib - overhead) * MIB
}

/// Pods the VPC CNI can address: ENIs × (IPv4 per ENI − 1) + 2, on the default network card.
pub fn eni_limited_pods(raw: &RawInstanceType) -> i64 {
    let net = &raw.network_info;
    let enis = net
        .network_cards
        .get(net.default_network_card_index)
        .and_then(|c| c.maximum_network_interfaces)
        .unwrap_or(net.maximum_network_interfaces);
    if enis <= 0 {
        return 0;
    }
    enis * (net.ipv4_addresses_per_interface - 1) + 2
}

fn max_pods(raw: &RawInstanceType, kubelet: &KubeletSettings) -> i64 {
    let mut pods = kubelet.max_pods.unwrap_or_else(|| eni_limited_pods(raw));
    if let Some(per_core) = kubelet.pods_per_core.filter(|p| *p > 0) {
        pods = pods.min(per_core * raw.v_cpu_info.default_v_cpus);
    }
    pods
}

/// Branch ENIs for security groups for pods. Trunking needs a Nitro type outside the `t` family;
/// the count follows the VPC resource controller's published limits by size.
fn pod_eni(raw: &RawInstanceType) -> i64 {
    let family = raw.instance_type.split('.').next().unwrap_or_default();
    let nitro = raw.hypervisor.as_deref() == Some("nitro") || raw.bare_metal;
    let generation = category_and_generation(&raw.instance_type).1;
    let generation_ok = generation
        .and_then(|g| g.parse::<i64>().ok())
        .is_some_and(|g| g >= 5)
        || family == "a1";
    if !nitro || family.starts_with('t') || !generation_ok {
        return 0;
    }
    match raw.v_cpu_info.default_v_cpus {
        0..=2 => 9,
        3..=4 => 18,
        5..=8 => 38,
        9..=47 => 54,
        _ => 107,
    }
}

fn ephemeral_capacity(raw: &RawInstanceType, settings: &NodeClassSettings) -> i64 {
    if settings.instance_store_raid0 {
        if let Some(gb) = raw
            .instance_storage_info
            .as_ref()
            .and_then(|s| s.total_size_in_gb)
        {
            return gb * 1_000_000_000;
        }
    }
    settings
        .root_volume_bytes
        .unwrap_or(DEFAULT_ROOT_VOLUME_BYTES)
}

fn capacity(raw: &RawInstanceType, arch: &str, settings: &NodeClassSettings) -> Resources {
    let mut r = Resources {
        cpu: raw.v_cpu_info.default_v_cpus * 1000,
        memory: memory_capacity(raw, arch),
        ephemeral: ephemeral_capacity(raw, settings),
        pods: max_pods(raw, &settings.kubelet),
        extended: BTreeMap::new(),
    };
    r.set(RESOURCE_POD_ENI, pod_eni(raw));
    let gpus = |maker: &str| -> i64 {
        raw.gpu_info
            .as_ref()
            .map(|g| {
                g.gpus
                    .iter()
                    .filter(|x| x.manufacturer == maker)
                    .map(|x| x.count)
                    .sum()
            })
            .unwrap_or(0)
    };
    r.set(RESOURCE_NVIDIA_GPU, gpus("NVIDIA"));
    r.set(RESOURCE_AMD_GPU, gpus("AMD"));
    r.set(RESOURCE_HABANA, gpus("Habana"));
    r.set(RESOURCE_NEURON, neuron_devices(raw));
    let efa = raw
        .network_info
        .efa_info
        .as_ref()
        .and_then(|e| e.maximum_efa_interfaces);
    r.set(RESOURCE_EFA, efa.unwrap_or(0));
    r
}

fn neuron_devices(raw: &RawInstanceType) -> i64 {
    if let Some(n) = &raw.neuron_info {
        return n.neuron_devices.iter().map(|d| d.count).sum();
    }
    raw.inference_accelerator_info
        .as_ref()
        .map(|a| a.accelerators.iter().map(|x| x.count).sum())
        .unwrap_or(0)
}

/// kube-reserved CPU: 6 % of the first core, 1 % of the second, 0.5 % of cores 3–4, 0.25 % above.
pub fn kube_reserved_cpu(cpu_millis: i64) -> i64 {
    let ranges: [(i64, i64, f64); 4] = [
        (0, 1000, 0.06),
        (1000, 2000, 0.01),
        (2000, 4000, 0.005),
        (4000, i64::MAX, 0.0025),
    ];
    ranges
        .iter()
        .filter(|(start, _, _)| cpu_millis >= *start)
        .map(|(start, end, pct)| ((cpu_millis.min(*end) - start) as f64 * pct) as i64)
        .sum()
}

fn overhead(
    raw: &RawInstanceType,
    capacity: &Resources,
    settings: &NodeClassSettings,
) -> Resources {
    let kubelet = &settings.kubelet;
    let pods = capacity.pods;
    let mut kube_reserved = Resources {
        cpu: kube_reserved_cpu(raw.v_cpu_info.default_v_cpus * 1000),
        memory: (11 * pods + 255) * MIB,
        ephemeral: 1 << 30,
        ..Default::default()
    };
    if let Some(custom) = &kubelet.kube_reserved {
        for name in custom.names().collect::<Vec<_>>() {
            kube_reserved.set(name, custom.get(name));
        }
    }
    let mut eviction = Resources {
        memory: 100 * MIB,
        ephemeral: (capacity.ephemeral as f64 / 100.0 * 10.0).ceil() as i64,
        ..Default::default()
    };
    if let Some(v) = kubelet.eviction_hard.get("memory.available") {
        eviction.memory = eviction_signal(capacity.memory, v);
    }
    if let Some(v) = kubelet.eviction_hard.get("nodefs.available") {
        eviction.ephemeral = eviction_signal(capacity.ephemeral, v);
    }
    let mut total = kube_reserved;
    if let Some(system) = &kubelet.system_reserved {
        total.add(system);
    }
    total.add(&eviction);
    total
}

fn eviction_signal(capacity: i64, value: &str) -> i64 {
    match value.strip_suffix('%') {
        Some(pct) => {
            let p: f64 = pct.trim().parse().unwrap_or(0.0);
            let p = if p >= 100.0 { 0.0 } else { p };
            (capacity as f64 / 100.0 * p).ceil() as i64
        }
        None => crate::quantity::parse_units(value).unwrap_or(0),
    }
}

fn type_requirements(
    raw: &RawInstanceType,
    arch: &str,
    offerings: &[Offering],
    region: &str,
) -> Requirements {
    let available: Vec<&Offering> = offerings.iter().filter(|o| o.available).collect();
    let mut labels: Vec<(&str, Option<String>)> = vec![
        (INSTANCE_TYPE, Some(raw.instance_type.clone())),
        (ARCH, Some(arch.to_string())),
        (OS, Some("linux".to_string())),
        (REGION, Some(region.to_string())),
        (
            INSTANCE_CPU,
            Some(raw.v_cpu_info.default_v_cpus.to_string()),
        ),
        (
            INSTANCE_MEMORY,
            Some(raw.memory_info.size_in_mib.to_string()),
        ),
        (
            INSTANCE_HYPERVISOR,
            Some(raw.hypervisor.clone().unwrap_or_default()),
        ),
        (
            INSTANCE_CPU_MANUFACTURER,
            raw.processor_info.manufacturer.as_deref().map(kebab),
        ),
    ];
    let (category, generation) = category_and_generation(&raw.instance_type);
    labels.push((INSTANCE_CATEGORY, category));
    labels.push((INSTANCE_GENERATION, generation));
    let mut parts = raw.instance_type.splitn(2, '.');
    labels.push((INSTANCE_FAMILY, parts.next().map(str::to_string)));
    labels.push((INSTANCE_SIZE, parts.next().map(str::to_string)));
    let nvme = raw
        .instance_storage_info
        .as_ref()
        .filter(|s| s.nvme_support.as_deref() != Some("unsupported"))
        .and_then(|s| s.total_size_in_gb);
    labels.push((INSTANCE_LOCAL_NVME, nvme.map(|v| v.to_string())));
    let bandwidth: f64 = raw
        .network_info
        .network_cards
        .iter()
        .filter_map(|c| c.baseline_bandwidth_in_gbps)
        .sum();
    labels.push((
        INSTANCE_NETWORK_BANDWIDTH,
        (bandwidth > 0.0).then(|| ((bandwidth * 1000.0).round() as i64).to_string()),
    ));
    let ebs = raw
        .ebs_info
        .as_ref()
        .filter(|e| e.ebs_optimized_support.as_deref() == Some("default"))
        .and_then(|e| e.ebs_optimized_info.as_ref())
        .and_then(|i| i.maximum_bandwidth_in_mbps);
    labels.push((INSTANCE_EBS_BANDWIDTH, ebs.map(|v| v.to_string())));
    let gpu = raw
        .gpu_info
        .as_ref()
        .filter(|g| g.gpus.len() == 1)
        .map(|g| &g.gpus[0]);
    labels.push((INSTANCE_GPU_NAME, gpu.map(|g| kebab(&g.name))));
    labels.push((
        INSTANCE_GPU_MANUFACTURER,
        gpu.map(|g| kebab(&g.manufacturer)),
    ));
    labels.push((INSTANCE_GPU_COUNT, gpu.map(|g| g.count.to_string())));
    labels.push((
        INSTANCE_GPU_MEMORY,
        gpu.and_then(|g| g.memory_info.as_ref())
            .map(|m| m.size_in_mib.to_string()),
    ));
    let (acc_name, acc_maker, acc_count) = accelerator_labels(raw);
    labels.push((INSTANCE_ACCELERATOR_NAME, acc_name));
    labels.push((INSTANCE_ACCELERATOR_MANUFACTURER, acc_maker));
    labels.push((INSTANCE_ACCELERATOR_COUNT, acc_count));

    let mut reqs = Requirements::new();
    for (key, value) in labels {
        reqs.add(match value {
            Some(v) => Requirement::single(key, &v),
            None => Requirement::does_not_exist(key),
        });
    }
    reqs.add(Requirement::in_values(
        ZONE,
        available.iter().map(|o| o.zone.clone()),
    ));
    reqs.add(Requirement::in_values(
        CAPACITY_TYPE,
        available.iter().map(|o| o.capacity_type.clone()),
    ));
    reqs.add(Requirement::does_not_exist(
        "node.kubernetes.io/windows-build",
    ));
    reqs
}

fn accelerator_labels(raw: &RawInstanceType) -> (Option<String>, Option<String>, Option<String>) {
    if let Some(n) = raw
        .neuron_info
        .as_ref()
        .filter(|n| n.neuron_devices.len() == 1)
    {
        let d = &n.neuron_devices[0];
        return (
            Some(kebab(&d.name)),
            Some("aws".into()),
            Some(d.count.to_string()),
        );
    }
    if let Some(a) = raw
        .inference_accelerator_info
        .as_ref()
        .filter(|a| a.accelerators.len() == 1)
    {
        let x = &a.accelerators[0];
        return (
            Some(kebab(&x.name)),
            Some(kebab(&x.manufacturer)),
            Some(x.count.to_string()),
        );
    }
    (None, None, None)
}

/// `c7i.2xlarge` → (`c`, `7`); `u-6tb1.metal` → (`u`, `1`), following Karpenter's pattern
/// `^([a-z]+)(-[0-9]+tb)?([0-9]+).*\.`.
fn category_and_generation(name: &str) -> (Option<String>, Option<String>) {
    let family = name.split('.').next().unwrap_or_default();
    if !name.contains('.') {
        return (None, None);
    }
    let category: String = family
        .chars()
        .take_while(|c| c.is_ascii_lowercase())
        .collect();
    let mut rest = &family[category.len()..];
    if let Some(after_dash) = rest.strip_prefix('-') {
        let digits = after_dash
            .chars()
            .take_while(|c| c.is_ascii_digit())
            .count();
        if digits > 0 && after_dash[digits..].starts_with("tb") {
            rest = &after_dash[digits + 2..];
        }
    }
    let generation: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    if category.is_empty() || generation.is_empty() {
        return (None, None);
    }
    (Some(category), Some(generation))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_price_table_is_the_embedded_catalogs() {
        assert_eq!(Catalog::embedded_prices(), Catalog::embedded().on_demand);
    }

    fn find<'a>(types: &'a [InstanceType], name: &str) -> &'a InstanceType {
        types.iter().find(|t| t.name == name).unwrap()
    }

    #[test]
    fn embedded_catalog_resolves_m5_large_like_karpenter() {
        let catalog = Catalog::embedded();
        assert_eq!(catalog.raw.len(), 1395);
        let types = catalog.instance_types(&NodeClassSettings::default());
        let m5 = find(&types, "m5.large");
        // 3 ENIs × (10 − 1) + 2
        assert_eq!(m5.capacity.pods, 29);
        assert_eq!(m5.capacity.cpu, 2000);
        // 8192 MiB − ceil(8192 × 0.075) = 7577 MiB
        assert_eq!(m5.capacity.memory, 7577 * MIB);
        // cpu: 60 + 10 = 70m reserved
        assert_eq!(m5.allocatable.cpu, 1930);
        // memory: 7577 − (11 × 29 + 255) − 100 = 6903 MiB
        assert_eq!(m5.allocatable.memory, 6903 * MIB);
        assert_eq!(m5.capacity.get(RESOURCE_POD_ENI), 9);
        let labels = m5.requirements.single_valued_labels();
        assert_eq!(labels[INSTANCE_FAMILY], "m5");
        assert_eq!(labels[INSTANCE_CATEGORY], "m");
        assert_eq!(labels[INSTANCE_GENERATION], "5");
        assert_eq!(labels[INSTANCE_SIZE], "large");
        assert_eq!(labels[ARCH], "amd64");
        assert_eq!(labels[INSTANCE_HYPERVISOR], "nitro");
        assert_eq!(labels[INSTANCE_NETWORK_BANDWIDTH], "750");
        assert!(m5.requirements.get(ZONE).unwrap().len() >= 5);
        let od = m5.cheapest_offering(&Requirements::new()).unwrap();
        assert!(od.price < 0.096 && od.capacity_type == CAPACITY_SPOT);
    }

    #[test]
    fn gpu_and_graviton_types() {
        let types = Catalog::embedded().instance_types(&NodeClassSettings::default());
        let g4 = find(&types, "g4dn.xlarge");
        assert_eq!(g4.capacity.get(RESOURCE_NVIDIA_GPU), 1);
        let labels = g4.requirements.single_valued_labels();
        assert_eq!(labels[INSTANCE_GPU_NAME], "t4");
        assert_eq!(labels[INSTANCE_GPU_MANUFACTURER], "nvidia");
        assert_eq!(labels[INSTANCE_LOCAL_NVME], "125");
        let c6g = find(&types, "c6g.large");
        assert_eq!(c6g.requirements.single_valued_labels()[ARCH], "arm64");
        // (4096 − 64) − ceil(4032 × 0.075) = 3729 MiB
        assert_eq!(c6g.capacity.memory, 3729 * MIB);
        let t3 = find(&types, "t3.micro");
        assert_eq!(t3.capacity.get(RESOURCE_POD_ENI), 0);
        assert_eq!(t3.capacity.pods, 4);
    }

    #[test]
    fn kubelet_max_pods_and_reserved_cpu() {
        assert_eq!(kube_reserved_cpu(1000), 60);
        assert_eq!(kube_reserved_cpu(4000), 80);
        assert_eq!(kube_reserved_cpu(8000), 90);
        let settings = NodeClassSettings {
            kubelet: KubeletSettings {
                max_pods: Some(5),
                ..Default::default()
            },
            ..Default::default()
        };
        let types = Catalog::embedded().instance_types(&settings);
        assert!(types.iter().all(|t| t.capacity.pods == 5));
    }

    #[test]
    fn bad_price_table_names_the_line() {
        let err = parse_prices(b"instance_type,usd_per_hour\nm5.large,abc\n").unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");
        assert!(err.to_string().contains("m5.large"), "{err}");
    }

    #[test]
    fn names_split_into_category_and_generation() {
        assert_eq!(
            category_and_generation("c7i.2xlarge"),
            (Some("c".into()), Some("7".into()))
        );
        assert_eq!(
            category_and_generation("u-6tb1.metal"),
            (Some("u".into()), Some("1".into()))
        );
        assert_eq!(
            category_and_generation("inf2.xlarge"),
            (Some("inf".into()), Some("2".into()))
        );
    }
}
