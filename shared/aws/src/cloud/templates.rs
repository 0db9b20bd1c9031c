//! The launch templates an EC2 launch uses: one per AMI among its overrides, with the user data
//! of the NodeClaim's labels and taints and its types' kubelet settings, each ensured once per
//! warm container and checked again after a while.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use fleetwright_core::labels::{
    CAPACITY_TYPE, NODECLASS, NODEPOOL, TAG_CLUSTER, TAG_CLUSTER_PREFIX, TAG_EKS_CLUSTER_NAME,
    TAINT_UNREGISTERED,
};
use fleetwright_core::model::{Taint, TaintEffect};
use fleetwright_crds::{EC2NodeClass, KubeletConfiguration};

use super::{partition_of, Ec2Cloud, TEMPLATE_RECHECK};
use crate::ami::AmiFamily;
use crate::cluster::ClusterInfo;
use crate::error::AwsError;
use crate::fleet::{LaunchRequest, Override};
use crate::launch_template;
use crate::nodeclass::ResolvedNodeClass;
use crate::userdata::{self, NodeBootstrap};

impl Ec2Cloud {
    pub(super) async fn ensure_template(
        &self,
        spec: &launch_template::LaunchTemplateSpec,
        now: DateTime<Utc>,
    ) -> Result<String, AwsError> {
        let name = spec.name(&self.cluster);
        if let Some(used) = self.warm().templates.get_mut(&name) {
            if now - *used < TEMPLATE_RECHECK {
                *used = now;
                return Ok(name);
            }
        }
        let name = launch_template::ensure(&self.clients.ec2, &self.cluster, spec).await?;
        self.warm().templates.insert(name.clone(), now);
        Ok(name)
    }

    /// Forgets the launch's templates when CreateFleet did not find one (collected by another
    /// container), so the next launch checks them and creates what is missing.
    pub(super) fn forget_missing_templates(
        &self,
        codes: &[&str],
        templates: &[(String, Vec<Override>)],
    ) {
        if codes
            .iter()
            .any(|c| c.contains("LaunchTemplate") && c.contains("NotFound"))
        {
            let mut warm = self.warm();
            for (name, _) in templates {
                warm.templates.remove(name);
            }
        }
    }

    /// One launch template per AMI among the overrides, each with the same user data.
    pub(super) async fn templates(
        &self,
        req: &LaunchRequest,
        nodeclass: &EC2NodeClass,
        resolved: &ResolvedNodeClass,
        capacity_type: &str,
        overrides: Vec<Override>,
        now: DateTime<Utc>,
    ) -> Result<Vec<(String, Vec<Override>)>, AwsError> {
        let cluster = self.cluster_info().await?;
        let kubelets = self.kubelets(nodeclass, resolved, &overrides, now).await?;
        // One template per image, per kubelet settings (which differ by instance type where
        // they hold expressions) and, for a reserved launch, per reservation it targets.
        let mut by_image: BTreeMap<(String, Option<String>, String), Vec<Override>> =
            BTreeMap::new();
        for o in overrides {
            let kubelet = kubelet_key(kubelets.get(&o.instance_type));
            let key = (o.image_id.clone(), o.reservation.clone(), kubelet);
            by_image.entry(key).or_default().push(o);
        }
        let mut tags = nodeclass.spec.tags().clone();
        tags.insert(
            format!("{TAG_CLUSTER_PREFIX}{}", self.cluster),
            "owned".into(),
        );
        tags.insert(TAG_CLUSTER.into(), self.cluster.clone());
        // IAM scopes CreateLaunchTemplate (and the fleet's use of it) to these request tags.
        tags.insert(TAG_EKS_CLUSTER_NAME.into(), self.cluster.clone());
        tags.insert(NODEPOOL.into(), req.nodepool.clone());
        tags.insert(NODECLASS.into(), resolved.name.clone());
        let mut out = Vec::new();
        for ((image, reservation, _), list) in by_image {
            let kubelet = list
                .first()
                .and_then(|o| kubelets.get(&o.instance_type))
                .or(nodeclass.spec.kubelet.as_ref());
            let user_data = user_data(&cluster, req, nodeclass, kubelet, resolved, capacity_type)?;
            let mut spec =
                launch_template::spec(&nodeclass.spec, resolved, &image, user_data, tags.clone())?;
            spec.capacity_reservation = reservation.map(|id| {
                let block = resolved
                    .reservations
                    .iter()
                    .any(|r| r.id == id && r.kind == "capacity-block");
                (id, block)
            });
            spec.partition = partition_of(req, resolved);
            out.push((self.ensure_template(&spec, now).await?, list));
        }
        Ok(out)
    }

