//! The instances this cluster launched: listing them by tag (for garbage collection and
//! idempotent launches) and terminating them. Termination checks ownership **in code**
//! ([`ownership_problem`]) before calling EC2.

use aws_sdk_ec2::types::{Filter, Instance as Ec2Instance};
use chrono::DateTime;
pub use fleetwright_cloud::instances::*;
use fleetwright_core::labels::{NODEPOOL, TAG_CLUSTER_PREFIX};
use tracing::{info, instrument, warn};

use crate::error::AwsError;

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
        capacity_type: match (
            i.instance_lifecycle().map(|l| l.as_str()),
            i.capacity_reservation_id(),
        ) {
            (Some("spot"), _) => "spot".into(),
            (_, Some(_)) => "reserved".into(),
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
        capacity_reservation_id: i.capacity_reservation_id().map(str::to_string),
        partition: i
            .placement()
            .and_then(|p| p.partition_number())
            .filter(|n| *n != 0),
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
        let page = page.map_err(|e| crate::error::api("DescribeInstances", e))?;
        for r in page.reservations() {
            out.extend(r.instances().iter().filter_map(from_sdk));
        }
    }
    Ok(out)
}

fn owned_filters(cluster: &str) -> Vec<Filter> {
    vec![
        Filter::builder()
            .name(format!("tag:{TAG_CLUSTER_PREFIX}{cluster}"))
            .values("owned")
            .build(),
        Filter::builder().name("tag-key").values(NODEPOOL).build(),
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

/// The instances with these ids, in any state and whatever their tags, through the
/// `instance-id` filter (which, unlike `InstanceIds`, leaves out ids EC2 no longer knows instead of
/// failing the call).
#[instrument(skip(ec2))]
pub async fn describe_by_id(
    ec2: &aws_sdk_ec2::Client,
    ids: &[String],
) -> Result<Vec<Instance>, AwsError> {
    let mut out = Vec::new();
    for chunk in ids.chunks(200) {
        let filter = Filter::builder()
            .name("instance-id")
            .set_values(Some(chunk.to_vec()))
            .build();
        out.extend(describe(ec2, vec![filter], None).await?);
    }
    Ok(out)
}

/// The live instance launched for a NodeClaim, if any.
#[instrument(skip(ec2))]
pub async fn find_for_nodeclaim(
    ec2: &aws_sdk_ec2::Client,
    cluster: &str,
    nodeclaim: &str,
) -> Result<Option<Instance>, AwsError> {
    // Any state: a NodeClaim gets one instance for life. If the one it got has already died,
    // that dead instance is its launch (the tick then lets the NodeClaim go, and the pods are
    // planned again), never a second instance.
    let mut filters: Vec<Filter> = owned_filters(cluster)
        .into_iter()
        .filter(|f| f.name() != Some("instance-state-name"))
        .collect();
    filters.push(
        Filter::builder()
            .name("tag:karpenter.sh/nodeclaim")
            .values(nodeclaim)
            .build(),
    );
    let mut found = describe(ec2, filters, None).await?;
    found.sort_by_key(|i| (LIVE_STATES.contains(&i.state.as_str()), i.launch_time));
    Ok(found.pop())
}

/// The instance with this id, in any state; None when EC2 no longer knows it.
async fn describe_one(
    ec2: &aws_sdk_ec2::Client,
    instance_id: &str,
) -> Result<Option<Instance>, AwsError> {
    match describe(ec2, Vec::new(), Some(vec![instance_id.to_string()])).await {
        Ok(list) => Ok(list.into_iter().next()),
        Err(AwsError::Api { code, .. }) if code == "InvalidInstanceID.NotFound" => Ok(None),
        Err(e) => Err(e),
    }
}

/// Terminates one instance after checking, in code, that this cluster launched it.
#[instrument(skip(ec2))]
pub async fn terminate(
    ec2: &aws_sdk_ec2::Client,
    cluster: &str,
    instance_id: &str,
) -> Result<Termination, AwsError> {
    let Some(instance) = describe_one(ec2, instance_id).await? else {
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
        .map_err(|e| crate::error::api("TerminateInstances", e))?;
    info!(instance_id, nodeclaim = ?instance.nodeclaim(), "terminated instance");
    Ok(Termination::Terminating)
}

/// Reboots one instance after checking, in code, that this cluster launched it for
/// `nodeclaim` (a repair's reboot). `Ok(false)`: it is gone or going.
#[instrument(skip(ec2))]
pub async fn reboot(
    ec2: &aws_sdk_ec2::Client,
    cluster: &str,
    instance_id: &str,
    nodeclaim: &str,
) -> Result<bool, AwsError> {
    let Some(instance) = describe_one(ec2, instance_id).await? else {
        return Ok(false);
    };
    let other = (instance.nodeclaim() != Some(nodeclaim)).then(|| {
        format!(
            "it was launched for NodeClaim {:?}, not {nodeclaim}",
            instance.nodeclaim().unwrap_or_default()
        )
    });
    if let Some(reason) = ownership_problem(&instance.tags, cluster).or(other) {
        warn!(instance_id, %reason, "refusing to reboot an instance this cluster does not own");
        return Err(AwsError::Refused {
            action: "reboot",
            instance_id: instance_id.to_string(),
            reason,
        });
    }
    if !LIVE_STATES.contains(&instance.state.as_str()) {
        return Ok(false);
    }
    ec2.reboot_instances()
        .instance_ids(instance_id)
        .send()
        .await
        .map_err(|e| crate::error::api("RebootInstances", e))?;
    info!(instance_id, nodeclaim = ?instance.nodeclaim(), "rebooted instance");
    Ok(true)
}
