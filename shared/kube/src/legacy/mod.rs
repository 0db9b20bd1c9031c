//! Legacy Karpenter resources turned into v1 ones, without I/O: `karpenter.sh/v1alpha5`
//! `Provisioner` (with an inline `provider` or a `providerRef`), `karpenter.k8s.aws/v1alpha1`
//! `AWSNodeTemplate`, and the `v1beta1` `NodePool` and `EC2NodeClass`. Every field that has no
//! v1 meaning is reported as a [`Note`], never dropped silently. `fleetwright convert` prints
//! the result; cluster dumps go through the same conversion.

use std::collections::BTreeMap;

use fleetwright_core::labels::{normalize_key, ARCH, CAPACITY_TYPE};
use serde_json::{json, Map, Value};

mod node_classes;

use self::node_classes::{beta_node_class, class_from_provider, node_template};

/// The v1 objects, and what could not be mapped (or was defaulted) on the way.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Converted {
    pub nodepools: Vec<Value>,
    pub nodeclasses: Vec<Value>,
    pub notes: Vec<Note>,
}

/// One remark about a legacy object's field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// `Provisioner dev`, `AWSNodeTemplate karpenter-default`, …
    pub object: String,
    /// The legacy field, as a path: `spec.kubeletConfiguration.containerRuntime`.
    pub field: String,
    pub kind: NoteKind,
    pub reason: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoteKind {
    /// The field has no v1 equivalent; it is left out.
    Unmapped,
    /// v1 would behave differently without it, so the legacy default was written explicitly.
    Defaulted,
    /// No field of the legacy kind has this name (a misspelt or mis-indented key): dropped.
    Unknown,
}

impl std::fmt::Display for Note {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.kind {
            NoteKind::Unmapped => "not mapped",
            NoteKind::Defaulted => "defaulted",
            NoteKind::Unknown => "unknown key",
        };
        write!(
            f,
            "{}: {}: {kind}: {}",
            self.object, self.field, self.reason
        )
    }
}

/// Whether an object is one of the legacy kinds this module converts.
pub fn is_legacy(value: &Value) -> bool {
    matches!(
        (api_version(value), kind(value)),
        ("karpenter.sh/v1alpha5", "Provisioner")
            | ("karpenter.k8s.aws/v1alpha1", "AWSNodeTemplate")
            | ("karpenter.sh/v1beta1", "NodePool")
            | ("karpenter.k8s.aws/v1beta1", "EC2NodeClass")
    )
}

fn api_version(value: &Value) -> &str {
    value["apiVersion"].as_str().unwrap_or_default()
}

fn kind(value: &Value) -> &str {
    value["kind"].as_str().unwrap_or_default()
}

fn name(value: &Value) -> String {
    value["metadata"]["name"]
        .as_str()
        .unwrap_or("<unnamed>")
        .to_string()
}

/// Converts legacy objects (others are ignored). Node classes are converted first, so pools
/// can move their kubelet settings onto the class they reference, where v1 keeps them.
pub fn convert(objects: &[Value]) -> Converted {
    let mut out = Converted::default();
    let mut classes: BTreeMap<String, Value> = BTreeMap::new();
    for object in objects.iter().filter(|o| is_legacy(o)) {
        let object_name = format!("{} {}", kind(object), name(object));
        let mut notes = Notes::new(&object_name);
        let class = match kind(object) {
            "AWSNodeTemplate" => node_template(object, &mut notes),
            "EC2NodeClass" => {
                let class = beta_node_class(object, &mut notes);
                unread_in_v1::<crate::crds::EC2NodeClass>(&class, &mut notes, |c| {
                    [("spec", &c.spec.extra)].into()
                });
                class
            }
            _ => continue,
        };
        out.notes.extend(notes.list);
        classes.insert(name(object), class);
    }
    for object in objects.iter().filter(|o| is_legacy(o)) {
        let object_name = format!("{} {}", kind(object), name(object));
        let mut notes = Notes::new(&object_name);
        let pool = match kind(object) {
            "Provisioner" => provisioner(object, &mut classes, &mut notes),
            "NodePool" => {
                let pool = beta_node_pool(object, &mut classes, &mut notes);
                unread_in_v1::<crate::crds::NodePool>(&pool, &mut notes, |p| {
                    let template = &p.spec.template.spec.extra;
                    [("spec", &p.spec.extra), ("spec.template.spec", template)].into()
                });
                pool
            }
            _ => continue,
        };
        out.notes.extend(notes.list);
        out.nodepools.push(pool);
    }
    out.nodeclasses = classes.into_values().collect();
    out
}

