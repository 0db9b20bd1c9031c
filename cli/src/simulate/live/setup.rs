//! Before a run against a real cluster, and for a timeline's `apply` steps: the guard, then
//! Fleetwright's CRDs (created when missing, never changed), the namespaces (created when
//! missing; an existing one is used and never written), the tick's Lease and state ConfigMap,
//! and the scenario's objects, each created with the run label. An object that exists already
//! is never taken over: creating it is refused, and an `apply` step replaces only this run's.

use anyhow::{bail, Context};
use chrono::{Duration, Utc};
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, PostParams};
use kube::discovery::Scope;
use serde_json::{json, Value};
use tracing::info;

use super::guard::{self, State};
use super::owned;
use super::{Applied, Live};

impl Live {
    /// Refuses a cluster in use, then installs the CRDs, the namespaces and the tick's state
    /// objects, and creates the scenario's objects.
    pub(super) async fn prepare(&mut self) -> anyhow::Result<()> {
        self.clock.set(Utc::now());
        let state = State {
            namespace: &self.namespace,
            lease: &self.lease,
            configmap: fleetwright_kube::state::STATE_CONFIGMAP,
        };
        guard::refuse_a_cluster_in_use(&self.admin, &self.run, &state).await?;
        let mut objects = self.scenario.objects.clone();
        objects.extend(
            self.scenario
                .timeline
                .iter()
                .filter_map(|s| match &s.action {
                    super::Action::Apply(o) => Some((**o).clone()),
                    _ => None,
                }),
        );
        guard::refuse_taken_names(&self.admin, &self.run, &objects).await?;
        info!(target: "simulate::scenario", run = %self.run.selector(), "the cluster holds nothing of anyone else's; every object this run creates carries its label");
        self.prepared = true;
        if self.karpenter.is_some() {
            let names = self.install_karpenter_crds().await?;
            wait_established(&Api::all(self.admin.clone()), names).await?;
            if self.shadow.is_some() {
                // Fleetwright's CRDs the cluster lacks (its EC2NodeClass), for the shadow.
                self.install_crds().await?;
                self.ensure_namespace(&self.namespace.clone()).await?;
                self.create_state().await?;
                self.grant_shadow().await?;
            }
        } else {
            self.install_crds().await?;
            self.ensure_namespace(&self.namespace.clone()).await?;
            self.create_state().await?;
        }
        let objects = self.scenario.objects.clone();
        for (index, object) in objects.iter().enumerate() {
            self.create(object)
                .await
                .with_context(|| format!("the scenario's objects[{index}]"))?;
        }
        info!(target: "simulate::scenario", objects = objects.len(), "scenario applied to the cluster");
        self.start_karpenter().await
    }

    /// Stops the run when a Node, NodeClaim, NodePool, EC2NodeClass or pod of anyone else's
    /// has appeared since the guard let it through: the tick would act on it. A check that
    /// fails is tried again a few seconds later; when none has passed for
    /// [`super::UNCHECKED_FOR`] seconds the run stops, as the guard refuses on any error.
    pub(super) async fn still_alone(&mut self, t: i64) -> anyhow::Result<()> {
        self.checks.tried = t;
        match guard::newcomer(&self.admin, &self.run).await {
            Ok(None) => {
                self.checks.passed = t;
                Ok(())
            }
            Err(e) if t - self.checks.passed >= super::UNCHECKED_FOR => bail!(
                "could not check for {}s that the cluster holds only this run's objects ({e:#}): the run stops, and removes only what it created",
                t - self.checks.passed
            ),
            Ok(Some(what)) => bail!(
                "{what} appeared in the cluster, and this run ({}) did not create it: the run stops before the tick acts on it, and removes only what it created",
                self.run.selector()
            ),
            Err(e) => {
                tracing::warn!(target: "simulate::cluster", error = %format!("{e:#}"), "could not check that the cluster holds only this run's objects; checking again in a few seconds");
                Ok(())
            }
        }
    }

