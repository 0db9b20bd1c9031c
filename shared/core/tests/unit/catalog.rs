//! The catalog against the embedded data and Karpenter's published figures.

use std::sync::Arc;

use super::resolve::category_and_generation;
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
fn the_larger_of_hard_and_soft_eviction_thresholds_is_held_back() {
    let memory = |hard: &[(&str, &str)], soft: &[(&str, &str)]| {
        let map = |m: &[(&str, &str)]| {
            m.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let settings = NodeClassSettings {
            kubelet: KubeletSettings {
                eviction_hard: map(hard),
                eviction_soft: map(soft),
                ..Default::default()
            },
            ..Default::default()
        };
        find(&Catalog::embedded().instance_types(&settings), "t3a.small")
            .allocatable
            .memory
    };
    let default = memory(&[], &[]);
    let soft = memory(&[], &[("memory.available", "1Gi")]);
    let both = memory(
        &[("memory.available", "500Mi")],
        &[("memory.available", "1Gi")],
    );
    assert_eq!(default - soft, (1024 - 100) << 20);
    assert_eq!(both, soft);
    assert_eq!(
        memory(
            &[("memory.available", "1200Mi")],
            &[("memory.available", "1Gi")]
        ),
        default - ((1200 - 100) << 20)
    );
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

fn overlay(name: &str, weight: i32, reqs: &[(&str, crate::Operator, &[&str])]) -> NodeOverlay {
    let mut requirements = Requirements::new();
    for (key, op, values) in reqs {
        requirements.add(crate::Requirement::new(key, *op, values).unwrap());
    }
    NodeOverlay {
        name: name.into(),
        weight,
        requirements,
        ..Default::default()
    }
}

/// Karpenter's NodeOverlay: the highest-weight overlay with a price that selects an offering
/// decides it (a set price, an absolute or a percentage adjustment; equal weights by name);
/// capacity adds extended resources to the types selected; the rest is untouched.
#[test]
fn node_overlays_set_and_adjust_prices_and_add_capacity_by_weight() {
    use crate::model::PriceChange;
    use crate::Operator::{Gt, In};
    let base = Catalog::embedded();
    let plain = base.instance_types(&NodeClassSettings::default());
    let price = |types: &[InstanceType], name: &str, capacity: &str, zone: &str| {
        find(types, name)
            .offerings
            .iter()
            .find(|o| o.capacity_type == capacity && o.zone == zone)
            .unwrap()
            .price
    };
    let mut set = overlay(
        "savings-plan",
        10,
        &[
            (INSTANCE_TYPE, In, &["m5.large"]),
            (CAPACITY_TYPE, In, &[CAPACITY_ON_DEMAND]),
        ],
    );
    set.price = Some(PriceChange::Set(0.05));
    let mut loser = overlay("a-lower-weight", 1, &[(INSTANCE_FAMILY, In, &["m5"])]);
    loser.price = Some(PriceChange::Set(9.0));
    let mut percent = overlay("license", 5, &[(INSTANCE_FAMILY, In, &["m5"])]);
    percent.price = PriceChange::adjustment("+10%");
    let mut gpu = overlay("slices", 0, &[(INSTANCE_CPU, Gt, &["32"])]);
    gpu.capacity.insert("example.com/slice".into(), 4);
    let catalog = base.with_overlays(&[loser, gpu, percent, set]);
    let types = catalog.instance_types(&NodeClassSettings::default());
    let zone = "us-east-1a";
    assert_eq!(price(&types, "m5.large", CAPACITY_ON_DEMAND, zone), 0.05);
    let spot = price(&plain, "m5.large", CAPACITY_SPOT, zone);
    assert!((price(&types, "m5.large", CAPACITY_SPOT, zone) - spot * 1.1).abs() < 1e-9);
    let xl = price(&plain, "m5.xlarge", CAPACITY_ON_DEMAND, zone);
    assert!((price(&types, "m5.xlarge", CAPACITY_ON_DEMAND, zone) - xl * 1.1).abs() < 1e-9);
    assert_eq!(
        price(&types, "c5.large", CAPACITY_ON_DEMAND, zone),
        price(&plain, "c5.large", CAPACITY_ON_DEMAND, zone)
    );
    assert_eq!(
        find(&types, "m5.16xlarge")
            .allocatable
            .get("example.com/slice"),
        4
    );
    assert_eq!(
        find(&types, "m5.large")
            .allocatable
            .get("example.com/slice"),
        0
    );
    assert!(matches!(
        base.with_overlays(&[]),
        std::borrow::Cow::Borrowed(_)
    ));
    assert_eq!(
        PriceChange::adjustment("-0.02"),
        Some(PriceChange::Add(-0.02))
    );
    assert_eq!(
        PriceChange::adjustment("-100%").map(|c| c.apply(1.0)),
        Some(0.0)
    );
    for bad in ["10%", "+x", "-150%", ""] {
        assert_eq!(PriceChange::adjustment(bad), None, "{bad}");
    }
}

/// Types are resolved once per node class and shared, and a catalog whose offerings, prices or
/// overlays change after a lookup answers from the change, never from before it.
#[test]
fn resolved_types_are_shared_and_a_changed_catalog_resolves_again() {
    let mut catalog = Catalog::embedded().clone();
    let settings = NodeClassSettings::default();
    let first = catalog.instance_types_shared(&settings);
    assert!(Arc::ptr_eq(
        &first,
        &catalog.instance_types_shared(&settings)
    ));
    let offered = |types: &[InstanceType]| {
        find(types, "m5.large")
            .offerings
            .iter()
            .filter(|o| o.available)
            .count()
    };
    let before = offered(&first);
    let zone = find(&first, "m5.large").offerings[0].zone.clone();
    for capacity in ["spot", "on-demand"] {
        catalog
            .unavailable
            .insert((capacity.into(), "m5.large".into(), zone.clone()));
    }
    let after = catalog.instance_types_shared(&settings);
    assert!(!Arc::ptr_eq(&first, &after));
    assert_eq!(offered(&after), before - 2, "{zone}");
    catalog.spot_fraction = 0.5;
    assert!(!Arc::ptr_eq(
        &after,
        &catalog.instance_types_shared(&settings)
    ));
}

/// `enclaveOptions.enabled`: only the types that support Nitro Enclaves are left, as
/// Karpenter's compatibility check keeps them (the t3 family does not; m5 does).
#[test]
fn enclaves_keep_only_the_types_that_support_them() {
    let all = Catalog::embedded().instance_types(&NodeClassSettings::default());
    let settings = NodeClassSettings {
        enclaves: true,
        ..Default::default()
    };
    let enclaves = Catalog::embedded().instance_types(&settings);
    let names: std::collections::BTreeSet<&str> =
        enclaves.iter().map(|t| t.name.as_str()).collect();
    assert!(names.contains("m5.xlarge") && !names.contains("t3.large"));
    assert!(enclaves.len() < all.len() && !enclaves.is_empty());
}

/// Where prices come from is said, and estimates are marked: another region's table stands in
/// for a region's on-demand prices, and spot without a price history is a fraction of them.
#[test]
fn price_notes_mark_the_estimates() {
    let home = Catalog::embedded().price_notes();
    assert_eq!(
        home[0],
        "on-demand prices: the embedded us-east-1 price table"
    );
    assert!(home[1].starts_with("spot prices are estimates: 0.35 × on-demand"));
    let away = Catalog::embedded_region("eu-west-1").unwrap().price_notes();
    assert!(
        away[0].starts_with("on-demand prices are estimates") && away[0].contains("eu-west-1"),
        "{away:?}"
    );
    let mut read = Catalog::embedded().clone();
    read.spot_prices_read = true;
    assert_eq!(read.price_notes().len(), 1);
}
