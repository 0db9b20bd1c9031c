//! Keys a reader would otherwise drop without a word: a key that no field of the object's kind
//! reads (a typo such as `requirments:` or `limit:`), and a key given twice in one mapping (YAML
//! keeps the last one). Each is an [`InputWarning`] that names the object and the key's path;
//! the CLI prints them, and `--strict` makes them errors. Reading one object as its type
//! ([`typed`], [`typed_noting`]) lives here too, so that every reader names the object and the
//! failing field the same way.

use std::fmt;

use serde::de::{DeserializeOwned, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::error::KubeError;

/// One key the reader ignored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputWarning {
    /// `Kind namespace/name`, or the document when the key is outside any object.
    pub object: String,
    /// The key's path inside the object (`spec.template.spec.requirments`).
    pub path: String,
    pub problem: Problem,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Problem {
    /// No field of the object's kind has this name: the key and its value are ignored.
    Unknown,
    /// The key appears twice in one mapping: only its last value is read.
    Duplicate,
    /// The object's kind differs from one Fleetwright reads only in case (`Nodepool`): the
    /// object is ignored. `path` holds the kind meant.
    MisspeltKind,
    /// Another object of the same kind, namespace and name comes later in the input: this one
    /// is ignored, as `kubectl apply` would leave only the last.
    DuplicateObject,
    /// A NodePool whose class is another provider's (`path` is its `nodeClassRef`): not
    /// Fleetwright's, so it is ignored.
    Foreign,
    /// A field the kind (or its CRD) requires is missing or empty: `kubectl apply` refuses the
    /// object, though the plan can be made without it.
    Required,
    /// A `nodeClassRef.group` written with a version (`karpenter.k8s.aws/v1`): Karpenter's CRD
    /// refuses it, so `kubectl apply` would fail; it is read without the version.
    VersionedGroup,
    /// A disruption budget's `schedule` that Karpenter's CRD admits but no cron parser reads
    /// (`CRON_TZ=…`, a misspelt day): as Karpenter, the NodePool allows no disruption for any
    /// reason, while it still provisions.
    BadSchedule,
}

impl fmt::Display for InputWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.problem {
            Problem::Unknown => match moved_in_v1(&self.object, &self.path) {
                Some(hint) => write!(
                    f,
                    "{}: field {}: not read by Karpenter v1, so it is ignored: {hint}",
                    self.object, self.path
                ),
                None => write!(
                    f,
                    "{}: field {}: unknown key: no field of this kind has this name, so it is ignored (check its spelling and indentation)",
                    self.object, self.path
                ),
            },
            Problem::Duplicate => write!(
                f,
                "{}: field {}: duplicate key: it appears more than once in one mapping, and only its last value is read",
                self.object, self.path
            ),
            Problem::DuplicateObject => write!(
                f,
                "{}: field {}: duplicate object: another of the same kind and name comes later in the input, and only the last is read",
                self.object, self.path
            ),
            Problem::Foreign => write!(
                f,
                "{}: field {}: another provider's class, not an EC2NodeClass: the NodePool is not Fleetwright's, so it is ignored",
                self.object, self.path
            ),
            Problem::Required => write!(
                f,
                "{}: field {}: required, so `kubectl apply` refuses the object without it (the plan is made without it)",
                self.object, self.path
            ),
            Problem::VersionedGroup => write!(
                f,
                "{}: field {}: a group takes no version, and Karpenter's CRD refuses one, so `kubectl apply` would fail (it is read without the version)",
                self.object, self.path
            ),
            Problem::BadSchedule => write!(
                f,
                "{}: field {}: not a cron schedule (five fields, or @daily, @weekly, ...; days of the week 0-6 or names; no time zone: budgets run in UTC), so the NodePool allows no disruption for any reason, as Karpenter's does (it still provisions)",
                self.object, self.path
            ),
            Problem::MisspeltKind => write!(
                f,
                "{}: field kind: not a kind Fleetwright reads, so the object is ignored (did you mean {}?)",
                self.object, self.path
            ),
        }
    }
}

/// Where a field of a v1beta1 NodePool went in v1, for the fields a migration leaves behind.
fn moved_in_v1(object: &str, path: &str) -> Option<&'static str> {
    if !object.starts_with("NodePool ") {
        return None;
    }
    match path {
        "spec.template.spec.kubelet" => {
            Some("in v1 the kubelet settings are the EC2NodeClass's spec.kubelet")
        }
        "spec.disruption.expireAfter" => Some("in v1 it is spec.template.spec.expireAfter"),
        "spec.template.spec.nodeClassRef.apiVersion" => {
            Some("in v1 nodeClassRef takes group (karpenter.k8s.aws) and kind")
        }
        _ => None,
    }
}

/// One step of a path inside a document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    Key(String),
    Index(usize),
}

