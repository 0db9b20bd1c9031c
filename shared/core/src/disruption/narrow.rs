//! How a consolidation replacement's options are cut before it launches, as Karpenter cuts
//! them: its instance-type and capacity-type requirements narrowed to what it was priced at,
//! and Karpenter's spot-to-spot rules. A launch that finds the cheap options short must fail
//! and leave the node as it is, never fall back to capacity as dear as the node it replaces.

use super::candidates::Candidate;
use super::MIN_SPOT_OPTIONS;
use crate::labels::{CAPACITY_SPOT, CAPACITY_TYPE, INSTANCE_TYPE};
use crate::plan::NewNodeClaim;

/// Karpenter's rules for replacing spot nodes with spot: only with its `SpotToSpotConsolidation`
/// gate; a single node needs 15 cheaper spot types, and its replacement launches from the 15
/// cheapest (more when the pool has `minValues`), so that whichever of them EC2 picks, the
/// next consolidation finds it among the cheapest and leaves it.
pub(super) fn spot_to_spot(
    mut options: Vec<(String, f64)>,
    candidates: &[&Candidate],
    claim: &NewNodeClaim,
) -> Result<Vec<(String, f64)>, String> {
    if !candidates.iter().all(|c| c.pool.spot_to_spot) {
        return Err("SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node (FLEETWRIGHT_SPOT_TO_SPOT_CONSOLIDATION)".into());
    }
    if candidates.len() > 1 {
        return Ok(options);
    }
    if options.len() < MIN_SPOT_OPTIONS {
        return Err(format!(
            "spot-to-spot consolidation needs {MIN_SPOT_OPTIONS} cheaper spot types, found {}",
            options.len()
        ));
    }
    if claim.requirements.iter().all(|r| r.min_values.is_none()) {
        options.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        options.truncate(MIN_SPOT_OPTIONS);
    }
    Ok(options)
}

/// The replacement's own instance-type requirement narrowed to its cheaper types, as Karpenter
/// narrows it: a launch that finds them short of capacity must fail, not fall back to a type as
/// dear as the candidate (whose node consolidation would only replace again). Fewer types than
/// the requirement's `minValues` is no replacement.
pub(super) fn narrow_types(claim: &mut NewNodeClaim) -> Result<(), String> {
    let types = claim.instance_types.clone();
    let existing = claim
        .requirements
        .iter_mut()
        .find(|r| r.key == INSTANCE_TYPE && r.operator == "In");
    match existing {
        Some(r) if r.min_values.is_some_and(|m| types.len() < m) => Err(format!(
            "{} cheaper instance type(s) are fewer than the minValues of {}",
            types.len(),
            r.min_values.unwrap_or_default()
        )),
        Some(r) => {
            r.values = types;
            Ok(())
        }
        None => {
            claim.requirements.push(crate::plan::RequirementOut {
                key: INSTANCE_TYPE.into(),
                operator: "In".into(),
                values: types,
                min_values: None,
            });
            Ok(())
        }
    }
}

/// The replacement's own capacity-type requirement narrowed to the capacity it was priced at, as
/// Karpenter narrows a spot-priced one: its types were cut by their spot prices, so a launch
/// that finds no spot must fail and leave the node as it is, not buy the same types on demand
/// at a price that may exceed the candidate's.
pub(super) fn narrow_capacity(claim: &mut NewNodeClaim, capacity: &str) {
    if capacity != CAPACITY_SPOT {
        return;
    }
    claim.requirements.retain(|r| r.key != CAPACITY_TYPE);
    claim.requirements.push(crate::plan::RequirementOut {
        key: CAPACITY_TYPE.into(),
        operator: "In".into(),
        values: vec![CAPACITY_SPOT.to_string()],
        min_values: None,
    });
}
