use super::*;
use fleetwright_core::{Catalog, NodeClassSettings};

#[test]
fn every_type_keeps_its_allocatable_prices_and_labels_through_the_kwok_overhead() {
    let catalog = Catalog::embedded_region("us-east-1").unwrap();
    let types = catalog.instance_types(&NodeClassSettings::default());
    let file = instance_types(&types).unwrap();
    let m5 = file
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "m5.large")
        .unwrap();
    let ours = types.iter().find(|t| t.name == "m5.large").unwrap();
    let written: BTreeMap<String, String> =
        serde_json::from_value(m5["resources"].clone()).unwrap();
    let mut capacity =
        Resources::parse(written.iter().map(|(k, v)| (k.as_str(), v.as_str()))).unwrap();
    capacity.sub(&overhead().unwrap());
    assert_eq!(capacity, ours.allocatable);
    let offerings = m5["offerings"].as_array().unwrap();
    assert_eq!(offerings.len(), ours.offerings.len());
    let first = &ours.offerings[0];
    let same = offerings
        .iter()
        .find(|o| {
            o["Requirements"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["values"][0] == first.zone)
                && o["Requirements"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|r| r["values"][0] == first.capacity_type)
        })
        .unwrap();
    assert_eq!(same["Price"].as_f64(), Some(first.price));
    let family = same["Requirements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == "karpenter.k8s.aws/instance-family")
        .unwrap();
    assert_eq!(family["values"][0], "m5");
    assert_eq!(m5["architecture"], "amd64");
}
