//! EKS IAM authentication tokens, as `aws eks get-token` and aws-iam-authenticator make them:
//! `k8s-aws-v1.` + base64url(presigned STS `GetCallerIdentity` URL), signed with SigV4 and
//! carrying the cluster name in the signed `x-k8s-aws-id` header. EKS accepts such a token for
//! 15 minutes; [`TokenCache`] refreshes it a minute before that, so warm Lambda containers
//! reuse one token across invocations.

use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    sign, SignableBody, SignableRequest, SignatureLocation, SigningSettings,
};
use aws_sigv4::sign::v4;
use base64::Engine;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

use crate::error::KubeError;

/// Every EKS token starts with this.
pub const TOKEN_PREFIX: &str = "k8s-aws-v1.";
/// How long EKS accepts a token after it is signed.
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(15 * 60);
/// The header that binds a token to one cluster.
pub const CLUSTER_ID_HEADER: &str = "x-k8s-aws-id";
/// `X-Amz-Expires` on the presigned URL. STS ignores it after signing; aws-iam-authenticator
/// and the AWS CLI send 60, and so does Fleetwright.
pub const PRESIGN_EXPIRES: Duration = Duration::from_secs(60);
/// Refresh this long before a token's lifetime ends.
const REFRESH_MARGIN: Duration = Duration::from_secs(60);

/// RFC 3986 unreserved characters stay as they are; everything else is percent-encoded.
const QUERY: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// A bearer token and when EKS stops accepting it.
#[derive(Clone, Debug)]
pub struct EksToken {
    pub token: String,
    pub expires_at: SystemTime,
}

/// Signs a token for `cluster` in `region` at `now`.
pub fn token(
    credentials: &Credentials,
    region: &str,
    cluster: &str,
    now: SystemTime,
) -> Result<EksToken, KubeError> {
    let fail = |e: &dyn std::fmt::Display| {
        KubeError::Auth(format!(
            "signing the EKS token for cluster {cluster:?}: {e}"
        ))
    };
    let host = format!("sts.{region}.amazonaws.com");
    let base = format!("https://{host}/?Action=GetCallerIdentity&Version=2011-06-15");
    let mut settings = SigningSettings::default();
    settings.signature_location = SignatureLocation::QueryParams;
    settings.expires_in = Some(PRESIGN_EXPIRES);
    let identity = credentials.clone().into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("sts")
        .time(now)
        .settings(settings)
        .build()
        .map_err(|e| fail(&e))?
        .into();
    let headers = [("host", host.as_str()), (CLUSTER_ID_HEADER, cluster)];
    let request = SignableRequest::new(
        "GET",
        base.as_str(),
        headers.into_iter(),
        SignableBody::Bytes(&[]),
    )
    .map_err(|e| fail(&e))?;
    let (instructions, _signature) = sign(request, &params).map_err(|e| fail(&e))?.into_parts();
    let (_, query) = instructions.into_parts();
    let mut url = base;
    for (name, value) in query {
        url.push('&');
        url.push_str(name);
        url.push('=');
        url.extend(utf8_percent_encode(&value, QUERY));
    }
    Ok(EksToken {
        token: format!(
            "{TOKEN_PREFIX}{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(url)
        ),
        expires_at: now + TOKEN_LIFETIME,
    })
}

/// Keeps one token per container and signs a new one shortly before the old one expires.
#[derive(Debug, Default)]
pub struct TokenCache {
    current: Option<EksToken>,
}

impl TokenCache {
    /// The cached token, or a fresh one when there is none or it is about to expire.
    pub fn get(
        &mut self,
        credentials: &Credentials,
        region: &str,
        cluster: &str,
        now: SystemTime,
    ) -> Result<&EksToken, KubeError> {
        let fresh = self
            .current
            .as_ref()
            .is_some_and(|t| now + REFRESH_MARGIN < t.expires_at);
        if !fresh {
            self.current = None;
        }
        match &mut self.current {
            Some(current) => Ok(current),
            slot => Ok(slot.insert(token(credentials, region, cluster, now)?)),
        }
    }
}

#[cfg(test)]
#[path = "../tests/unit/eks_token.rs"]
mod tests;
