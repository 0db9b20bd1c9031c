//! What one launch asks for and gets ([`LaunchRequest`], [`Launched`]), and the pure choices of a
//! CreateFleet-style launch: the capacity type, the instance type × zone overrides (cheapest
//! first), the idempotency token and the tags. The EC2 adapter and the simulated cloud both
//! launch through these, so they pick the same offerings.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use fleetwright_core::catalog::{architecture, overlaid_price, reserved_price, RawInstanceType};
use fleetwright_core::labels::{
    CAPACITY_ON_DEMAND, CAPACITY_RESERVED, CAPACITY_SPOT, CAPACITY_TYPE, INSTANCE_TYPE, NODECLASS,
    NODEPOOL, PLACEMENT_GROUP_PARTITION, RESERVATION_ID, TAG_CLUSTER_PREFIX, TAG_EKS_CLUSTER_NAME,
    TAG_NODECLAIM, ZONE,
};
use fleetwright_core::model::{NodeOverlay, Taint, TaintEffect};
use fleetwright_core::Catalog;
use fleetwright_crds::{NodeClaim, TaintSpec};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::ami::{self, Ami, Variant};
use crate::error::CloudError;
pub use crate::error::FleetError;
use crate::nodeclass::ResolvedReservation;
use crate::nodeclass::Subnet;

/// At most this many instance types go into one CreateFleet call.
pub const MAX_INSTANCE_TYPES: usize = 60;

/// What to launch for one NodeClaim.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LaunchRequest {
    pub nodeclaim: String,
    /// The NodeClaim's uid: with its name, what makes a launch the same launch to EC2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    pub nodepool: String,
    pub nodeclass: String,
    /// The NodeClaim's instance-type options.
    pub instance_types: Vec<String>,
    /// Allowed capacity types; empty means both.
    pub capacity_types: Vec<String>,
    /// Allowed zones; empty means any.
    pub zones: Vec<String>,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub startup_taints: Vec<Taint>,
    /// The reservations the NodeClaim's requirements allow (`karpenter.k8s.aws/capacity-
    /// reservation-id` In), when it names some; None allows any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation_ids: Option<Vec<String>>,
    /// The cluster's NodeOverlays: the plan priced the options with them, so the launch orders
    /// its overrides by the same prices and asks EC2 to take them in that order (prioritized),
    /// as Karpenter does when a price overlay applies, instead of by EC2's own prices.
    #[serde(skip)]
    pub overlays: Vec<NodeOverlay>,
    /// The partition of a partition placement group the NodeClaim's requirements name (the
    /// lowest, as Karpenter takes it, when they allow several); None lets EC2 choose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<i32>,
}

impl LaunchRequest {
    /// The launch a NodeClaim asks for: its `In` requirements on instance type, capacity type and
    /// zone, its labels, taints and startup taints.
    pub fn from_nodeclaim(claim: &NodeClaim) -> Result<Self, CloudError> {
        let name = claim.metadata.name.clone().unwrap_or_default();
        let field_error = |field: &str, reason: &str| CloudError::Launch {
            nodeclaim: name.clone(),
            reason: format!("field {field}: {reason}"),
        };
        let values = |key: &str| -> Vec<String> {
            claim
                .spec
                .requirements
                .iter()
                .filter(|r| r.key == key && r.operator == "In")
                .flat_map(|r| r.values.clone())
                .collect()
        };
        let instance_types = values(INSTANCE_TYPE);
        if instance_types.is_empty() {
            return Err(field_error(
                "spec.requirements",
                "needs an In requirement on node.kubernetes.io/instance-type",
            ));
        }
        let labels = claim.metadata.labels.clone().unwrap_or_default();
        let nodepool = labels
            .get(NODEPOOL)
            .cloned()
            .ok_or_else(|| field_error("metadata.labels", "karpenter.sh/nodepool is missing"))?;
        let nodeclass = claim
            .spec
            .node_class_ref
            .as_ref()
            .map(|r| r.name.clone())
            .ok_or_else(|| field_error("spec.nodeClassRef", "is required"))?;
        let taints = |list: &[TaintSpec], field: &str| -> Result<Vec<Taint>, CloudError> {
            list.iter()
                .map(|t| {
                    Ok(Taint {
                        key: t.key.clone(),
                        value: t.value.clone().unwrap_or_default(),
                        effect: TaintEffect::parse(&t.effect).ok_or_else(|| {
                            field_error(field, &format!("effect {:?} is not valid", t.effect))
                        })?,
                    })
                })
                .collect()
        };
        Ok(LaunchRequest {
            nodeclaim: name.clone(),
            uid: claim.metadata.uid.clone(),
            nodepool,
            nodeclass,
            instance_types,
            capacity_types: values(CAPACITY_TYPE),
            zones: values(ZONE),
            reservation_ids: Some(values(RESERVATION_ID)).filter(|ids| !ids.is_empty()),
            labels,
            taints: taints(&claim.spec.taints, "spec.taints")?,
            startup_taints: taints(&claim.spec.startup_taints, "spec.startupTaints")?,
            overlays: Vec::new(),
            partition: lowest_partition(&values(PLACEMENT_GROUP_PARTITION)),
        })
    }

