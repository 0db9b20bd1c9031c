//! The requirements algebra: node selector requirements (`In`, `NotIn`, `Exists`, `DoesNotExist`,
//! `Gt`, `Lt`, and Karpenter's inclusive `Gte` and `Lte`) as sets of label values, with intersection, compatibility and `minValues`, following
//! Karpenter's semantics.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::CoreError;
use crate::labels::{is_well_known, normalize_key};

/// A node selector operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    Gt,
    Lt,
    /// Karpenter's inclusive bound (v1.x NodePool requirements): `Gte 4` is `Gt 3`.
    Gte,
    /// Karpenter's inclusive bound: `Lte 8` is `Lt 9`.
    Lte,
}

impl Operator {
    pub fn parse(text: &str) -> Option<Operator> {
        Some(match text {
            "In" => Operator::In,
            "NotIn" => Operator::NotIn,
            "Exists" => Operator::Exists,
            "DoesNotExist" => Operator::DoesNotExist,
            "Gt" => Operator::Gt,
            "Lt" => Operator::Lt,
            "Gte" => Operator::Gte,
            "Lte" => Operator::Lte,
            _ => return None,
        })
    }
}

/// One requirement on a label key: a (possibly complemented) set of values with optional integer bounds.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Requirement {
    pub key: String,
    complement: bool,
    values: BTreeSet<String>,
    greater_than: Option<i64>,
    less_than: Option<i64>,
    /// Karpenter's `minValues`: the least number of distinct values the launch must keep open.
    pub min_values: Option<usize>,
}

impl Requirement {
    /// Builds a requirement, validating the operator's values.
    pub fn new<S: AsRef<str>>(key: &str, op: Operator, values: &[S]) -> Result<Self, CoreError> {
        let key = normalize_key(key).to_string();
        let set: BTreeSet<String> = values.iter().map(|v| v.as_ref().to_string()).collect();
        let bound = |values: &BTreeSet<String>| -> Result<i64, CoreError> {
            let only = values.iter().next().filter(|_| values.len() == 1);
            only.and_then(|v| v.parse::<i64>().ok())
                .ok_or_else(|| CoreError::Requirement {
                    key: key.clone(),
                    reason: format!(
                        "operator {op:?} needs exactly one integer value, got {values:?}"
                    ),
                })
        };
        let mut req = Requirement {
            key: key.clone(),
            complement: false,
            values: BTreeSet::new(),
            greater_than: None,
            less_than: None,
            min_values: None,
        };
        match op {
            Operator::In => {
                if set.is_empty() {
                    return Err(CoreError::Requirement {
                        key,
                        reason: "operator In needs at least one value".into(),
                    });
                }
                req.values = set;
            }
            Operator::NotIn => {
                req.complement = true;
                req.values = set;
            }
            Operator::Exists => req.complement = true,
            Operator::DoesNotExist => {}
            Operator::Gt => {
                req.complement = true;
                req.greater_than = Some(bound(&set)?);
            }
            Operator::Lt => {
                req.complement = true;
                req.less_than = Some(bound(&set)?);
            }
            Operator::Gte => {
                req.complement = true;
                req.greater_than = Some(bound(&set)?.saturating_sub(1));
            }
            Operator::Lte => {
                req.complement = true;
                req.less_than = Some(bound(&set)?.saturating_add(1));
            }
        }
        Ok(req)
    }

    /// `key In [value]`.
    pub fn single(key: &str, value: &str) -> Self {
        Requirement {
            key: normalize_key(key).to_string(),
            complement: false,
            values: BTreeSet::from([value.to_string()]),
            greater_than: None,
            less_than: None,
            min_values: None,
        }
    }

    /// `key In values` (an empty list means DoesNotExist).
    pub fn in_values<I: IntoIterator<Item = String>>(key: &str, values: I) -> Self {
        Requirement {
            key: normalize_key(key).to_string(),
            complement: false,
            values: values.into_iter().collect(),
            greater_than: None,
            less_than: None,
            min_values: None,
        }
    }

    pub fn exists(key: &str) -> Self {
        Requirement {
            key: normalize_key(key).to_string(),
            complement: true,
            values: BTreeSet::new(),
            greater_than: None,
            less_than: None,
            min_values: None,
        }
    }

    pub fn does_not_exist(key: &str) -> Self {
        Requirement::in_values(key, std::iter::empty())
    }

    pub fn with_min_values(mut self, min_values: Option<usize>) -> Self {
        self.min_values = min_values;
        self
    }

