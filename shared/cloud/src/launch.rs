//! What one launch asks for and gets ([`LaunchRequest`], [`Launched`]), and the pure choices of a
//! CreateFleet-style launch: the capacity type, the instance type × zone overrides (cheapest
//! first), the idempotency token and the tags. The EC2 adapter and the simulated cloud both
//! launch through these, so they pick the same offerings.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use fleetwright_core::catalog::{architecture, overlaid_price, reserved_price, RawInstanceType};
use fleetwright_core::labels::{
    CAPACITY_ON_DEMAND, CAPACITY_RESERVED, CAPACITY_SPOT, CAPACITY_TYPE, INSTANCE_TYPE, NODEPOOL,
    PLACEMENT_GROUP_PARTITION, RESERVATION_ID, ZONE,
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
    out.insert(format!("kubernetes.io/cluster/{cluster}"), "owned".into());
    out.insert("eks:eks-cluster-name".into(), cluster.into());
    out.insert("karpenter.sh/nodepool".into(), req.nodepool.clone());
    out.insert("karpenter.sh/nodeclaim".into(), req.nodeclaim.clone());
    out.insert(
        "karpenter.k8s.aws/ec2nodeclass".into(),
        req.nodeclass.clone(),
    );
    out.entry("Name".into())
        .or_insert_with(|| format!("{}/{}", req.nodepool, req.nodeclaim));
    out
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ami::Ami;

    fn request(types: &[&str], capacity: &[&str], zones: &[&str]) -> LaunchRequest {
        LaunchRequest {
            nodeclaim: "default-abcde".into(),
            uid: Some("8c7a2f3e-0000-4000-8000-000000000001".into()),
            nodepool: "default".into(),
            nodeclass: "default".into(),
            instance_types: types.iter().map(|s| s.to_string()).collect(),
            capacity_types: capacity.iter().map(|s| s.to_string()).collect(),
            zones: zones.iter().map(|s| s.to_string()).collect(),
            labels: BTreeMap::new(),
            taints: Vec::new(),
            startup_taints: Vec::new(),
            overlays: Vec::new(),
            reservation_ids: None,
            partition: None,
        }
    }

    fn subnets() -> Vec<Subnet> {
        vec![
            Subnet {
                id: "subnet-a1".into(),
                zone: "us-east-1a".into(),
                available_ips: 10,
            },
            Subnet {
                id: "subnet-a2".into(),
                zone: "us-east-1a".into(),
                available_ips: 200,
            },
            Subnet {
                id: "subnet-b".into(),
                zone: "us-east-1b".into(),
                available_ips: 50,
            },
        ]
    }

    fn amis() -> Vec<Ami> {
        vec![
            Ami {
                id: "ami-x86".into(),
                arch: "amd64".into(),
                variant: Some(Variant::Standard),
                created: None,
            },
            Ami {
                id: "ami-arm".into(),
                arch: "arm64".into(),
                variant: Some(Variant::Standard),
                created: None,
            },
        ]
    }

    fn best(list: &[Subnet]) -> BTreeMap<&str, &Subnet> {
        let mut out: BTreeMap<&str, &Subnet> = BTreeMap::new();
        for s in list {
            if out
                .get(s.zone.as_str())
                .is_none_or(|b| b.available_ips < s.available_ips)
            {
                out.insert(&s.zone, s);
            }
        }
        out
    }

    #[test]
    fn spot_is_preferred_when_allowed_and_offered() {
        let catalog = Catalog::embedded();
        assert_eq!(
            capacity_type(&request(&["m5.large"], &[], &[]), catalog, &[], Utc::now()),
            Some("spot")
        );
        assert_eq!(
            capacity_type(
                &request(&["m5.large"], &["on-demand"], &[]),
                catalog,
                &[],
                Utc::now()
            ),
            Some("on-demand")
        );
        let mut ice = catalog.clone();
        for zone in &catalog.zones["m5.large"] {
            ice.unavailable
                .insert(("spot".into(), "m5.large".into(), zone.clone()));
        }
        assert_eq!(
            capacity_type(&request(&["m5.large"], &[], &[]), &ice, &[], Utc::now()),
            Some("on-demand")
        );
        assert_eq!(
            capacity_type(&request(&["no.such"], &[], &[]), catalog, &[], Utc::now()),
            None
        );
    }

    fn reservation(id: &str, kind: &str, available: usize) -> ResolvedReservation {
        ResolvedReservation {
            id: id.into(),
            instance_type: "m5.large".into(),
            zone: "us-east-1a".into(),
            kind: kind.into(),
            interruptible: false,
            owner_id: "123456789012".into(),
            instance_match_criteria: "targeted".into(),
            end_time: None,
            available,
        }
    }

    /// A NodeClaim that allows `reserved` launches into a reservation of one of its types with
    /// instances left, at the reserved price, and only into the reservations its requirements
    /// name; a used-up or expiring one (a capacity block 40 minutes from its end) takes nothing.
    #[test]
    fn reserved_is_preferred_when_allowed_and_a_reservation_has_room() {
        let catalog = Catalog::embedded();
        let now = Utc::now();
        let both = request(&["m5.large", "m5.xlarge"], &["reserved", "on-demand"], &[]);
        let open = [reservation("cr-1", "default", 2)];
        assert_eq!(capacity_type(&both, catalog, &open, now), Some("reserved"));
        let list = subnets();
        let out = reserved_overrides(&both, catalog, &open, &best(&list), &amis(), now);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].reservation.as_deref(), Some("cr-1"));
        assert_eq!(out[0].zone, "us-east-1a");
        assert!(out[0].price < 1e-6);
        let od_only = request(&["m5.large"], &["on-demand"], &[]);
        assert_eq!(
            capacity_type(&od_only, catalog, &open, now),
            Some("on-demand")
        );
        let full = [reservation("cr-1", "default", 0)];
        assert_eq!(capacity_type(&both, catalog, &full, now), Some("on-demand"));
        let mut ending = reservation("cr-2", "capacity-block", 2);
        ending.end_time = Some(now + chrono::Duration::minutes(30));
        assert_eq!(
            capacity_type(&both, catalog, &[ending.clone()], now),
            Some("on-demand")
        );
        ending.end_time = Some(now + chrono::Duration::minutes(41));
        assert_eq!(
            capacity_type(&both, catalog, &[ending], now),
            Some("reserved")
        );
        let mut named = both.clone();
        named.reservation_ids = Some(vec!["cr-9".into()]);
        assert_eq!(
            capacity_type(&named, catalog, &open, now),
            Some("on-demand")
        );
        let b_only = request(&["m5.large"], &["reserved"], &["us-east-1b"]);
        assert_eq!(capacity_type(&b_only, catalog, &open, now), None);
    }

    #[test]
    fn overrides_use_the_roomiest_subnet_the_right_ami_and_allowed_zones() {
        let catalog = Catalog::embedded();
        let list = subnets();
        let req = request(
            &["m6g.large", "m5.large"],
            &[],
            &["us-east-1a", "us-east-1b"],
        );
        let out = overrides(&req, catalog, "on-demand", &best(&list), &amis());
        assert!(!out.is_empty());
        assert!(out
            .iter()
            .all(|o| o.zone == "us-east-1a" || o.zone == "us-east-1b"));
        assert!(out
            .iter()
            .filter(|o| o.zone == "us-east-1a")
            .all(|o| o.subnet_id == "subnet-a2"));
        assert!(out
            .iter()
            .filter(|o| o.instance_type == "m6g.large")
            .all(|o| o.image_id == "ami-arm"));
        assert!(out
            .iter()
            .filter(|o| o.instance_type == "m5.large")
            .all(|o| o.image_id == "ami-x86"));
        assert!(out.windows(2).all(|w| w[0].price <= w[1].price));
        // A GPU type has no nvidia AMI here, so it is left out.
        let gpu = overrides(
            &request(&["g5.xlarge"], &[], &[]),
            catalog,
            "on-demand",
            &best(&list),
            &amis(),
        );
        assert!(gpu.is_empty());
    }

    #[test]
    fn at_most_sixty_instance_types() {
        let catalog = Catalog::embedded();
        let types: Vec<&str> = catalog
            .raw
            .iter()
            .filter(|r| {
                r.processor_info
                    .supported_architectures
                    .iter()
                    .any(|a| a == "x86_64")
            })
            .filter(|r| r.gpu_info.is_none() && r.neuron_info.is_none())
            .map(|r| r.instance_type.as_str())
            .take(150)
            .collect();
        let list = subnets();
        let out = overrides(
            &request(&types, &[], &[]),
            catalog,
            "on-demand",
            &best(&list),
            &amis(),
        );
        let distinct: std::collections::BTreeSet<&str> =
            out.iter().map(|o| o.instance_type.as_str()).collect();
        assert_eq!(distinct.len(), MAX_INSTANCE_TYPES);
    }

    /// The token names the NodeClaim only: the retry of a launch whose invocation was cut off
    /// is the same launch to EC2 whatever offerings, prices, subnets, images or capacity type it
    /// asks for this time, so EC2 cannot launch a second instance for it.
    #[test]
    fn the_client_token_depends_on_the_nodeclaim_alone() {
        let catalog = Catalog::embedded();
        let list = subnets();
        let req = request(&["m5.large", "m5.xlarge"], &[], &[]);
        let uid = req.uid.as_deref();
        let spot = overrides(&req, catalog, "spot", &best(&list), &amis());
        let token = client_token(&req.nodeclaim, uid);
        assert_eq!(token, client_token("default-abcde", uid));
        assert!(token.len() <= 64, "EC2 takes at most 64 characters");

        // What a retry may ask for differently: fewer offerings (one marked unavailable
        // meanwhile), another order, prices, subnets and image, another capacity type.
        let mut retried = spot[1..].to_vec();
        retried.reverse();
        for o in &mut retried {
            o.price *= 1.5;
            o.subnet_id = format!("{}-other", o.subnet_id);
            o.image_id = "ami-newer".into();
        }
        let od = overrides(&req, catalog, "on-demand", &best(&list), &amis());
        assert_ne!(spot, retried);
        assert_ne!(spot, od);
        for (capacity_type, offered) in [("spot", &spot), ("spot", &retried), ("on-demand", &od)] {
            assert_eq!(
                token,
                fleet_token(&req, capacity_type, offered),
                "{capacity_type}: {offered:?}"
            );
        }

        // Another NodeClaim, or one that reuses a deleted NodeClaim's name, is another launch.
        assert_ne!(token, client_token("default-fghij", uid));
        assert_ne!(token, client_token("default-abcde", Some("another-uid")));
    }

    /// The token CreateFleet is given for a request, its capacity type and its overrides.
    fn fleet_token(req: &LaunchRequest, _capacity_type: &str, _overrides: &[Override]) -> String {
        client_token(&req.nodeclaim, req.uid.as_deref())
    }

    #[test]
    fn fleetwright_tags_cannot_be_overridden_by_user_tags() {
        let user: BTreeMap<String, String> = [
            ("team".to_string(), "web".to_string()),
            ("karpenter.sh/nodepool".to_string(), "evil".to_string()),
        ]
        .into();
        let tags = instance_tags("dev", &request(&["m5.large"], &[], &[]), &user);
        assert_eq!(tags["team"], "web");
        assert_eq!(tags["karpenter.sh/nodepool"], "default");
        assert_eq!(tags["kubernetes.io/cluster/dev"], "owned");
        assert_eq!(tags["eks:eks-cluster-name"], "dev");
        assert_eq!(tags["karpenter.sh/nodeclaim"], "default-abcde");
        assert_eq!(tags["Name"], "default/default-abcde");
    }

    #[test]
    fn a_launch_request_comes_from_a_nodeclaim() {
        let claim: NodeClaim = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "default-x1", "labels": {"karpenter.sh/nodepool": "default", "team": "a"}},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [
                    {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large", "c5.large"]},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
                    {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a"]}
                ],
                "taints": [{"key": "gpu", "effect": "NoSchedule"}],
                "startupTaints": [{"key": "init", "value": "x", "effect": "NoExecute"}]
            }
        })).unwrap();
        let req = LaunchRequest::from_nodeclaim(&claim).unwrap();
        assert_eq!(req.instance_types, vec!["m5.large", "c5.large"]);
        assert_eq!(req.capacity_types, vec!["spot"]);
        assert_eq!(req.zones, vec!["us-east-1a"]);
        assert_eq!(req.taints[0].to_string(), "gpu:NoSchedule");
        assert_eq!(req.startup_taints[0].to_string(), "init=x:NoExecute");
        let mut bad = claim.clone();
        bad.spec.taints[0].effect = "Sometimes".into();
        let err = LaunchRequest::from_nodeclaim(&bad).unwrap_err().to_string();
        assert!(
            err.contains("default-x1") && err.contains("spec.taints"),
            "{err}"
        );
    }
}
