//! Garbage collection of launch templates. A template is named by a hash of its content, so a
//! changed EC2NodeClass, AMI, user data or NodePool label leaves the old template behind, and
//! one is left per deleted class. Like Karpenter, which deletes a template once its cache has not
//! used it for a while, the tick deletes this cluster's templates that no launch has used for
//! [`UNUSED_FOR`]: a launch that needs one again creates it again, by the same name. Only
//! templates this code made are touched: the cluster's name prefix and its ownership tags are
//! checked here, as the IAM policy checks the tags.

use std::collections::BTreeMap;

use aws_sdk_ec2::types::Filter;
use chrono::{DateTime, Duration, Utc};
use fleetwright_core::labels::{NODEPOOL, TAG_CLUSTER, TAG_CLUSTER_PREFIX, TAG_EKS_CLUSTER_NAME};
use tracing::{info, warn};

use crate::error::AwsError;

/// A template unused (by the launches of this container) and older than this is deleted.
pub const UNUSED_FOR: Duration = Duration::hours(1);

/// At most this many templates are deleted per call, so one collection stays short.
pub const MAX_DELETIONS: usize = 20;

/// One launch template as DescribeLaunchTemplates lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listed {
    pub id: String,
    pub name: String,
    pub created: Option<DateTime<Utc>>,
    pub tags: BTreeMap<String, String>,
}

/// Whether this cluster's launch path made `template`: its name prefix, and the tags it puts on
/// every template (the ones IAM's deletion condition names among them).
pub fn owned(cluster: &str, template: &Listed) -> bool {
    let tag = |key: &str| template.tags.get(key).map(String::as_str);
    template
        .name
        .starts_with(&format!("fleetwright/{cluster}/"))
        && tag(&format!("{TAG_CLUSTER_PREFIX}{cluster}")) == Some("owned")
        && tag(TAG_CLUSTER) == Some(cluster)
        && tag(TAG_EKS_CLUSTER_NAME) == Some(cluster)
        && tag(NODEPOOL).is_some()
}

/// The templates to delete: this cluster's, created over [`UNUSED_FOR`] ago, and not used by a
/// launch (`used`: template name to its last use) within it. A template without a creation
/// time is kept.
pub fn stale<'a>(
    cluster: &str,
    listed: &'a [Listed],
    used: &BTreeMap<String, DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Vec<&'a Listed> {
    let old = |t: Option<DateTime<Utc>>| t.is_some_and(|t| now - t >= UNUSED_FOR);
    listed
        .iter()
        .filter(|t| owned(cluster, t))
        .filter(|t| old(t.created))
        .filter(|t| used.get(&t.name).is_none_or(|u| now - *u >= UNUSED_FOR))
        .take(MAX_DELETIONS)
        .collect()
}

/// This cluster's launch templates, found by their cluster tag (the rest is checked by
/// [`owned`]).
pub async fn list(ec2: &aws_sdk_ec2::Client, cluster: &str) -> Result<Vec<Listed>, AwsError> {
    let filter = Filter::builder()
        .name("tag:karpenter.k8s.aws/cluster")
        .values(cluster)
        .build();
    let mut out = Vec::new();
    let mut token = None;
    loop {
        let page = ec2
            .describe_launch_templates()
            .filters(filter.clone())
            .max_results(200)
            .set_next_token(token)
            .send()
            .await
            .map_err(|e| crate::error::api("DescribeLaunchTemplates", e))?;
        out.extend(page.launch_templates().iter().map(|t| {
            Listed {
                id: t.launch_template_id().unwrap_or_default().to_string(),
                name: t.launch_template_name().unwrap_or_default().to_string(),
                created: t
                    .create_time()
                    .and_then(|c| DateTime::from_timestamp(c.secs(), c.subsec_nanos())),
                tags: t
                    .tags()
                    .iter()
                    .map(|tag| {
                        let text = |v: Option<&str>| v.unwrap_or_default().to_string();
                        (text(tag.key()), text(tag.value()))
                    })
                    .collect(),
            }
        }));
        token = page.next_token().map(str::to_string);
        if token.is_none() {
            return Ok(out);
        }
    }
}

/// Deletes the stale templates among `listed`, each on its own (one failure does not stop the
/// others); returns the names deleted. A template already gone counts as deleted.
pub async fn delete_stale(
    ec2: &aws_sdk_ec2::Client,
    cluster: &str,
    listed: &[Listed],
    used: &BTreeMap<String, DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Vec<String> {
    let mut deleted = Vec::new();
    for template in stale(cluster, listed, used, now) {
        if !owned(cluster, template) {
            continue;
        }
        let result = ec2
            .delete_launch_template()
            .launch_template_id(&template.id)
            .send()
            .await;
        match result {
            Ok(_) => info!(launch_template = %template.name, "deleted an unused launch template"),
            Err(e) if is_not_found(&e) => {}
            Err(e) => {
                let e = crate::error::api("DeleteLaunchTemplate", e);
                warn!(launch_template = %template.name, error = %e, "could not delete an unused launch template");
                continue;
            }
        }
        deleted.push(template.name.clone());
    }
    deleted
}

fn is_not_found<E: aws_sdk_ec2::error::ProvideErrorMetadata>(e: &E) -> bool {
    e.code().is_some_and(|c| c.contains("NotFound"))
}

#[cfg(test)]
#[path = "../tests/unit/template_gc.rs"]
mod tests;
