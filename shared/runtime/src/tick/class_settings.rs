//! What the tick knows of each EC2NodeClass beyond its spec, for planning: the zones of its
//! subnets and the architectures of its AMIs, from this tick's resolution or, for a dump (and
//! `plan`, `explain`), from the class's status.

use fleetwright_core::Snapshot;
use fleetwright_kube::dump::ClusterDump;

use super::status;

/// What each EC2NodeClass's status says it resolved to, for a dump: the zones it lists subnets
/// in and the architectures of its AMIs, what resolving it would give ([`subnet_zones`],
/// [`ami_architectures`]). `plan` and `explain` read a dump the same way, so a class whose
/// subnets are all in one zone plans there, and one whose AMIs are all amd64 plans no arm64.
pub fn status_settings(dump: &ClusterDump, snapshot: &mut Snapshot) {
    for class in &dump.nodeclasses {
        let Some(status) = &class.status else {
            continue;
        };
        let name = class.metadata.name.clone().unwrap_or_default();
        let zones: std::collections::BTreeSet<String> = status
            .subnets
            .iter()
            .filter_map(|s| s.get("zone").and_then(|z| z.as_str()).map(str::to_string))
            .collect();
        if !zones.is_empty() {
            snapshot.node_classes.entry(name.clone()).or_default().zones = Some(zones);
        }
        if let Some(arches) = status_architectures(&status.amis) {
            snapshot.node_classes.entry(name).or_default().architectures = Some(arches);
        }
    }
}

/// The architectures a status's AMIs name (their `kubernetes.io/arch In` requirement); None
/// when there are none, or one names no architecture (then any may launch).
fn status_architectures(amis: &[serde_json::Value]) -> Option<std::collections::BTreeSet<String>> {
    let mut out = std::collections::BTreeSet::new();
    for ami in amis {
        let arches: Vec<String> = ami
            .get("requirements")
            .and_then(|r| r.as_array())
            .into_iter()
            .flatten()
            .filter(|r| {
                r.get("key").and_then(|k| k.as_str()) == Some(fleetwright_core::labels::ARCH)
            })
            .filter(|r| r.get("operator").and_then(|o| o.as_str()) == Some("In"))
            .flat_map(|r| {
                r.get("values")
                    .and_then(|v| v.as_array())
                    .cloned()
                    .unwrap_or_default()
            })
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect();
        if arches.is_empty() {
            return None;
        }
        out.extend(arches);
    }
    (!out.is_empty()).then_some(out)
}

/// The architectures of each resolved EC2NodeClass's AMIs: types of another have no image.
pub(crate) fn ami_architectures(snapshot: &mut Snapshot, resolved: &status::Resolutions) {
    for r in resolved.values().flatten() {
        let arches: std::collections::BTreeSet<String> =
            r.amis.iter().map(|a| a.arch.clone()).collect();
        if arches.is_empty() {
            continue;
        }
        snapshot
            .node_classes
            .entry(r.name.clone())
            .or_default()
            .architectures = Some(arches);
    }
}

/// The zones each resolved EC2NodeClass has subnets in: the only zones its NodeClaims can
/// launch into, so the only ones the core plans (and spreads) over.
pub(crate) fn subnet_zones(snapshot: &mut Snapshot, resolved: &status::Resolutions) {
    for r in resolved.values().flatten() {
        let zones: std::collections::BTreeSet<String> =
            r.subnets.iter().map(|s| s.zone.clone()).collect();
        if zones.is_empty() {
            continue;
        }
        let settings = snapshot.node_classes.entry(r.name.clone()).or_default();
        settings.zones = Some(zones);
    }
}
