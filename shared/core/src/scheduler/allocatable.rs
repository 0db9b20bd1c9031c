//! What a node or NodeClaim can hold for the scheduler: an in-flight NodeClaim's allocatable,
//! and a starting node's, which takes from its NodeClaim what the node does not report yet.

use super::*;

impl Ctx<'_> {
    /// What a node can hold: its allocatable, but while its NodeClaim is not initialized, a
    /// resource the node reports none of yet (a GPU before its device plugin registers it) is
    /// taken from the NodeClaim, as Karpenter counts a starting node. Otherwise a node that has
    /// joined but not yet advertised its GPUs would make every plan launch another for its pods.
    pub(super) fn node_allocatable(
        &self,
        node: &crate::model::Node,
        starting: &HashMap<&str, &NodeClaim>,
    ) -> Resources {
        let claim = [Some(node.name.as_str()), node.provider_id.as_deref()]
            .into_iter()
            .flatten()
            .find_map(|k| starting.get(k).copied());
        let mut out = node.allocatable.clone();
        let Some(expected) = claim.and_then(|c| self.claim_allocatable(c)) else {
            return out;
        };
        for name in expected.names().map(str::to_string).collect::<Vec<_>>() {
            if out.get(&name) == 0 {
                out.set(&name, expected.get(&name));
            }
        }
        out
    }

    /// An in-flight claim's allocatable: its status, or the smallest type it may still launch as
    /// (one its pool offers no more among them: a full reservation's).
    pub(crate) fn claim_allocatable(&self, claim: &NodeClaim) -> Option<Resources> {
        if let Some(a) = &claim.allocatable {
            return Some(a.clone());
        }
        let pool = self.pools.iter().find(|p| p.pool.name == claim.nodepool)?;
        let allowed = claim.requirements.get(INSTANCE_TYPE);
        let candidates = pool
            .types
            .iter()
            .enumerate()
            .filter(|(_, t)| allowed.is_none_or(|r| r.has(&t.name)));
        // Only a type the claim names itself: the others are other claims'.
        let others = (pool.inflight_only.iter())
            .filter(|(name, _)| allowed.is_some_and(|r| !r.is_complement() && r.has(name)))
            .map(|(_, u)| u);
        let mut smallest: Option<Resources> = None;
        for u in candidates.map(|(i, _)| &pool.usable[i]).chain(others) {
            smallest = Some(match smallest {
                None => u.clone(),
                Some(s) if (u.cpu, u.memory) < (s.cpu, s.memory) => u.clone(),
                Some(s) => s,
            });
        }
        smallest
    }
}
