//! The EC2 implementation ([`Ec2Cloud`]) of the cloud port ([`fleetwright_cloud::Cloud`]). The implementation keeps what a warm Lambda container may
//! reuse: the catalog (TTL), spot and on-demand prices (12 h), the cluster's facts, resolved node classes,
//! ensured launch templates and unavailable offerings.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

mod templates;

use chrono::{DateTime, Duration, Utc};
pub use fleetwright_cloud::Cloud;
use fleetwright_core::Catalog;
use fleetwright_crds::EC2NodeClass;
use tracing::{info, instrument, warn};

use crate::catalog::{Cached, CATALOG_TTL};
use crate::clients::AwsClients;
use crate::cluster::ClusterInfo;
use crate::error::AwsError;
use crate::fleet::{self, LaunchRequest, Launched, Override};
use crate::instances::{self, Instance, Termination};
use crate::nodeclass::{self, ParameterRoot, ResolvedNodeClass};
use crate::pricing::{self, OnDemandPriceList, SpotPrices, WarmPrices};
use crate::template_gc;
use crate::unavailable::{is_capacity_error, UnavailableOfferings};

/// How long a launch template this container ensured is used without checking that it still
/// exists (well under [`template_gc::UNUSED_FOR`]).
pub const TEMPLATE_RECHECK: Duration = Duration::minutes(10);

/// How long a resolved EC2NodeClass (subnets, security groups, AMIs) is reused.
pub const NODECLASS_TTL: Duration = Duration::minutes(5);

#[derive(Debug)]
struct Warm {
    catalog: Cached<Catalog>,
    cluster: Option<ClusterInfo>,
    nodeclasses: HashMap<String, (String, ResolvedNodeClass, DateTime<Utc>)>,
    /// Launch templates this container ensured, with their last use by a launch.
    templates: BTreeMap<String, DateTime<Utc>>,
    unavailable: UnavailableOfferings,
    /// The last catalog handed out, and what it was composed from; reused while those are the
    /// same, so the launches of one tick do not each copy the whole catalog.
    composed: Option<Composed>,
}

#[derive(Debug)]
struct Composed {
    base: Arc<Catalog>,
    spot: Option<Arc<SpotPrices>>,
    on_demand: Option<Arc<OnDemandPriceList>>,
    unavailable: BTreeSet<crate::unavailable::OfferingKey>,
    catalog: Arc<Catalog>,
}

fn same<T>(a: &Option<Arc<T>>, b: &Option<Arc<T>>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        (None, None) => true,
        _ => false,
    }
}

impl Composed {
    fn matches(
        &self,
        base: &Arc<Catalog>,
        spot: &Option<Arc<SpotPrices>>,
        on_demand: &Option<Arc<OnDemandPriceList>>,
        unavailable: &BTreeSet<crate::unavailable::OfferingKey>,
    ) -> bool {
        Arc::ptr_eq(&self.base, base)
            && same(&self.spot, spot)
            && same(&self.on_demand, on_demand)
            && &self.unavailable == unavailable
    }
}

/// The EC2 implementation of [`Cloud`].
#[derive(Debug)]
pub struct Ec2Cloud {
    clients: AwsClients,
    cluster: String,
    on_demand: BTreeMap<String, f64>,
    parameter_root: ParameterRoot,
    /// A dry run's cloud: it reads, and creates or changes nothing (no instance profile).
    read_only: bool,
    warm: Mutex<Warm>,
    prices: WarmPrices,
}

impl Ec2Cloud {
    /// A cloud for `cluster`, priced on-demand from the embedded table.
    pub fn new(clients: AwsClients, cluster: &str) -> Self {
        Ec2Cloud {
            clients,
            cluster: cluster.to_string(),
            on_demand: Catalog::embedded_prices(),
            parameter_root: ParameterRoot::default(),
            read_only: false,
            warm: Mutex::new(Warm {
                catalog: Cached::new(CATALOG_TTL),
                cluster: None,
                nodeclasses: HashMap::new(),
                templates: BTreeMap::new(),
                unavailable: UnavailableOfferings::default(),
                composed: None,
            }),
            prices: WarmPrices::default(),
        }
    }