    fn allows_capacity(&self, capacity_type: &str) -> bool {
        self.capacity_types.is_empty() || self.capacity_types.iter().any(|c| c == capacity_type)
    }

    fn allows_zone(&self, zone: &str) -> bool {
        self.zones.is_empty() || self.zones.iter().any(|z| z == zone)
    }
}

/// The partition a launch targets among those allowed: the first in string order, parsed, as
/// Karpenter's launch template provider picks it.
fn lowest_partition(values: &[String]) -> Option<i32> {
    let mut sorted: Vec<&String> = values.iter().collect();
    sorted.sort();
    sorted.first().and_then(|v| v.parse().ok())
}

/// One instance type in one zone, with the subnet and AMI it would use.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Override {
    pub instance_type: String,
    pub zone: String,
    pub subnet_id: String,
    pub image_id: String,
    pub price: f64,
    /// For a `reserved` launch: the reservation this override targets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reservation: Option<String>,
}

/// The instance a launch produced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Launched {
    pub instance_id: String,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
    pub image_id: String,
    /// The subnet it was launched into (empty when unknown), recorded for subnet drift.
    #[serde(default)]
    pub subnet_id: String,
    /// Its security groups, sorted (empty when unknown), recorded for security-group drift.
    #[serde(default)]
    pub security_groups: Vec<String>,
    /// The capacity reservation it was launched into (capacity type `reserved`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<LaunchedReservation>,
    /// The partition of its partition placement group, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<i32>,
    /// The instance type's own labels (architecture, family, size, CPU, memory, ...), which come
    /// with the instance as Karpenter's cloud provider returns them: pods selecting them land on
    /// its node, and requirements drift sees them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub type_labels: BTreeMap<String, String>,
}

/// The capacity reservation an instance runs in, with what the NodeClaim's labels say of it
/// (unknown for an instance found again by its tags, whose reservation is known only by id).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LaunchedReservation {
    pub id: String,
    /// `default` or `capacity-block`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interruptible: Option<bool>,
}

impl Launched {
    /// The launch with its instance type's labels from `catalog`.
    pub fn labelled(mut self, catalog: &Catalog) -> Launched {
        self.type_labels = catalog.type_labels(&self.instance_type);
        self
    }

    /// `aws:///<zone>/<instance id>`, as the kubelet's cloud provider writes it.
    pub fn provider_id(&self) -> String {
        format!("aws:///{}/{}", self.zone, self.instance_id)
    }
}

/// The AMI variant an instance type needs, from its accelerators.
pub fn variant_of(raw: &RawInstanceType) -> Variant {
    let nvidia = raw.gpu_info.as_ref().is_some_and(|g| {
        g.gpus
            .iter()
            .any(|d| d.manufacturer.eq_ignore_ascii_case("nvidia"))
    });
    let neuron = raw
        .neuron_info
        .as_ref()
        .is_some_and(|n| !n.neuron_devices.is_empty());
    match (nvidia, neuron) {
        (true, _) => Variant::Nvidia,
        (_, true) => Variant::Neuron,
        _ => Variant::Standard,
    }
}

/// Reserved when the NodeClaim allows it and one of the class's reservations can take one of
/// its options (Karpenter prefers reservations, which are paid for); else spot when allowed and
/// some option has an available spot offering; otherwise on-demand.
pub fn capacity_type(
    req: &LaunchRequest,
    catalog: &Catalog,
    reservations: &[ResolvedReservation],
    now: DateTime<Utc>,
) -> Option<&'static str> {
    if req.allows_capacity(CAPACITY_RESERVED)
        && reservations.iter().any(|r| takes(req, catalog, r, now))
    {
        return Some(CAPACITY_RESERVED);
    }
    [CAPACITY_SPOT, CAPACITY_ON_DEMAND]
        .into_iter()
        .filter(|c| req.allows_capacity(c))
        .find(|c| {
            req.instance_types.iter().any(|t| {
                catalog
                    .raw
                    .iter()
                    .find(|r| &r.instance_type == t)
                    .is_some_and(|raw| {
                        catalog.offerings(raw).iter().any(|o| {
                            o.available && o.capacity_type == *c && req.allows_zone(&o.zone)
                        })
                    })
            })
        })
}

