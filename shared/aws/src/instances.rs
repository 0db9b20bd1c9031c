//! The instances this cluster launched: listing them by tag (for garbage collection and
//! idempotent launches) and terminating them. Termination checks ownership **in code** before
//! calling EC2: an instance without `kubernetes.io/cluster/<this cluster>=owned` and
//! `karpenter.sh/nodepool` is never terminated, whatever IAM would allow.

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_ec2::types::{Filter, Instance as Ec2Instance};
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use tracing::{info, instrument, warn};

use crate::error::AwsError;
use crate::fleet::Launched;

/// Instances younger than this are never garbage collected (their NodeClaim may not be visible yet).
pub const ORPHAN_GRACE: Duration = Duration::seconds(30);

/// The states of an instance that still exists.
pub const LIVE_STATES: [&str; 4] = ["pending", "running", "stopping", "stopped"];

/// An EC2 instance as Fleetwright sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Instance {
    pub id: String,
    pub instance_type: String,
    pub zone: String,
    pub state: String,
    pub capacity_type: String,
    pub image_id: String,
    #[serde(default)]
    pub subnet_id: String,
    /// Sorted.
    #[serde(default)]
    pub security_groups: Vec<String>,
    pub launch_time: Option<DateTime<Utc>>,
    pub tags: BTreeMap<String, String>,
}

impl Instance {
    pub fn nodeclaim(&self) -> Option<&str> {
        self.tags.get("karpenter.sh/nodeclaim").map(String::as_str)
    }

    pub fn launched(&self) -> Launched {
        Launched {
            instance_id: self.id.clone(),
            instance_type: self.instance_type.clone(),
            zone: self.zone.clone(),
            capacity_type: self.capacity_type.clone(),
            image_id: self.image_id.clone(),
            subnet_id: self.subnet_id.clone(),
            security_groups: self.security_groups.clone(),
        }
    }
}

/// Why an instance is not this cluster's to terminate, or None when it is.
pub fn ownership_problem(tags: &BTreeMap<String, String>, cluster: &str) -> Option<String> {
    let key = format!("kubernetes.io/cluster/{cluster}");
    if tags.get(&key).map(String::as_str) != Some("owned") {
        return Some(format!("it is not tagged {key}=owned"));
    }
    if !tags.contains_key("karpenter.sh/nodepool") {
        return Some("it has no karpenter.sh/nodepool tag".to_string());
    }
    None
}

fn from_sdk(i: &Ec2Instance) -> Option<Instance> {
    Some(Instance {
        id: i.instance_id()?.to_string(),
        instance_type: i
            .instance_type()
            .map(|t| t.as_str().to_string())
            .unwrap_or_default(),
        zone: i
            .placement()
            .and_then(|p| p.availability_zone())
            .unwrap_or_default()
            .to_string(),
        state: i
            .state()
            .and_then(|s| s.name())
            .map(|n| n.as_str().to_string())
            .unwrap_or_default(),
        capacity_type: match i.instance_lifecycle().map(|l| l.as_str()) {
            Some("spot") => "spot".into(),
            _ => "on-demand".into(),
        },
        image_id: i.image_id().unwrap_or_default().to_string(),
        subnet_id: i.subnet_id().unwrap_or_default().to_string(),
        security_groups: {
            let mut groups: Vec<String> = i
                .security_groups()
                .iter()
                .filter_map(|g| g.group_id().map(str::to_string))
                .collect();
            groups.sort();
            groups
        },
        launch_time: i
            .launch_time()
            .and_then(|t| DateTime::from_timestamp(t.secs(), t.subsec_nanos())),
        tags: i
            .tags()
            .iter()
            .filter_map(|t| Some((t.key()?.to_string(), t.value()?.to_string())))
            .collect(),
    })
}

async fn describe(
    ec2: &aws_sdk_ec2::Client,
    filters: Vec<Filter>,
    ids: Option<Vec<String>>,
) -> Result<Vec<Instance>, AwsError> {
    let mut pages = ec2
        .describe_instances()
        .set_filters(Some(filters))
        .set_instance_ids(ids)
        .into_paginator()
        .send();
    let mut out = Vec::new();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| AwsError::api("DescribeInstances", e))?;
        for r in page.reservations() {
            out.extend(r.instances().iter().filter_map(from_sdk));
        }
    }
    Ok(out)
}