    /// Creates Fleetwright's CRDs that are missing (an existing one is used as it is) and waits
    /// until the API server serves them.
    async fn install_crds(&self) -> anyhow::Result<()> {
        let api: Api<CustomResourceDefinition> = Api::all(self.admin.clone());
        let mut names = Vec::new();
        for mut crd in fleetwright_crds::definitions() {
            let name = crd.metadata.name.clone().unwrap_or_default();
            names.push(name.clone());
            let existing = api
                .get_opt(&name)
                .await
                .with_context(|| format!("reading CustomResourceDefinition {name}"))?;
            if existing.is_some() {
                continue;
            }
            crd.metadata
                .labels
                .get_or_insert_with(Default::default)
                .insert(owned::RUN_LABEL.into(), self.run.id().into());
            match api.create(&PostParams::default(), &crd).await {
                Ok(_) => {
                    info!(target: "simulate::scenario", crd = %name, "CustomResourceDefinition installed")
                }
                // Someone else installed it meanwhile: used as it is.
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => {
                    return Err(e)
                        .with_context(|| format!("installing CustomResourceDefinition {name}"))
                }
            }
        }
        wait_established(&api, names).await
    }

    /// Creates namespace `name`, labelled as this run's, when it does not exist. An existing
    /// namespace is only used: never written, never deleted.
    pub(super) async fn ensure_namespace(&mut self, name: &str) -> anyhow::Result<()> {
        if self.namespaces.iter().any(|n| n == name) {
            return Ok(());
        }
        let api: Api<Namespace> = Api::all(self.admin.clone());
        if api
            .get_opt(name)
            .await
            .with_context(|| format!("reading namespace {name}"))?
            .is_some()
        {
            return Ok(());
        }
        let mut object = json!({"metadata": {"name": name}});
        self.run.stamp(&mut object);
        match api
            .create(&PostParams::default(), &serde_json::from_value(object)?)
            .await
        {
            Ok(_) => self.namespaces.push(name.to_string()),
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(e).with_context(|| format!("creating namespace {name}")),
        }
        Ok(())
    }

    /// The functions' own RBAC for the shadow's identity (its user, as the API server names it),
    /// created as this run's objects: shadow mode runs with what a deploy grants, no more.
    async fn grant_shadow(&mut self) -> anyhow::Result<()> {
        let Some(shadow) = &self.shadow else {
            return Ok(());
        };
        let reviews: Api<SelfSubjectReview> = Api::all(shadow.kube.clone());
        let review = reviews
            .create(&PostParams::default(), &SelfSubjectReview::default())
            .await
            .context("--shadow-kubeconfig: asking the API server who its identity is")?;
        let info = review.status.and_then(|s| s.user_info).unwrap_or_default();
        let user = (info.username)
            .context("--shadow-kubeconfig: the API server named no user for its identity")?;
        // An identity that may do anything proves nothing about what shadow mode writes.
        if info.groups.iter().flatten().any(|g| g == "system:masters") {
            bail!("--shadow-kubeconfig: {user} is in system:masters; give an identity that holds only what `fleetwright manifests` grants");
        }
        let namespace = self.namespace.clone();
        let objects = crate::manifests::rbac_for("User", &user, &namespace);
        // Someone else's RBAC of the same names is refused before anything is created.
        for object in &objects {
            let (api, applied) = self.resolve(object).await?;
            if api.get_opt(&applied.name).await?.is_some() {
                bail!(
                    "{} {} exists and is not this run's; refusing to run the shadow beside it",
                    applied.resource.kind,
                    applied.name
                );
            }
        }
        for object in objects {
            self.create(&object).await?;
        }
        Ok(())
    }

    /// The tick's Lease and state ConfigMap, created as this run's so that the tick's writes
    /// land on objects the run owns, and the clean-up can remove them.
    async fn create_state(&self) -> anyhow::Result<()> {
        let mut lease =
            json!({"metadata": {"name": self.lease, "namespace": self.namespace}, "spec": {}});
        self.run.stamp(&mut lease);
        let leases: Api<Lease> = Api::namespaced(self.admin.clone(), &self.namespace);
        owned::create(&leases, &self.run, "Lease", &serde_json::from_value(lease)?).await?;
        let mut map = json!({"metadata": {"name": fleetwright_kube::state::STATE_CONFIGMAP,
            "namespace": self.namespace}, "data": {}});
        self.run.stamp(&mut map);
        let maps: Api<ConfigMap> = Api::namespaced(self.admin.clone(), &self.namespace);
        owned::create(&maps, &self.run, "ConfigMap", &serde_json::from_value(map)?).await?;
        Ok(())
    }

