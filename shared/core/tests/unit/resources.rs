use super::*;

#[test]
fn arithmetic_and_fit() {
    let mut a =
        Resources::parse([("cpu", "1"), ("memory", "1Gi"), ("nvidia.com/gpu", "1")]).unwrap();
    let cap = Resources::parse([("cpu", "2"), ("memory", "2Gi"), ("pods", "10")]).unwrap();
    assert!(!a.fits_in(&cap));
    assert_eq!(a.first_exceeding(&cap), Some("nvidia.com/gpu"));
    a.set("nvidia.com/gpu", 0);
    assert!(a.fits_in(&cap));
    let twice = a.plus(&a);
    assert!(twice.fits_in(&cap));
    assert!(!twice.plus(&a).fits_in(&cap));
    assert_eq!(twice.to_map()["cpu"], "2");
    assert_eq!(twice.to_map()["memory"], "2Gi");
}
