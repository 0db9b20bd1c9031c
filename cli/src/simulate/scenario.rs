//! Simulation scenarios: the initial cluster as Kubernetes objects, and a timeline of what happens
//! to it (deployments scaled or deleted, spot interruptions, a new AMI, capacity shortages, a
//! NodePool or EC2NodeClass applied anew).
//! Read from YAML; the embedded default replays the Karpenter hands-on.

use std::collections::BTreeMap;

use anyhow::{bail, Context};
use fleetwright_crds::conditions;
use fleetwright_kube::convert::duration_seconds;
use fleetwright_kube::strict::{self, InputWarning, Problem};
use serde::Deserialize;
use serde_json::Value;

/// The scenario `fleetwright simulate` runs with no `--scenario`.
pub const DEFAULT: &str = include_str!("../../../examples/simulate/inflate.yaml");

/// A scenario file.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScenarioFile {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// How long to simulate (a Go duration, `20m`).
    pub duration: String,
    /// How often the tick runs on its schedule, besides the nudges (the EventBridge rule's
    /// rate; `1m` unless set).
    #[serde(default)]
    pub schedule: Option<String>,
    /// The cluster at the start: NodePools, EC2NodeClasses, Deployments, DaemonSets, pods,
    /// PodDisruptionBudgets (a list of objects, or a `kind: List`).
    pub objects: Vec<Value>,
    #[serde(default)]
    pub timeline: Vec<StepFile>,
    /// The functions' settings for the run (`FLEETWRIGHT_NODE_REPAIR: "true"`), as the
    /// deployment's environment; only those that change decisions ([`SETTINGS`]).
    #[serde(default)]
    pub settings: BTreeMap<String, String>,
    /// Capacity reservations in the simulated account, which EC2NodeClasses select with
    /// `capacityReservationSelectorTerms` (by id or tags).
    #[serde(default)]
    pub reservations: Vec<ReservationFile>,
}

/// A capacity reservation of a scenario.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReservationFile {
    pub id: String,
    pub instance_type: String,
    pub zone: String,
    /// Instances it holds.
    pub count: usize,
    /// `default` (the default) or `capacity-block`.
    #[serde(default = "default_kind")]
    pub r#type: String,
    /// When it ends, from the start (`90m`); a capacity block's instances are reclaimed then.
    #[serde(default)]
    pub ends_at: Option<String>,
    #[serde(default)]
    pub interruptible: bool,
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
}

fn default_kind() -> String {
    "default".into()
}

/// A validated capacity reservation: `ends` in seconds from the start.
#[derive(Clone, Debug, PartialEq)]
pub struct Reservation {
    pub file: ReservationFile,
    pub ends: Option<i64>,
}

/// The settings a scenario may set.
pub const SETTINGS: [&str; 10] = [
    "FLEETWRIGHT_NODE_REPAIR",
    "FLEETWRIGHT_LEGACY_NODE_REPAIR",
    "FLEETWRIGHT_REBOOT_FOR_REPAIR",
    "FLEETWRIGHT_MIN_VALUES_POLICY",
    "FLEETWRIGHT_REBALANCE",
    "FLEETWRIGHT_NODE_CLASS_CEL",
    "FLEETWRIGHT_TERMINATE_FIRST_DRIFT",
    "FLEETWRIGHT_TERMINATE_FIRST_REPAIR",
    "FLEETWRIGHT_SPOT_TO_SPOT_CONSOLIDATION",
    "FLEETWRIGHT_FOLLOW_UP",
];

fn default_seed() -> u64 {
    1
}

/// One timeline entry: when, and exactly one action.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StepFile {
    pub at: String,
    pub scale: Option<Scale>,
    pub delete: Option<Delete>,
    pub interrupt: Option<Interrupt>,
    pub change_ami: Option<ChangeAmi>,
    pub ice: Option<Ice>,
    /// A NodePool, EC2NodeClass or NodeOverlay that replaces the one of its name, as `kubectl
    /// apply` would (a pool narrowed, a template relabelled, `replicas` changed, a price set).
    pub apply: Option<Value>,
    pub fail: Option<Fail>,
}

/// A node of a NodePool fails (one holding pods, picked with the seed): its `condition` takes
/// `status`, with `reason`, and keeps it (`Ready` `Unknown`: its kubelet is gone;
/// `StorageReady` `False`: the node monitoring agent reports a bad disk;
/// `AcceleratedHardwareReady` `False` with reason `NvidiaXID79Error`: a GPU fault).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Fail {
    pub nodepool: String,
    #[serde(default = "ready")]
    pub condition: String,
    /// Unknown for `Ready` (its kubelet gone), False for the node monitoring agent's
    /// conditions, when not given.
    #[serde(default)]
    pub status: String,
    #[serde(default = "simulated")]
    pub reason: String,
    /// The fault outlives the node's reboots (a reboot for repair clears one that does not).
    #[serde(default)]
    pub persists: bool,
}