    /// The operator this requirement reads as (bounded complements read as `Exists`, as in Karpenter).
    pub fn operator(&self) -> Operator {
        match (self.complement, self.values.is_empty()) {
            (true, true) => Operator::Exists,
            (true, false) => Operator::NotIn,
            (false, false) => Operator::In,
            (false, true) => Operator::DoesNotExist,
        }
    }

    pub fn is_complement(&self) -> bool {
        self.complement
    }

    /// The `Gt` bound, if any.
    pub fn greater_than(&self) -> Option<i64> {
        self.greater_than
    }

    /// The `Lt` bound, if any.
    pub fn less_than(&self) -> Option<i64> {
        self.less_than
    }

    /// The explicit values: allowed ones for `In`, excluded ones for `NotIn`.
    pub fn values(&self) -> &BTreeSet<String> {
        &self.values
    }

    /// Whether a label value satisfies this requirement.
    pub fn has(&self, value: &str) -> bool {
        let in_set = self.values.contains(value);
        within(value, self.greater_than, self.less_than) && (in_set != self.complement)
    }

    /// Number of allowed values; `usize::MAX` for open (complement) sets.
    pub fn len(&self) -> usize {
        if self.complement {
            usize::MAX
        } else {
            self.values.len()
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// One allowed value, if the set is concrete.
    pub fn any(&self) -> Option<&str> {
        if self.complement {
            None
        } else {
            self.values.iter().next().map(String::as_str)
        }
    }

    /// The intersection of two requirements on the same key.
    pub fn intersection(&self, other: &Requirement) -> Requirement {
        let complement = self.complement && other.complement;
        let greater_than = max_opt(self.greater_than, other.greater_than);
        let less_than = min_opt(self.less_than, other.less_than);
        let min_values = max_opt(self.min_values, other.min_values);
        if let (Some(gt), Some(lt)) = (greater_than, less_than) {
            if gt.saturating_add(1) >= lt {
                return Requirement::does_not_exist(&self.key).with_min_values(min_values);
            }
        }
        let values: BTreeSet<String> = match (self.complement, other.complement) {
            (true, true) => self.values.union(&other.values).cloned().collect(),
            (true, false) => other.values.difference(&self.values).cloned().collect(),
            (false, true) => self.values.difference(&other.values).cloned().collect(),
            (false, false) => self.values.intersection(&other.values).cloned().collect(),
        };
        let values = values
            .into_iter()
            .filter(|v| within(v, greater_than, less_than))
            .collect();
        let (greater_than, less_than) = if complement {
            (greater_than, less_than)
        } else {
            (None, None)
        };
        Requirement {
            key: self.key.clone(),
            complement,
            values,
            greater_than,
            less_than,
            min_values,
        }
    }

    /// Karpenter's "intersects" test for two requirements on one key.
    pub fn intersects(&self, incoming: &Requirement) -> bool {
        if !self.intersection(incoming).is_empty() {
            return true;
        }
        let negative = |op| matches!(op, Operator::NotIn | Operator::DoesNotExist);
        negative(incoming.operator()) && negative(self.operator())
    }
}

fn within(value: &str, gt: Option<i64>, lt: Option<i64>) -> bool {
    if gt.is_none() && lt.is_none() {
        return true;
    }
    let Ok(n) = value.parse::<i64>() else {
        return false;
    };
    gt.is_none_or(|g| n > g) && lt.is_none_or(|l| n < l)
}

fn max_opt<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, y) => x.or(y),
    }
}

fn min_opt<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list =
            |values: &BTreeSet<String>| values.iter().cloned().collect::<Vec<_>>().join(", ");
        match (self.operator(), self.greater_than, self.less_than) {
            (Operator::Exists, Some(gt), Some(lt)) => write!(f, "{} >{gt} <{lt}", self.key),
            (Operator::Exists, Some(gt), None) => write!(f, "{} Gt {gt}", self.key),
            (Operator::Exists, None, Some(lt)) => write!(f, "{} Lt {lt}", self.key),
            (Operator::NotIn, _, _) => write!(f, "{} NotIn [{}]", self.key, list(&self.values)),
            (Operator::In, _, _) => write!(f, "{} In [{}]", self.key, list(&self.values)),
            (op, _, _) => write!(f, "{} {op:?}", self.key),
        }
    }
}

/// Why two requirement sets do not fit together.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Incompatibility {
    pub key: String,
    pub reason: String,
}

impl fmt::Display for Incompatibility {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

/// A set of requirements keyed by label.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Requirements {
    by_key: BTreeMap<String, Requirement>,
}

impl Requirements {
    pub fn new() -> Self {
        Self::default()
    }

