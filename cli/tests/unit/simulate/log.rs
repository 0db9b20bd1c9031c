use super::*;

#[test]
fn components_are_the_last_target_segment() {
    assert_eq!(component("fleetwright_runtime::disrupt"), "disrupt");
    assert_eq!(component("simulate::kubelet"), "kubelet");
    assert_eq!(component("plain"), "plain");
}
