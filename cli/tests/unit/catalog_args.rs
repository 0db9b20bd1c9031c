use super::*;

#[test]
fn offerings_name_their_region_in_their_zones() {
    let zones = |z: &[&str]| z.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        zones_region(&zones(&["eu-central-1a", "eu-central-1b", "eu-central-1c"])).as_deref(),
        Some("eu-central-1")
    );
    assert_eq!(zones_region(&zones(&[])), None);
    assert_eq!(zones_region(&zones(&["weird"])), None);
}
