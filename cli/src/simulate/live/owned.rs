//! What a run against a real cluster owns, and the only way it changes or deletes anything.
//! Every object the run creates carries its run label ([`RUN_LABEL`] with a value drawn fresh
//! for each run). Each change and each delete reads the object first, goes ahead only when it
//! carries this run's label, and is made conditional on what was read (the `resourceVersion` of
//! a replace; the `uid` and `resourceVersion` of a delete), so an object swapped or relabelled in
//! between is never touched. A create answered 409 AlreadyExists is a refusal, never adoption.

use std::fmt::Debug;
use std::hash::{BuildHasher, Hasher};

use anyhow::{bail, Context};
use kube::api::{Api, DeleteParams, PostParams, Preconditions};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};

/// The label every object of a run carries, with the run's id as its value.
pub const RUN_LABEL: &str = "fleetwright.io/simulate-run";

/// How often a conditional write is tried again after a 409 (another writer, such as a
/// controller updating a status, got there first).
const ATTEMPTS: usize = 4;

/// One run: its id is the value of [`RUN_LABEL`] on everything it creates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run(String);

impl Run {
    /// A new run, with an id no earlier run had (the clock, the process and the hasher's
    /// random keys, mixed).
    pub fn fresh() -> Run {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_i64(chrono::Utc::now().timestamp_nanos_opt().unwrap_or_default());
        hasher.write_u32(std::process::id());
        Run(format!("{:010x}", hasher.finish() & 0xff_ffff_ffff))
    }

    #[cfg(test)]
    pub fn with_id(id: &str) -> Run {
        Run(id.to_string())
    }

    pub fn id(&self) -> &str {
        &self.0
    }

    /// The label selector of this run's objects.
    pub fn selector(&self) -> String {
        format!("{RUN_LABEL}={}", self.0)
    }

    /// Whether `object` carries this run's label.
    pub fn owns<K: Resource>(&self, object: &K) -> bool {
        object.labels().get(RUN_LABEL) == Some(&self.0)
    }

    /// Labels `object` (as JSON) as this run's, and the pod or node template it has
    /// (`spec.template.metadata` of a Deployment, DaemonSet, StatefulSet, Job or NodePool; a
    /// CronJob's job template), so the pods, NodeClaims and nodes made from it are this run's
    /// too.
    pub fn stamp(&self, object: &mut Value) {
        object["metadata"]["labels"][RUN_LABEL] = json!(self.0);
        if object["spec"]["template"].is_object() {
            object["spec"]["template"]["metadata"]["labels"][RUN_LABEL] = json!(self.0);
        }
        // A CronJob's Jobs, and their pods.
        if object["spec"]["jobTemplate"].is_object() {
            let jobs = &mut object["spec"]["jobTemplate"];
            jobs["metadata"]["labels"][RUN_LABEL] = json!(self.0);
            jobs["spec"]["template"]["metadata"]["labels"][RUN_LABEL] = json!(self.0);
        }
    }

    /// Why `object` is refused: it is not this run's, and may be an earlier run's.
    pub fn foreign<K: Resource>(&self, object: &K) -> &'static str {
        match object.labels().get(RUN_LABEL) {
            Some(_) => "left by an earlier simulate run",
            None => "not created by simulate",
        }
    }
}

/// A create refused because the name is taken: whatever holds it is not this run's.
#[derive(Debug)]
pub struct Taken(String);

impl std::fmt::Display for Taken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} already exists and this run did not create it: left as it is; point --kubeconfig at a disposable cluster (scripts/control-plane.sh start DIR)", self.0)
    }
}

impl std::error::Error for Taken {}

/// Reads `name`: None when it does not exist, an error naming it when it is not this run's.
pub async fn read<K>(api: &Api<K>, run: &Run, what: &str, name: &str) -> anyhow::Result<Option<K>>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let object = api
        .get_opt(name)
        .await
        .with_context(|| format!("reading {what} {name}"))?;
    match object {
        Some(o) if !run.owns(&o) => bail!(
            "{what} {name} is {}: left as it is (it has no {})",
            run.foreign(&o),
            run.selector()
        ),
        other => Ok(other),
    }
}