impl Fail {
    /// The condition, status and reason the node takes.
    pub fn failure(&self) -> (&str, &str, &str) {
        (&self.condition, &self.status, &self.reason)
    }
}

fn simulated() -> String {
    "Simulated".into()
}

fn ready() -> String {
    conditions::READY.into()
}

/// Scale a deployment to `replicas`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Scale {
    pub deployment: String,
    pub replicas: u32,
}

/// Delete a deployment (and its pods).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Delete {
    pub deployment: String,
}

/// A spot interruption warning for `count` instances of a NodePool (picked with the seed).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Interrupt {
    pub nodepool: String,
    #[serde(default = "one")]
    pub count: usize,
}

fn one() -> usize {
    1
}

/// A new AMI release: every EC2NodeClass (or the one named) resolves to new images.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChangeAmi {
    pub nodeclass: Option<String>,
}

pub use fleetwright_sim::Ice;

/// What happens at a step.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    Scale(Scale),
    Delete(Delete),
    Interrupt(Interrupt),
    ChangeAmi(ChangeAmi),
    Ice(Ice),
    Apply(Box<Value>),
    Fail(Fail),
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Action::Scale(s) => write!(f, "scale deployment {} to {}", s.deployment, s.replicas),
            Action::Delete(d) => write!(f, "delete deployment {}", d.deployment),
            Action::Interrupt(i) => {
                write!(
                    f,
                    "interrupt {} instance(s) of nodepool {}",
                    i.count, i.nodepool
                )
            }
            Action::ChangeAmi(c) => match &c.nodeclass {
                Some(n) => write!(f, "release a new AMI for EC2NodeClass {n}"),
                None => write!(f, "release a new AMI"),
            },
            Action::Apply(o) => write!(
                f,
                "apply {} {}",
                o["kind"].as_str().unwrap_or_default(),
                o["metadata"]["name"].as_str().unwrap_or_default()
            ),
            Action::Fail(x) => write!(
                f,
                "fail a node of nodepool {} ({}={})",
                x.nodepool, x.condition, x.status
            ),
            Action::Ice(i) => write!(
                f,
                "insufficient capacity for {} in {} ({})",
                i.instance_type.as_deref().unwrap_or("every type"),
                i.zone.as_deref().unwrap_or("every zone"),
                i.capacity_type.as_deref().unwrap_or("any capacity type")
            ),
        }
    }
}

/// A timeline step, validated.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// Seconds from the start.
    pub at: i64,
    pub action: Action,
}

/// A validated scenario.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: String,
    pub description: String,
    pub seed: u64,
    /// Seconds to simulate.
    pub duration: i64,
    /// Seconds between scheduled ticks (at least 1).
    pub schedule: i64,
    /// Objects by kind.
    pub objects: Vec<Value>,
    /// Steps in time order.
    pub timeline: Vec<Step>,
    /// The functions' settings ([`SETTINGS`]).
    pub settings: BTreeMap<String, String>,
    pub reservations: Vec<Reservation>,
    /// Keys of the file that nothing reads: given twice, or unknown to their object's kind.
    pub warnings: Vec<InputWarning>,
}

fn seconds(text: &str, field: &str) -> anyhow::Result<i64> {
    match duration_seconds(text) {
        Ok(Some(s)) if s >= 0 => Ok(s),
        Ok(_) => bail!("{field}: {text:?} is not a duration from the start (`90s`, `5m`)"),
        Err(e) => bail!("{field}: {e}"),
    }
}

impl StepFile {
    fn validate(self, index: usize) -> anyhow::Result<Step> {
        let field = format!("timeline[{index}]");
        let at = seconds(&self.at, &format!("{field}.at"))?;
        let mut actions: Vec<Action> = Vec::new();
        actions.extend(self.scale.map(Action::Scale));
        actions.extend(self.delete.map(Action::Delete));
        actions.extend(self.interrupt.map(Action::Interrupt));
        actions.extend(self.change_ami.map(Action::ChangeAmi));
        actions.extend(self.ice.map(Action::Ice));
        if let Some(mut fail) = self.fail {
            if fail.status.is_empty() {
                fail.status = match fail.condition == conditions::READY {
                    true => "Unknown".into(),
                    false => "False".into(),
                };
            }
            if !["True", "False", "Unknown"].contains(&fail.status.as_str()) {
                bail!(
                    "{field}.fail.status: {:?} is not True, False or Unknown",
                    fail.status
                );
            }
            actions.push(Action::Fail(fail));
        }
        if let Some(object) = self.apply {
            let kind = object["kind"].as_str().unwrap_or_default();
            if !matches!(kind, "NodePool" | "EC2NodeClass" | "NodeOverlay") {
                bail!("{field}.apply.kind: {kind:?} is not NodePool, EC2NodeClass or NodeOverlay");
            }
            if object["metadata"]["name"].as_str().is_none() {
                bail!("{field}.apply.metadata.name: missing");
            }
            actions.push(Action::Apply(Box::new(object)));
        }
        if actions.len() != 1 {
            bail!(
                "{field}: needs exactly one of scale, delete, interrupt, changeAmi, ice, apply, fail (found {})",
                actions.len()
            );
        }
        Ok(Step {
            at,
            action: actions.remove(0),
        })
    }
}

