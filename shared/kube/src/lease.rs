//! The single-writer guard: a `coordination.k8s.io/v1` Lease taken at the start of each tick, so
//! overlapping invocations never plan on the same pending pods twice. A tick that cannot take
//! the lease exits cleanly; a lease whose holder died expires after its duration and is taken
//! over. Conflicts (409) are never overwritten: losing a race means someone else holds it,
//! unless the Lease, read again, shows this invocation's own write (a retry after a lost answer).

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::Client;

use crate::error::KubeError;

/// A lease this invocation holds.
#[derive(Debug)]
pub struct LeaseGuard {
    api: Api<Lease>,
    lease: Lease,
}

impl LeaseGuard {
    /// The holder identity written into the lease.
    pub fn holder(&self) -> Option<&str> {
        self.lease
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.as_deref())
    }

    /// Gives the lease up (its renew time is moved back so the next tick takes it at once).
    /// A conflict means someone already took it over, which is fine.
    pub async fn release(mut self) -> Result<(), KubeError> {
        let name = self.lease.metadata.name.clone().unwrap_or_default();
        if let Some(spec) = self.lease.spec.as_mut() {
            spec.holder_identity = None;
            spec.renew_time = None;
        }
        let api = &self.api;
        let lease = &self.lease;
        let params = PostParams::default();
        let released =
            crate::retry::with_retries("releasing Lease", || api.replace(&name, &params, lease));
        match released.await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
            Err(e) => Err(api_error(e)),
        }
    }
}

fn api_error(e: kube::Error) -> KubeError {
    KubeError::Api {
        kind: "updating Lease".into(),
        reason: e.to_string(),
    }
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(r) if r.code == 409)
}

/// Tries to take lease `name` in `namespace` for `holder` at `now`. Returns None, without error,
/// when another live holder has it or won the race for it.
pub async fn try_acquire(
    client: Client,
    namespace: &str,
    name: &str,
    holder: &str,
    duration: Duration,
    now: Timestamp,
) -> Result<Option<LeaseGuard>, KubeError> {
    let api: Api<Lease> = Api::namespaced(client, namespace);
    let existing = crate::retry::with_retries("reading Lease", || api.get_opt(name))
        .await
        .map_err(api_error)?;
    let seconds = i32::try_from(duration.as_secs()).unwrap_or(i32::MAX);
    let params = PostParams::default();
    let result = match existing {
        None => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(name.to_string()),
                    namespace: Some(namespace.to_string()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(holder.to_string()),
                    lease_duration_seconds: Some(seconds),
                    acquire_time: Some(MicroTime(now)),
                    renew_time: Some(MicroTime(now)),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            crate::retry::with_retries("creating Lease", || api.create(&params, &lease)).await
        }
        Some(mut lease) => {
            let spec = lease.spec.get_or_insert_with(Default::default);
            if held_by_other(spec, holder, now) {
                tracing::info!(lease = name, holder = ?spec.holder_identity, "lease is held by another invocation");
                return Ok(None);
            }
            let taking_over = spec.holder_identity.as_deref() != Some(holder);
            spec.holder_identity = Some(holder.to_string());
            spec.lease_duration_seconds = Some(seconds);
            spec.renew_time = Some(MicroTime(now));
            if taking_over {
                spec.acquire_time = Some(MicroTime(now));
                spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
            }
            crate::retry::with_retries("updating Lease", || api.replace(name, &params, &lease))
                .await
        }
    };
    match result {
        Ok(lease) => Ok(Some(LeaseGuard { api, lease })),
        Err(e) if is_conflict(&e) => own_write_landed(api, name, holder, now).await,
        Err(e) => Err(api_error(e)),
    }
}

/// After a 409 on the Lease write: a retry of a write whose answer was lost meets its own
/// write, which bumped the resourceVersion (or, on a create, made the object exist). The Lease
/// is read again; when it names this holder with this renew time, the write landed and the
/// Lease is this invocation's, with the resourceVersion its release needs. Anything else is
/// another invocation that won the race.
async fn own_write_landed(
    api: Api<Lease>,
    name: &str,
    holder: &str,
    now: Timestamp,
) -> Result<Option<LeaseGuard>, KubeError> {
    let current = crate::retry::with_retries("reading Lease", || api.get_opt(name))
        .await
        .map_err(api_error)?;
    match current {
        Some(lease) if written_by(&lease, holder, now) => {
            tracing::info!(
                lease = name,
                "the lease write had landed before its retry; holding it"
            );
            Ok(Some(LeaseGuard { api, lease }))
        }
        _ => {
            tracing::info!(lease = name, "lost the race for the lease");
            Ok(None)
        }
    }
}

/// Whether `lease` holds what this invocation wrote: its holder and its renew time.
fn written_by(lease: &Lease, holder: &str, now: Timestamp) -> bool {
    let Some(spec) = lease.spec.as_ref() else {
        return false;
    };
    // A MicroTime travels with microseconds.
    spec.holder_identity.as_deref() == Some(holder)
        && spec
            .renew_time
            .as_ref()
            .is_some_and(|r| r.0.as_microsecond() == now.as_microsecond())
}

/// Held by someone else whose renew time plus duration is still in the future.
fn held_by_other(spec: &LeaseSpec, holder: &str, now: Timestamp) -> bool {
    let other = spec
        .holder_identity
        .as_deref()
        .is_some_and(|h| !h.is_empty() && h != holder);
    let duration = i64::from(spec.lease_duration_seconds.unwrap_or(0));
    let live = spec
        .renew_time
        .as_ref()
        .is_some_and(|r| r.0.as_second() + duration > now.as_second());
    other && live
}
