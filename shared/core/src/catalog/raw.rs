//! The AWS input shapes the catalog reads: `describe-instance-types` and
//! `describe-instance-type-offerings` as the AWS CLI prints them (only the fields Fleetwright
//! reads; unknown fields are ignored).

use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct DescribeInstanceTypes {
    pub(crate) instance_types: Vec<RawInstanceType>,
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
    /// `supported` or `unsupported`.
    pub nitro_enclaves_support: Option<String>,
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
pub(crate) struct DescribeOfferings {
    pub(crate) instance_type_offerings: Vec<RawOffering>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct RawOffering {
    pub(crate) instance_type: String,
    pub(crate) location: String,
}

// ---- Resolved types ----
