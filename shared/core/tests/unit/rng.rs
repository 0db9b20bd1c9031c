use super::*;

#[test]
fn the_same_seed_gives_the_same_sequence_and_others_differ() {
    let a: Vec<u64> = (0..4)
        .map({
            let mut r = Rng::new(7);
            move |_| r.next_u64()
        })
        .collect();
    let b: Vec<u64> = (0..4)
        .map({
            let mut r = Rng::new(7);
            move |_| r.next_u64()
        })
        .collect();
    let c = Rng::new(8).next_u64();
    assert_eq!(a, b);
    assert_ne!(a[0], c);
    let mut r = Rng::new(1);
    assert!((0..100).all(|_| r.below(3) < 3));
    assert!((0..100).all(|_| (0.3..0.5).contains(&r.between(0.3, 0.5))));
    assert_eq!(r.suffix().len(), 5);
}
