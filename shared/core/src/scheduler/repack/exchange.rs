//! Moving and swapping single pods between a run's new nodes of one pool: a pod moves to a
//! node with room for it, or two pods trade places, whenever the two nodes then cost less
//! together. This is what the packings by group cannot see: a pod that takes a slack node's
//! room across a zone or a topology, so that the node it left shrinks or goes.
//!
//! Each node keeps only what its pods need (their own requirements, and the zone and capacity
//! type each pod's topology pinned where it was planned), and pods that a hostname
//! anti-affinity or spread keeps apart stay apart.

use super::*;

/// Above this many pods on the nodes taking part, nodes are left as they are.
const EXCHANGE_PODS: usize = 400;

/// At most this many trades are priced in one run.
const EXCHANGE_WORK: usize = 20_000;

/// At most this many passes over the pairs of nodes.
const EXCHANGE_PASSES: usize = 4;

/// A node while pods move: its bin, pods, resources used, requirements, type and price, and
/// its price without each of its pods (what it saves when that pod leaves).
struct Node {
    bin: usize,
    pods: Vec<usize>,
    used: Resources,
    reqs: Requirements,
    t: usize,
    price: f64,
    without: Vec<f64>,
}

/// A trade between two nodes: their price after it, and each one's pods.
type Trade = (f64, Vec<usize>, Vec<usize>);

/// What the nodes of one pool need to know of each pod: what it needs of its node and which
/// pods it is kept apart from.
struct Needs {
    /// Per pod, its requirements as an index into `kinds` (most pods share a few).
    reqs: HashMap<usize, usize>,
    kinds: Vec<Requirements>,
    apart: HashMap<usize, KeptApart>,
    work: usize,
}

impl Run<'_, '_> {
    /// Moves and swaps pods between pool `p`'s new nodes of movable pods while that makes the
    /// plan cheaper (see the module's note). Pools with limits or minValues are left as they are.
    pub(crate) fn exchange_pods(&mut self, p: usize) {
        let ctx = self.ctx;
        let pool = &ctx.pools[p];
        if pool.remaining.is_some() || !pool.min_values.is_empty() {
            return;
        }
        let bins: Vec<usize> = (0..self.bins.len())
            .filter(|&b| {
                let bin = &self.bins[b];
                bin.pool == Some(p)
                    && !bin.inflight
                    && bin.name.is_empty()
                    && !bin.pods.is_empty()
                    && bin
                        .pods
                        .iter()
                        .all(|&i| ctx.is_movable(i) && !self.counts_by_node(i))
            })
            .collect();
        let pods: usize = bins.iter().map(|&b| self.bins[b].pods.len()).sum();
        if bins.len() < 2 || pods > EXCHANGE_PODS {
            return;
        }
        let mut needs = Needs {
            reqs: HashMap::new(),
            kinds: Vec::new(),
            apart: HashMap::new(),
            work: 0,
        };
        for &b in &bins {
            for &i in &self.bins[b].pods {
                let own = ctx.own_reqs(p, i, &self.bins[b].reqs);
                let kind = match needs.kinds.iter().position(|k| *k == own) {
                    Some(k) => k,
                    None => {
                        needs.kinds.push(own);
                        needs.kinds.len() - 1
                    }
                };
                needs.reqs.insert(i, kind);
                needs.apart.insert(i, ctx.hostname_anti(i));
            }
        }
        // A node whose pods' own needs no type meets (a preference the pool cannot honour)
        // stays as it is; the others still trade.
        let mut nodes: Vec<Node> = bins
            .iter()
            .filter_map(|&b| self.node(p, b, self.bins[b].pods.clone(), &needs))
            .collect();
        if nodes.len() < 2 {
            return;
        }
        let mut changed = BTreeSet::new();
        for _ in 0..EXCHANGE_PASSES {
            let mut better = false;
            for a in 0..nodes.len() {
                for b in 0..nodes.len() {
                    if a != b && self.improve_pair(p, &mut nodes, (a, b), &mut needs) {
                        better = true;
                        changed.extend([a, b]);
                    }
                }
            }
            if !better || needs.work > EXCHANGE_WORK {
                break;
            }
        }
        for k in changed {
            self.write_back(p, &nodes[k]);
        }
    }

    /// Node `bin` of pool `p` holding `pods`, at the cheapest type their needs allow; None
    /// when no type holds them (an empty node costs nothing).
    fn node(&self, p: usize, bin: usize, pods: Vec<usize>, needs: &Needs) -> Option<Node> {
        let (reqs, used, t, price) = self.priced(p, &pods, needs)?;
        let without = (0..pods.len())
            .map(|k| {
                let rest: Vec<usize> = pods
                    .iter()
                    .enumerate()
                    .filter(|&(j, _)| j != k)
                    .map(|(_, &i)| i)
                    .collect();
                self.priced(p, &rest, needs).map_or(price, |(.., c)| c)
            })
            .collect();
        Some(Node {
            bin,
            pods,
            used,
            reqs,
            t,
            price,
            without,
        })
    }

    /// What `pods` need together in pool `p`, what they use, and the cheapest type that holds
    /// them with its price (none and nothing for no pods).
    fn priced(
        &self,
        p: usize,
        pods: &[usize],
        needs: &Needs,
    ) -> Option<(Requirements, Resources, usize, f64)> {
        let ctx = self.ctx;
        let mut used = Resources::default();
        let mut kinds = BTreeSet::new();
        for &i in pods {
            used.add(&ctx.snapshot.pods[i].requests);
            kinds.insert(needs.reqs[&i]);
        }
        let reqs = kinds.into_iter().fold(ctx.pools[p].base.clone(), |r, k| {
            r.intersection(&needs.kinds[k])
        });
        if pods.is_empty() {
            return Some((reqs, used, 0, 0.0));
        }
        let (t, price) = ctx.cheapest_fit(p, &used, &reqs)?;
        Some((reqs, used, t, price))
    }

