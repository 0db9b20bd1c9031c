//! Topology bookkeeping for scheduling: groups of pods counted per domain (zone, hostname,
//! capacity type or any node label) for topology spread, pod affinity and pod anti-affinity,
//! including the inverse direction (pods that existing anti-affinity terms repel).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::model::{tolerates_all, Namespaces, Taint, Toleration};
use crate::requirements::Requirements;

/// What a group constrains.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    Spread {
        max_skew: i32,
        min_domains: Option<i32>,
    },
    Affinity,
    Anti,
}

/// Identity of a group: two pods with the same constraint share one group.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct GroupKey {
    pub key: String,
    pub kind: Kind,
    /// Inverse anti-affinity: counts the term's owners and repels the pods the term selects.
    pub inverse: bool,
    pub namespaces: Namespaces,
    pub selector: Requirements,
    /// For spreads: the owner's node requirements, which bound the eligible domains.
    pub owner_reqs: Requirements,
    /// For spreads honouring node affinity: the nodes that take part in the counts, as the
    /// owner's nodeSelector with each of its required node-affinity terms (any one matching).
    /// Empty: every node.
    pub node_filter: Vec<Requirements>,
    /// For spreads honouring taints: the owner's tolerations; only nodes whose taints they
    /// tolerate take part. None: every node.
    pub tolerations: Option<Vec<Toleration>>,
}

impl GroupKey {
    /// Whether a pod on a node of these requirements and taints counts in this group: always,
    /// except for spreads whose node filter or tolerations the node fails (Kubernetes'
    /// `nodeAffinityPolicy` and `nodeTaintsPolicy`). `existing`: the requirements are a node's
    /// labels (matched as kube-scheduler matches them), not a new node's.
    pub fn counts_on(&self, node: &Requirements, taints: &[Taint], existing: bool) -> bool {
        let matches = |term: &Requirements| {
            if existing {
                node.compatible_with_labels(term).is_ok()
            } else {
                node.compatible(term).is_ok()
            }
        };
        let affinity = self.node_filter.is_empty() || self.node_filter.iter().any(matches);
        affinity && self.tolerates(taints)
    }

    /// Whether a node (or NodePool) with these taints takes part: always, unless the spread
    /// honours taints and its owner does not tolerate one of them.
    pub fn tolerates(&self, taints: &[Taint]) -> bool {
        self.tolerations
            .as_ref()
            .is_none_or(|t| tolerates_all(t, taints).is_none())
    }
}

/// A counted group.
#[derive(Clone, Debug)]
pub(crate) struct Group {
    pub id: GroupKey,
    /// Eligible domains (spreads on keys other than hostname).
    pub universe: BTreeSet<String>,
    pub counts: BTreeMap<String, i32>,
    /// Hostname counts by bin index.
    pub host: Vec<i32>,
    pub total: i32,
}

impl Group {
    pub fn is_hostname(&self) -> bool {
        self.id.key == crate::labels::HOSTNAME
    }

    pub fn count(&self, domain: &str) -> i32 {
        self.counts.get(domain).copied().unwrap_or(0)
    }

    pub fn host_count(&self, bin: usize) -> i32 {
        self.host.get(bin).copied().unwrap_or(0)
    }

    pub fn record_host(&mut self, bin: usize) {
        if self.host.len() <= bin {
            self.host.resize(bin + 1, 0);
        }
        self.host[bin] += 1;
        self.total += 1;
    }

    pub fn record_value(&mut self, domain: &str) {
        *self.counts.entry(domain.to_string()).or_insert(0) += 1;
        self.total += 1;
    }

    fn global_min(&self) -> i32 {
        let Kind::Spread { min_domains, .. } = self.id.kind else {
            return 0;
        };
        if min_domains.is_some_and(|m| (self.universe.len() as i32) < m) {
            return 0;
        }
        self.universe
            .iter()
            .map(|d| self.count(d))
            .min()
            .unwrap_or(0)
    }

    /// May a pod go on host `bin`? New nodes can always be made, so the hostname minimum is 0.
    pub fn allows_host(&self, bin: usize, self_match: bool) -> bool {
        let here = self.host_count(bin);
        match (&self.id.kind, self.id.inverse) {
            (Kind::Spread { max_skew, .. }, _) => here + i32::from(self_match) <= *max_skew,
            (Kind::Affinity, _) => {
                if self.total == 0 {
                    self_match
                } else {
                    here > 0
                }
            }
            (Kind::Anti, _) => here == 0,
        }
    }

    /// The allowed domains among `candidates`, best first (spread: fewest pods; affinity: most).
    pub fn allowed_values(&self, candidates: &[String], self_match: bool) -> Vec<String> {
        let mut out: Vec<(i32, &String)> = match &self.id.kind {
            Kind::Spread { max_skew, .. } => {
                let min = self.global_min();
                let skew = |d: &str| self.count(d) + i32::from(self_match) - min;
                candidates
                    .iter()
                    .filter(|d| self.universe.contains(*d) && skew(d) <= *max_skew)
                    .map(|d| (self.count(d), d))
                    .collect()
            }
            Kind::Affinity => {
                if self.total == 0 {
                    if !self_match {
                        return Vec::new();
                    }
                    candidates.iter().map(|d| (0, d)).collect()
                } else {
                    candidates
                        .iter()
                        .filter(|d| self.count(d) > 0)
                        .map(|d| (-self.count(d), d))
                        .collect()
                }
            }
            Kind::Anti => candidates
                .iter()
                .filter(|d| self.count(d) == 0)
                .map(|d| (0, d))
                .collect(),
        };
        out.sort();
        out.into_iter().map(|(_, d)| d.clone()).collect()
    }
}

/// All groups, interned by key.
#[derive(Clone, Debug, Default)]
pub(crate) struct Topology {
    pub groups: Vec<Group>,
    index: HashMap<GroupKey, usize>,
}

impl Topology {
    /// Returns the group for `key`, creating it with `universe` if it is new.
    pub fn intern(
        &mut self,
        key: GroupKey,
        universe: impl FnOnce(&GroupKey) -> BTreeSet<String>,
    ) -> usize {
        if let Some(i) = self.index.get(&key) {
            return *i;
        }
        let id = self.groups.len();
        let universe = universe(&key);
        self.groups.push(Group {
            id: key.clone(),
            universe,
            counts: BTreeMap::new(),
            host: Vec::new(),
            total: 0,
        });
        self.index.insert(key, id);
        id
    }
}
