//! Karpenter's kubelet expressions: an EC2NodeClass's `spec.kubelet.maxPods`, and its
//! `kubeReserved` and `systemReserved` values, may be CEL expressions over the instance type
//! (`vcpus`, `memory_mib`, `default_enis`, `ips_per_eni`, `max_pods`, all ints, and
//! `instance_type`, a string), evaluated per type (Karpenter v1.15, behind its `NodeClassCEL`
//! feature gate). This owns compiling them as Karpenter does (parsed, type-checked, an int or a
//! double result), evaluating them, and turning a result into a count or a reservation as
//! Karpenter does (a double truncated, cpu rounded up to 10m, memory up to 16Mi).

mod check;
#[cfg(test)]
#[path = "../../../tests/unit/catalog/expression.rs"]
mod tests;

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use cel::{Context, Env, ExecutionError, Program, Value};

use super::{KubeletSettings, RawInstanceType};
use crate::labels::{RESOURCE_CPU, RESOURCE_EPHEMERAL, RESOURCE_MEMORY};
use crate::resources::Resources;

/// The granularity a cpu reservation is rounded up to, in millicores.
const CPU_ROUNDING_MILLIS: i64 = 10;
/// The granularity a memory reservation is rounded up to, in MiB.
const MEMORY_ROUNDING_MIB: i64 = 16;
/// The resources `kubeReserved` and `systemReserved` may name (what the kubelet reserves).
pub const RESERVED_RESOURCES: [&str; 4] = ["cpu", "memory", "ephemeral-storage", "pid"];

/// A compiled kubelet expression. Equal, ordered and hashed by its text.
#[derive(Clone)]
pub struct Expression {
    source: String,
    program: Arc<Program>,
}

impl std::fmt::Debug for Expression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Expression({:?})", self.source)
    }
}

impl PartialEq for Expression {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Eq for Expression {}

impl std::hash::Hash for Expression {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.source.hash(state);
    }
}

/// What an expression sees of an instance type.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExpressionVars {
    pub vcpus: i64,
    pub memory_mib: i64,
    /// ENIs of the default network card.
    pub default_enis: i64,
    pub ips_per_eni: i64,
    /// For `maxPods`: the count without it (ENI-limited, capped by `podsPerCore`); for the
    /// reservations: the resolved count.
    pub max_pods: i64,
    pub instance_type: String,
}

impl ExpressionVars {
    /// The variables of a type, with `max_pods` as given.
    pub fn of(raw: &RawInstanceType, max_pods: i64) -> Self {
        let net = &raw.network_info;
        ExpressionVars {
            vcpus: raw.v_cpu_info.default_v_cpus,
            memory_mib: raw.memory_info.size_in_mib,
            default_enis: net
                .network_cards
                .get(net.default_network_card_index)
                .and_then(|c| c.maximum_network_interfaces)
                .unwrap_or(0),
            ips_per_eni: net.ipv4_addresses_per_interface,
            max_pods,
            instance_type: raw.instance_type.clone(),
        }
    }
}

impl Expression {
    /// Parses and type-checks `source` as Karpenter compiles it: a syntax error, an undeclared
    /// name, an operator on types it has no overload for, or a result that is not an int or a
    /// double is an error.
    pub fn compile(source: &str) -> Result<Expression, String> {
        let program = Program::compile(source).map_err(|e| one_line(&e.to_string()))?;
        check::check(program.expression())?;
        Ok(Expression {
            source: source.to_string(),
            program: Arc::new(program),
        })
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// The expression's value for one instance type: an int as it is, a double truncated
    /// toward zero as Go converts it (one outside int64's range becomes its minimum, as on
    /// amd64, and is then refused as negative); an error, a NaN or an infinity is an error.
    pub fn evaluate(&self, vars: &ExpressionVars) -> Result<i64, String> {
        let mut context = Context::with_env(environment());
        add_variables(&mut context, vars);
        match self.program.execute(&context) {
            Ok(Value::Int(v)) => Ok(v),
            Ok(Value::Float(v)) if v.is_finite() => Ok(go_int64(v)),
            Ok(Value::Float(v)) => Err(format!("expression returned a non-finite value ({v})")),
            Ok(other) => Err(format!(
                "expression returned an unexpected type ({:?})",
                other.type_of()
            )),
            Err(e) => Err(format!("evaluating expression: {e}")),
        }
    }
}

/// A parse error's text on one line (the parser draws a caret under the source).
fn one_line(text: &str) -> String {
    text.lines()
        .next()
        .unwrap_or_default()
        .trim_start_matches("ERROR: ")
        .to_string()
}

/// CEL's standard library with Karpenter's `min` and `max`, built once.
fn environment() -> Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    ENV.get_or_init(|| Arc::new(Env::stdlib())).clone()
}

