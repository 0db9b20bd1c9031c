//! What a catalog remembers between lookups: the types it resolved for each node class
//! lately, and each type's labels and where it is offered, built once.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, OnceLock};

use crate::labels::{CAPACITY_TYPE, ZONE};

use super::{Catalog, InstanceType, NodeClassSettings, Offering};

/// [`Catalog::instance_types_shared`]'s memory: node-class settings and a fingerprint of the
/// catalog's public fields (so a catalog changed after a lookup is never answered from before
/// the change), with the types resolved for them. A clone starts empty, as [`Facts`] does.
#[derive(Debug, Default)]
pub(super) struct Resolved(std::sync::Mutex<Vec<ResolvedEntry>>);

/// Node-class settings, the catalog's fingerprint then, and the types they resolved to.
type ResolvedEntry = (NodeClassSettings, u64, Arc<Vec<InstanceType>>);

impl Clone for Resolved {
    fn clone(&self) -> Self {
        Resolved::default()
    }
}

impl Resolved {
    /// The types kept for these settings and fingerprint, or those `resolve` gives, kept.
    pub(super) fn get_or_insert(
        &self,
        settings: &NodeClassSettings,
        fingerprint: u64,
        resolve: impl FnOnce() -> Vec<InstanceType>,
    ) -> Arc<Vec<InstanceType>> {
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, _, types)) = kept
            .iter()
            .find(|(s, f, _)| *f == fingerprint && s == settings)
        {
            return types.clone();
        }
        let types = Arc::new(resolve());
        if kept.len() >= RESOLVED_KEPT {
            kept.remove(0);
        }
        kept.push((settings.clone(), fingerprint, types.clone()));
        types
    }
}

/// How many node classes' types a catalog keeps resolved.
const RESOLVED_KEPT: usize = 16;

/// What [`Catalog::type_labels`] and [`Catalog::offered`] answer, by type, built once per
/// catalog. A clone starts empty: it may be composed with other unavailable offerings, which
/// decide whether a type resolves at all.
#[derive(Debug, Default)]
pub(super) struct Facts(OnceLock<BTreeMap<String, TypeFacts>>);

impl Clone for Facts {
    fn clone(&self) -> Self {
        Facts::default()
    }
}

#[derive(Debug, Default)]
struct TypeFacts {
    /// Empty for a type that does not resolve (no offering available).
    labels: BTreeMap<String, String>,
    /// (zone, capacity type) of every offering, available or not.
    offered: BTreeSet<(String, String)>,
}

impl Catalog {
    /// [`Catalog::instance_types`], resolved once per node class and shared.
    pub fn instance_types_shared(&self, settings: &NodeClassSettings) -> Arc<Vec<InstanceType>> {
        (self.resolved).get_or_insert(settings, self.fingerprint(), || self.resolve_all(settings))
    }

    /// A hash of the public fields that change what a node class resolves to.
    pub(super) fn fingerprint(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.region.hash(&mut h);
        self.raw.len().hash(&mut h);
        self.zones.hash(&mut h);
        for (k, v) in &self.on_demand {
            (k, v.to_bits()).hash(&mut h);
        }
        for (k, v) in &self.spot {
            (k, v.to_bits()).hash(&mut h);
        }
        self.unavailable.hash(&mut h);
        self.fixed.as_ref().map(Vec::len).hash(&mut h);
        self.spot_fraction.to_bits().hash(&mut h);
        format!("{:?}", self.overlays).hash(&mut h);
        h.finish()
    }

    /// The labels a node of `instance_type` carries for its type (arch, OS, family, size, CPU,
    /// memory, ...: every single-valued label of the type's requirements), as Karpenter writes
    /// them onto a NodeClaim at launch. Empty for a type the catalog does not know.
    pub fn type_labels(&self, instance_type: &str) -> BTreeMap<String, String> {
        self.facts()
            .get(instance_type)
            .map(|f| f.labels.clone())
            .unwrap_or_default()
    }

    /// Whether `instance_type` is offered in `zone` with `capacity_type` (either unset: any),
    /// available or not (Karpenter's `Offerings.HasCompatible`); None when the catalog does
    /// not know the type.
    pub fn offered(
        &self,
        instance_type: &str,
        zone: Option<&str>,
        capacity_type: Option<&str>,
    ) -> Option<bool> {
        let facts = self.facts().get(instance_type)?;
        Some(facts.offered.iter().any(|(z, c)| {
            zone.is_none_or(|want| want == z) && capacity_type.is_none_or(|want| want == c)
        }))
    }

    fn facts(&self) -> &BTreeMap<String, TypeFacts> {
        self.facts.0.get_or_init(|| {
            let single = |t: &InstanceType| {
                let mut labels = t.requirements.single_valued_labels();
                labels.retain(|k, _| k != ZONE && k != CAPACITY_TYPE);
                labels
            };
            let offered = |offerings: &[Offering]| {
                offerings
                    .iter()
                    .map(|o| (o.zone.clone(), o.capacity_type.clone()))
                    .collect()
            };
            if let Some(fixed) = &self.fixed {
                return fixed
                    .iter()
                    .map(|t| {
                        let facts = TypeFacts {
                            labels: single(t),
                            offered: offered(&t.offerings),
                        };
                        (t.name.clone(), facts)
                    })
                    .collect();
            }
            self.raw
                .iter()
                .map(|raw| {
                    let resolved = self
                        .resolve(raw, &NodeClassSettings::default())
                        .ok()
                        .flatten();
                    let facts = TypeFacts {
                        labels: resolved.as_ref().map(single).unwrap_or_default(),
                        offered: offered(&self.offerings(raw)),
                    };
                    (raw.instance_type.clone(), facts)
                })
                .collect()
        })
    }
}
