//! The exact packing of a few pods: over every way to split them into nodes (a subset dynamic
//! program, 3^n steps), each node at the cheapest type of the pool that holds its pods under the
//! requirements. Heuristics miss the optimum on small batches by a node's worth (a 10-pod batch
//! on one 8xlarge where two smaller nodes cost a quarter less); for up to [`EXACT_MAX_PODS`]
//! pods the optimum costs milliseconds, so it is found, not approximated.

use super::*;

/// The most pods packed exactly: 3^12 ≈ 531,000 subset pairs.
pub(crate) const EXACT_MAX_PODS: usize = 12;

impl Ctx<'_> {
    /// The cheapest split of `pods` into nodes of pool `p` under `reqs`, keeping hostname
    /// anti-affine pods apart; None when there are too many pods or one fits no type.
    pub(crate) fn exact_pack(
        &self,
        p: usize,
        pods: &[usize],
        reqs: &Requirements,
    ) -> Option<Vec<Packed>> {
        let n = pods.len();
        if n == 0 || n > EXACT_MAX_PODS {
            return None;
        }
        let apart = self.kept_apart(pods);
        let full = (1usize << n) - 1;
        // The cheapest single node for each subset, if one holds it.
        let mut node: Vec<Option<Priced>> = vec![None; full + 1];
        for (s, slot) in node.iter_mut().enumerate().skip(1) {
            if (0..n).any(|i| s >> i & 1 == 1 && apart[i] & s != 0) {
                continue;
            }
            let mut used = Resources::default();
            for (i, &pod) in pods.iter().enumerate() {
                if s >> i & 1 == 1 {
                    used.add(&self.snapshot.pods[pod].requests);
                }
            }
            *slot = self.cheapest_fit(p, &used, reqs);
        }
        // best[s]: the cheapest split of subset s, and the node holding its lowest pod.
        let mut best: Vec<(f64, usize)> = vec![(f64::INFINITY, 0); full + 1];
        best[0] = (0.0, 0);
        for s in 1..=full {
            let low = s & s.wrapping_neg();
            let rest = s & !low;
            let mut t = rest;
            loop {
                let part = t | low;
                if let Some((_, price)) = node[part] {
                    let total = price + best[s & !part].0;
                    if total < best[s].0 {
                        best[s] = (total, part);
                    }
                }
                if t == 0 {
                    break;
                }
                t = (t - 1) & rest;
            }
        }
        if !best[full].0.is_finite() {
            return None;
        }
        let mut out = Vec::new();
        let mut s = full;
        while s != 0 {
            let part = best[s].1;
            let (t, price) = node[part]?;
            let members = (0..n).filter(|i| part >> i & 1 == 1).map(|i| pods[i]);
            out.push((members.collect(), t, price));
            s &= !part;
        }
        Some(out)
    }

    /// Per pod (by position), the positions of the pods it may not share a node with: hostname
    /// anti-affinity either way.
    fn kept_apart(&self, pods: &[usize]) -> Vec<usize> {
        let anti: Vec<(Vec<usize>, Vec<usize>)> =
            pods.iter().map(|&i| self.hostname_anti(i)).collect();
        let meets = |a: &[usize], b: &[usize]| a.iter().any(|g| b.contains(g));
        (0..pods.len())
            .map(|i| {
                (0..pods.len())
                    .filter(|&j| j != i)
                    .filter(|&j| meets(&anti[i].0, &anti[j].1) || meets(&anti[j].0, &anti[i].1))
                    .fold(0usize, |mask, j| mask | 1 << j)
            })
            .collect()
    }
}