/// Flattens `kind: List` objects.
fn flatten(objects: Vec<Value>) -> Vec<Value> {
    let mut out = Vec::new();
    for o in objects {
        match (o["kind"].as_str(), o["items"].as_array()) {
            (Some("List"), Some(items)) => out.extend(flatten(items.clone())),
            _ => out.push(o),
        }
    }
    out
}

/// Checks that every deployment and NodePool a step names exists among the objects (or is
/// applied by an earlier step, for a NodePool).
fn check_deployments(objects: &[Value], timeline: &[Step]) -> anyhow::Result<()> {
    let named = |kind: &str| -> BTreeMap<&str, ()> {
        objects
            .iter()
            .filter(|o| o["kind"] == kind)
            .filter_map(|o| o["metadata"]["name"].as_str().map(|n| (n, ())))
            .collect()
    };
    let deployments = named("Deployment");
    let mut pools = named("NodePool");
    for (i, step) in timeline.iter().enumerate() {
        let (kind, name) = match &step.action {
            Action::Scale(s) => ("deployment", &s.deployment),
            Action::Delete(d) => ("deployment", &d.deployment),
            Action::Fail(f) => ("nodepool", &f.nodepool),
            Action::Apply(o) if o["kind"] == "NodePool" => {
                pools.extend(o["metadata"]["name"].as_str().map(|n| (n, ())));
                continue;
            }
            _ => continue,
        };
        let known = match kind {
            "deployment" => &deployments,
            _ => &pools,
        };
        if !known.contains_key(name.as_str()) {
            bail!("timeline[{i}]: {kind} {name:?} is not among the scenario's objects");
        }
    }
    Ok(())
}

impl Scenario {
    /// Parses and validates a scenario; errors name the source and the field.
    pub fn parse(text: &str, source: &str) -> anyhow::Result<Scenario> {
        let de = serde_yaml::Deserializer::from_str(text);
        let file: ScenarioFile = serde_path_to_error::deserialize(de)
            .map_err(|e| anyhow::anyhow!("{source}: {}: {}", e.path(), e.inner()))?;
        // Read again for the keys given twice, which the typed read keeps the last of.
        let mut warnings = match serde_yaml::Deserializer::from_str(text).next() {
            Some(de) => match strict::document(de) {
                Ok((value, duplicates)) => duplicate_keys(&value, &duplicates, source),
                Err(_) => Vec::new(),
            },
            None => Vec::new(),
        };
        let duration = seconds(&file.duration, "duration").with_context(|| source.to_string())?;
        let schedule = match &file.schedule {
            Some(text) => seconds(text, "schedule").with_context(|| source.to_string())?,
            None => 60,
        };
        if schedule < 1 {
            bail!(
                "{source}: schedule: {:?} is shorter than a second",
                file.schedule.unwrap_or_default()
            );
        }
        let mut timeline = file
            .timeline
            .into_iter()
            .enumerate()
            .map(|(i, s)| s.validate(i))
            .collect::<anyhow::Result<Vec<_>>>()
            .with_context(|| source.to_string())?;
        timeline.sort_by_key(|s| s.at);
        let objects = flatten(file.objects);
        for (i, o) in objects.iter().enumerate() {
            if o["kind"].as_str().is_none() || o["metadata"]["name"].as_str().is_none() {
                bail!("{source}: objects[{i}]: needs kind and metadata.name");
            }
        }
        check_deployments(&objects, &timeline).with_context(|| source.to_string())?;
        warnings.extend(read_objects(&objects, source)?);
        warnings.extend(read_applied(&objects, &timeline, source)?);
        if let Some(name) = file
            .settings
            .keys()
            .find(|k| !SETTINGS.contains(&k.as_str()))
        {
            bail!(
                "{source}: settings.{name}: not a setting a scenario can set (one of {SETTINGS:?})"
            );
        }
        let mut reservations = Vec::new();
        for (i, r) in file.reservations.into_iter().enumerate() {
            let field = format!("reservations[{i}]");
            if !["default", "capacity-block"].contains(&r.r#type.as_str()) {
                bail!(
                    "{source}: {field}.type: {:?} is not default or capacity-block",
                    r.r#type
                );
            }
            let ends = match &r.ends_at {
                Some(text) => Some(
                    seconds(text, &format!("{field}.endsAt"))
                        .with_context(|| source.to_string())?,
                ),
                None if r.r#type == "capacity-block" => {
                    bail!("{source}: {field}.endsAt: a capacity block needs its end")
                }
                None => None,
            };
            reservations.push(Reservation { file: r, ends });
        }
        Ok(Scenario {
            name: file.name,
            description: file.description,
            seed: file.seed,
            duration,
            schedule,
            objects,
            timeline,
            settings: file.settings,
            reservations,
            warnings,
        })
    }
}

