//! The type check Karpenter's CEL environment makes when it compiles a kubelet expression: every
//! identifier declared (the six instance-type variables, or a macro's own), every operator and
//! function applied to operands of a type it has an overload for (CEL converts no number
//! implicitly: `vcpus * 1.5` is refused, `double(vcpus) * 1.5` is not), and the result an int
//! or a double. The interpreter only finds such mistakes when a branch runs; Karpenter refuses
//! the expression before any instance type is tried, and so does this.

use std::collections::BTreeMap;

use cel::common::ast::{CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr, LiteralValue};

/// A CEL type, as far as the check needs to tell types apart.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Ty {
    Int,
    Uint,
    Double,
    Bool,
    String,
    Bytes,
    Null,
    List(Box<Ty>),
    Map(Box<Ty>, Box<Ty>),
    /// A type value (`int`, `type(x)`).
    Type,
    /// Known only when evaluated: matches every overload.
    Dyn,
}

impl std::fmt::Display for Ty {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ty::Int => f.write_str("int"),
            Ty::Uint => f.write_str("uint"),
            Ty::Double => f.write_str("double"),
            Ty::Bool => f.write_str("bool"),
            Ty::String => f.write_str("string"),
            Ty::Bytes => f.write_str("bytes"),
            Ty::Null => f.write_str("null_type"),
            Ty::List(e) => write!(f, "list({e})"),
            Ty::Map(k, v) => write!(f, "map({k}, {v})"),
            Ty::Type => f.write_str("type"),
            Ty::Dyn => f.write_str("dyn"),
        }
    }
}

/// The variables Karpenter declares, with their types.
pub(super) const VARIABLES: [(&str, Ty); 6] = [
    ("vcpus", Ty::Int),
    ("memory_mib", Ty::Int),
    ("default_enis", Ty::Int),
    ("ips_per_eni", Ty::Int),
    ("max_pods", Ty::Int),
    ("instance_type", Ty::String),
];

/// The identifiers that name types.
const TYPE_NAMES: [&str; 11] = [
    "int",
    "uint",
    "double",
    "bool",
    "string",
    "bytes",
    "list",
    "map",
    "null_type",
    "type",
    "dyn",
];

/// Checks an expression: its result type must be an int or a double.
pub(super) fn check(expr: &IdedExpr) -> Result<Ty, String> {
    let ty = Scope::default().check(expr)?;
    match ty {
        Ty::Int | Ty::Double => Ok(ty),
        other => Err(format!("expression must return int or double, not {other}")),
    }
}

/// The identifiers a macro's comprehension binds, over the declared variables.
#[derive(Clone, Default)]
struct Scope {
    locals: BTreeMap<String, Ty>,
}

impl Scope {
    fn check(&self, e: &IdedExpr) -> Result<Ty, String> {
        match &e.expr {
            Expr::Literal(l) => Ok(literal(l)),
            Expr::Ident(name) => self.ident(name),
            Expr::List(list) => {
                let items = self.all(&list.elements)?;
                Ok(Ty::List(Box::new(common(&items))))
            }
            Expr::Map(map) => self.map(&map.entries),
            Expr::Select(s) => {
                let operand = self.check(&s.operand)?;
                select(&operand, &s.field, s.test)
            }
            Expr::Call(call) => self.call(call),
            Expr::Comprehension(c) => self.comprehension(c),
            Expr::Struct(s) => Err(format!("undeclared reference to '{}'", s.type_name)),
            Expr::Unspecified => Err("empty expression".into()),
        }
    }

    fn all(&self, exprs: &[IdedExpr]) -> Result<Vec<Ty>, String> {
        exprs.iter().map(|e| self.check(e)).collect()
    }

    fn ident(&self, name: &str) -> Result<Ty, String> {
        if let Some(ty) = self.locals.get(name) {
            return Ok(ty.clone());
        }
        if let Some((_, ty)) = VARIABLES.iter().find(|(n, _)| *n == name) {
            return Ok(ty.clone());
        }
        if TYPE_NAMES.contains(&name) {
            return Ok(Ty::Type);
        }
        Err(format!("undeclared reference to '{name}'"))
    }

