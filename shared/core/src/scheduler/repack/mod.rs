//! Improving a packing: re-packing movable pods per set of node requirements into the LP's node
//! mix with vector best fit, splitting half-empty nodes into cheaper smaller ones, and
//! re-splitting pairs of nodes by the pods' memory per CPU.
//!
//! This file holds what the parts share and packing one group of pods: [`Ctx::pack_group`]
//! picks the cheapest of the exact, vector and pattern packings.

use super::*;

/// Above this many pod×node pairs in a partition, re-packing tries a reduced set of strategies.
const THOROUGH_WORK: usize = 50_000;

/// Above this many split points per pass (pods summed over all node pairs), pairs are not
/// re-split.
const PAIR_WORK: usize = 20_000;

/// A pair is cut at about this many points.
const PAIR_CUTS: usize = 64;

/// At most this many passes over the node pairs.
const PAIR_PASSES: usize = 4;

/// Whether type `t` is in a mask of types.
fn bit(mask: &Bits, t: usize) -> bool {
    mask[t / 64] & (1 << (t % 64)) != 0
}

/// An instance type (its index in the pool) and its price.
type Priced = (usize, f64);

/// Pods with the pool each would be re-packed into (see `Run::home_pool`).
type Homed = Vec<(usize, Option<usize>)>;

/// One packed node: its pods, its type and its price.
pub(crate) type Packed = (Vec<usize>, usize, f64);

/// A group packed from scratch: pool, requirements, pods, patterns, the node count it had.
pub(crate) type GroupKey = (usize, String, Vec<usize>, Patterns, usize);

/// A group's vector packings: pool, requirements, pods, whether every strategy was tried.
pub(crate) type VectorKey = (usize, String, Vec<usize>, bool);

/// Whether a group's nodes may also be packed by patterns ([`Ctx::pattern_pack`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Patterns {
    On,
    Off,
}

/// The hourly price of a packing.
fn cost(packing: &[Packed]) -> f64 {
    packing.iter().map(|(_, _, price)| price).sum()
}

impl Ctx<'_> {
    /// The cheapest packing found for `pods` under `reqs` in pool `p`: the LP-guided vector
    /// packings (every strategy when the problem is small), the pattern packings (`patterns`,
    /// when the group suits them) and `current` if given, each with its half-empty nodes split,
    /// then the best one re-cut two nodes at a time. A group packed from scratch is packed once
    /// per plan: each way of regrouping meets the same groups.
    pub(crate) fn pack_group(
        &self,
        p: usize,
        pods: &[usize],
        reqs: &Requirements,
        current: Option<Vec<Packed>>,
        nodes: usize,
        patterns: Patterns,
    ) -> Option<Vec<Packed>> {
        let patterns = match patterns {
            Patterns::On if !self.suits_patterns(pods) => Patterns::Off,
            _ => patterns,
        };
        let key = current
            .is_none()
            .then(|| (p, reqs.to_string(), pods.to_vec(), patterns, nodes));
        if let Some(found) = key
            .as_ref()
            .and_then(|k| self.packings.borrow().get(k).cloned())
        {
            return found;
        }
        // A few pods: the optimum itself, which no heuristic packing can beat.
        let exact = self
            .exact_pack(p, pods, reqs)
            .or_else(|| self.exact_pack_by_shape(p, pods, reqs));
        let packing = match exact {
            Some(exact) => Some(exact),
            None => {
                // Each strategy costs about pods × nodes; try them all only on small problems.
                let thorough = pods.len().saturating_mul(nodes.max(1)) <= THOROUGH_WORK;
                let patterned = match patterns {
                    Patterns::On => self.best_pattern_pack(p, pods, reqs),
                    Patterns::Off => None,
                };
                let candidates = current
                    .into_iter()
                    .chain(self.best_vector_pack(p, pods, reqs, thorough))
                    .chain(patterned);
                self.cheapest_improved(p, reqs, candidates)
            }
        };
        if let Some(key) = key {
            self.packings.borrow_mut().insert(key, packing.clone());
        }
        packing
    }

    /// The cheapest of `candidates` once each has its half-empty nodes split, re-cut two nodes
    /// at a time.
    fn cheapest_improved(
        &self,
        p: usize,
        reqs: &Requirements,
        candidates: impl Iterator<Item = Vec<Packed>>,
    ) -> Option<Vec<Packed>> {
        let mut packing = candidates
            .map(|k| {
                k.into_iter()
                    .flat_map(|bin| self.split(p, reqs, bin))
                    .collect::<Vec<_>>()
            })
            .min_by(|a, b| cost(a).total_cmp(&cost(b)))?;
        self.improve_pairs(p, reqs, &mut packing);
        Some(packing)
    }

    /// The cheapest of the LP-guided vector packings of `pods` (every strategy when
    /// `thorough`, else a few), found once per group.
    fn best_vector_pack(
        &self,
        p: usize,
        pods: &[usize],
        reqs: &Requirements,
        thorough: bool,
    ) -> Option<Vec<Packed>> {
        let key = (p, reqs.to_string(), pods.to_vec(), thorough);
        if let Some(found) = self.vector_packings.borrow().get(&key) {
            return found.clone();
        }
        let top = self.pools[p].price.last().copied().unwrap_or(f64::INFINITY);
        let bands: Vec<(f64, f64)> = [1.0, 0.5, 0.25, 0.125, 0.0625]
            .map(|f| (0.0, f * top))
            .into_iter()
            .chain([0.0625, 0.03125, 0.015625].map(|f| (f * top, top)))
            .collect();
        let best = Strategy::all(bands, thorough)
            .into_iter()
            .filter_map(|s| self.vector_pack(p, pods, reqs, s))
            .min_by(|a, b| cost(a).total_cmp(&cost(b)));
        self.vector_packings.borrow_mut().insert(key, best.clone());
        best
    }

    /// The cheapest packing of `pods` by patterns: over all types and over the cheaper ones
    /// only (smaller nodes round better), rounded down and to the nearest node.
    fn best_pattern_pack(
        &self,
        p: usize,
        pods: &[usize],
        reqs: &Requirements,
    ) -> Option<Vec<Packed>> {
        [1.0, 0.25]
            .into_iter()
            .flat_map(|share| [Rounding::Down, Rounding::Nearest].map(|r| (share, r)))
            .filter_map(|(share, rounding)| self.pattern_pack(p, pods, reqs, share, rounding))
            .min_by(|a, b| cost(a).total_cmp(&cost(b)))
    }
}

mod allowed;
mod exact;
mod exchange;
mod groups;
mod movable;
mod patterns;
mod recut;
mod regroup;
mod run;
mod vector;
use groups::{total, Fill};
use movable::KeptApart;
pub(crate) use patterns::Program;
use vector::{Fit, Order, Rounding, Strategy};
#[cfg(test)]
#[path = "../../../tests/unit/scheduler/repack.rs"]
mod tests;
