use super::*;

#[test]
fn latency_percentiles_use_the_nearest_rank() {
    let l = Latency::of((1..=100).collect());
    assert_eq!((l.pods, l.p50, l.p99, l.max), (100, 50, 99, 100));
    assert_eq!(Latency::of(vec![]), Latency::default());
    let l = Latency::of(vec![61, 5]);
    assert_eq!((l.p50, l.p99), (5, 61));
}
