//! The exact packing of a few pods: over every way to split them into nodes (a subset dynamic
//! program, 3^n steps), each node at the cheapest type of the pool that holds its pods under the
//! requirements. Heuristics miss the optimum on small batches by a node's worth (a 10-pod batch
//! on one 8xlarge where two smaller nodes cost a quarter less); for up to [`EXACT_MAX_PODS`]
//! pods the optimum costs milliseconds, so it is found, not approximated. Larger batches of a
//! few shapes (as Deployments give: 30 pods of three shapes) are packed exactly too, by a dynamic
//! program over how many pods of each shape are left.

use super::*;

/// The most pods packed exactly: 3^12 ≈ 531,000 subset pairs.
pub(crate) const EXACT_MAX_PODS: usize = 12;

/// Pods of a few shapes are packed exactly by counts when the program takes at most this many
/// steps: Π (nₖ+1)(nₖ+2)/2 over the shapes' pod counts nₖ (every state times every node
/// pattern it holds).
const EXACT_MAX_STEPS: usize = 4_000_000;

/// At most this many states (how many of each shape are left), each priced once.
const EXACT_MAX_STATES: usize = 20_000;

/// The most distinct shapes packed exactly by counts.
const EXACT_MAX_SHAPES: usize = 6;

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

    /// The cheapest split of `pods` into nodes of pool `p` under `reqs` when they come in a few
    /// shapes and none keeps apart from another: each node takes some pods of each shape (at
    /// least one of the first shape left, so each split is counted once) at the cheapest type
    /// that holds them. None when the program would be too large or a pod fits no type.
    pub(crate) fn exact_pack_by_shape(
        &self,
        p: usize,
        pods: &[usize],
        reqs: &Requirements,
    ) -> Option<Vec<Packed>> {
        let (shapes, members) = self.shapes_of(pods, EXACT_MAX_SHAPES)?;
        let radix: Vec<usize> = members.iter().map(|m| m.len() + 1).collect();
        let states = radix
            .iter()
            .try_fold(1usize, |a, r| a.checked_mul(*r))
            .filter(|s| *s <= EXACT_MAX_STATES)?;
        radix
            .iter()
            .try_fold(1usize, |a, r| a.checked_mul(r * (r + 1) / 2))
            .filter(|steps| *steps <= EXACT_MAX_STEPS)?;
        let decode = |mut s: usize| -> Vec<usize> {
            radix
                .iter()
                .map(|r| {
                    let d = s % r;
                    s /= r;
                    d
                })
                .collect()
        };
        let node: Vec<Option<Priced>> = (0..states)
            .map(|s| {
                let mut used = Resources::default();
                for (k, n) in decode(s).into_iter().enumerate() {
                    for _ in 0..n {
                        used.add(&shapes[k]);
                    }
                }
                (s > 0).then(|| self.cheapest_fit(p, &used, reqs)).flatten()
            })
            .collect();
        // best[s]: the cheapest split of state s, and the node (a state) holding part of it.
        let mut best: Vec<(f64, usize)> = vec![(f64::INFINITY, 0); states];
        best[0] = (0.0, 0);
        for s in 1..states {
            best[s] = best_split(s, &decode(s), &radix, &node, &best);
        }
        if !best[states - 1].0.is_finite() {
            return None;
        }
        let mut next: Vec<usize> = vec![0; members.len()];
        let mut out = Vec::new();
        let mut s = states - 1;
        while s != 0 {
            let part = best[s].1;
            let (t, price) = node[part]?;
            let mut on = Vec::new();
            for (k, n) in decode(part).into_iter().enumerate() {
                on.extend_from_slice(&members[k][next[k]..next[k] + n]);
                next[k] += n;
            }
            out.push((on, t, price));
            s -= part;
        }
        Some(out)
    }

    /// The pods' distinct requests and the pods of each, when there are at most `max` and no pod
    /// keeps apart from another.
    pub(crate) fn shapes_of(
        &self,
        pods: &[usize],
        max: usize,
    ) -> Option<(Vec<Resources>, Vec<Vec<usize>>)> {
        if self.any_kept_apart(pods) {
            return None;
        }
        let mut shapes: Vec<Resources> = Vec::new();
        let mut members: Vec<Vec<usize>> = Vec::new();
        for &i in pods {
            let r = &self.snapshot.pods[i].requests;
            match shapes.iter().position(|s| s == r) {
                Some(k) => members[k].push(i),
                None => {
                    shapes.push(r.clone());
                    members.push(vec![i]);
                }
            }
            if shapes.len() > max {
                return None;
            }
        }
        Some((shapes, members))
    }

    /// Whether two of the pods may not share a node: one owns a hostname anti-affinity or
    /// spread group that counts the other. A pod alone in its group (an anti-affine Deployment
    /// of one replica) keeps from nobody.
    fn any_kept_apart(&self, pods: &[usize]) -> bool {
        let mut owners: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        let mut counted: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for &i in pods {
            let (owns, counts) = self.hostname_anti(i);
            for g in owns {
                owners.entry(g).or_default().push(i);
            }
            for g in counts {
                counted.entry(g).or_default().push(i);
            }
        }
        owners.iter().any(|(g, own)| {
            counted
                .get(g)
                .is_some_and(|c| c.iter().any(|j| own.iter().any(|i| i != j)))
        })
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

/// The cheapest split of state `s` (`have` pods of each shape): over every node pattern with at
/// least one pod of the first shape left, the node's price plus the best split of the rest.
fn best_split(
    s: usize,
    have: &[usize],
    radix: &[usize],
    node: &[Option<Priced>],
    best: &[(f64, usize)],
) -> (f64, usize) {
    let Some(first) = have.iter().position(|&n| n > 0) else {
        return (0.0, 0);
    };
    let mut out = (f64::INFINITY, 0);
    let mut pattern = vec![0usize; have.len()];
    pattern[first] = 1;
    loop {
        let mut part = 0;
        let mut scale = 1;
        for k in 0..have.len() {
            part += pattern[k] * scale;
            scale *= radix[k];
        }
        if let Some((_, price)) = node[part] {
            let total = price + best[s - part].0;
            if total < out.0 {
                out = (total, part);
            }
        }
        // The next pattern, as a counter with digit k running up to have[k].
        let mut k = 0;
        while k < have.len() {
            if pattern[k] < have[k] {
                pattern[k] += 1;
                break;
            }
            pattern[k] = usize::from(k == first);
            k += 1;
        }
        if k == have.len() {
            return out;
        }
    }
}