/// Notes about one object.
struct Notes {
    object: String,
    list: Vec<Note>,
}

impl Notes {
    fn new(object: &str) -> Self {
        Notes {
            object: object.to_string(),
            list: Vec::new(),
        }
    }

    fn add(&mut self, field: &str, kind: NoteKind, reason: impl Into<String>) {
        self.list.push(Note {
            object: self.object.clone(),
            field: field.to_string(),
            kind,
            reason: reason.into(),
        });
    }

    fn unmapped(&mut self, field: &str, reason: impl Into<String>) {
        self.add(field, NoteKind::Unmapped, reason);
    }

    /// Reports every field left in `rest` (the ones no rule took) under `prefix`: no field of
    /// the legacy kind has such a name.
    fn leftovers(&mut self, prefix: &str, rest: Map<String, Value>) {
        for key in rest.keys() {
            self.add(&format!("{prefix}.{key}"), NoteKind::Unknown, UNKNOWN);
        }
    }
}

/// Notes each key of a v1beta1 object that its v1 form carries over but no v1 field reads (a
/// misspelt `requirments:`): the conversion keeps v1beta1's fields as they are, so a typo would
/// otherwise pass unseen. `extras` gives the maps of keys the v1 type keeps unread.
fn unread_in_v1<T: serde::de::DeserializeOwned>(
    v1: &Value,
    notes: &mut Notes,
    extras: impl Fn(&T) -> Vec<(&str, &BTreeMap<String, Value>)>,
) {
    let kind = kind(v1).to_string();
    let Ok((typed, unknown)) = crate::strict::typed_noting::<T>(v1.clone(), &kind) else {
        return;
    };
    let mut rest = unknown;
    for (prefix, extra) in extras(&typed) {
        rest.extend(extra.keys().map(|k| format!("{prefix}.{k}")));
    }
    for path in rest {
        notes.add(&path, NoteKind::Unknown, UNKNOWN);
    }
}

const UNKNOWN: &str =
    "no field of this kind has this name, so it is dropped (check its spelling and indentation)";

fn spec_of(object: &Value) -> Map<String, Value> {
    object["spec"].as_object().cloned().unwrap_or_default()
}

/// Metadata a converted object keeps: name, labels and annotations (not uid, resourceVersion
/// or managed fields, which belong to the old object).
fn metadata(object: &Value) -> Value {
    let mut meta = Map::new();
    meta.insert("name".into(), json!(name(object)));
    for key in ["labels", "annotations"] {
        if let Some(v) = object["metadata"].get(key).filter(|v| !v.is_null()) {
            meta.insert(key.into(), v.clone());
        }
    }
    Value::Object(meta)
}

