//! Fleetwright's kubelet expressions against Karpenter's own: every expression of the corpus
//! below, on real instance types of the embedded catalog, must compile, evaluate and round as
//! Karpenter v1.15.0's CEL environment (`pkg/cel`) does. Karpenter's answers are recorded in
//! `karpenter-cel.jsonl`, beside the question each answers; `scripts/karpenter-cel.sh --check`
//! builds `tests/karpenter-cel` (Karpenter's package, from the Go module proxy) and asks it
//! afresh, `--record` rewrites the record.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use fleetwright_core::catalog::{
    default_pods, reserved_value, Catalog, Expression, ExpressionVars, KubeletSettings,
};
use serde_json::{json, Value};

/// Instance types of every shape: small and large, burstable, Graviton, several network cards,
/// one vCPU.
const TYPES: [&str; 6] = [
    "m5.large",
    "t3.nano",
    "a1.medium",
    "c6g.16xlarge",
    "p4d.24xlarge",
    "m7i.48xlarge",
];

/// `maxPods`-style expressions: what users write, CEL's typing rules (no implicit number
/// conversion, no cross-type comparison, `dyn`), Karpenter's `min`/`max`, macros, and every way
/// an evaluation fails.
const EXPRESSIONS: &[&str] = &[
    "vcpus * 8",
    "min(vcpus * 8, 110)",
    "max(min(vcpus * 8, 110), 8)",
    "max_pods",
    "max_pods - 4",
    "min(max_pods, 58)",
    "default_enis * (ips_per_eni - 1) + 2",
    "memory_mib / 1024",
    "memory_mib / 1024 * 4",
    "double(memory_mib) / 1024.0 * 1.5",
    "double(vcpus) * 2.9",
    "max(vcpus, 2.5)",
    "min(vcpus, 7.9) * 2.0",
    "min(double(vcpus), 3.5)",
    "-0.5",
    "9223372036854775807.0 * 2.0",
    "instance_type.startsWith('m5') ? 20 : 10",
    "instance_type.endsWith('xlarge') ? 50 : 10",
    "instance_type.contains('.metal') ? 737 : max_pods",
    "instance_type.matches('^[a-z]+[0-9]+g') ? 30 : 40",
    "instance_type in ['m5.large', 't3.nano'] ? 20 : 10",
    "{'m5.large': 3, 't3.nano': 1}[instance_type]",
    "size(instance_type)",
    "instance_type.size()",
    "vcpus > 8 ? 110 : vcpus * 10",
    "vcpus >= 4 && memory_mib > 8192 ? 1 : 0",
    "[1, 2, 4].exists(x, x == vcpus) ? 1 : 2",
    "[1, 2].map(x, x * vcpus)[1]",
    "[1, 2, 3].filter(x, x > 1).size()",
    "[1, 2].all(x, x > 0) ? 1 : 0",
    "[1, 2].exists_one(x, x > 1) ? 1 : 0",
    "has({'a': 1}.a) ? 1 : 0",
    "type(vcpus) == int ? 1 : 2",
    "int(string(vcpus) + '0')",
    "vcpus % 3",
    "-vcpus",
    "true ? 1 : 2",
    "[[1]][0][0]",
    "{'a': {'b': 2}}['a']['b']",
    "dyn(1) + 1.5",
    "vcpus * 1.5",
    "1 == 1.0 ? 1 : 0",
    "1 < 1.5 ? 1 : 2",
    "double(vcpus) > 1 ? 1 : 0",
    "vcpus < 2u ? 1 : 2",
    "vcpus > 2 ? 10 : 2.5",
    "null == vcpus ? 1 : 2",
    "vcpus in [1.0] ? 1 : 0",
    "1 != 'a' ? 1 : 0",
    "min(1, 2, 3)",
    "min(vcpus, 1u)",
    "-(1u)",
    "uint(vcpus)",
    "1u",
    "[1, 'a'][0]",
    "dyn(vcpus)",
    "instance_type",
    "vcpus > 2",
    "cores * 8",
    "vcpus.foo",
    "(vcpus",
    "vcpus *",
    "memory_mib / (vcpus - 2)",
    "vcpus % (vcpus - 1)",
    "int(1e30)",
    "double(vcpus) * 1e300 * 1e300",
    "1.0 / (double(vcpus) - 2.0)",
    "9223372036854775807 + vcpus",
    "int('x')",
    "[1, 2][vcpus]",
    "{'m5.large': 3}.m5",
    "max_pods - 30",
];

/// Reservation expressions, each tried for every reservable resource: Karpenter writes the
/// result in the resource's unit, rounded up, and drops an entry that fails or is negative.
const RESERVED: &[&str] = &[
    "vcpus * 7",
    "max(60, vcpus * 30)",
    "memory_mib / 100",
    "11 * max_pods + 255",
    "vcpus - 3",
    "memory_mib / (vcpus - 2)",
    "double(vcpus) * 12.5",
    "vcpus * 1.5",
];
const RESOURCES: [&str; 4] = ["cpu", "memory", "ephemeral-storage", "pid"];

fn vars_of(name: &str) -> ExpressionVars {
    let raw = Catalog::embedded()
        .raw
        .iter()
        .find(|r| r.instance_type == name)
        .unwrap_or_else(|| panic!("{name} is in the embedded catalog"));
    ExpressionVars::of(raw, default_pods(raw, &KubeletSettings::default()))
}

