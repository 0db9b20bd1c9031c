use super::*;
use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

fn lease(holder: &str, renewed: i64) -> Lease {
    Lease {
        spec: Some(LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(15),
            renew_time: Some(MicroTime(
                k8s_openapi::jiff::Timestamp::from_second(renewed).unwrap(),
            )),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn a_lease_is_held_while_renewed_within_its_duration() {
    let now = 1_790_000_000;
    assert!(held(&lease("karpenter-7d9f", now), now));
    assert!(!held(&lease("karpenter-7d9f", now - 300), now));
    assert!(!held(&lease("", now), now));
    assert!(!held(&Lease::default(), now));
}