    fn map(&self, entries: &[cel::common::ast::IdedEntryExpr]) -> Result<Ty, String> {
        let mut keys = Vec::new();
        let mut values = Vec::new();
        for entry in entries {
            match &entry.expr {
                EntryExpr::MapEntry(m) => {
                    keys.push(self.check(&m.key)?);
                    values.push(self.check(&m.value)?);
                }
                EntryExpr::StructField(f) => {
                    return Err(format!("unexpected field {:?} in a map", f.field))
                }
            }
        }
        Ok(Ty::Map(Box::new(common(&keys)), Box::new(common(&values))))
    }

    fn comprehension(&self, c: &ComprehensionExpr) -> Result<Ty, String> {
        let range = self.check(&c.iter_range)?;
        let (first, second) = match &range {
            Ty::List(item) => (Ty::Int, (**item).clone()),
            Ty::Map(key, value) => ((**key).clone(), (**value).clone()),
            Ty::Dyn => (Ty::Dyn, Ty::Dyn),
            other => return Err(format!("expression of type '{other}' cannot be the range of a comprehension (must be list, map, or dynamic)")),
        };
        let mut inner = self.clone();
        match &c.iter_var2 {
            Some(var2) => {
                inner.locals.insert(c.iter_var.clone(), first);
                inner.locals.insert(var2.clone(), second);
            }
            None if matches!(range, Ty::List(_)) => {
                inner.locals.insert(c.iter_var.clone(), second);
            }
            None => {
                inner.locals.insert(c.iter_var.clone(), first);
            }
        }
        let init = self.check(&c.accu_init)?;
        inner.locals.insert(c.accu_var.clone(), init.clone());
        let condition = inner.check(&c.loop_cond)?;
        expect_bool(&condition, "loop condition")?;
        let step = inner.check(&c.loop_step)?;
        let accu = join(&init, &step).ok_or_else(|| {
            format!("comprehension step of type '{step}' does not match its start, '{init}'")
        })?;
        inner.locals.insert(c.accu_var.clone(), accu);
        inner.check(&c.result)
    }

    fn call(&self, call: &CallExpr) -> Result<Ty, String> {
        let args = self.all(&call.args)?;
        let name = call.func_name.as_str();
        if let Some(target) = &call.target {
            let target = self.check(target)?;
            return member(name, &target, &args);
        }
        match name {
            "_?_:_" => conditional(&args),
            "_==_" | "_!=_" => equality(name, &args),
            "_[_]" => index(&args),
            "@in" => membership(&args),
            "_+_" => plus(&args),
            _ => function(name, &args),
        }
    }
}

fn literal(l: &LiteralValue) -> Ty {
    match l {
        LiteralValue::Boolean(_) => Ty::Bool,
        LiteralValue::Bytes(_) => Ty::Bytes,
        LiteralValue::Double(_) => Ty::Double,
        LiteralValue::Int(_) => Ty::Int,
        LiteralValue::Null => Ty::Null,
        LiteralValue::String(_) => Ty::String,
        LiteralValue::UInt(_) => Ty::Uint,
    }
}

/// The one type every item has, else `dyn` (a list or map literal of mixed types).
fn common(items: &[Ty]) -> Ty {
    items
        .iter()
        .try_fold(None::<Ty>, |acc, t| match acc {
            None => Some(Some(t.clone())),
            Some(a) => join(&a, t).map(Some),
        })
        .flatten()
        .unwrap_or(Ty::Dyn)
}

/// The type two types are both of, where they agree (`dyn` agrees with anything, and keeps
/// the more precise side); None where they do not.
fn join(a: &Ty, b: &Ty) -> Option<Ty> {
    match (a, b) {
        (Ty::Dyn, other) | (other, Ty::Dyn) => Some(other.clone()),
        (Ty::List(x), Ty::List(y)) => Some(Ty::List(Box::new(join(x, y)?))),
        (Ty::Map(k1, v1), Ty::Map(k2, v2)) => {
            Some(Ty::Map(Box::new(join(k1, k2)?), Box::new(join(v1, v2)?)))
        }
        (x, y) if x == y => Some(x.clone()),
        _ => None,
    }
}

fn no_overload(name: &str, args: &[Ty]) -> String {
    let list: Vec<String> = args.iter().map(Ty::to_string).collect();
    format!(
        "found no matching overload for '{name}' applied to '({})'",
        list.join(", ")
    )
}

fn expect_bool(ty: &Ty, what: &str) -> Result<(), String> {
    match ty {
        Ty::Bool | Ty::Dyn => Ok(()),
        other => Err(format!("{what} must be bool, not {other}")),
    }
}