/// The overrides for one capacity type: each option × each allowed zone with a subnet and an
/// available offering, using the AMI for the type's architecture and accelerators. Cheapest
/// first, at most [`MAX_INSTANCE_TYPES`] instance types.
pub fn overrides(
    req: &LaunchRequest,
    catalog: &Catalog,
    capacity_type: &str,
    subnets: &BTreeMap<&str, &Subnet>,
    amis: &[Ami],
) -> Vec<Override> {
    let mut by_type: Vec<Vec<Override>> = Vec::new();
    for name in &req.instance_types {
        let Some(raw) = catalog.raw.iter().find(|r| &r.instance_type == name) else {
            continue;
        };
        let Some(ami) = architecture(raw).and_then(|arch| ami::pick(amis, arch, variant_of(raw)))
        else {
            continue;
        };
        let labels = (!req.overlays.is_empty()).then(|| catalog.type_labels(name));
        let options: Vec<Override> = catalog
            .offerings(raw)
            .into_iter()
            .filter(|o| o.available && o.capacity_type == capacity_type && req.allows_zone(&o.zone))
            .filter_map(|o| {
                let subnet = subnets.get(o.zone.as_str())?;
                Some(Override {
                    instance_type: name.clone(),
                    zone: o.zone.clone(),
                    subnet_id: subnet.id.clone(),
                    image_id: ami.id.clone(),
                    price: match &labels {
                        Some(l) => {
                            overlaid_price(&req.overlays, l, &o.zone, &o.capacity_type, o.price)
                        }
                        None => o.price,
                    },
                    reservation: None,
                })
            })
            .collect();
        if !options.is_empty() {
            by_type.push(options);
        }
    }
    let cheapest = |o: &Vec<Override>| o.iter().map(|x| x.price).fold(f64::MAX, f64::min);
    by_type.sort_by(|a, b| cheapest(a).total_cmp(&cheapest(b)));
    let mut out: Vec<Override> = by_type
        .into_iter()
        .take(MAX_INSTANCE_TYPES)
        .flatten()
        .collect();
    out.sort_by(|a, b| {
        a.price
            .total_cmp(&b.price)
            .then_with(|| a.instance_type.cmp(&b.instance_type))
            .then_with(|| a.zone.cmp(&b.zone))
    });
    out
}

/// What one launch asks EC2 for: the capacity type ([`capacity_type`]) and its overrides
/// ([`reserved_overrides`] or [`overrides`]), or why nothing can be asked. The EC2 cloud and the
/// simulated one both choose through this.
pub fn choose(
    req: &LaunchRequest,
    catalog: &Catalog,
    resolved: &crate::nodeclass::ResolvedNodeClass,
    now: DateTime<Utc>,
) -> Result<(&'static str, Vec<Override>), String> {
    let reservations = &resolved.reservations;
    let capacity_type = capacity_type(req, catalog, reservations, now).ok_or_else(|| {
        format!(
            "no available offering for instance types {:?} (capacity types {:?}, zones {:?})",
            req.instance_types, req.capacity_types, req.zones
        )
    })?;
    let subnets = resolved.best_subnets();
    let amis = &resolved.amis;
    let list = match capacity_type {
        CAPACITY_RESERVED => reserved_overrides(req, catalog, reservations, &subnets, amis, now),
        _ => overrides(req, catalog, capacity_type, &subnets, amis),
    };
    if list.is_empty() {
        return Err(format!(
            "no {capacity_type} option has both an AMI for its architecture and a subnet in an allowed zone"
        ));
    }
    Ok((capacity_type, list))
}

/// Whether a reservation can take this launch: active, with an instance left, of one of the
/// options, in an allowed zone where the type is offered, and allowed by the NodeClaim's
/// requirements on the reservation labels (a pod that selected one reservation).
fn takes(
    req: &LaunchRequest,
    catalog: &Catalog,
    r: &ResolvedReservation,
    now: DateTime<Utc>,
) -> bool {
    r.state(now) == "active"
        && r.available > 0
        && req.instance_types.contains(&r.instance_type)
        && req.allows_zone(&r.zone)
        && req
            .reservation_ids
            .as_ref()
            .is_none_or(|ids| ids.contains(&r.id))
        && catalog
            .zones
            .get(&r.instance_type)
            .is_some_and(|z| z.contains(&r.zone))
}