    /// Requirements that pin each label to its value (how a node's labels read as requirements).
    pub fn from_labels<'a>(labels: impl IntoIterator<Item = (&'a String, &'a String)>) -> Self {
        let mut out = Requirements::new();
        for (k, v) in labels {
            out.add(Requirement::single(k, v));
        }
        out
    }

    /// Adds a requirement, intersecting with any existing one on the same key.
    pub fn add(&mut self, req: Requirement) {
        match self.by_key.get_mut(&req.key) {
            Some(existing) => *existing = existing.intersection(&req),
            None => {
                self.by_key.insert(req.key.clone(), req);
            }
        }
    }

    /// Puts `req` in place of the requirement on its key (no intersection).
    pub fn replace(&mut self, req: Requirement) {
        self.by_key.insert(req.key.clone(), req);
    }

    /// Adds every requirement of `other`.
    pub fn add_all(&mut self, other: &Requirements) {
        for req in other.iter() {
            self.add(req.clone());
        }
    }

    pub fn get(&self, key: &str) -> Option<&Requirement> {
        self.by_key.get(key)
    }

    pub fn has_key(&self, key: &str) -> bool {
        self.by_key.contains_key(key)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Requirement> {
        self.by_key.values()
    }

    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.by_key.keys()
    }

    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// Whether a label set satisfies every requirement (a missing label satisfies only
    /// `NotIn` and `DoesNotExist`).
    pub fn matches_labels(&self, labels: &BTreeMap<String, String>) -> bool {
        self.iter().all(|req| match labels.get(&req.key) {
            Some(value) => req.has(value),
            None => {
                matches!(req.operator(), Operator::NotIn | Operator::DoesNotExist)
                    && req.greater_than.is_none()
                    && req.less_than.is_none()
            }
        })
    }

    /// Karpenter's `Intersects`: every key both sides define must have a common value.
    pub fn intersects(&self, incoming: &Requirements) -> Result<(), Incompatibility> {
        let (small, large, small_is_incoming) = if self.len() <= incoming.len() {
            (self, incoming, false)
        } else {
            (incoming, self, true)
        };
        for req in small.iter() {
            let Some(other) = large.get(&req.key) else {
                continue;
            };
            let (existing, incoming) = if small_is_incoming {
                (other, req)
            } else {
                (req, other)
            };
            if !existing.intersects(incoming) {
                return Err(Incompatibility {
                    key: req.key.clone(),
                    reason: format!("requires {incoming}, but only {existing} is offered"),
                });
            }
        }
        Ok(())
    }

    /// Karpenter's `Compatible`: like [`Requirements::intersects`], and in addition every custom
    /// (not well-known) label that `incoming` needs to exist must be defined here.
    pub fn compatible(&self, incoming: &Requirements) -> Result<(), Incompatibility> {
        self.compatible_with(incoming, true)
    }

    /// Karpenter's `Compatible` with no options, for a node that exists: every key `incoming`
    /// requires a value of must be one of the node's labels, well-known or not, as kube-scheduler
    /// matches them. A node group's node without `karpenter.sh/capacity-type` takes no pod that
    /// selects a capacity type.
    pub fn compatible_with_labels(&self, incoming: &Requirements) -> Result<(), Incompatibility> {
        self.compatible_with(incoming, false)
    }

    fn compatible_with(
        &self,
        incoming: &Requirements,
        allow_undefined_well_known: bool,
    ) -> Result<(), Incompatibility> {
        for req in incoming.iter() {
            if (allow_undefined_well_known && is_well_known(&req.key)) || self.has_key(&req.key) {
                continue;
            }
            if matches!(req.operator(), Operator::NotIn | Operator::DoesNotExist)
                && req.greater_than.is_none()
                && req.less_than.is_none()
            {
                continue;
            }
            return Err(Incompatibility {
                key: req.key.clone(),
                reason: format!(
                    "requires label {:?} ({req}), which the nodepool does not define",
                    req.key
                ),
            });
        }
        self.intersects(incoming)
    }

    /// The intersection of two requirement sets.
    pub fn intersection(&self, other: &Requirements) -> Requirements {
        let mut out = self.clone();
        out.add_all(other);
        out
    }

    /// Labels for a node: every requirement with exactly one value.
    pub fn single_valued_labels(&self) -> BTreeMap<String, String> {
        self.iter()
            .filter(|r| r.len() == 1)
            .filter_map(|r| r.any().map(|v| (r.key.clone(), v.to_string())))
            .collect()
    }
}

impl fmt::Display for Requirements {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.iter().map(|r| r.to_string()).collect();
        f.write_str(&parts.join(", "))
    }
}

#[cfg(test)]
#[path = "../tests/unit/requirements.rs"]
mod tests;