fn select(operand: &Ty, field: &str, test: bool) -> Result<Ty, String> {
    let value = match operand {
        Ty::Map(_, value) => (**value).clone(),
        Ty::Dyn => Ty::Dyn,
        other => {
            return Err(format!(
                "type '{other}' does not support field selection ('.{field}')"
            ))
        }
    };
    Ok(if test { Ty::Bool } else { value })
}

fn conditional(args: &[Ty]) -> Result<Ty, String> {
    let [condition, yes, no] = args else {
        return Err(no_overload("_?_:_", args));
    };
    if !matches!(condition, Ty::Bool | Ty::Dyn) {
        return Err(no_overload("_?_:_", args));
    }
    join(yes, no).ok_or_else(|| no_overload("_?_:_", args))
}

fn equality(name: &str, args: &[Ty]) -> Result<Ty, String> {
    match args {
        [a, b] if join(a, b).is_some() => Ok(Ty::Bool),
        _ => Err(no_overload(name, args)),
    }
}

fn index(args: &[Ty]) -> Result<Ty, String> {
    match args {
        [Ty::List(item), Ty::Int | Ty::Dyn] => Ok((**item).clone()),
        [Ty::Map(key, value), k] if join(key, k).is_some() => Ok((**value).clone()),
        [Ty::Dyn, _] => Ok(Ty::Dyn),
        _ => Err(no_overload("_[_]", args)),
    }
}

fn membership(args: &[Ty]) -> Result<Ty, String> {
    match args {
        [x, Ty::List(item)] if join(x, item).is_some() => Ok(Ty::Bool),
        [x, Ty::Map(key, _)] if join(x, key).is_some() => Ok(Ty::Bool),
        [_, Ty::Dyn] => Ok(Ty::Bool),
        _ => Err(no_overload("@in", args)),
    }
}

fn plus(args: &[Ty]) -> Result<Ty, String> {
    match args {
        [Ty::List(x), Ty::List(y)] => join(x, y)
            .map(|t| Ty::List(Box::new(t)))
            .ok_or_else(|| no_overload("_+_", args)),
        _ => overloaded("_+_", args),
    }
}

/// A member call: `instance_type.startsWith("m5")`, `name.size()`.
fn member(name: &str, target: &Ty, args: &[Ty]) -> Result<Ty, String> {
    const STRING_TESTS: &[(&[Ty], Ty)] = &[(&[Ty::String, Ty::String], Ty::Bool)];
    let mut all = vec![target.clone()];
    all.extend(args.iter().cloned());
    match name {
        "size" => overloaded(name, &all),
        "startsWith" | "endsWith" | "contains" | "matches" => pick(name, STRING_TESTS, &all),
        _ => Err(format!("undeclared reference to '{name}'")),
    }
}

fn function(name: &str, args: &[Ty]) -> Result<Ty, String> {
    match passthrough(name, args) {
        Some(result) => result,
        None => overloaded(name, args),
    }
}

/// `dyn(x)` and `type(x)`, which take any one argument.
fn passthrough(name: &str, args: &[Ty]) -> Option<Result<Ty, String>> {
    let result = match name {
        "dyn" => Ty::Dyn,
        "type" => Ty::Type,
        _ => return None,
    };
    Some(match args {
        [_] => Ok(result),
        _ => Err(no_overload(name, args)),
    })
}

fn overloaded(name: &str, args: &[Ty]) -> Result<Ty, String> {
    let table = table(name).ok_or_else(|| format!("undeclared reference to '{name}'"))?;
    pick(name, table, args)
}