fn add_variables(context: &mut Context, vars: &ExpressionVars) {
    context.add_variable_from_value("vcpus", vars.vcpus);
    context.add_variable_from_value("memory_mib", vars.memory_mib);
    context.add_variable_from_value("default_enis", vars.default_enis);
    context.add_variable_from_value("ips_per_eni", vars.ips_per_eni);
    context.add_variable_from_value("max_pods", vars.max_pods);
    context.add_variable_from_value("instance_type", vars.instance_type.clone());
    // Neither name is in CEL's standard library, so neither declaration can conflict.
    let _ = context.add_function("min", |a: Value, b: Value| extreme(a, b, Order::Least));
    let _ = context.add_function("max", |a: Value, b: Value| extreme(a, b, Order::Greatest));
}

#[derive(Clone, Copy, PartialEq)]
enum Order {
    Least,
    Greatest,
}

/// Karpenter's `min` and `max`: two ints give an int; an int with a double gives a double.
fn extreme(a: Value, b: Value, order: Order) -> Result<Value, ExecutionError> {
    let pick_first = |less: bool| (order == Order::Least) == less;
    let (x, y) = match (a, b) {
        (Value::Int(x), Value::Int(y)) => {
            return Ok(Value::Int(if pick_first(x < y) { x } else { y }))
        }
        (Value::Int(x), Value::Float(y)) => (x as f64, y),
        (Value::Float(x), Value::Int(y)) => (x, y as f64),
        (Value::Float(x), Value::Float(y)) => (x, y),
        (a, b) => {
            let name = if order == Order::Least { "min" } else { "max" };
            return Err(ExecutionError::no_such_overload(
                name,
                vec![format!("{:?}", a.type_of()), format!("{:?}", b.type_of())],
            ));
        }
    };
    Ok(Value::Float(if pick_first(x < y) { x } else { y }))
}

/// Go's `int64(v)` for a finite double: truncation toward zero; out of range, int64's minimum
/// (what amd64 gives).
fn go_int64(v: f64) -> i64 {
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if (-LIMIT..LIMIT).contains(&v) {
        v as i64
    } else {
        i64::MIN
    }
}

/// Rounds up to the next multiple of `granularity`; a value that would overflow is left as it is.
fn round_up(value: i64, granularity: i64) -> i64 {
    if value <= 0 || value % granularity == 0 || value > i64::MAX - granularity {
        return value;
    }
    (value / granularity + 1) * granularity
}

/// A reservation's result as the quantity Karpenter writes for it: cpu in millicores rounded
/// up to 10m, memory in MiB rounded up to 16Mi, ephemeral storage in GiB, anything else bare.
pub fn reserved_quantity(resource: &str, result: i64) -> String {
    match resource {
        RESOURCE_CPU => format!("{}m", round_up(result, CPU_ROUNDING_MILLIS)),
        RESOURCE_MEMORY => format!("{}Mi", round_up(result, MEMORY_ROUNDING_MIB)),
        RESOURCE_EPHEMERAL => format!("{result}Gi"),
        _ => result.to_string(),
    }
}

/// The expressions of an EC2NodeClass's kubelet settings.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct KubeletExpressions {
    pub max_pods: Option<Expression>,
    /// `kubeReserved` values that are no quantity, by resource.
    pub kube_reserved: BTreeMap<String, Expression>,
    /// `systemReserved` values that are no quantity, by resource.
    pub system_reserved: BTreeMap<String, Expression>,
}

/// Why an expression is refused: the field it is in, the type it failed for (none when it
/// does not compile), and the reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpressionError {
    /// `spec.kubelet.maxPods`, `spec.kubelet.kubeReserved.cpu`.
    pub field: String,
    pub instance_type: Option<String>,
    pub reason: String,
}

