use super::*;

#[test]
fn cases_are_deterministic_and_the_limit_is_the_only_difference() {
    let (name, a) = generated_case(7, false);
    let (again, b) = generated_case(7, true);
    assert_eq!(name, again);
    assert_eq!(a.pods.len(), b.pods.len());
    assert!(a.pods.len() >= 20 && a.pods.len() <= 2000);
    assert!(b.nodepools.iter().all(|p| p.limits.is_some()));
    let names: std::collections::BTreeSet<String> =
        (0..200).map(|s| generated_case(s, false).0).collect();
    assert_eq!(names.len(), 200);
}
