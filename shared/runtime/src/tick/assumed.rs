//! What a dry run (and `fleetwright plan --actions`) takes the actions it does not apply to have
//! done, so that the phases after them decide as a live tick would.

use chrono::{DateTime, Utc};

use super::action::Action;
use super::machine::Outcome;

/// What a dry run (or a plan of a dump) takes an action to have done, so the phases after it
/// decide as a live tick would: the NodeClaims it creates (named `<generateName><dry-run-N>`),
/// and the nodes it registers and initializes.
pub(crate) fn assumed(action: &Action, made_up: &mut usize, now: DateTime<Utc>) -> Vec<Outcome> {
    match action {
        Action::CreateNodeClaim { claim, .. } => {
            vec![Outcome::Created(Box::new(made_up_claim(
                claim, made_up, now,
            )))]
        }
        Action::StartDisruption { replacements, .. } => replacements
            .iter()
            .flat_map(|r| assumed(r, made_up, now))
            .collect(),
        Action::Register { nodeclaim, .. } => vec![Outcome::Registered(nodeclaim.clone())],
        Action::Initialize { nodeclaim, .. } => vec![Outcome::Initialized(nodeclaim.clone())],
        _ => Vec::new(),
    }
}

/// A NodeClaim as a dry run supposes it created: named, and created now.
fn made_up_claim(
    claim: &fleetwright_crds::NodeClaim,
    made_up: &mut usize,
    now: DateTime<Utc>,
) -> fleetwright_crds::NodeClaim {
    *made_up += 1;
    let mut claim = claim.clone();
    let prefix = claim.metadata.generate_name.clone().unwrap_or_default();
    claim.metadata.name = Some(format!("{prefix}<dry-run-{made_up}>"));
    claim.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        super::jiff(now),
    ));
    claim
}