fn owned_filters(cluster: &str) -> Vec<Filter> {
    vec![
        Filter::builder()
            .name(format!("tag:kubernetes.io/cluster/{cluster}"))
            .values("owned")
            .build(),
        Filter::builder()
            .name("tag-key")
            .values("karpenter.sh/nodepool")
            .build(),
        Filter::builder()
            .name("instance-state-name")
            .set_values(Some(LIVE_STATES.iter().map(|s| s.to_string()).collect()))
            .build(),
    ]
}

/// Every live instance this cluster launched.
#[instrument(skip(ec2))]
pub async fn list_owned(
    ec2: &aws_sdk_ec2::Client,
    cluster: &str,
) -> Result<Vec<Instance>, AwsError> {
    describe(ec2, owned_filters(cluster), None).await
}

/// The live instance launched for a NodeClaim, if any.
#[instrument(skip(ec2))]
pub async fn find_for_nodeclaim(
    ec2: &aws_sdk_ec2::Client,
    cluster: &str,
    nodeclaim: &str,
) -> Result<Option<Instance>, AwsError> {
    let mut filters = owned_filters(cluster);
    filters.push(
        Filter::builder()
            .name("tag:karpenter.sh/nodeclaim")
            .values(nodeclaim)
            .build(),
    );
    Ok(describe(ec2, filters, None).await?.into_iter().next())
}

/// What terminating an instance did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Termination {
    /// TerminateInstances accepted it.
    Terminating,
    /// It no longer exists or is already shutting down.
    AlreadyGone,
}

/// Terminates one instance after checking, in code, that this cluster launched it.
#[instrument(skip(ec2))]
pub async fn terminate(
    ec2: &aws_sdk_ec2::Client,
    cluster: &str,
    instance_id: &str,
) -> Result<Termination, AwsError> {
    let found = describe(ec2, Vec::new(), Some(vec![instance_id.to_string()])).await;
    let instance = match found {
        Ok(list) => list.into_iter().next(),
        Err(AwsError::Api { code, .. }) if code == "InvalidInstanceID.NotFound" => None,
        Err(e) => return Err(e),
    };
    let Some(instance) = instance else {
        return Ok(Termination::AlreadyGone);
    };
    if let Some(reason) = ownership_problem(&instance.tags, cluster) {
        warn!(instance_id, %reason, "refusing to terminate an instance this cluster does not own");
        return Err(AwsError::Refused {
            action: "terminate",
            instance_id: instance_id.to_string(),
            reason,
        });
    }
    if matches!(instance.state.as_str(), "shutting-down" | "terminated") {
        return Ok(Termination::AlreadyGone);
    }
    ec2.terminate_instances()
        .instance_ids(instance_id)
        .send()
        .await
        .map_err(|e| AwsError::api("TerminateInstances", e))?;
    info!(instance_id, nodeclaim = ?instance.nodeclaim(), "terminated instance");
    Ok(Termination::Terminating)
}

/// Owned instances that no NodeClaim accounts for and that are older than the grace period.
pub fn orphans<'a>(
    instances: &'a [Instance],
    claimed_instance_ids: &BTreeSet<String>,
    now: DateTime<Utc>,
) -> Vec<&'a Instance> {
    instances
        .iter()
        .filter(|i| !claimed_instance_ids.contains(&i.id))
        .filter(|i| i.launch_time.is_some_and(|t| now - t >= ORPHAN_GRACE))
        .filter(|i| LIVE_STATES.contains(&i.state.as_str()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn ownership_needs_both_tags() {
        let owned = tags(&[
            ("kubernetes.io/cluster/dev", "owned"),
            ("karpenter.sh/nodepool", "default"),
        ]);
        assert!(ownership_problem(&owned, "dev").is_none());
        assert!(ownership_problem(&owned, "prod")
            .unwrap()
            .contains("kubernetes.io/cluster/prod=owned"));
        let shared = tags(&[
            ("kubernetes.io/cluster/dev", "shared"),
            ("karpenter.sh/nodepool", "x"),
        ]);
        assert!(ownership_problem(&shared, "dev").is_some());
        let no_pool = tags(&[("kubernetes.io/cluster/dev", "owned")]);
        assert!(ownership_problem(&no_pool, "dev")
            .unwrap()
            .contains("nodepool"));
    }
}