/// Creates `object`, which must carry this run's label. AlreadyExists is an error: whatever
/// holds the name is not this run's.
pub async fn create<K>(api: &Api<K>, run: &Run, what: &str, object: &K) -> anyhow::Result<K>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    let name = object.meta().name.clone().unwrap_or_default();
    if !run.owns(object) {
        bail!(
            "{what} {name}: refusing to create it without {}",
            run.selector()
        );
    }
    let params = PostParams {
        field_manager: Some(super::MANAGER.into()),
        ..Default::default()
    };
    match api.create(&params, object).await {
        Ok(created) => Ok(created),
        Err(kube::Error::Api(e)) if e.code == 409 => Err(Taken(format!("{what} {name}")).into()),
        Err(e) => Err(e).with_context(|| format!("creating {what} {name}")),
    }
}

/// Changes `name` with `change` and replaces it, only while it is this run's and unchanged
/// since it was read. `change` returns false when there is nothing to write. Returns whether
/// it wrote (false also when the object is gone).
pub async fn replace<K>(
    api: &Api<K>,
    run: &Run,
    what: &str,
    name: &str,
    mut change: impl FnMut(&mut K) -> bool,
) -> anyhow::Result<bool>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    for _ in 0..ATTEMPTS {
        let Some(mut object) = read(api, run, what, name).await? else {
            return Ok(false);
        };
        if !change(&mut object) {
            return Ok(false);
        }
        // The resourceVersion read above rides along: the API server refuses the replace
        // (409) if the object changed since.
        match api.replace(name, &PostParams::default(), &object).await {
            Ok(_) => return Ok(true),
            Err(kube::Error::Api(e)) if e.code == 409 => continue,
            Err(kube::Error::Api(e)) if e.code == 404 => return Ok(false),
            Err(e) => return Err(e).with_context(|| format!("writing {what} {name}")),
        }
    }
    bail!("writing {what} {name}: it kept changing under the write ({ATTEMPTS} tries)")
}

/// Deletes `name`, only while it is this run's: the delete is conditional on the uid and
/// resourceVersion of the copy whose label was checked. Returns whether it deleted (false when
/// it was gone already).
pub async fn delete<K>(
    api: &Api<K>,
    run: &Run,
    what: &str,
    name: &str,
    params: &DeleteParams,
) -> anyhow::Result<bool>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    for _ in 0..ATTEMPTS {
        let Some(object) = read(api, run, what, name).await? else {
            return Ok(false);
        };
        let params = params.clone().preconditions(Preconditions {
            uid: object.uid(),
            resource_version: object.resource_version(),
        });
        match api.delete(name, &params).await {
            Ok(_) => return Ok(true),
            Err(kube::Error::Api(e)) if e.code == 409 => continue,
            Err(kube::Error::Api(e)) if e.code == 404 => return Ok(false),
            Err(e) => return Err(e).with_context(|| format!("deleting {what} {name}")),
        }
    }
    bail!("deleting {what} {name}: it kept changing under the delete ({ATTEMPTS} tries)")
}

/// This run's objects in `api` (namespace, name): listed by the run's label selector, each
/// checked again (a server that ignored the selector must not widen the set).
pub async fn list<K>(
    api: &Api<K>,
    run: &Run,
    what: &str,
) -> anyhow::Result<Vec<(Option<String>, String)>>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let list = api
        .list(&kube::api::ListParams::default().labels(&run.selector()))
        .await
        .with_context(|| format!("listing {what} by {}", run.selector()))?;
    Ok(list
        .items
        .iter()
        .filter(|o| run.owns(*o))
        .map(|o| (o.namespace(), o.name_any()))
        .collect())
}
