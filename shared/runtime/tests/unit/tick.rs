use super::*;
use fleetwright_sim::memory::MemoryApi;

/// The interruption function marked `spot/m5.large/us-east-1b` while a tick ran; the tick's
/// end-of-tick write (which knows only `us-east-1a`) must not erase it.
#[tokio::test]
async fn the_ticks_write_keeps_offerings_another_writer_just_marked() {
    let api = MemoryApi::new(Default::default());
    let now = Utc::now();
    let mut theirs = UnavailableOfferings::default();
    theirs.mark("spot", "m5.large", "us-east-1b", now);
    persist_unavailable(api.client(), "karpenter", &theirs, now)
        .await
        .unwrap();
    let mut ours = UnavailableOfferings::default();
    ours.mark("spot", "m5.large", "us-east-1a", now);
    persist_unavailable(api.client(), "karpenter", &ours, now)
        .await
        .unwrap();
    let stored: UnavailableOfferings = state::load(api.client(), "karpenter", UNAVAILABLE_KEY)
        .await
        .unwrap()
        .unwrap();
    let zones: Vec<String> = stored.active(now).into_iter().map(|(_, _, z)| z).collect();
    assert!(zones.contains(&"us-east-1a".to_string()), "{zones:?}");
    assert!(zones.contains(&"us-east-1b".to_string()), "{zones:?}");
}

/// Switched from shadow mode to live, the first write of the unavailable offerings drops the
/// shadow records, so they do not hold room the live state needs.
#[tokio::test]
async fn a_live_write_drops_the_shadow_records() {
    let api = MemoryApi::new(Default::default());
    let now = Utc::now();
    let key = crate::shadow::SHADOW_KEY;
    state::store(
        api.client(),
        "karpenter",
        key,
        &crate::shadow::Shadow::default(),
    )
    .await
    .unwrap();
    persist_unavailable(api.client(), "karpenter", &Default::default(), now)
        .await
        .unwrap();
    let left: Option<crate::shadow::Shadow> =
        state::load(api.client(), "karpenter", key).await.unwrap();
    assert!(left.is_none(), "{left:?}");
}