    /// One improving move or swap between nodes `a` and `b`, applied; whether there was one.
    fn improve_pair(
        &self,
        p: usize,
        nodes: &mut [Node],
        (a, b): (usize, usize),
        needs: &mut Needs,
    ) -> bool {
        if nodes[a].pods.is_empty() {
            return false;
        }
        let before = nodes[a].price + nodes[b].price;
        let mut best: Option<Trade> = None;
        // Each side: the pod leaving (none for a plain move) and what the node costs without it.
        let ys: Vec<(Option<usize>, f64)> = std::iter::once((None, nodes[b].price))
            .chain(
                nodes[b]
                    .pods
                    .iter()
                    .zip(&nodes[b].without)
                    .map(|(&y, &c)| (Some(y), c)),
            )
            .collect();
        for (&x, &a_without) in nodes[a].pods.iter().zip(&nodes[a].without) {
            for &(y, b_without) in &ys {
                // A node never costs less with a pod more, so this is the best a trade can do.
                if a_without + b_without >= before - 1e-9 || needs.work > EXCHANGE_WORK {
                    continue;
                }
                if y.is_some_and(|y| self.alike(x, y, needs)) {
                    continue;
                }
                needs.work += 1;
                let Some(trade) = self.traded(p, (&nodes[a], &nodes[b]), x, y, needs) else {
                    continue;
                };
                if trade.0 < best.as_ref().map_or(before - 1e-9, |t| t.0) {
                    best = Some(trade);
                }
            }
        }
        let Some((_, a_pods, b_pods)) = best else {
            return false;
        };
        // Pricing each node without each of its pods is work too.
        needs.work += a_pods.len() + b_pods.len();
        let (Some(na), Some(nb)) = (
            self.node(p, nodes[a].bin, a_pods, needs),
            self.node(p, nodes[b].bin, b_pods, needs),
        ) else {
            return false;
        };
        nodes[a] = na;
        nodes[b] = nb;
        true
    }

    /// The price of nodes `a` and `b` together, and their pods, after pod `x` goes from `a` to
    /// `b` and, for a swap, pod `y` from `b` to `a`; None when a type no longer holds either or
    /// the pods kept apart would meet.
    fn traded(
        &self,
        p: usize,
        (a, b): (&Node, &Node),
        x: usize,
        y: Option<usize>,
        needs: &Needs,
    ) -> Option<Trade> {
        let mut a_pods: Vec<usize> = a.pods.iter().copied().filter(|&i| i != x).collect();
        let mut b_pods: Vec<usize> = b.pods.iter().copied().filter(|&i| Some(i) != y).collect();
        if !self.may_join(x, &b_pods, needs) {
            return None;
        }
        if let Some(y) = y {
            if !self.may_join(y, &a_pods, needs) {
                return None;
            }
            a_pods.push(y);
        }
        b_pods.push(x);
        let (.., a_price) = self.priced(p, &a_pods, needs)?;
        let (.., b_price) = self.priced(p, &b_pods, needs)?;
        Some((a_price + b_price, a_pods, b_pods))
    }

    /// Whether pod `i` may share a node with `pods`: no hostname anti-affinity or spread of
    /// either side counts the other.
    fn may_join(&self, i: usize, pods: &[usize], needs: &Needs) -> bool {
        let meets = |a: &[usize], b: &[usize]| a.iter().any(|g| b.contains(g));
        let (owns, counted) = &needs.apart[&i];
        pods.iter().all(|j| {
            let (j_owns, j_counted) = &needs.apart[j];
            !meets(owns, j_counted) && !meets(j_owns, counted)
        })
    }

    /// Whether pod `i` takes part in a zone or capacity-type topology that counts a pod only
    /// on nodes its owner could use (a spread honouring node affinity): a trade could change
    /// which nodes count for it, here or on the nodes it shares, so such pods stay put.
    fn counts_by_node(&self, i: usize) -> bool {
        let groups = &self.ctx.base_topology.groups;
        self.ctx
            .topology_groups(i)
            .any(|g| groups[g].id.key != HOSTNAME && !groups[g].id.node_filter.is_empty())
    }

    /// Whether two pods ask the same of a node, so trading them changes nothing.
    fn alike(&self, x: usize, y: usize, needs: &Needs) -> bool {
        let pods = &self.ctx.snapshot.pods;
        pods[x].requests == pods[y].requests
            && needs.reqs[&x] == needs.reqs[&y]
            && needs.apart[&x] == needs.apart[&y]
    }

    /// Writes a node back to its bin: its pods, requirements and type.
    fn write_back(&mut self, p: usize, node: &Node) {
        for &i in &node.pods {
            self.placed.insert(i, node.bin);
        }
        let usable = self.ctx.pools[p].usable[node.t].clone();
        let bin = &mut self.bins[node.bin];
        bin.pods = node.pods.clone();
        bin.used = node.used.clone();
        if !node.pods.is_empty() {
            bin.reqs = node.reqs.clone();
            bin.options = vec![node.t as u32];
            bin.max_usable = usable;
        }
    }
}
