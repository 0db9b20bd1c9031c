use super::*;

#[test]
fn a_deadline_is_near_inside_the_margin_only() {
    assert!(!Deadline::none().near());
    assert!(Deadline::at(Instant::now() + Duration::from_secs(5)).near());
    assert!(!Deadline::at(Instant::now() + Duration::from_secs(60)).near());
    let now = std::time::SystemTime::now();
    let in_a_minute = now
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
        + 60_000;
    assert!(!Deadline::from_epoch_millis(in_a_minute, now).near());
    assert!(Deadline::from_epoch_millis(0, now).near());
    let an_hour_ago = in_a_minute - 3_660_000;
    assert!(Deadline::from_epoch_millis(an_hour_ago, now).near());
}

/// The margin covers one Kubernetes call with all its retries: a tick that starts one with
/// the margin left is not cut off by Lambda in the middle of it.
#[test]
fn the_margin_covers_one_retried_kubernetes_call() {
    let budget = fleetwright_kube::retry::BUDGET;
    assert!(
        MARGIN >= budget + Duration::from_secs(2),
        "{MARGIN:?} < {budget:?}"
    );
    // Twelve seconds left is too little for one more call with its retries.
    assert!(Deadline::at(Instant::now() + Duration::from_secs(12)).near());
    assert!(!Deadline::at(Instant::now() + Duration::from_secs(30)).near());
}

#[test]
fn an_emulators_time_left_is_read_as_time_left() {
    let now = std::time::SystemTime::now();
    // `cargo lambda watch` sends the time left: ten minutes.
    assert!(!Deadline::from_epoch_millis(600_000, now).near());
    assert!(Deadline::from_epoch_millis(5_000, now).near());
}