    /// Uses these cluster facts instead of calling DescribeCluster (tests, local runs).
    pub fn with_cluster_info(self, info: ClusterInfo) -> Self {
        self.warm().cluster = Some(info);
        self
    }

    /// Reads AMI alias parameters under a mirror root instead of the public `/aws/service/...`.
    pub fn with_parameter_root(mut self, root: &str) -> Self {
        self.parameter_root = ParameterRoot(root.to_string());
        self
    }

    /// A cloud that reads and writes nothing (a dry run): resolving an EC2NodeClass creates no
    /// instance profile.
    pub fn read_only(mut self) -> Self {
        self.read_only = true;
        self
    }

    pub fn clients(&self) -> &AwsClients {
        &self.clients
    }

    fn warm(&self) -> std::sync::MutexGuard<'_, Warm> {
        self.warm.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn cluster_info(&self) -> Result<ClusterInfo, AwsError> {
        if let Some(info) = self.warm().cluster.clone() {
            return Ok(info);
        }
        let info = crate::cluster::describe(&self.clients.eks, &self.cluster).await?;
        self.warm().cluster = Some(info.clone());
        Ok(info)
    }

    async fn base_catalog(&self, now: DateTime<Utc>) -> Result<Arc<Catalog>, AwsError> {
        if let Some(c) = self.warm().catalog.fresh(now) {
            return Ok(c);
        }
        let catalog = crate::catalog::discover(
            &self.clients.ec2,
            &self.clients.region,
            self.on_demand.clone(),
        )
        .await?;
        Ok(self.warm().catalog.store(catalog, now))
    }

    /// A reserved launch took one of the reservation's instances: the cached resolution says so
    /// until it is refreshed, so the next launch does not count on it.
    fn took_reservation(&self, nodeclass: &str, id: &str) {
        if let Some((_, resolved, _)) = self.warm().nodeclasses.get_mut(nodeclass) {
            for r in resolved.reservations.iter_mut().filter(|r| r.id == id) {
                r.available = r.available.saturating_sub(1);
            }
        }
    }

    fn record_fleet_errors(
        &self,
        errors: &[fleet::FleetError],
        capacity_type: &str,
        overrides: &[(String, Vec<Override>)],
        now: DateTime<Utc>,
    ) {
        let mut warm = self.warm();
        for e in errors.iter().filter(|e| is_capacity_error(&e.code)) {
            let Some(instance_type) = &e.instance_type else {
                continue;
            };
            let zones: Vec<String> = match &e.zone {
                Some(z) => vec![z.clone()],
                None => overrides
                    .iter()
                    .flat_map(|(_, l)| l.iter())
                    .filter(|o| &o.instance_type == instance_type)
                    .map(|o| o.zone.clone())
                    .collect(),
            };
            for zone in zones {
                warm.unavailable
                    .mark(capacity_type, instance_type, &zone, now);
            }
        }
    }

    /// After CreateFleet refused the token as `IdempotentParameterMismatch`: an earlier call for
    /// this NodeClaim (an invocation cut off before it recorded the instance) used the same
    /// token with other subnets or an other order. Its instance, found by tag, is the launch;
    /// if it is not listed yet, the launch fails and the NodeClaim is planned again (an instance
    /// that shows up later is collected as garbage).
    async fn launched_before(&self, req: &LaunchRequest) -> Result<Launched, AwsError> {
        match instances::find_for_nodeclaim(&self.clients.ec2, &self.cluster, &req.nodeclaim).await? {
            Some(existing) => {
                info!(instance_id = %existing.id, "CreateFleet: IdempotentParameterMismatch; the instance an earlier call launched is the launch");
                existing.adopted().map_err(|reason| AwsError::Launch {
                    nodeclaim: req.nodeclaim.clone(),
                    reason,
                })
            }
            None => Err(AwsError::Launch {
                nodeclaim: req.nodeclaim.clone(),
                reason: "CreateFleet: IdempotentParameterMismatch, and the instance an earlier call with this token launched is not listed yet".into(),
            }),
        }
    }
}

fn spec_key(nodeclass: &EC2NodeClass) -> String {
    serde_json::to_string(&nodeclass.spec).unwrap_or_default()
}

