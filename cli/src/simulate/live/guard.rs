//! The guard a run against a real cluster passes before its first write. It refuses a cluster
//! in use: any Node, pod, NodeClaim, NodePool, EC2NodeClass or NodeOverlay (none of them is
//! this run's, since the run has created nothing yet; the simulated cloud and kubelets would
//! take them for their own), the tick's Lease or state ConfigMap, and any object the scenario
//! would create whose name is taken. It fails closed: a check that cannot be made (a list that
//! fails, a 403) refuses too.

use anyhow::{bail, Context};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::owned::{Run, RUN_LABEL};

/// The Karpenter kinds the tick reads and writes: (group, version, kind, plural).
pub const CUSTOM: [(&str, &str, &str, &str); 4] = [
    ("karpenter.sh", "v1", "NodeClaim", "nodeclaims"),
    ("karpenter.sh", "v1", "NodePool", "nodepools"),
    ("karpenter.k8s.aws", "v1", "EC2NodeClass", "ec2nodeclasses"),
    ("karpenter.sh", "v1alpha1", "NodeOverlay", "nodeoverlays"),
];

/// How many of each kind a refusal names.
const NAMED: u32 = 8;

/// Where the tick keeps its Lease and state ConfigMap.
pub struct State<'a> {
    pub namespace: &'a str,
    pub lease: &'a str,
    pub configmap: &'a str,
}

/// Refuses a cluster that holds anything the run would take for its own or overwrite.
pub async fn refuse_a_cluster_in_use(
    admin: &Client,
    run: &Run,
    state: &State<'_>,
) -> anyhow::Result<()> {
    let mut found = Vec::new();
    found.extend(existing::<Node>(Api::all(admin.clone()), "Node").await?);
    for (group, version, kind, plural) in CUSTOM {
        found.extend(existing_custom(admin, (group, version, kind, plural)).await?);
    }
    found.extend(existing::<Pod>(Api::all(admin.clone()), "Pod").await?);
    let leases: Api<Lease> = Api::namespaced(admin.clone(), state.namespace);
    found.extend(named(&leases, "Lease", state.namespace, state.lease).await?);
    let maps: Api<ConfigMap> = Api::namespaced(admin.clone(), state.namespace);
    found.extend(named(&maps, "ConfigMap", state.namespace, state.configmap).await?);
    refuse(run, &found)
}

/// During the run: the first Node, NodeClaim, NodePool, EC2NodeClass or pod that is not this
/// run's, if one has appeared.
pub async fn newcomer(admin: &Client, run: &Run) -> anyhow::Result<Option<String>> {
    // `key!=value` also selects the objects without the label.
    let others = ListParams::default().labels(&format!("{RUN_LABEL}!={}", run.id()));
    let nodes: Api<Node> = Api::all(admin.clone());
    if let Some(found) = first_not_of(&nodes, run, &others, "Node").await? {
        return Ok(Some(found));
    }
    for (group, version, kind, plural) in &CUSTOM[..3] {
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let resource = ApiResource::from_gvk_with_plural(&gvk, plural);
        let api: Api<DynamicObject> = Api::all_with(admin.clone(), &resource);
        match first_not_of(&api, run, &others, kind).await {
            Ok(None) => {}
            Ok(Some(found)) => return Ok(Some(found)),
            // A run with Karpenter installs no EC2NodeClass CRD: a 404 means none only when the
            // API server confirms that the CRD does not exist.
            Err(e) if not_found(&e) => crd_absent(admin, plural, group).await.context(e)?,
            Err(e) => return Err(e),
        }
    }
    let pods: Api<Pod> = Api::all(admin.clone());
    first_not_of(&pods, run, &others, "Pod").await
}

async fn first_not_of<K>(
    api: &Api<K>,
    run: &Run,
    params: &ListParams,
    kind: &str,
) -> anyhow::Result<Option<String>>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let list = api
        .list(params)
        .await
        .with_context(|| format!("listing every {kind}"))?;
    Ok(list
        .items
        .iter()
        .find(|o| !run.owns(*o))
        .map(|o| Found::of(o, kind, "").what))
}

/// Refuses when an object the scenario would create (`objects`) already exists: it is not
/// this run's. Kinds of Fleetwright's CRDs not yet installed are skipped: the cluster check
/// found none of them.
pub async fn refuse_taken_names(
    admin: &Client,
    run: &Run,
    objects: &[Value],
) -> anyhow::Result<()> {
    let mut found = Vec::new();
    for object in objects {
        let (gvk, name) = identity(object)?;
        let resolved = kube::discovery::pinned_kind(admin, &gvk).await;
        let (resource, capabilities) = match resolved {
            Ok(r) => r,
            Err(_) if CUSTOM.iter().any(|c| c.0 == gvk.group) => continue,
            Err(e) => {
                return Err(e).with_context(|| {
                    format!(
                        "{} {name}: the API server does not serve {}",
                        gvk.kind, object["apiVersion"]
                    )
                })
            }
        };
        let api: Api<DynamicObject> = match capabilities.scope {
            kube::discovery::Scope::Namespaced => {
                let ns = object["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or("default");
                Api::namespaced_with(admin.clone(), ns, &resource)
            }
            kube::discovery::Scope::Cluster => Api::all_with(admin.clone(), &resource),
        };
        let taken = api.get_opt(&name).await.with_context(|| {
            format!(
                "checking whether {} {name} exists; refusing, since it cannot tell",
                gvk.kind
            )
        })?;
        if let Some(o) = taken {
            found.push(Found::of(&o, &gvk.kind, "the scenario would create it"));
        }
    }
    refuse(run, &found)
}

/// The kind and name of a scenario object.
pub fn identity(object: &Value) -> anyhow::Result<(GroupVersionKind, String)> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let kind = object["kind"].as_str().unwrap_or_default();
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    if kind.is_empty() || version.is_empty() || name.is_empty() {
        bail!("an object without apiVersion, kind or metadata.name: {object}");
    }
    Ok((
        GroupVersionKind::gvk(group, version, kind),
        name.to_string(),
    ))
}

