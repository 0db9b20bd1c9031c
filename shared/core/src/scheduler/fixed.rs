//! The NodeClaim a static NodePool (`spec.replicas`) launches: no pods, its template's
//! requirements, its cheapest instance types (with `minValues`), as Karpenter launches a static
//! pool's node from the template alone.

use super::*;

/// The NodeClaim `pool`'s template launches with no pods, or None when no instance type is left.
pub fn static_claim(
    snapshot: &Snapshot,
    catalog: &Catalog,
    pool: &NodePool,
) -> Option<NewNodeClaim> {
    let settings = snapshot.node_class_settings(pool);
    let ctx = pools::pool_ctx(snapshot, pool, &catalog.instance_types_shared(&settings));
    let options: Vec<u32> = (0..ctx.types.len())
        .filter(|&t| ctx.usable[t].cpu >= 0 && ctx.usable[t].memory >= 0)
        .map(|t| t as u32)
        .collect();
    if options.is_empty() {
        return None;
    }
    let bin = Bin {
        name: String::new(),
        pool: Some(0),
        inflight: false,
        reqs: ctx.base.clone(),
        taints: Vec::new(),
        used: Resources::default(),
        max_usable: Resources::default(),
        options,
        ports: Vec::new(),
        volumes: Vec::new(),
        volume_limits: Default::default(),
        pods: Vec::new(),
        reserved: Resources::default(),
        limit: None,
    };
    let max = ScheduleOptions::default().max_options;
    let claim = output::node_claim_out(&ctx, &bin, snapshot, max, &mut Default::default());
    (!claim.instance_types.is_empty()).then_some(claim)
}
