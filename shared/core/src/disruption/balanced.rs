//! Karpenter's `consolidationPolicy: Balanced` (v1.14): a consolidation move is made only when
//! what it saves is worth what it disrupts, both as fractions of the NodePool's totals:
//!
//! score = (savings / pool cost) / (disruption / pool disruption), approved when ≥ 1/k, k = 2
//!
//! The pool's totals are its candidates' hourly prices and disruption costs; a node's disruption
//! cost is 1 (the node itself: cordon, drain, replacement) plus its pods' (Karpenter's
//! per-pod cost, nudged by deletion cost and priority). A move across pools is scored for each
//! Balanced pool in it, with the replacements' cost shared by price; every one must pass. The
//! score only filters moves the consolidation already found cheaper: it never makes one.
//! Emptiness is not scored.

use std::cell::RefCell;
use std::collections::BTreeMap;

use serde::Serialize;

use crate::model::ConsolidationPolicy;

use super::candidates::Candidate;

/// Balanced's k: a move passes when its disruption fraction is at most k times its savings
/// fraction (Karpenter's default and, in v1.14, only value).
pub const BALANCED_K: f64 = 2.0;

/// One scored move of one Balanced pool (Karpenter's `karpenter_consolidation_score` and
/// `karpenter_consolidation_moves_total`, by decision).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Score {
    pub nodepool: String,
    pub nodes: Vec<String>,
    pub score: f64,
    pub approved: bool,
}

/// The Balanced pools' totals, and every move scored against them.
#[derive(Debug, Default)]
pub(crate) struct Scoring {
    /// Per Balanced pool: its candidates' hourly cost and disruption cost.
    totals: BTreeMap<String, (f64, f64)>,
    scored: RefCell<Vec<Score>>,
}

fn disruption(c: &Candidate) -> f64 {
    1.0 + c.cost.max(0.0)
}

impl Scoring {
    pub(crate) fn new(candidates: &[Candidate]) -> Scoring {
        let mut totals: BTreeMap<String, (f64, f64)> = BTreeMap::new();
        // A node whose pods cannot be evicted is no candidate of consolidation's, so it is not
        // counted in its pool's totals either.
        for c in candidates.iter().filter(|c| {
            c.held.is_none() && c.pool.consolidation_policy == ConsolidationPolicy::Balanced
        }) {
            let t = totals.entry(c.pool.name.clone()).or_default();
            t.0 += c.price;
            t.1 += disruption(c);
        }
        Scoring {
            totals,
            scored: RefCell::new(Vec::new()),
        }
    }

    /// Whether a move of `candidates` whose replacements cost `replacing` an hour passes every
    /// Balanced pool it touches; why not when it does not.
    pub(crate) fn check(&self, candidates: &[&Candidate], replacing: f64) -> Result<(), String> {
        let total: f64 = candidates.iter().map(|c| c.price).sum();
        if total <= 0.0 {
            return Ok(());
        }
        let mut verdict = Ok(());
        for (pool, (pool_cost, pool_disruption)) in &self.totals {
            let mine: Vec<&&Candidate> =
                candidates.iter().filter(|c| &c.pool.name == pool).collect();
            if mine.is_empty() || *pool_cost <= 0.0 || *pool_disruption <= 0.0 {
                continue;
            }
            let price: f64 = mine.iter().map(|c| c.price).sum();
            let savings = price - replacing * price / total;
            let disrupted: f64 = mine.iter().map(|c| disruption(c)).sum();
            let score = (savings / pool_cost) / (disrupted / pool_disruption);
            let approved = score >= 1.0 / BALANCED_K;
            self.scored.borrow_mut().push(Score {
                nodepool: pool.clone(),
                nodes: mine.iter().map(|c| c.node.name.clone()).collect(),
                score: (score * 10_000.0).round() / 10_000.0,
                approved,
            });
            if !approved && verdict.is_ok() {
                verdict = Err(format!(
                    "Balanced: nodepool {pool} scores {score:.3}, under {:.2} (saves {:.1} % of its cost for {:.1} % of its disruption)",
                    1.0 / BALANCED_K,
                    100.0 * savings / pool_cost,
                    100.0 * disrupted / pool_disruption
                ));
            }
        }
        verdict
    }

    /// Every move scored, in order.
    pub(crate) fn take(&self) -> Vec<Score> {
        self.scored.take()
    }
}