/// Renders a path as `spec.requirements[0].key`.
pub fn render(steps: &[Step]) -> String {
    let mut out = String::new();
    for step in steps {
        match step {
            Step::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Step::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// Reads one YAML (or JSON) document into a JSON value, with the path of every key that
/// appeared twice in its mapping.
pub fn document<'de, D>(de: D) -> Result<(Value, Vec<Vec<Step>>), D::Error>
where
    D: serde::Deserializer<'de>,
{
    let mut path = Vec::new();
    let mut duplicates = Vec::new();
    let value = Tracked {
        path: &mut path,
        duplicates: &mut duplicates,
    }
    .deserialize(de)?;
    Ok((value, duplicates))
}

/// Deserialises one object, naming it and the failing field on error.
pub fn typed<T: DeserializeOwned>(value: Value, kind: &str) -> Result<T, KubeError> {
    let object = object_name(kind, &value);
    serde_path_to_error::deserialize(value).map_err(|e| {
        let field = e.path().to_string();
        KubeError::field(object, field, e.into_inner())
    })
}

/// `Kind namespace/name` (or `Kind name`) for messages.
pub fn object_name(kind: &str, value: &Value) -> String {
    let meta = value.get("metadata");
    let name = meta
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("<unnamed>");
    match meta
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str)
    {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}

/// Deserialises one object as `T`, with the path of every key `T` does not read. An error names
/// the object and the failing field.
pub fn typed_noting<T: DeserializeOwned>(
    value: Value,
    kind: &str,
) -> Result<(T, Vec<String>), KubeError> {
    let object = object_name(kind, &value);
    let mut unknown = Vec::new();
    // Every object carries these two; some kinds' types take them from the type instead. A
    // status is the cluster's to write, and newer Kubernetes versions add fields to it (a pod's
    // `observedGeneration`) that these types may not know: nothing a user wrote is lost there.
    let mut note = |path: serde_ignored::Path| {
        let path = ignored_path(&path);
        let status = path == "status" || path.starts_with("status.");
        if path != "apiVersion" && path != "kind" && !status {
            unknown.push(path);
        }
    };
    let noting = serde_ignored::Deserializer::new(value, &mut note);
    let typed = serde_path_to_error::deserialize(noting).map_err(|e| {
        let field = e.path().to_string();
        KubeError::field(object, field, e.into_inner())
    })?;
    Ok((typed, unknown))
}

/// `spec.template.spec.requirments` from serde_ignored's path (its `Some` and newtype levels
/// left out).
fn ignored_path(path: &serde_ignored::Path) -> String {
    use serde_ignored::Path;
    let mut steps = Vec::new();
    let mut at = path;
    loop {
        match at {
            Path::Root => break,
            Path::Seq { parent, index } => {
                steps.push(Step::Index(*index));
                at = parent;
            }
            Path::Map { parent, key } => {
                steps.push(Step::Key(key.clone()));
                at = parent;
            }
            Path::Some { parent }
            | Path::NewtypeStruct { parent }
            | Path::NewtypeVariant { parent } => at = parent,
        }
    }
    steps.reverse();
    render(&steps)
}

/// The object of a document a duplicate key sits in, and the key's path inside it: a `kind:
/// List`'s items are objects of their own.
pub fn locate(document: &Value, steps: &[Step], source: &str) -> (String, String) {
    let mut object = document;
    let mut rest = steps;
    while let [Step::Key(items), Step::Index(i), tail @ ..] = rest {
        let is_list = object["kind"].as_str().is_some_and(|k| k.ends_with("List"));
        match object[items.as_str()].get(*i) {
            Some(item) if is_list && items == "items" => {
                object = item;
                rest = tail;
            }
            _ => break,
        }
    }
    let name = match object["kind"].as_str() {
        Some(kind) if !kind.is_empty() => object_name(kind, object),
        _ => source.to_string(),
    };
    (name, render(rest))
}

/// Builds a JSON value from any self-describing input, noting duplicated keys.
struct Tracked<'a> {
    path: &'a mut Vec<Step>,
    duplicates: &'a mut Vec<Vec<Step>>,
}

impl<'de> DeserializeSeed<'de> for Tracked<'_> {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, de: D) -> Result<Value, D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Tracked<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML or JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: serde::Deserializer<'de>>(self, de: D) -> Result<Value, D::Error> {
        self.deserialize(de)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        loop {
            self.path.push(Step::Index(out.len()));
            let next = seq.next_element_seed(Tracked {
                path: &mut *self.path,
                duplicates: &mut *self.duplicates,
            });
            self.path.pop();
            match next? {
                Some(v) => out.push(v),
                None => return Ok(Value::Array(out)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        let mut merged = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            self.path.push(Step::Key(key.clone()));
            if out.contains_key(&key) {
                self.duplicates.push(self.path.clone());
            }
            let value = map.next_value_seed(Tracked {
                path: &mut *self.path,
                duplicates: &mut *self.duplicates,
            });
            self.path.pop();
            if key == MERGE {
                merged.push(value?);
            } else {
                out.insert(key, value?);
            }
        }
        merge(&mut out, merged);
        Ok(Value::Object(out))
    }
}

/// YAML's merge key, which kubectl applies (`<<: *defaults`).
const MERGE: &str = "<<";

/// Applies merge keys as YAML 1.1 does: the keys of each merged mapping (of a list of them, the
/// earlier first) that the mapping does not set itself.
fn merge(out: &mut Map<String, Value>, merged: Vec<Value>) {
    for value in merged {
        let maps = match value {
            Value::Array(list) => list,
            single => vec![single],
        };
        for map in maps {
            if let Value::Object(map) = map {
                for (k, v) in map {
                    out.entry(k).or_insert(v);
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "../tests/unit/strict.rs"]
mod tests;

/// The edit distance between two words (insertions, deletions and substitutions).
pub(crate) fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, x) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, y) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(x != *y));
            diagonal = above;
        }
    }
    row[b.len()]
}
