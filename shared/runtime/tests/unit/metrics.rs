use super::*;

#[test]
fn the_emf_document_declares_every_metric_it_carries() {
    let mut m = Metrics::default();
    m.add(NODECLAIMS_CREATED, 2.0);
    m.add(LAUNCH_FAILURES, 1.0);
    let doc = m.to_emf("dev", 1_700_000_000_000);
    assert_eq!(doc["karpenter_nodeclaims_created_total"], 2.0);
    assert_eq!(doc["cluster"], "dev");
    let declared = doc["_aws"]["CloudWatchMetrics"][0]["Metrics"]
        .as_array()
        .unwrap();
    assert_eq!(declared.len(), 2);
    let mut out = Vec::new();
    m.emit("dev", 1, &mut out).unwrap();
    assert!(String::from_utf8(out).unwrap().ends_with("}\n"));
    let mut empty = Vec::new();
    Metrics::default().emit("dev", 1, &mut empty).unwrap();
    assert!(empty.is_empty());
}

#[test]
fn breakdowns_are_documents_of_their_own_and_gauges_keep_their_unit() {
    let mut m = Metrics::default();
    m.add_by(NODECLAIMS_TERMINATED, REASON, "underutilized", 2.0);
    m.add_by(NODECLAIMS_TERMINATED, REASON, "empty", 1.0);
    m.set(TICK_DURATION, 1.5, Unit::Seconds);
    assert_eq!(m.get(NODECLAIMS_TERMINATED), 3.0);
    assert_eq!(m.get_by(NODECLAIMS_TERMINATED, REASON, "empty"), 1.0);
    let docs = m.to_emf_all("dev", 1);
    assert_eq!(docs.len(), 3);
    assert_eq!(docs[0][NODECLAIMS_TERMINATED], 3.0);
    assert_eq!(docs[0][TICK_DURATION], 1.5);
    let units: Vec<&str> = docs[0]["_aws"]["CloudWatchMetrics"][0]["Metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["Unit"].as_str().unwrap())
        .collect();
    assert_eq!(units, ["Seconds", "Count"]); // by name: fleetwright_tick_duration_seconds first
    let empty = &docs[1];
    assert_eq!(empty["reason"], "empty");
    assert_eq!(
        empty["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
        json!([["cluster", "reason"]])
    );
    assert_eq!(empty[NODECLAIMS_TERMINATED], 1.0);
    assert!(empty.get(TICK_DURATION).is_none());
}