impl Ec2Cloud {
    /// Finds the NodeClaim's instance, or launches it.
    async fn launch_instance(
        &self,
        req: &LaunchRequest,
        nodeclass: &EC2NodeClass,
        now: DateTime<Utc>,
    ) -> Result<Launched, AwsError> {
        if let Some(existing) =
            instances::find_for_nodeclaim(&self.clients.ec2, &self.cluster, &req.nodeclaim).await?
        {
            info!(instance_id = %existing.id, state = %existing.state, "nodeclaim already has an instance; not launching another");
            return existing.adopted().map_err(|reason| AwsError::Launch {
                nodeclaim: req.nodeclaim.clone(),
                reason,
            });
        }
        let catalog = self.catalog(now).await?;
        let resolved = self.nodeclass(nodeclass, now).await?;
        let launch_error = |reason: String| AwsError::Launch {
            nodeclaim: req.nodeclaim.clone(),
            reason,
        };
        let reservations = &resolved.reservations;
        let (capacity_type, overrides) =
            fleet::choose(req, &catalog, &resolved, now).map_err(launch_error)?;
        let templates = self
            .templates(req, nodeclass, &resolved, capacity_type, overrides, now)
            .await?;
        let tags = fleet::instance_tags(&self.cluster, req, nodeclass.spec.tags());
        let blocks = templates.iter().flat_map(|(_, l)| l).any(|o| {
            reservations
                .iter()
                .any(|r| Some(&r.id) == o.reservation.as_ref() && r.kind == "capacity-block")
        });
        let options = fleet::FleetOptions {
            capacity_blocks: blocks,
            context: nodeclass.spec.context.clone(),
        };
        let created = fleet::create(
            &self.clients.ec2,
            req,
            capacity_type,
            &templates,
            &tags,
            &options,
        )
        .await;
        let (mut launched, errors) = match created {
            Err(e) if e.code() == Some("IdempotentParameterMismatch") => {
                return self.launched_before(req).await;
            }
            Err(e) => {
                self.forget_missing_templates(&[e.code().unwrap_or_default()], &templates);
                return Err(e);
            }
            Ok(answer) => answer,
        };
        let codes: Vec<&str> = errors.iter().map(|e| e.code.as_str()).collect();
        self.forget_missing_templates(&codes, &templates);
        self.record_fleet_errors(&errors, capacity_type, &templates, now);
        if let Some(l) = launched.as_mut() {
            l.partition = partition_of(req, &resolved);
            // The launch templates carry the class's security groups.
            l.security_groups = resolved.security_groups.clone();
            l.security_groups.sort();
            if let Some(id) = l.reservation.as_ref().map(|r| r.id.clone()) {
                l.reservation = Some(fleet::launched_reservation(&id, reservations));
                self.took_reservation(&resolved.name, &id);
            }
        }
        launched.ok_or_else(|| AwsError::NothingLaunched {
            nodeclaim: req.nodeclaim.clone(),
            capacity_type: capacity_type.to_string(),
            errors,
        })
    }
}

impl Cloud for Ec2Cloud {
    async fn catalog(&self, now: DateTime<Utc>) -> Result<Arc<Catalog>, AwsError> {
        let base = self.base_catalog(now).await?;
        let spot = self.prices.spot(&self.clients.ec2, now).await;
        let on_demand = self
            .prices
            .on_demand(&self.clients.pricing, &self.clients.region, now)
            .await;
        let mut warm = self.warm();
        let unavailable = warm.unavailable.active(now);
        if let Some(c) = warm
            .composed
            .as_ref()
            .filter(|c| c.matches(&base, &spot, &on_demand, &unavailable))
        {
            return Ok(c.catalog.clone());
        }
        let mut catalog = (*base).clone();
        if let Some(prices) = &on_demand {
            pricing::apply_on_demand_prices(&mut catalog, prices);
        }
        if let Some(prices) = &spot {
            pricing::apply_spot_prices(&mut catalog, prices);
            catalog.spot_fraction = 1.0;
        }
        catalog.unavailable = unavailable.clone();
        let catalog = Arc::new(catalog);
        warm.composed = Some(Composed {
            base,
            spot,
            on_demand,
            unavailable,
            catalog: catalog.clone(),
        });
        Ok(catalog)
    }

