//! The live instance catalog: DescribeInstanceTypes and DescribeInstanceTypeOfferings (paginated)
//! turned into the core's raw shapes and fed to the same catalog builder as the embedded data.
//! A warm Lambda container keeps the result for a TTL.

use std::collections::BTreeMap;
use std::sync::Arc;

use aws_sdk_ec2::types::{InstanceTypeInfo, LocationType};
use chrono::{DateTime, Duration, Utc};
use fleetwright_core::catalog::*;
use fleetwright_core::Catalog;
use tracing::{debug, instrument};

use crate::error::AwsError;

/// How long a discovered catalog is reused by a warm container.
pub const CATALOG_TTL: Duration = Duration::minutes(60);

/// Reads every instance type and per-zone offering of the client's region.
#[instrument(skip_all, fields(region = %region))]
pub async fn discover(
    ec2: &aws_sdk_ec2::Client,
    region: &str,
    on_demand: BTreeMap<String, f64>,
) -> Result<Catalog, AwsError> {
    let raw = instance_types(ec2).await?;
    let offerings = offerings(ec2).await?;
    debug!(
        types = raw.len(),
        offerings = offerings.len(),
        "discovered instance types"
    );
    let mut catalog = Catalog::from_raw(region, raw, offerings, on_demand);
    // The functions price on-demand from the embedded table (`Catalog::embedded_prices`).
    catalog.on_demand_prices = OnDemandPrices::Table(EMBEDDED_PRICE_REGION.into());
    // Until the first spot-price refresh, spot is priced as on-demand.
    catalog.spot_fraction = 1.0;
    Ok(catalog)
}

async fn instance_types(ec2: &aws_sdk_ec2::Client) -> Result<Vec<RawInstanceType>, AwsError> {
    let mut pages = ec2
        .describe_instance_types()
        .max_results(100)
        .into_paginator()
        .send();
    let mut out = Vec::new();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| crate::error::api("DescribeInstanceTypes", e))?;
        out.extend(page.instance_types().iter().filter_map(raw_instance_type));
    }
    Ok(out)
}

async fn offerings(ec2: &aws_sdk_ec2::Client) -> Result<Vec<(String, String)>, AwsError> {
    let mut pages = ec2
        .describe_instance_type_offerings()
        .location_type(LocationType::AvailabilityZone)
        .max_results(1000)
        .into_paginator()
        .send();
    let mut out = Vec::new();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| crate::error::api("DescribeInstanceTypeOfferings", e))?;
        for o in page.instance_type_offerings() {
            if let (Some(t), Some(zone)) = (o.instance_type(), o.location()) {
                out.push((t.as_str().to_string(), zone.to_string()));
            }
        }
    }
    Ok(out)
}

fn int(v: Option<i32>) -> i64 {
    v.map(i64::from).unwrap_or(0)
}