/// Seconds as a Karpenter duration: `720h`, `30m`, `45s`.
pub fn duration(seconds: u64) -> String {
    match seconds {
        s if s > 0 && s % 3600 == 0 => format!("{}h", s / 3600),
        s if s > 0 && s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

fn seconds(value: &Value) -> Option<u64> {
    value
        .as_u64()
        .or_else(|| value.as_str().and_then(|s| s.trim().parse().ok()))
}

// ---------------------------------------------------------------- node pools

/// A Provisioner as a v1 NodePool.
fn provisioner(object: &Value, classes: &mut BTreeMap<String, Value>, notes: &mut Notes) -> Value {
    let pool_name = name(object);
    let mut spec = spec_of(object);
    let mut template_meta = Map::new();
    for key in ["labels", "annotations"] {
        if let Some(v) = spec.remove(key).filter(|v| !v.is_null()) {
            template_meta.insert(key.into(), v);
        }
    }
    let mut template = Map::new();
    let requirements = legacy_requirements(spec.remove("requirements"), notes);
    template.insert("requirements".into(), Value::Array(requirements));
    for key in ["taints", "startupTaints"] {
        if let Some(v) = spec.remove(key).filter(|v| !v.is_null()) {
            template.insert(key.into(), v);
        }
    }
    let class_name = match (spec.remove("providerRef"), spec.remove("provider")) {
        (Some(reference), provider) => {
            if provider.is_some() {
                notes.unmapped("spec.provider", "ignored: spec.providerRef is also set");
            }
            reference["name"].as_str().unwrap_or("default").to_string()
        }
        (None, Some(provider)) => {
            let meta = json!({ "name": pool_name });
            let provider = provider.as_object().cloned().unwrap_or_default();
            let class = class_from_provider(meta, provider, "spec.provider", notes);
            classes.insert(pool_name.clone(), class);
            pool_name.clone()
        }
        (None, None) => {
            notes.unmapped(
                "spec.providerRef",
                "absent: the NodePool references EC2NodeClass \"default\"",
            );
            "default".to_string()
        }
    };
    template.insert("nodeClassRef".into(), node_class_ref(&class_name));
    if let Some(kubelet) = spec.remove("kubeletConfiguration") {
        move_kubelet(
            kubelet,
            "spec.kubeletConfiguration",
            &class_name,
            classes,
            notes,
        );
    }
    let expire = spec.remove("ttlSecondsUntilExpired");
    template.insert(
        "expireAfter".into(),
        json!(expire
            .as_ref()
            .and_then(seconds)
            .map(duration)
            .unwrap_or_else(|| "Never".into())),
    );
    let disruption = legacy_disruption(
        spec.remove("ttlSecondsAfterEmpty"),
        spec.remove("consolidation"),
        notes,
    );
    let mut out = Map::new();
    out.insert(
        "template".into(),
        json!({"metadata": template_meta, "spec": template}),
    );
    out.insert("disruption".into(), disruption);
    if let Some(limits) = spec.remove("limits") {
        let mut limits = limits.as_object().cloned().unwrap_or_default();
        if let Some(resources) = limits.remove("resources") {
            out.insert("limits".into(), resources);
        }
        notes.leftovers("spec.limits", limits);
    }
    if let Some(weight) = spec.remove("weight").filter(|v| !v.is_null()) {
        out.insert("weight".into(), weight);
    }
    notes.leftovers("spec", spec);
    json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
           "metadata": metadata(object), "spec": out})
}

fn node_class_ref(name: &str) -> Value {
    json!({"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": name})
}

/// Requirements with v1 label keys, plus the legacy defaults v1 no longer applies: on-demand
/// when no capacity type is required, amd64 when no architecture is.
fn legacy_requirements(requirements: Option<Value>, notes: &mut Notes) -> Vec<Value> {
    let mut out: Vec<Value> = requirements
        .and_then(|r| r.as_array().cloned())
        .unwrap_or_default()
        .into_iter()
        .map(|mut r| {
            if let Some(key) = r["key"].as_str().map(str::to_string) {
                r["key"] = json!(normalize_key(&key));
            }
            r
        })
        .collect();
    let has = |out: &[Value], key: &str| out.iter().any(|r| r["key"] == key);
    for (key, value, why) in [
        (
            CAPACITY_TYPE,
            "on-demand",
            "legacy Provisioners without a capacity-type requirement launched on-demand only",
        ),
        (
            ARCH,
            "amd64",
            "legacy Provisioners without an architecture requirement launched amd64 only",
        ),
    ] {
        if !has(&out, key) {
            out.push(json!({"key": key, "operator": "In", "values": [value]}));
            notes.add(
                "spec.requirements",
                NoteKind::Defaulted,
                format!("{key} In [{value}]: {why}"),
            );
        }
    }
    out
}

