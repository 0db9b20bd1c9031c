//! Which AWS region a cluster dump is in, read from the dump itself: the nodes' region and zone
//! labels and providerIDs, the NodeClaims' labels and providerIDs, and the NodePools' zone and
//! region requirements. `plan`, `explain` and `simulate` use it to pick the embedded catalog of
//! that region when no `--region` is given.

use std::collections::BTreeMap;

use crate::labels::{REGION, ZONE};
use crate::model::Snapshot;
use crate::requirements::Operator;

/// The region a dump points at, and what pointed there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inferred {
    pub region: String,
    /// What it was read from, e.g. `node labels and providerIDs (3)`.
    pub evidence: String,
    /// Other regions the dump also mentions (a mixed dump), with their counts.
    pub others: Vec<(String, usize)>,
}

/// The region of an availability zone or local zone name: `ap-northeast-2a` → `ap-northeast-2`,
/// `us-west-2-lax-1a` → `us-west-2`, `us-gov-west-1b` → `us-gov-west-1`.
pub fn of_zone(zone: &str) -> Option<String> {
    let mut parts = Vec::new();
    for part in zone.split('-') {
        let digits: String = part.chars().take_while(char::is_ascii_digit).collect();
        if digits.is_empty() {
            if !part.chars().all(|c| c.is_ascii_lowercase()) || part.is_empty() {
                return None;
            }
            parts.push(part.to_string());
            continue;
        }
        parts.push(digits);
        return (parts.len() >= 3).then(|| parts.join("-"));
    }
    None
}

/// The zone of an AWS providerID, `aws:///us-west-2a/i-0abc` → `us-west-2a`.
fn zone_of_provider_id(id: &str) -> Option<&str> {
    let rest = id.strip_prefix("aws:///")?;
    rest.split('/').next().filter(|z| !z.is_empty())
}

#[derive(Default)]
struct Votes {
    /// region → (count, sources that named it).
    regions: BTreeMap<String, (usize, Vec<&'static str>)>,
}

impl Votes {
    fn add(&mut self, region: Option<String>, source: &'static str) {
        let Some(region) = region else { return };
        let entry = self.regions.entry(region).or_default();
        entry.0 += 1;
        if !entry.1.contains(&source) {
            entry.1.push(source);
        }
    }

    /// The regions of an object's zone label and of its providerID's zone.
    fn placed(
        &mut self,
        labels: &BTreeMap<String, String>,
        provider_id: Option<&str>,
        label_source: &'static str,
        id_source: &'static str,
    ) {
        self.add(labels.get(ZONE).and_then(|z| of_zone(z)), label_source);
        let zone = provider_id.and_then(zone_of_provider_id);
        self.add(zone.and_then(of_zone), id_source);
    }
}

/// The region the snapshot's objects point at; None when nothing in it names one.
pub fn infer(snapshot: &Snapshot) -> Option<Inferred> {
    let mut votes = Votes::default();
    for node in &snapshot.nodes {
        votes.add(node.labels.get(REGION).cloned(), "node labels");
        votes.placed(
            &node.labels,
            node.provider_id.as_deref(),
            "node labels",
            "node providerIDs",
        );
    }
    for claim in &snapshot.nodeclaims {
        votes.placed(
            &claim.labels,
            claim.provider_id.as_deref(),
            "NodeClaims",
            "NodeClaims",
        );
    }
    for pool in &snapshot.nodepools {
        for key in [ZONE, REGION] {
            let Some(req) = pool.requirements.get(key) else {
                continue;
            };
            if req.operator() != Operator::In {
                continue;
            }
            for value in req.values() {
                let region = if key == ZONE {
                    of_zone(value)
                } else {
                    Some(value.clone())
                };
                votes.add(region, "NodePool requirements");
            }
        }
    }
    for settings in snapshot.node_classes.values() {
        for zone in settings.zones.iter().flatten() {
            votes.add(of_zone(zone), "EC2NodeClass subnets");
        }
    }
    let mut ranked: Vec<(String, (usize, Vec<&'static str>))> = votes.regions.into_iter().collect();
    ranked.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then(a.0.cmp(&b.0)));
    let mut ranked = ranked.into_iter();
    let (region, (count, sources)) = ranked.next()?;
    Some(Inferred {
        region,
        evidence: format!("{} ({count})", sources.join(", ")),
        others: ranked.map(|(r, (n, _))| (r, n)).collect(),
    })
}

#[cfg(test)]
#[path = "../tests/unit/region.rs"]
mod tests;
