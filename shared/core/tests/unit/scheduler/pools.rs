use super::*;
use crate::requirements::Requirement;

/// A pool pinned to one type whose offerings an insufficient-capacity error marked
/// unavailable is empty because of the capacity, not the requirement that names the type.
#[test]
fn a_pool_emptied_by_unavailable_offerings_says_so_not_that_its_requirement_is_wrong() {
    let mut catalog = Catalog::embedded().clone();
    let mut reqs = Requirements::new();
    reqs.add(Requirement::single(
        crate::labels::INSTANCE_TYPE,
        "m5.large",
    ));
    let all = catalog.instance_types_shared(&Default::default());
    let why = emptied_by(&reqs, (&all, &Default::default()), &catalog);
    assert!(
        why.contains("no instance type"),
        "available, so not empty: {why}"
    );
    for zone in [
        "us-east-1a",
        "us-east-1b",
        "us-east-1c",
        "us-east-1d",
        "us-east-1e",
        "us-east-1f",
    ] {
        for class in ["on-demand", "spot"] {
            (catalog.unavailable).insert((class.into(), "m5.large".into(), zone.into()));
        }
    }
    let all = catalog.instance_types_shared(&Default::default());
    let why = emptied_by(&reqs, (&all, &Default::default()), &catalog);
    assert!(
        why.contains("have no offering available now (a launch error marked them")
            && why.contains("m5.large"),
        "{why}"
    );
    // A type that does not exist is still the requirement's fault.
    let mut missing = Requirements::new();
    missing.add(Requirement::single(crate::labels::INSTANCE_TYPE, "m5.huge"));
    let why = emptied_by(&missing, (&all, &Default::default()), &catalog);
    assert!(
        why.contains("requirement") && why.contains("leaves none"),
        "{why}"
    );
}