fn go_vars(v: &ExpressionVars) -> Value {
    json!({
        "VCPUs": v.vcpus,
        "MemoryMiB": v.memory_mib,
        "DefaultENIs": v.default_enis,
        "IPsPerENI": v.ips_per_eni,
        "MaxPods": v.max_pods,
        "InstanceType": v.instance_type,
    })
}

/// The questions, in order: each expression on each type, then each reservation.
fn questions() -> Vec<Value> {
    let mut out = Vec::new();
    for name in TYPES {
        let vars = go_vars(&vars_of(name));
        for e in EXPRESSIONS {
            out.push(json!({"expression": e, "vars": vars}));
        }
        for e in RESERVED {
            for r in RESOURCES {
                out.push(json!({"expression": e, "resource": r, "vars": vars}));
            }
        }
    }
    out
}

fn rust_vars(v: &Value) -> ExpressionVars {
    ExpressionVars {
        vcpus: v["VCPUs"].as_i64().unwrap(),
        memory_mib: v["MemoryMiB"].as_i64().unwrap(),
        default_enis: v["DefaultENIs"].as_i64().unwrap(),
        ips_per_eni: v["IPsPerENI"].as_i64().unwrap(),
        max_pods: v["MaxPods"].as_i64().unwrap(),
        instance_type: v["InstanceType"].as_str().unwrap().to_string(),
    }
}

/// Fleetwright's answer, in the command's terms: compiles or not; the value, or an error.
fn fleetwright_answer(question: &Value) -> (bool, Option<String>) {
    let source = question["expression"].as_str().unwrap();
    let Ok(expression) = Expression::compile(source) else {
        return (false, None);
    };
    let vars = rust_vars(&question["vars"]);
    let value = match question["resource"].as_str() {
        // Karpenter drops a failing reservation: an empty value.
        Some(resource) => Some(reserved_value(resource, &expression, &vars).unwrap_or_default()),
        None => expression.evaluate(&vars).ok().map(|v| v.to_string()),
    };
    (true, value)
}

fn karpenter_answer(answer: &Value) -> (bool, Option<String>) {
    let compiles = answer["compileError"]
        .as_str()
        .unwrap_or_default()
        .is_empty();
    let value = answer["value"].as_str().map(str::to_string);
    (compiles, value)
}

/// Compares every answer; the differences, each with the question.
fn differences(questions: &[Value], answers: &[Value]) -> Vec<String> {
    let mut out = Vec::new();
    for (q, a) in questions.iter().zip(answers) {
        let asked = json!({"expression": a["expression"], "resource": a.get("resource"), "vars": a["vars"]});
        let mine = json!({"expression": q["expression"], "resource": q.get("resource"), "vars": q["vars"]});
        if asked != mine {
            out.push(format!(
                "the record answers another question ({asked} for {mine}): run scripts/karpenter-cel.sh --record"
            ));
            break;
        }
        let (ours, theirs) = (fleetwright_answer(q), karpenter_answer(a));
        if ours != theirs {
            out.push(format!(
                "{} on {}{}: Fleetwright {ours:?}, Karpenter {theirs:?} ({})",
                q["expression"],
                q["vars"]["InstanceType"],
                q.get("resource")
                    .map(|r| format!(" as {r}"))
                    .unwrap_or_default(),
                a.get("compileError")
                    .or(a.get("evalError"))
                    .unwrap_or(&Value::Null)
            ));
        }
    }
    if questions.len() != answers.len() {
        out.push(format!(
            "{} questions, {} answers: run scripts/karpenter-cel.sh --record",
            questions.len(),
            answers.len()
        ));
    }
    out
}

fn record_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/karpenter-cel.jsonl")
}

fn parse_lines(text: &str) -> Vec<Value> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

#[test]
fn expressions_compile_evaluate_and_round_as_karpenters_own() {
    let questions = questions();
    let record = std::fs::read_to_string(record_path()).expect("the recorded answers");
    let diff = differences(&questions, &parse_lines(&record));
    assert!(diff.is_empty(), "{}", diff.join("\n"));
}

/// Asks the command built by `scripts/karpenter-cel.sh` (its path in `FLEETWRIGHT_KARPENTER_CEL`);
/// with `FLEETWRIGHT_KARPENTER_CEL_RECORD` set, writes its answers as the record.
#[test]
#[ignore = "needs the Go command: scripts/karpenter-cel.sh --check"]
fn expressions_agree_with_karpenters_command() {
    let bin = std::env::var("FLEETWRIGHT_KARPENTER_CEL").expect("FLEETWRIGHT_KARPENTER_CEL");
    let questions = questions();
    let mut child = Command::new(bin)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the command runs");
    let mut input = String::new();
    for q in &questions {
        input.push_str(&q.to_string());
        input.push('\n');
    }
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "the command failed");
    let text = String::from_utf8(out.stdout).unwrap();
    if std::env::var_os("FLEETWRIGHT_KARPENTER_CEL_RECORD").is_some() {
        std::fs::write(record_path(), &text).unwrap();
    }
    let diff = differences(&questions, &parse_lines(&text));
    assert!(diff.is_empty(), "{}", diff.join("\n"));
}