/// The keys given twice in a scenario file, each named with the object it is in (or the file).
fn duplicate_keys(
    file: &Value,
    duplicates: &[Vec<strict::Step>],
    source: &str,
) -> Vec<InputWarning> {
    duplicates
        .iter()
        .map(|steps| {
            let (object, path) = match steps.as_slice() {
                [strict::Step::Key(k), strict::Step::Index(i), rest @ ..] if k == "objects" => {
                    strict::locate(&file["objects"][*i], rest, source)
                }
                _ => (source.to_string(), strict::render(steps)),
            };
            InputWarning {
                object,
                path,
                problem: Problem::Duplicate,
            }
        })
        .collect()
}

/// The scenario's objects read as a tick reads a file: the keys their kinds do not read (the
/// warnings), and every object that does not read or convert, all named at once before
/// anything runs rather than left out of every tick. Each workload is read with at least one
/// replica, so that a template the timeline only scales up later is checked too; expressions in
/// a class's kubelet settings are compiled whatever the gate, which only decides whether the
/// class is used.
fn read_objects(objects: &[Value], source: &str) -> anyhow::Result<Vec<InputWarning>> {
    let items: Vec<Value> = objects.iter().cloned().map(at_least_one_replica).collect();
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
    let mut dump = fleetwright_kube::dump::parse(&list.to_string(), source)?;
    dump.node_class_cel = true;
    let refused = fleetwright_kube::convert::take_snapshot_isolating(&mut dump).1;
    if refused.is_empty() {
        return Ok(dump.warnings);
    }
    let errors: Vec<String> = refused.iter().map(|r| format!("  {}", r.error)).collect();
    bail!(
        "{source}: {} object(s) do not read:\n{}",
        refused.len(),
        errors.join("\n")
    )
}

/// The objects the timeline applies, each read (as [`read_objects`] reads the scenario's) in
/// the cluster as it is once applied, so that a NodePool applied with a bad operator or a
/// misspelt key is named before anything runs, not left out of every tick after it lands. What
/// the cluster before it already said is not said again.
fn read_applied(
    objects: &[Value],
    timeline: &[Step],
    source: &str,
) -> anyhow::Result<Vec<InputWarning>> {
    let mut cluster = objects.to_vec();
    let mut said: Vec<String> = Vec::new();
    let base = read_objects(&cluster, source)?;
    said.extend(base.iter().map(ToString::to_string));
    let mut warnings = Vec::new();
    for step in timeline {
        let Action::Apply(object) = &step.action else {
            continue;
        };
        let same = |o: &Value| {
            o["kind"] == object["kind"] && o["metadata"]["name"] == object["metadata"]["name"]
        };
        match cluster.iter_mut().find(|o| same(o)) {
            Some(old) => *old = (**object).clone(),
            None => cluster.push((**object).clone()),
        }
        let read = read_objects(&cluster, source).map_err(|e| {
            let (kind, name) = (&object["kind"], &object["metadata"]["name"]);
            let (kind, name) = (kind.as_str(), name.as_str());
            let (kind, name) = (kind.unwrap_or_default(), name.unwrap_or_default());
            anyhow::anyhow!(
                "{e}\n  (once the timeline applies {kind} {name} at {}s)",
                step.at
            )
        })?;
        for w in read {
            if !said.contains(&w.to_string()) {
                said.push(w.to_string());
                warnings.push(w);
            }
        }
    }
    Ok(warnings)
}

/// A Deployment, ReplicaSet or StatefulSet scaled to zero, with one replica.
fn at_least_one_replica(mut object: Value) -> Value {
    let scaled = ["Deployment", "ReplicaSet", "StatefulSet"]
        .contains(&object["kind"].as_str().unwrap_or_default());
    if scaled && object["spec"]["replicas"].as_i64() == Some(0) {
        object["spec"]["replicas"] = 1.into();
    }
    object
}

#[cfg(test)]
#[path = "../../tests/unit/simulate/scenario.rs"]
mod tests;
