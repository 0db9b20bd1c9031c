//! Resolving a raw instance type into a schedulable one with the EKS and Karpenter formulas:
//! architecture, capacity (VM memory overhead, ephemeral storage, max pods, ENI-limited pods,
//! accelerators), kubelet and system reserved resources and eviction thresholds, and the
//! well-known labels it carries.

use std::collections::BTreeMap;

use crate::labels::*;
use crate::requirements::{Requirement, Requirements};
use crate::resources::Resources;

use super::expression::{reserved_resources, ResolvedKubelet};
use super::*;

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

pub(crate) fn kebab(s: &str) -> String {
    s.to_lowercase().replace(' ', "-")
}

/// Memory the kubelet sees: capacity minus the Graviton CMA reservation and the VM overhead.
pub(crate) fn memory_capacity(raw: &RawInstanceType, arch: &str) -> i64 {
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

/// Branch ENIs for security groups for pods. Trunking needs a Nitro type outside the `t` family;
/// the count follows the VPC resource controller's published limits by size.
pub(crate) fn pod_eni(raw: &RawInstanceType) -> i64 {
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

pub(crate) fn ephemeral_capacity(raw: &RawInstanceType, settings: &NodeClassSettings) -> i64 {
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

/// A type's capacity; `pods` is what its kubelet settings resolved to.
pub(crate) fn capacity(
    raw: &RawInstanceType,
    arch: &str,
    settings: &NodeClassSettings,
    pods: i64,
) -> Resources {
    let mut r = Resources {
        cpu: raw.v_cpu_info.default_v_cpus * 1000,
        memory: memory_capacity(raw, arch),
        ephemeral: ephemeral_capacity(raw, settings),
        pods,
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

pub(crate) fn neuron_devices(raw: &RawInstanceType) -> i64 {
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

/// What the kubelet holds back: kube-reserved, system-reserved and the eviction thresholds.
/// `resolved` carries the reservations written as expressions, evaluated for this type: each
/// replaces the default of its resource only.
pub(crate) fn overhead(
    raw: &RawInstanceType,
    capacity: &Resources,
    settings: &NodeClassSettings,
    resolved: &ResolvedKubelet,
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
    let evaluated = reserved_resources(&resolved.kube_reserved);
    for name in resolved.kube_reserved.keys() {
        kube_reserved.set(name, evaluated.get(name));
    }
    let mut eviction = Resources {
        memory: 100 * MIB,
        ephemeral: (capacity.ephemeral as f64 / 100.0 * 10.0).ceil() as i64,
        ..Default::default()
    };
    // Karpenter's rule: a signal set in either map replaces the default, at the larger of its
    // hard and soft thresholds.
    let largest = |signal: &str, of: i64| {
        [&kubelet.eviction_hard, &kubelet.eviction_soft]
            .into_iter()
            .filter_map(|m| m.get(signal))
            .map(|v| eviction_signal(of, v))
            .max()
    };
    if let Some(memory) = largest("memory.available", capacity.memory) {
        eviction.memory = memory;
    }
    if let Some(ephemeral) = largest("nodefs.available", capacity.ephemeral) {
        eviction.ephemeral = ephemeral;
    }
    let mut total = kube_reserved;
    if let Some(system) = &kubelet.system_reserved {
        total.add(system);
    }
    total.add(&reserved_resources(&resolved.system_reserved));
    total.add(&eviction);
    total
}

pub(crate) fn eviction_signal(capacity: i64, value: &str) -> i64 {
    match value.strip_suffix('%') {
        Some(pct) => {
            let p: f64 = pct.trim().parse().unwrap_or(0.0);
            let p = if p >= 100.0 { 0.0 } else { p };
            (capacity as f64 / 100.0 * p).ceil() as i64
        }
        None => crate::quantity::parse_units(value).unwrap_or(0),
    }
}

pub(crate) fn type_requirements(
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
    reqs.add(Requirement::does_not_exist(WINDOWS_BUILD));
    reqs
}

pub(crate) fn accelerator_labels(
    raw: &RawInstanceType,
) -> (Option<String>, Option<String>, Option<String>) {
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
pub(crate) fn category_and_generation(name: &str) -> (Option<String>, Option<String>) {
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