/// One object that makes the guard refuse.
struct Found {
    what: String,
    earlier_run: bool,
}

impl Found {
    fn of<K: Resource>(object: &K, kind: &str, note: &str) -> Found {
        let name = match object.meta().namespace.as_deref() {
            Some(ns) => format!("{ns}/{}", object.name_any()),
            None => object.name_any(),
        };
        let note = if note.is_empty() {
            String::new()
        } else {
            format!(" ({note})")
        };
        Found {
            what: format!("{kind} {name}{note}"),
            earlier_run: object.labels().contains_key(RUN_LABEL),
        }
    }
}

fn refuse(run: &Run, found: &[Found]) -> anyhow::Result<()> {
    if found.is_empty() {
        return Ok(());
    }
    let names: Vec<&str> = found.iter().map(|f| f.what.as_str()).collect();
    let mut message = format!(
        "refusing to run on this cluster: it has {}, which this run ({}) did not create. \
         simulate --kubeconfig plays the cloud and the kubelets, and deletes what it created at \
         the end, so it runs only on a disposable cluster with no nodes, no pods and no \
         Karpenter objects: check the kubeconfig's current context, or start such a cluster \
         with `scripts/control-plane.sh start DIR` and pass --kubeconfig DIR/admin.kubeconfig",
        names.join(", "),
        run.selector()
    );
    if found.iter().any(|f| f.earlier_run) {
        message.push_str(&format!(
            ". Objects labelled {RUN_LABEL} were left by an interrupted run: `kubectl delete KIND -l {RUN_LABEL}` removes them"
        ));
    }
    bail!(message)
}

/// Up to [`NAMED`] objects of the kind `api` lists. An error refuses.
async fn existing<K>(api: Api<K>, kind: &str) -> anyhow::Result<Vec<Found>>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let list = api
        .list(&ListParams::default().limit(NAMED))
        .await
        .with_context(|| format!("listing every {kind}; refusing, since it cannot tell whether the cluster is in use"))?;
    let mut found: Vec<Found> = list.items.iter().map(|o| Found::of(o, kind, "")).collect();
    if list.metadata.continue_.is_some_and(|c| !c.is_empty()) {
        found.push(Found {
            what: format!("more of kind {kind}"),
            earlier_run: false,
        });
    }
    Ok(found)
}

/// [`existing`] for a Karpenter kind. A 404 on the list means none only when the API server
/// confirms that the CRD does not exist.
async fn existing_custom(
    admin: &Client,
    (group, version, kind, plural): (&str, &str, &str, &str),
) -> anyhow::Result<Vec<Found>> {
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let resource = ApiResource::from_gvk_with_plural(&gvk, plural);
    let api: Api<DynamicObject> = Api::all_with(admin.clone(), &resource);
    match existing(api, kind).await {
        Ok(found) => Ok(found),
        Err(e) if not_found(&e) => {
            let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
            let crd = format!("{plural}.{group}");
            match crds.get_opt(&crd).await {
                Ok(None) => Ok(Vec::new()),
                Ok(Some(_)) => Err(e).context(format!("CustomResourceDefinition {crd} exists but its {version} list is not served")),
                Err(c) => Err(c).context(format!("reading CustomResourceDefinition {crd} after its list answered 404; refusing, since it cannot tell whether the cluster has {kind}s")),
            }
        }
        Err(e) => Err(e),
    }
}

/// Ok when the API server confirms that the CRD `plural.group` does not exist; an error when it
/// exists or that cannot be told.
async fn crd_absent(admin: &Client, plural: &str, group: &str) -> anyhow::Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    let crd = format!("{plural}.{group}");
    match crds.get_opt(&crd).await {
        Ok(None) => Ok(()),
        Ok(Some(_)) => bail!("CustomResourceDefinition {crd} exists but its list is not served"),
        Err(e) => Err(e).context(format!("reading CustomResourceDefinition {crd}")),
    }
}

fn not_found(e: &anyhow::Error) -> bool {
    matches!(e.downcast_ref::<kube::Error>(), Some(kube::Error::Api(s)) if s.code == 404)
}

/// The object `name` of `api`, if it exists. An error other than 404 refuses.
async fn named<K>(
    api: &Api<K>,
    kind: &str,
    namespace: &str,
    name: &str,
) -> anyhow::Result<Vec<Found>>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let object = api
        .get_opt(name)
        .await
        .with_context(|| format!("reading {kind} {namespace}/{name}; refusing, since it cannot tell whether another Fleetwright keeps its state there"))?;
    Ok(object
        .iter()
        .map(|o| Found::of(o, kind, "the tick's own"))
        .collect())
}