    /// The API of one scenario object, its kind resolved through discovery (its namespace
    /// created if missing).
    async fn resolve(&mut self, object: &Value) -> anyhow::Result<(Api<DynamicObject>, Applied)> {
        let (gvk, name) = guard::identity(object)?;
        let (resource, capabilities) = kube::discovery::pinned_kind(&self.admin, &gvk)
            .await
            .with_context(|| {
                format!(
                    "{} {name}: the API server does not serve {}",
                    gvk.kind, object["apiVersion"]
                )
            })?;
        let namespace = (capabilities.scope == Scope::Namespaced).then(|| {
            object["metadata"]["namespace"]
                .as_str()
                .unwrap_or("default")
                .to_string()
        });
        let api = match &namespace {
            Some(ns) => {
                self.ensure_namespace(ns).await?;
                Api::namespaced_with(self.admin.clone(), ns, &resource)
            }
            None => Api::all_with(self.admin.clone(), &resource),
        };
        Ok((
            api,
            Applied {
                resource,
                namespace,
                name,
            },
        ))
    }

    /// `object` as this run's autoscaler reads it: Karpenter's KWOK provider has its own node
    /// class.
    fn for_autoscaler(&self, object: &Value) -> Value {
        match self.karpenter {
            Some(_) => super::karpenter::translate(object),
            None => object.clone(),
        }
    }

    /// `object` labelled as this run's (and, for a Node, annotated for kwok).
    fn stamped(&self, object: &Value) -> anyhow::Result<DynamicObject> {
        let mut object = object.clone();
        if object["kind"] == "Node" {
            object["metadata"]["annotations"]["kwok.x-k8s.io/node"] = json!("fake");
        }
        self.run.stamp(&mut object);
        serde_json::from_value(object).context("the object")
    }

    /// Creates one scenario object. One that exists already is refused. Beside Karpenter, an
    /// EC2NodeClass is also created as it is for Fleetwright's shadow, which reads its pools'
    /// classes by name.
    pub(super) async fn create(&mut self, object: &Value) -> anyhow::Result<()> {
        let shadowed =
            self.karpenter.is_some() && self.shadow.is_some() && object["kind"] == "EC2NodeClass";
        self.create_as_is(&self.for_autoscaler(object)).await?;
        if shadowed {
            self.create_as_is(object).await?;
        }
        Ok(())
    }

    async fn create_as_is(&mut self, object: &Value) -> anyhow::Result<()> {
        let (api, applied) = self.resolve(object).await?;
        let what = applied.resource.kind.clone();
        let created = owned::create(&api, &self.run, &what, &self.stamped(object)?).await;
        created?;
        self.applied.push(applied);
        Ok(())
    }

    /// A timeline's `apply`: replaces the object if this run created it, creates it if it does
    /// not exist, and refuses anyone else's.
    pub(super) async fn apply(&mut self, object: &Value) -> anyhow::Result<()> {
        let object = &self.for_autoscaler(object);
        let (api, applied) = self.resolve(object).await?;
        let what = applied.resource.kind.clone();
        let mut next = self.stamped(object)?;
        let present = owned::read(&api, &self.run, &what, &applied.name).await?;
        if present.is_none() {
            owned::create(&api, &self.run, &what, &next).await?;
            self.applied.push(applied);
            return Ok(());
        }
        owned::replace(&api, &self.run, &what, &applied.name, |current| {
            next.metadata.resource_version = current.metadata.resource_version.clone();
            next.metadata.finalizers = current.metadata.finalizers.clone();
            // The status subresource keeps its own; the rest is the scenario's.
            if let Some(status) = current.data.get("status") {
                next.data["status"] = status.clone();
            }
            *current = next.clone();
            true
        })
        .await?;
        Ok(())
    }
}

/// Waits until the API server serves each of `names`.
async fn wait_established(
    api: &Api<CustomResourceDefinition>,
    names: Vec<String>,
) -> anyhow::Result<()> {
    let deadline = Utc::now() + Duration::seconds(30);
    for name in names {
        while !established(api, &name).await {
            if Utc::now() > deadline {
                bail!("CustomResourceDefinition {name} is not Established after 30 s");
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    }
    Ok(())
}

async fn established(api: &Api<CustomResourceDefinition>, name: &str) -> bool {
    api.get(name)
        .await
        .ok()
        .and_then(|c| c.status)
        .and_then(|s| s.conditions)
        .is_some_and(|c| {
            c.iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        })
}