/// The SDK's `InstanceTypeInfo` in the core's raw shape (the `describe-instance-types` JSON).
pub fn raw_instance_type(info: &InstanceTypeInfo) -> Option<RawInstanceType> {
    let name = info.instance_type()?.as_str().to_string();
    let processor = info.processor_info();
    let network = info.network_info();
    Some(RawInstanceType {
        instance_type: name,
        bare_metal: info.bare_metal().unwrap_or(false),
        hypervisor: info.hypervisor().map(|h| h.as_str().to_string()),
        nitro_enclaves_support: info
            .nitro_enclaves_support()
            .map(|n| n.as_str().to_string()),
        supported_usage_classes: info
            .supported_usage_classes()
            .iter()
            .map(|c| c.as_str().to_string())
            .collect(),
        v_cpu_info: RawVCpu {
            default_v_cpus: int(info.v_cpu_info().and_then(|v| v.default_v_cpus())),
        },
        memory_info: RawMemory {
            size_in_mib: info
                .memory_info()
                .and_then(|m| m.size_in_mib())
                .unwrap_or(0),
        },
        processor_info: RawProcessor {
            supported_architectures: processor
                .map(|p| {
                    p.supported_architectures()
                        .iter()
                        .map(|a| a.as_str().to_string())
                        .collect()
                })
                .unwrap_or_default(),
            manufacturer: processor.and_then(|p| p.manufacturer()).map(str::to_string),
        },
        network_info: network.map(raw_network).unwrap_or_default(),
        gpu_info: info.gpu_info().map(|g| RawGpuInfo {
            gpus: g
                .gpus()
                .iter()
                .map(|d| RawGpu {
                    name: d.name().unwrap_or_default().to_string(),
                    manufacturer: d.manufacturer().unwrap_or_default().to_string(),
                    count: int(d.count()),
                    memory_info: d.memory_info().map(|m| RawMemory {
                        size_in_mib: int(m.size_in_mib()),
                    }),
                })
                .collect(),
        }),
        inference_accelerator_info: info
            .inference_accelerator_info()
            .map(|a| RawAcceleratorInfo {
                accelerators: a
                    .accelerators()
                    .iter()
                    .map(|d| RawAccelerator {
                        name: d.name().unwrap_or_default().to_string(),
                        manufacturer: d.manufacturer().unwrap_or_default().to_string(),
                        count: int(d.count()),
                    })
                    .collect(),
            }),
        neuron_info: info.neuron_info().map(|n| RawNeuronInfo {
            neuron_devices: n
                .neuron_devices()
                .iter()
                .map(|d| RawNeuronDevice {
                    name: d.name().unwrap_or_default().to_string(),
                    count: int(d.count()),
                })
                .collect(),
        }),
        instance_storage_info: info.instance_storage_info().map(|s| RawStorage {
            total_size_in_gb: s.total_size_in_gb(),
            nvme_support: s.nvme_support().map(|n| n.as_str().to_string()),
        }),
        ebs_info: info.ebs_info().map(|e| RawEbs {
            ebs_optimized_support: e.ebs_optimized_support().map(|s| s.as_str().to_string()),
            ebs_optimized_info: e.ebs_optimized_info().map(|o| RawEbsOptimized {
                maximum_bandwidth_in_mbps: o.maximum_bandwidth_in_mbps().map(i64::from),
            }),
        }),
    })
}

fn raw_network(n: &aws_sdk_ec2::types::NetworkInfo) -> RawNetwork {
    RawNetwork {
        maximum_network_interfaces: int(n.maximum_network_interfaces()),
        ipv4_addresses_per_interface: int(n.ipv4_addresses_per_interface()),
        default_network_card_index: n.default_network_card_index().unwrap_or(0).max(0) as usize,
        network_cards: n
            .network_cards()
            .iter()
            .map(|c| RawNetworkCard {
                maximum_network_interfaces: c.maximum_network_interfaces().map(i64::from),
                baseline_bandwidth_in_gbps: c.baseline_bandwidth_in_gbps(),
            })
            .collect(),
        efa_info: n.efa_info().map(|e| RawEfa {
            maximum_efa_interfaces: e.maximum_efa_interfaces().map(i64::from),
        }),
    }
}

/// A value kept by a warm container until it is older than a TTL. Time is passed in.
#[derive(Debug)]
pub struct Cached<T> {
    value: Option<(Arc<T>, DateTime<Utc>)>,
    ttl: Duration,
}

impl<T> Cached<T> {
    pub fn new(ttl: Duration) -> Self {
        Cached { value: None, ttl }
    }

    /// The value, if it was stored less than the TTL before `now`.
    pub fn fresh(&self, now: DateTime<Utc>) -> Option<Arc<T>> {
        self.value
            .as_ref()
            .filter(|(_, at)| now - *at < self.ttl)
            .map(|(v, _)| v.clone())
    }

    pub fn store(&mut self, value: T, now: DateTime<Utc>) -> Arc<T> {
        let value = Arc::new(value);
        self.value = Some((value.clone(), now));
        value
    }
}