impl std::fmt::Display for ExpressionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.instance_type {
            Some(t) => write!(f, "{}: for instance type {t}: {}", self.field, self.reason),
            None => write!(f, "{}: {}", self.field, self.reason),
        }
    }
}

impl std::error::Error for ExpressionError {}

/// The field names of the reservation maps.
const KUBE_RESERVED: &str = "spec.kubelet.kubeReserved";
const SYSTEM_RESERVED: &str = "spec.kubelet.systemReserved";
pub const MAX_PODS_FIELD: &str = "spec.kubelet.maxPods";

/// Whether a reservation value is a quantity (taken as it is) rather than an expression: the
/// test Karpenter makes.
pub fn is_quantity(value: &str) -> bool {
    crate::quantity::parse_units(value).is_ok()
}

impl KubeletExpressions {
    /// Compiles the expressions of the kubelet settings as written: `maxPods` when it is a
    /// string, and each reservation value that is no quantity (of a resource the kubelet
    /// reserves). The first that does not compile is the error.
    pub fn read(
        max_pods: Option<&str>,
        kube_reserved: Option<&BTreeMap<String, String>>,
        system_reserved: Option<&BTreeMap<String, String>>,
    ) -> Result<Self, ExpressionError> {
        let compile = |field: String, source: &str| {
            Expression::compile(source).map_err(|reason| ExpressionError {
                field,
                instance_type: None,
                reason: format!("invalid CEL expression {source:?}: {reason}"),
            })
        };
        let max_pods = max_pods
            .map(|source| compile(MAX_PODS_FIELD.to_string(), source))
            .transpose()?;
        let reserved = |field: &str, map: Option<&BTreeMap<String, String>>| {
            let mut out = BTreeMap::new();
            for (resource, value) in map.into_iter().flatten() {
                if is_quantity(value) {
                    continue;
                }
                let at = format!("{field}.{resource}");
                if !RESERVED_RESOURCES.contains(&resource.as_str()) {
                    return Err(ExpressionError {
                        field: at,
                        instance_type: None,
                        reason: format!("only {} can be reserved", RESERVED_RESOURCES.join(", ")),
                    });
                }
                out.insert(resource.clone(), compile(at, value)?);
            }
            Ok(out)
        };
        Ok(KubeletExpressions {
            max_pods,
            kube_reserved: reserved(KUBE_RESERVED, kube_reserved)?,
            system_reserved: reserved(SYSTEM_RESERVED, system_reserved)?,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.max_pods.is_none() && self.kube_reserved.is_empty() && self.system_reserved.is_empty()
    }

    /// Where each expression is, with its text.
    pub fn fields(&self) -> Vec<(String, &str)> {
        let mut out: Vec<(String, &str)> = self
            .max_pods
            .iter()
            .map(|e| (MAX_PODS_FIELD.to_string(), e.source()))
            .collect();
        for (field, map) in [
            (KUBE_RESERVED, &self.kube_reserved),
            (SYSTEM_RESERVED, &self.system_reserved),
        ] {
            out.extend(
                map.iter()
                    .map(|(r, e)| (format!("{field}.{r}"), e.source())),
            );
        }
        out
    }
}

/// The kubelet values one instance type resolves to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResolvedKubelet {
    /// The pods the node holds: `maxPods` (static, evaluated or ENI-limited), capped by
    /// `podsPerCore`.
    pub pods: i64,
    /// `maxPods`'s value, when it is an expression.
    pub max_pods: Option<i64>,
    /// The `kubeReserved` expressions' quantities (`"480m"`), by resource.
    pub kube_reserved: BTreeMap<String, String>,
    /// The `systemReserved` expressions' quantities, by resource.
    pub system_reserved: BTreeMap<String, String>,
}

/// The pods a type holds without `maxPods`: ENI-limited, capped by `podsPerCore`.
pub fn default_pods(raw: &RawInstanceType, kubelet: &KubeletSettings) -> i64 {
    cap_per_core(super::eni_limited_pods(raw), raw, kubelet)
}

fn cap_per_core(pods: i64, raw: &RawInstanceType, kubelet: &KubeletSettings) -> i64 {
    match kubelet.pods_per_core.filter(|p| *p > 0) {
        Some(per_core) => pods.min(per_core * raw.v_cpu_info.default_v_cpus),
        None => pods,
    }
}

/// `maxPods`'s expression for one type, as Karpenter resolves it: evaluated against the count
/// without it (an expression cannot see its own result), and refused outside `[0, 2^31 - 1]`.
fn evaluate_max_pods(
    expression: &Expression,
    raw: &RawInstanceType,
    kubelet: &KubeletSettings,
) -> Result<i64, ExpressionError> {
    let vars = ExpressionVars::of(raw, default_pods(raw, kubelet));
    let fail = |reason: String| ExpressionError {
        field: MAX_PODS_FIELD.to_string(),
        instance_type: Some(raw.instance_type.clone()),
        reason,
    };
    let result = expression.evaluate(&vars).map_err(fail)?;
    if !(0..=i64::from(i32::MAX)).contains(&result) {
        return Err(fail(format!(
            "maxPods expression evaluated to {result}, outside the valid range [0, {}]",
            i32::MAX
        )));
    }
    Ok(result)
}

/// A reservation expression's quantity for one type, as Karpenter resolves it: the result
/// written as [`reserved_quantity`] writes it; an error or a negative result as the reason.
pub fn reserved_value(
    resource: &str,
    expression: &Expression,
    vars: &ExpressionVars,
) -> Result<String, String> {
    match expression.evaluate(vars)? {
        v if v >= 0 => Ok(reserved_quantity(resource, v)),
        v => Err(format!("expression evaluated to a negative value ({v})")),
    }
}

/// One reservation map's expressions for a type, as quantities. `strict`: a failure or a
/// negative result is the error (Karpenter's validation); otherwise the entry is left out and
/// its default holds (Karpenter's resolution).
fn evaluate_reserved(
    field: &str,
    expressions: &BTreeMap<String, Expression>,
    vars: &ExpressionVars,
    strict: bool,
) -> Result<BTreeMap<String, String>, ExpressionError> {
    let mut out = BTreeMap::new();
    for (resource, expression) in expressions {
        match reserved_value(resource, expression, vars) {
            Ok(quantity) => {
                out.insert(resource.clone(), quantity);
            }
            Err(reason) if strict => {
                return Err(ExpressionError {
                    field: format!("{field}.{resource}"),
                    instance_type: Some(vars.instance_type.clone()),
                    reason,
                })
            }
            Err(_) => {}
        }
    }
    Ok(out)
}

/// The kubelet values of one type. `strict` is Karpenter's validation (every failure is the
/// error); otherwise only a `maxPods` failure is (Karpenter then lists no type for the class),
/// and a reservation that fails keeps its default.
pub fn resolve_kubelet(
    raw: &RawInstanceType,
    kubelet: &KubeletSettings,
    strict: bool,
) -> Result<ResolvedKubelet, ExpressionError> {
    let expressions = &kubelet.expressions;
    let max_pods = expressions
        .max_pods
        .as_ref()
        .map(|e| evaluate_max_pods(e, raw, kubelet))
        .transpose()?;
    let pods = match max_pods.or(kubelet.max_pods) {
        Some(count) => cap_per_core(count, raw, kubelet),
        None => default_pods(raw, kubelet),
    };
    let mut resolved = ResolvedKubelet {
        pods,
        max_pods,
        ..Default::default()
    };
    if expressions.kube_reserved.is_empty() && expressions.system_reserved.is_empty() {
        return Ok(resolved);
    }
    let vars = ExpressionVars::of(raw, pods);
    resolved.kube_reserved =
        evaluate_reserved(KUBE_RESERVED, &expressions.kube_reserved, &vars, strict)?;
    resolved.system_reserved =
        evaluate_reserved(SYSTEM_RESERVED, &expressions.system_reserved, &vars, strict)?;
    Ok(resolved)
}

/// Reservation quantities as resources (each was written by [`reserved_quantity`]).
pub(crate) fn reserved_resources(quantities: &BTreeMap<String, String>) -> Resources {
    let mut out = Resources::default();
    for (resource, quantity) in quantities {
        // The quantities are this module's own, so each parses.
        let _ = out.set_quantity(resource, quantity);
    }
    out
}
