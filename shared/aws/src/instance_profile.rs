//! Instance profiles for an EC2NodeClass `role`: one profile per (cluster, role), named from a
//! hash so it is found again, created on first use and tagged as owned by the cluster.

use fleetwright_cloud::launch::hex;
use fleetwright_core::labels::{TAG_CLUSTER, TAG_CLUSTER_PREFIX};
use sha2::{Digest, Sha256};
use tracing::{info, instrument};

use crate::error::AwsError;

/// The profile name for a role: `fleetwright_<cluster>_<hash>` (IAM allows 128 characters).
pub fn profile_name(cluster: &str, role: &str) -> String {
    let hash = hex(&Sha256::digest(format!("{cluster}/{role}").as_bytes()))[..16].to_string();
    let cluster: String = cluster.chars().take(80).collect();
    format!("fleetwright_{cluster}_{hash}")
}

/// Returns the profile for `role`, creating it (with the role added) when it does not exist.
/// `read_only` (a dry run) creates and changes nothing, and says what it would do.
#[instrument(skip(iam))]
pub async fn ensure(
    iam: &aws_sdk_iam::Client,
    cluster: &str,
    role: &str,
    read_only: bool,
) -> Result<String, AwsError> {
    let name = profile_name(cluster, role);
    let existing = iam
        .get_instance_profile()
        .instance_profile_name(&name)
        .send()
        .await;
    match existing {
        Ok(out) => {
            let has_role = out
                .instance_profile()
                .is_some_and(|p| p.roles().iter().any(|r| r.role_name() == role));
            if !has_role && read_only {
                info!(instance_profile = %name, role, "dry run: would add the role to the instance profile");
            } else if !has_role {
                add_role(iam, &name, role).await?;
            }
            return Ok(name);
        }
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_no_such_entity_exception()) => {}
        Err(e) => return Err(crate::error::api("GetInstanceProfile", e)),
    }
    if read_only {
        info!(instance_profile = %name, role, "dry run: would create the instance profile");
        return Ok(name);
    }
    let tag = |k: &str, v: &str| {
        aws_sdk_iam::types::Tag::builder()
            .key(k)
            .value(v)
            .build()
            .map_err(|e| AwsError::Api {
                operation: "CreateInstanceProfile",
                code: "InvalidTag".into(),
                message: e.to_string(),
            })
    };
    iam.create_instance_profile()
        .instance_profile_name(&name)
        .tags(tag(&format!("{TAG_CLUSTER_PREFIX}{cluster}"), "owned")?)
        .tags(tag(TAG_CLUSTER, cluster)?)
        .send()
        .await
        .map_err(|e| crate::error::api("CreateInstanceProfile", e))?;
    add_role(iam, &name, role).await?;
    info!(instance_profile = %name, role, "created instance profile");
    Ok(name)
}

async fn add_role(iam: &aws_sdk_iam::Client, profile: &str, role: &str) -> Result<(), AwsError> {
    iam.add_role_to_instance_profile()
        .instance_profile_name(profile)
        .role_name(role)
        .send()
        .await
        .map_err(|e| crate::error::api("AddRoleToInstanceProfile", e))?;
    Ok(())
}