/// `ttlSecondsAfterEmpty` → WhenEmpty after that long; `consolidation.enabled` →
/// WhenEmptyOrUnderutilized; neither → nodes were never scaled down, so WhenEmpty and Never.
fn legacy_disruption(
    after_empty: Option<Value>,
    consolidation: Option<Value>,
    notes: &mut Notes,
) -> Value {
    let consolidate = consolidation
        .as_ref()
        .and_then(|c| c["enabled"].as_bool())
        .unwrap_or(false);
    let empty = after_empty.as_ref().and_then(seconds);
    match (consolidate, empty) {
        (true, e) => {
            if e.is_some() {
                notes.unmapped(
                    "spec.ttlSecondsAfterEmpty",
                    "ignored: consolidation.enabled also removes empty nodes",
                );
            }
            json!({"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"})
        }
        (false, Some(s)) => {
            json!({"consolidationPolicy": "WhenEmpty", "consolidateAfter": duration(s)})
        }
        (false, None) => {
            json!({"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"})
        }
    }
}

/// Moves kubelet settings onto the referenced class, where v1 keeps them.
fn move_kubelet(
    kubelet: Value,
    field: &str,
    class_name: &str,
    classes: &mut BTreeMap<String, Value>,
    notes: &mut Notes,
) {
    let mut kubelet = kubelet.as_object().cloned().unwrap_or_default();
    if kubelet.remove("containerRuntime").is_some() {
        notes.unmapped(
            &format!("{field}.containerRuntime"),
            "v1 nodes always run containerd",
        );
    }
    if kubelet.is_empty() {
        return;
    }
    let Some(class) = classes.get_mut(class_name) else {
        notes.unmapped(
            field,
            format!("v1 keeps kubelet settings on the EC2NodeClass, and {class_name} is not in the input; add them to its spec.kubelet"),
        );
        return;
    };
    let existing = &class["spec"]["kubelet"];
    if !existing.is_null() && *existing != Value::Object(kubelet.clone()) {
        notes.unmapped(
            field,
            format!("EC2NodeClass {class_name} already has other kubelet settings from another pool; split the class"),
        );
        return;
    }
    class["spec"]["kubelet"] = Value::Object(kubelet);
}

/// `karpenter.sh/v1beta1` NodePool: nodeClassRef by group, `expireAfter` into the template,
/// `WhenUnderutilized` renamed, kubelet onto the class.
fn beta_node_pool(
    object: &Value,
    classes: &mut BTreeMap<String, Value>,
    notes: &mut Notes,
) -> Value {
    let mut spec = spec_of(object);
    let mut template = spec.remove("template").unwrap_or_else(|| json!({}));
    let class_name = template["spec"]["nodeClassRef"]["name"]
        .as_str()
        .unwrap_or("default")
        .to_string();
    template["spec"]["nodeClassRef"] = node_class_ref(&class_name);
    if let Some(kubelet) = template["spec"]
        .as_object_mut()
        .and_then(|s| s.remove("kubelet"))
    {
        move_kubelet(
            kubelet,
            "spec.template.spec.kubelet",
            &class_name,
            classes,
            notes,
        );
    }
    let mut disruption = spec
        .remove("disruption")
        .and_then(|d| d.as_object().cloned())
        .unwrap_or_default();
    let expire = disruption.remove("expireAfter").unwrap_or(json!("720h"));
    template["spec"]["expireAfter"] = expire;
    if disruption.get("consolidationPolicy") == Some(&json!("WhenUnderutilized")) {
        disruption.insert(
            "consolidationPolicy".into(),
            json!("WhenEmptyOrUnderutilized"),
        );
        disruption
            .entry("consolidateAfter")
            .or_insert_with(|| json!("0s"));
    }
    spec.insert("template".into(), template);
    spec.insert("disruption".into(), Value::Object(disruption));
    json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
           "metadata": metadata(object), "spec": spec})
}

#[cfg(test)]
#[path = "../../tests/unit/legacy.rs"]
mod tests;
