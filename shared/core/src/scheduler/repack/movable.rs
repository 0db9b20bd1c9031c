//! Which pods re-packing may move, and what they need of the node they move to: their own
//! requirements, the zone and capacity type their topology pinned, and the hostname groups
//! that keep them apart from other pods.

use super::*;

impl Ctx<'_> {
    /// A pod that re-packing may move to another new node of the same pool with the same node
    /// requirements (so its node selector, required node affinity, zone and capacity type hold
    /// as before): no host ports, a strictest reading (its preferences as requirements) that
    /// some pool can meet, so that a move keeps every preference, and topology only on zone or
    /// capacity type (whose counts such a move leaves unchanged) or hostname anti-affinity or
    /// spread (which re-packing keeps, see [`Self::hostname_anti`]).
    pub(crate) fn is_movable(&self, i: usize) -> bool {
        let class = &self.classes[self.class_of[&i]];
        let pod = &self.snapshot.pods[i];
        let groups = &self.base_topology.groups;
        let v = &class.variants[0];
        (class.variants.len() == 1 || v.pools.iter().any(Option::is_some))
            && pod.host_ports.is_empty()
            && self.topology_groups(i).all(|g| {
                let id = &groups[g].id;
                matches!(id.key.as_str(), ZONE | CAPACITY_TYPE)
                    || (id.key == HOSTNAME && id.kind == Kind::Anti)
                    || keeps_apart(id)
            })
    }

    /// Hostname anti-affinity and spread of a movable pod: the groups it owns and those that
    /// count it. Re-packing keeps an owner off every node that holds a pod its group counts.
    /// For a hostname spread that is at most one counted pod per node where an owner goes: a
    /// new node's domain is always at count zero, so a skew of one allows no more, and a larger
    /// skew is kept to one (stricter, never a violation).
    pub(crate) fn hostname_anti(&self, i: usize) -> (Vec<usize>, Vec<usize>) {
        let class = &self.classes[self.class_of[&i]];
        let groups = &self.base_topology.groups;
        let is_anti = |g: &usize| keeps_apart(&groups[*g].id);
        let owns = class.variants[0]
            .owned
            .iter()
            .map(|(g, _)| *g)
            .filter(is_anti)
            .collect();
        let counted = class.member_of.iter().copied().filter(is_anti).collect();
        (owns, counted)
    }

    /// The requirements a movable pod needs of its node in pool `p`: the pool's and its own,
    /// and, when it takes part in a topology (zone or capacity-type spread, hostname
    /// anti-affinity), the zone and capacity type its bin pinned, so the counts stay as planned.
    pub(crate) fn own_reqs(&self, p: usize, i: usize, bin_reqs: &Requirements) -> Requirements {
        let class = &self.classes[self.class_of[&i]];
        let v = &class.variants[0];
        let mut reqs = self.pools[p].base.intersection(&v.reqs);
        if !self.in_no_topology(i) {
            for key in [ZONE, CAPACITY_TYPE] {
                if let Some(r) = bin_reqs.get(key) {
                    reqs.add(r.clone());
                }
            }
        }
        reqs
    }

    /// Whether pod `i` takes part in no topology (spread, affinity or anti-affinity).
    pub(super) fn in_no_topology(&self, i: usize) -> bool {
        self.topology_groups(i).next().is_none()
    }

    /// The topology groups pod `i` takes part in: those it owns, those its term owns, those
    /// that count it and the inverse groups that repel it.
    pub(super) fn topology_groups(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        let class = &self.classes[self.class_of[&i]];
        let v = &class.variants[0];
        v.owned
            .iter()
            .map(|(g, _)| g)
            .chain(&v.owner_of)
            .chain(&class.member_of)
            .chain(&class.repelled_by)
            .copied()
    }
}

/// The hostname groups a pod owns and those that count it ([`Ctx::hostname_anti`]).
pub(super) type KeptApart = (Vec<usize>, Vec<usize>);

/// Whether re-packing keeps the group's owners apart from its counted pods, node by node:
/// hostname anti-affinity (not its inverse) and hard hostname spreads.
fn keeps_apart(id: &crate::topology::GroupKey) -> bool {
    id.key == HOSTNAME
        && !id.inverse
        && match id.kind {
            Kind::Anti => true,
            Kind::Spread { .. } => true,
            Kind::Affinity => false,
        }
}