    async fn nodeclass(
        &self,
        nodeclass: &EC2NodeClass,
        now: DateTime<Utc>,
    ) -> Result<ResolvedNodeClass, AwsError> {
        let name = nodeclass.metadata.name.clone().unwrap_or_default();
        let key = spec_key(nodeclass);
        if let Some((k, resolved, at)) = self.warm().nodeclasses.get(&name) {
            if *k == key && now - *at < NODECLASS_TTL {
                return Ok(resolved.clone());
            }
        }
        let cluster = self.cluster_info().await?;
        let resolved = nodeclass::resolve(
            &self.clients,
            &cluster,
            &name,
            &nodeclass.spec,
            &self.parameter_root,
            self.read_only,
        )
        .await?;
        self.warm()
            .nodeclasses
            .insert(name, (key, resolved.clone(), now));
        Ok(resolved)
    }

    #[instrument(skip_all, fields(nodeclaim = %req.nodeclaim, nodepool = %req.nodepool))]
    async fn launch(
        &self,
        req: &LaunchRequest,
        nodeclass: &EC2NodeClass,
        now: DateTime<Utc>,
    ) -> Result<Launched, AwsError> {
        let launched = self.launch_instance(req, nodeclass, now).await?;
        // Without the catalog, the NodeClaim still gets the labels the launch itself knows.
        match self.catalog(now).await {
            Ok(catalog) => Ok(launched.labelled(&catalog)),
            Err(e) => {
                warn!(nodeclaim = %req.nodeclaim, error = %e, "no catalog for the instance type's labels");
                Ok(launched)
            }
        }
    }

    async fn terminate(&self, instance_id: &str) -> Result<Termination, AwsError> {
        instances::terminate(&self.clients.ec2, &self.cluster, instance_id).await
    }

    async fn reboot(&self, instance_id: &str, nodeclaim: &str) -> Result<bool, AwsError> {
        instances::reboot(&self.clients.ec2, &self.cluster, instance_id, nodeclaim).await
    }

    async fn instances(&self) -> Result<Vec<Instance>, AwsError> {
        instances::list_owned(&self.clients.ec2, &self.cluster).await
    }

    async fn describe(&self, ids: &[String]) -> Result<Vec<Instance>, AwsError> {
        instances::describe_by_id(&self.clients.ec2, ids).await
    }

    fn mark_unavailable(
        &self,
        capacity_type: &str,
        instance_type: &str,
        zone: &str,
        now: DateTime<Utc>,
    ) {
        self.warm()
            .unavailable
            .mark(capacity_type, instance_type, zone, now);
    }

    fn unavailable(&self) -> UnavailableOfferings {
        self.warm().unavailable.clone()
    }

    fn restore_unavailable(&self, saved: &UnavailableOfferings) {
        self.warm().unavailable.merge(saved);
    }

    /// Deletes this cluster's launch templates that no launch has used for
    /// [`template_gc::UNUSED_FOR`] (tags checked in code, at most
    /// [`template_gc::MAX_DELETIONS`] per call); returns their names. The tick calls it; a
    /// template needed again is created again by the next launch.
    async fn collect_launch_templates(&self, now: DateTime<Utc>) -> Result<Vec<String>, AwsError> {
        let listed = template_gc::list(&self.clients.ec2, &self.cluster).await?;
        let used = self.warm().templates.clone();
        let deleted =
            template_gc::delete_stale(&self.clients.ec2, &self.cluster, &listed, &used, now).await;
        let mut warm = self.warm();
        for name in &deleted {
            warm.templates.remove(name);
        }
        Ok(deleted)
    }
}

/// The partition a launch targets: the one its NodeClaim names, when the class launches into a
/// partition group (EC2 takes no partition number for other strategies).
fn partition_of(req: &LaunchRequest, resolved: &ResolvedNodeClass) -> Option<i32> {
    let group = resolved.placement_group.as_ref()?;
    (group.strategy == "partition").then_some(req.partition)?
}
