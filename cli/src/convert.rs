//! `fleetwright convert FILE…`: legacy Karpenter resources (v1alpha5 Provisioner, v1alpha1
//! AWSNodeTemplate, v1beta1 NodePool and EC2NodeClass) printed as v1 NodePools and
//! EC2NodeClasses, with every field that could not be mapped (or was defaulted) on stderr.

use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Args;
use fleetwright_crds::{EC2NodeClass, NodePool};
use fleetwright_kube::dump::typed;
use fleetwright_kube::strict::{self, InputWarning, Problem};
use fleetwright_kube::{legacy, yaml};
use serde_json::Value;

#[derive(Debug, Args)]
pub struct ConvertArgs {
    /// Files holding legacy objects: YAML or JSON, one document, a stream, or a `kind: List`.
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

pub fn run(args: &ConvertArgs) -> anyhow::Result<()> {
    use std::io::Write;
    let mut objects = Vec::new();
    let mut warnings = Vec::new();
    for file in &args.files {
        objects.extend(read(file, &mut warnings)?);
    }
    let converted = legacy::convert(&objects);
    // A key no legacy field has is a misspelt key like any other: a warning, an error with
    // --strict.
    warnings.extend(
        (converted.notes.iter())
            .filter(|n| n.kind == legacy::NoteKind::Unknown)
            .map(|n| InputWarning {
                object: n.object.clone(),
                path: n.field.clone(),
                problem: Problem::Unknown,
            }),
    );
    crate::input::check(&warnings)?;
    if converted.nodepools.is_empty() && converted.nodeclasses.is_empty() {
        bail!(
            "no Provisioner, AWSNodeTemplate or v1beta1 NodePool/EC2NodeClass found in the input"
        );
    }
    let mut out = String::new();
    for class in &converted.nodeclasses {
        let checked: EC2NodeClass = typed(class.clone(), "EC2NodeClass")?;
        out.push_str("---\n");
        out.push_str(&yaml::to_string(&serde_json::to_value(&checked)?));
    }
    for pool in &converted.nodepools {
        let checked: NodePool = typed(pool.clone(), "NodePool")?;
        out.push_str("---\n");
        out.push_str(&yaml::to_string(&serde_json::to_value(&checked)?));
    }
    for note in (converted.notes.iter()).filter(|n| n.kind != legacy::NoteKind::Unknown) {
        tracing::warn!("{note}");
    }
    write!(std::io::stdout(), "{out}")?;
    Ok(())
}

/// Every object of a file, lists flattened; a key given twice in one mapping is a warning.
fn read(path: &PathBuf, warnings: &mut Vec<InputWarning>) -> anyhow::Result<Vec<Value>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut out = Vec::new();
    for (i, document) in serde_yaml::Deserializer::from_str(&text).enumerate() {
        let name = format!("{} (document {})", path.display(), i + 1);
        let (value, duplicates) = strict::document(document).with_context(|| name.clone())?;
        for steps in duplicates {
            let (object, path) = strict::locate(&value, &steps, &name);
            warnings.push(InputWarning {
                object,
                path,
                problem: Problem::Duplicate,
            });
        }
        flatten(value, &mut out);
    }
    Ok(out)
}

fn flatten(value: Value, out: &mut Vec<Value>) {
    match value.get("items").and_then(Value::as_array) {
        Some(items) if value["kind"].as_str().is_some_and(|k| k.ends_with("List")) => {
            for item in items.clone() {
                flatten(item, out);
            }
        }
        _ if value.is_null() => {}
        _ => out.push(value),
    }
}