/// The overloads of an operator or global function: argument types and result. `min` and
/// `max` are Karpenter's own (int or double, two arguments); the rest are CEL's standard ones.
fn table(name: &str) -> Option<&'static [(&'static [Ty], Ty)]> {
    use Ty::*;
    const ARITHMETIC: &[(&[Ty], Ty)] = &[
        (&[Int, Int], Int),
        (&[Uint, Uint], Uint),
        (&[Double, Double], Double),
    ];
    const PLUS: &[(&[Ty], Ty)] = &[
        (&[Int, Int], Int),
        (&[Uint, Uint], Uint),
        (&[Double, Double], Double),
        (&[String, String], String),
        (&[Bytes, Bytes], Bytes),
    ];
    const REMAINDER: &[(&[Ty], Ty)] = &[(&[Int, Int], Int), (&[Uint, Uint], Uint)];
    const NEGATE: &[(&[Ty], Ty)] = &[(&[Int], Int), (&[Double], Double)];
    // Karpenter's environment has no cross-type numeric comparisons: `1 < 1.5` is refused.
    const ORDER: &[(&[Ty], Ty)] = &[
        (&[Int, Int], Bool),
        (&[Uint, Uint], Bool),
        (&[Double, Double], Bool),
        (&[String, String], Bool),
        (&[Bytes, Bytes], Bool),
        (&[Bool, Bool], Bool),
    ];
    const LOGIC: &[(&[Ty], Ty)] = &[(&[Bool, Bool], Bool)];
    const NOT: &[(&[Ty], Ty)] = &[(&[Bool], Bool)];
    const EXTREMES: &[(&[Ty], Ty)] = &[
        (&[Int, Int], Int),
        (&[Double, Double], Double),
        (&[Int, Double], Double),
        (&[Double, Int], Double),
    ];
    const TO_INT: &[(&[Ty], Ty)] = &[
        (&[Int], Int),
        (&[Uint], Int),
        (&[Double], Int),
        (&[String], Int),
    ];
    const TO_UINT: &[(&[Ty], Ty)] = &[
        (&[Int], Uint),
        (&[Uint], Uint),
        (&[Double], Uint),
        (&[String], Uint),
    ];
    const TO_DOUBLE: &[(&[Ty], Ty)] = &[
        (&[Int], Double),
        (&[Uint], Double),
        (&[Double], Double),
        (&[String], Double),
    ];
    const TO_STRING: &[(&[Ty], Ty)] = &[
        (&[Int], String),
        (&[Uint], String),
        (&[Double], String),
        (&[String], String),
        (&[Bytes], String),
        (&[Bool], String),
    ];
    const TO_BOOL: &[(&[Ty], Ty)] = &[(&[Bool], Bool), (&[String], Bool)];
    const TO_BYTES: &[(&[Ty], Ty)] = &[(&[Bytes], Bytes), (&[String], Bytes)];
    const SIZE: &[(&[Ty], Ty)] = &[(&[String], Int), (&[Bytes], Int)];
    const MATCHES: &[(&[Ty], Ty)] = &[(&[String, String], Bool)];
    Some(match name {
        "_+_" => PLUS,
        "_-_" | "_*_" | "_/_" => ARITHMETIC,
        "_%_" => REMAINDER,
        "-_" => NEGATE,
        "_<_" | "_<=_" | "_>_" | "_>=_" => ORDER,
        "_&&_" | "_||_" => LOGIC,
        "!_" | "@not_strictly_false" => NOT,
        "min" | "max" => EXTREMES,
        "int" => TO_INT,
        "uint" => TO_UINT,
        "double" => TO_DOUBLE,
        "string" => TO_STRING,
        "bool" => TO_BOOL,
        "bytes" => TO_BYTES,
        "size" => SIZE,
        "matches" => MATCHES,
        _ => return None,
    })
}

/// The result of the overloads whose arguments match (`dyn` matches any, a list or map of
/// `dyn` any list or map); the one result they share, else `dyn`.
fn pick(name: &str, table: &[(&[Ty], Ty)], args: &[Ty]) -> Result<Ty, String> {
    if name == "size" {
        if let [Ty::List(_) | Ty::Map(_, _)] = args {
            return Ok(Ty::Int);
        }
    }
    let results: Vec<&Ty> = table
        .iter()
        .filter(|(params, _)| {
            params.len() == args.len() && params.iter().zip(args).all(|(p, a)| accepts(p, a))
        })
        .map(|(_, result)| result)
        .collect();
    match results.as_slice() {
        [] => Err(no_overload(name, args)),
        [first, rest @ ..] if rest.iter().all(|r| r == first) => Ok((*first).clone()),
        _ => Ok(Ty::Dyn),
    }
}

fn accepts(param: &Ty, arg: &Ty) -> bool {
    match (param, arg) {
        (_, Ty::Dyn) => true,
        (Ty::List(_), Ty::List(_)) => true,
        (Ty::Map(_, _), Ty::Map(_, _)) => true,
        (p, a) => p == a,
    }
}