/// The overrides of a `reserved` launch: one per reservation that can take it (its type, in its
/// zone, with that zone's subnet), at the reserved price, cheapest type first.
pub fn reserved_overrides(
    req: &LaunchRequest,
    catalog: &Catalog,
    reservations: &[ResolvedReservation],
    subnets: &BTreeMap<&str, &Subnet>,
    amis: &[Ami],
    now: DateTime<Utc>,
) -> Vec<Override> {
    let mut out: Vec<Override> = reservations
        .iter()
        .filter(|r| takes(req, catalog, r, now))
        .filter_map(|r| {
            let raw = catalog
                .raw
                .iter()
                .find(|x| x.instance_type == r.instance_type)?;
            let arch = architecture(raw)?;
            let ami = ami::pick(amis, arch, variant_of(raw))?;
            let subnet = subnets.get(r.zone.as_str())?;
            let on_demand = catalog.on_demand.get(&r.instance_type).copied();
            Some(Override {
                instance_type: r.instance_type.clone(),
                zone: r.zone.clone(),
                subnet_id: subnet.id.clone(),
                image_id: ami.id.clone(),
                price: reserved_price(on_demand.unwrap_or(0.0)),
                reservation: Some(r.id.clone()),
            })
        })
        .collect();
    out.sort_by(|a, b| {
        a.price
            .total_cmp(&b.price)
            .then_with(|| a.instance_type.cmp(&b.instance_type))
            .then_with(|| a.reservation.cmp(&b.reservation))
    });
    // One CreateFleet asks for one market: capacity blocks or plain reservations, as the
    // cheapest override's is.
    let kind = |o: &Override| {
        reservations
            .iter()
            .find(|r| Some(&r.id) == o.reservation.as_ref())
            .map(|r| r.kind.clone())
    };
    if let Some(first) = out.first().map(kind) {
        out.retain(|o| kind(o) == first);
    }
    out.truncate(MAX_INSTANCE_TYPES);
    out
}

/// The instance's reservation, with the labels the NodeClaim gets from it.
pub fn launched_reservation(id: &str, reservations: &[ResolvedReservation]) -> LaunchedReservation {
    let r = reservations.iter().find(|r| r.id == id);
    LaunchedReservation {
        id: id.to_string(),
        kind: r.map(|r| r.kind.clone()),
        interruptible: r.map(|r| r.interruptible),
    }
}

/// CreateFleet's idempotency token: the NodeClaim's name and uid, and nothing of the request.
/// A launch retried after an invocation was cut off (or after a lost answer) then reaches EC2
/// as the same launch, whatever changed in between: other offerings marked unavailable, a price
/// refresh, another subnet, a new AMI, a fallback to another capacity type. EC2 answers the same
/// request with the first call's instance, and a changed one with `IdempotentParameterMismatch`,
/// which the adapter resolves by looking the instance up by its tags. A NodeClaim whose launch
/// failed for good is deleted, and its replacement has another uid, so another token.
pub fn client_token(nodeclaim: &str, uid: Option<&str>) -> String {
    let mut hasher = Sha256::new();
    hasher.update(nodeclaim.as_bytes());
    hasher.update([0]);
    hasher.update(uid.unwrap_or_default().as_bytes());
    format!("fleetwright-{}", &hex(&hasher.finalize())[..40])
}

/// The tags every instance, volume and fleet of a NodeClaim carries. User tags come first; the
/// tags Fleetwright relies on cannot be overridden.
pub fn instance_tags(
    cluster: &str,
    req: &LaunchRequest,
    user: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut out = user.clone();
    out.insert(format!("{TAG_CLUSTER_PREFIX}{cluster}"), "owned".into());
    out.insert(TAG_EKS_CLUSTER_NAME.into(), cluster.into());
    out.insert(NODEPOOL.into(), req.nodepool.clone());
    out.insert(TAG_NODECLAIM.into(), req.nodeclaim.clone());
    out.insert(NODECLASS.into(), req.nodeclass.clone());
    out.entry("Name".into())
        .or_insert_with(|| format!("{}/{}", req.nodepool, req.nodeclaim));
    out
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
#[path = "../tests/unit/launch.rs"]
mod tests;