    /// Where the class's kubelet settings hold CEL expressions: the settings each instance type
    /// of the launch gets, evaluated against the catalog's facts of the type. Empty otherwise
    /// (every type gets the class's settings as written).
    pub(super) async fn kubelets(
        &self,
        nodeclass: &EC2NodeClass,
        resolved: &ResolvedNodeClass,
        overrides: &[Override],
        now: DateTime<Utc>,
    ) -> Result<BTreeMap<String, KubeletConfiguration>, AwsError> {
        let Some(kubelet) = nodeclass.spec.kubelet.as_ref() else {
            return Ok(BTreeMap::new());
        };
        let invalid =
            |e: userdata::UserDataError| AwsError::nodeclass(&resolved.name, "kubelet", e.0);
        if !userdata::has_expressions(kubelet).map_err(invalid)? {
            return Ok(BTreeMap::new());
        }
        let catalog = self.base_catalog(now).await?;
        let mut out = BTreeMap::new();
        for o in overrides {
            if out.contains_key(&o.instance_type) {
                continue;
            }
            let raw = catalog
                .raw
                .iter()
                .find(|r| r.instance_type == o.instance_type)
                .ok_or_else(|| {
                    AwsError::nodeclass(
                        &resolved.name,
                        "kubelet",
                        format!(
                            "instance type {} is not in the catalog, so its kubelet expressions cannot be evaluated",
                            o.instance_type
                        ),
                    )
                })?;
            let evaluated = userdata::evaluated(kubelet, raw).map_err(invalid)?;
            out.insert(o.instance_type.clone(), evaluated);
        }
        Ok(out)
    }
}

/// What tells one instance type's kubelet settings from another's, for grouping templates.
fn kubelet_key(kubelet: Option<&KubeletConfiguration>) -> String {
    kubelet
        .map(|k| serde_json::to_string(k).unwrap_or_default())
        .unwrap_or_default()
}

/// The family's user data for a NodeClaim's labels and taints, with `kubelet` (the class's
/// settings, evaluated for the template's instance types).
fn user_data(
    cluster: &ClusterInfo,
    req: &LaunchRequest,
    nodeclass: &EC2NodeClass,
    kubelet: Option<&KubeletConfiguration>,
    resolved: &ResolvedNodeClass,
    capacity_type: &str,
) -> Result<String, AwsError> {
    let mut labels = req.labels.clone();
    labels.insert(NODEPOOL.into(), req.nodepool.clone());
    labels.insert(CAPACITY_TYPE.into(), capacity_type.into());
    let mut taints: Vec<Taint> = req
        .taints
        .iter()
        .chain(&req.startup_taints)
        .cloned()
        .collect();
    taints.push(Taint {
        key: TAINT_UNREGISTERED.into(),
        value: String::new(),
        effect: TaintEffect::NoExecute,
    });
    taints.dedup();
    let bootstrap = NodeBootstrap {
        cluster,
        labels: &labels,
        taints: &taints,
        kubelet,
        custom: nodeclass.spec.user_data.as_deref(),
    };
    let text = match resolved.family {
        AmiFamily::AL2023 => userdata::al2023(&bootstrap),
        AmiFamily::AL2 => userdata::al2(&bootstrap),
        AmiFamily::Bottlerocket => userdata::bottlerocket(&bootstrap),
        AmiFamily::Custom => Ok(nodeclass.spec.user_data.clone().unwrap_or_default()),
    };
    text.map_err(|e| AwsError::nodeclass(&resolved.name, "userData", e.0))
}
