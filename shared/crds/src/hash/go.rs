//! A model of the Go values Karpenter hashes ([`Go`]), and `hashstructure/v2`'s walk over them
//! with the options Karpenter passes (FormatV2, `SlicesAsSets`, `IgnoreZeroValue`, `ZeroNil`),
//! with 64-bit FNV-1 (Go's `fnv.New64`). Also the Go renderings the hashes need:
//! `resource.Quantity`'s canonical form (a `hash:"string"` field), `time.ParseDuration`, and
//! `encoding/json`'s `Marshal` of untyped JSON ([`go_json`]).

use serde_json::{Number, Value};

use super::HashError;

/// A Go value, as far as hashing sees it.
#[derive(Clone, Debug, PartialEq)]
pub enum Go {
    /// A string, or a named string type (`TaintEffect`, `InterfaceType`, ...).
    Str(String),
    Int32(i32),
    Int64(i64),
    Bool(bool),
    /// A pointer: nil, or what it points at.
    Ptr(Option<Box<Go>>),
    /// A slice: nil, or its elements (hashed as a set).
    Slice(Option<Vec<Go>>),
    /// A map: nil, or its entries.
    Map(Option<Vec<(Go, Go)>>),
    /// A struct: its type's name and its exported fields, in declaration order.
    Struct(&'static str, Vec<Field>),
    /// A `time.Time` in the local zone (a `metav1.Time` read from JSON), taken to be UTC as in
    /// Karpenter's container.
    Time {
        unix: i64,
        nanos: u32,
    },
}

/// One exported field of a Go struct.
#[derive(Clone, Debug, PartialEq)]
pub struct Field {
    pub name: &'static str,
    pub value: Go,
    /// `hash:"ignore"`: left out of the hash, but still part of the struct's zero test.
    pub ignored: bool,
}

impl Go {
    pub fn str(s: impl Into<String>) -> Go {
        Go::Str(s.into())
    }

    /// A pointer to `value` when there is one, nil otherwise.
    pub fn ptr(value: Option<Go>) -> Go {
        Go::Ptr(value.map(Box::new))
    }

    /// A map of strings to strings.
    pub fn string_map<'a>(
        entries: Option<impl IntoIterator<Item = (&'a String, &'a String)>>,
    ) -> Go {
        Go::Map(entries.map(|e| {
            e.into_iter()
                .map(|(k, v)| (Go::str(k.as_str()), Go::str(v.as_str())))
                .collect()
        }))
    }

    /// Go's `reflect.Value.IsZero`.
    fn is_zero(&self) -> bool {
        match self {
            Go::Str(s) => s.is_empty(),
            Go::Int32(n) => *n == 0,
            Go::Int64(n) => *n == 0,
            Go::Bool(b) => !b,
            Go::Ptr(p) => p.is_none(),
            Go::Slice(s) => s.is_none(),
            Go::Map(m) => m.is_none(),
            Go::Struct(_, fields) => fields.iter().all(|f| f.value.is_zero()),
            Go::Time { .. } => false,
        }
    }
}

impl Field {
    pub fn new(name: &'static str, value: Go) -> Field {
        Field {
            name,
            value,
            ignored: false,
        }
    }

    /// A field tagged `hash:"ignore"`.
    pub fn ignored(name: &'static str, value: Go) -> Field {
        Field {
            name,
            value,
            ignored: true,
        }
    }
}

/// `hashstructure.Hash(v, FormatV2, &HashOptions{SlicesAsSets: true, IgnoreZeroValue: true,
/// ZeroNil: true})`.
pub fn hash(v: &Go) -> u64 {
    match v {
        Go::Str(s) => fnv(s.as_bytes()),
        Go::Int32(n) => fnv(&n.to_le_bytes()),
        Go::Int64(n) => fnv(&n.to_le_bytes()),
        Go::Bool(b) => fnv(&[u8::from(*b)]),
        Go::Ptr(Some(inner)) => hash(inner),
        // Only reached for a nil element of a slice, which Karpenter's objects do not hold.
        Go::Ptr(None) => fnv(&0_i64.to_le_bytes()),
        Go::Slice(items) => items.iter().flatten().fold(0, |h, item| h ^ hash(item)),
        Go::Map(entries) => {
            let mixed = entries
                .iter()
                .flatten()
                .fold(0, |h, (k, v)| h ^ ordered(hash(k), hash(v)));
            finish(mixed)
        }
        Go::Struct(name, fields) => fields
            .iter()
            .filter(|f| !f.ignored && !f.value.is_zero())
            .fold(fnv(name.as_bytes()), |h, f| {
                finish(h ^ ordered(fnv(f.name.as_bytes()), hash(&f.value)))
            }),
        Go::Time { unix, nanos } => fnv(&time_binary(*unix, *nanos)),
    }
}

/// `time.Time.MarshalBinary` (version 1) of a time in a zone at offset zero that is not `UTC`
/// itself (what `metav1.Time`'s `.Local()` gives in a container whose local zone is UTC).
fn time_binary(unix: i64, nanos: u32) -> Vec<u8> {
    const UNIX_TO_INTERNAL: i64 = 62_135_596_800;
    let mut out = vec![1_u8];
    out.extend_from_slice(&(unix + UNIX_TO_INTERNAL).to_be_bytes());
    out.extend_from_slice(&nanos.to_be_bytes());
    out.extend_from_slice(&0_i16.to_be_bytes());
    out
}

fn ordered(a: u64, b: u64) -> u64 {
    let mut bytes = [0_u8; 16];
    bytes[..8].copy_from_slice(&a.to_le_bytes());
    bytes[8..].copy_from_slice(&b.to_le_bytes());
    fnv(&bytes)
}

fn finish(a: u64) -> u64 {
    fnv(&a.to_le_bytes())
}

/// 64-bit FNV-1 (multiply, then xor).
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        h.wrapping_mul(0x0100_0000_01b3) ^ u64::from(*b)
    })
}

/// `time.ParseDuration`, in nanoseconds: a sequence of decimal numbers, each with an optional
/// fraction and a unit (`ns`, `us`, `µs`, `ms`, `s`, `m`, `h`), optionally signed (`"1h30m"`,
/// `"1.5s"`, `"-2m"`, `"0"`).
pub fn go_duration_nanos(text: &str) -> Result<i64, String> {
    let bad = || format!("{text:?} is not a Go duration");
    let (negative, mut rest) = match text.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(bad());
    }
    let mut total: i128 = 0;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .ok_or_else(bad)?;
        let (number, tail) = rest.split_at(digits);
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let scale: i128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(bad()),
        };
        total += scaled(number, scale).ok_or_else(bad)?;
        rest = tail;
    }
    let total = if negative { -total } else { total };
    i64::try_from(total).map_err(|_| bad())
}

/// `number` (digits with an optional fraction) times `scale`, with the fraction's excess
/// digits dropped as Go drops them.
fn scaled(number: &str, scale: i128) -> Option<i128> {
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    let whole: i128 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let mut value = whole.checked_mul(scale)?;
    let mut unit = scale;
    for d in fraction.chars() {
        unit /= 10;
        value += i128::from(d.to_digit(10)?) * unit;
    }
    Some(value)
}

/// `json.Marshal` of a JSON value as Go holds one the API server served (integers as `int64`,
/// other numbers as `float64`): object keys sorted, no spaces, Go's number forms, and strings
/// escaped as Go escapes them (`<`, `>`, `&`, U+2028 and U+2029 too).
pub fn go_json(value: &Value) -> String {
    let mut out = String::new();
    write_json(value, &mut out);
    out
}

fn write_json(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&go_number(n)),
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            // Go sorts a map's keys by their bytes, whatever order the map kept them in.
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(key, out);
                out.push(':');
                write_json(item, out);
            }
            out.push('}');
        }
    }
}

/// A number as Go writes the `int64` or `float64` the API server decoded it into: a number
/// beyond `int64` is a `float64` there.
fn go_number(n: &Number) -> String {
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    // A u64 beyond i64, or a float: both are float64 in Go.
    go_float(n.as_f64().unwrap_or_default())
}

/// `encoding/json`'s float64 form: the shortest digits that read back the same, in plain
/// decimals, or in exponent form (`1e+21`, `1e-7`) below 1e-6 and from 1e21.
fn go_float(f: f64) -> String {
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let text = format!("{f:e}");
        return match text.split_once('e') {
            Some((digits, exp)) if !exp.starts_with('-') => format!("{digits}e+{exp}"),
            _ => text,
        };
    }
    format!("{f}")
}

fn write_string(s: &str, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{0}'..='\u{1f}' | '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let code = c as u32;
                out.push_str("\\u");
                for shift in [12, 8, 4, 0] {
                    out.push(char::from(HEX[((code >> shift) & 0xf) as usize]));
                }
            }
            _ => out.push(c),
        }
    }
    out.push('"');
}

/// A quantity's value: `mantissa × 10^exponent`, and the format its suffix chose.
struct Amount {
    mantissa: i128,
    exponent: i32,
    binary: bool,
}

/// `resource.Quantity.String()`: the canonical form Kubernetes writes a quantity in (`"20Gi"`,
/// `"1Gi"` for `"1024Mi"`, `"1500m"` for `"1.5"`).
pub fn quantity_string(text: &str) -> Result<String, HashError> {
    let amount = parse_quantity(text).ok_or_else(|| HashError {
        field: "quantity".into(),
        reason: format!("{text:?} is not a Kubernetes quantity"),
    })?;
    Ok(canonical(amount))
}

fn parse_quantity(text: &str) -> Option<Amount> {
    let (negative, rest) = match text.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let end = rest
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(end);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    let digits: i128 = format!("{whole}{fraction}").parse().ok()?;
    let digits = if negative { -digits } else { digits };
    let places = i32::try_from(fraction.len()).ok()?;
    let (base2, base10, binary) = suffix_scale(suffix)?;
    let mantissa = digits.checked_mul(1_i128.checked_shl(base2)?)?;
    let mut amount = Amount {
        mantissa,
        exponent: base10 - places,
        binary,
    };
    round_up_to_nano(&mut amount);
    Some(amount)
}

/// The power of two and of ten a suffix multiplies by, and whether it is a binary suffix.
fn suffix_scale(suffix: &str) -> Option<(u32, i32, bool)> {
    let decimal = |e: i32| Some((0, e, false));
    match suffix {
        "" => decimal(0),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => Some((10, 0, true)),
        "Mi" => Some((20, 0, true)),
        "Gi" => Some((30, 0, true)),
        "Ti" => Some((40, 0, true)),
        "Pi" => Some((50, 0, true)),
        "Ei" => Some((60, 0, true)),
        _ => {
            let e = suffix.strip_prefix(['e', 'E'])?;
            Some((0, e.parse().ok()?, false))
        }
    }
}

/// Kubernetes keeps no precision below a nanounit and rounds up to it.
fn round_up_to_nano(a: &mut Amount) {
    while a.exponent < -9 {
        let rounded = a.mantissa.div_euclid(10) + i128::from(a.mantissa.rem_euclid(10) != 0);
        a.mantissa = rounded;
        a.exponent += 1;
    }
}

fn canonical(a: Amount) -> String {
    if a.mantissa == 0 {
        return "0".into();
    }
    if a.binary {
        if let Some(whole) = whole_value(&a).filter(|w| w.abs() >= 1024) {
            let (amount, powers) = remove_factors(whole, 1024);
            let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
                .get(powers as usize)
                .copied()
                .unwrap_or("");
            return format!("{amount}{suffix}");
        }
    }
    let (mut amount, times) = remove_factors(a.mantissa, 10);
    let mut exponent = a.exponent + times as i32;
    match exponent.rem_euclid(3) {
        1 => {
            amount *= 10;
            exponent -= 1;
        }
        2 => {
            amount *= 100;
            exponent -= 2;
        }
        _ => {}
    }
    let suffix = match exponent {
        -9 => "n".to_string(),
        -6 => "u".into(),
        -3 => "m".into(),
        0 => String::new(),
        3 => "k".into(),
        6 => "M".into(),
        9 => "G".into(),
        12 => "T".into(),
        15 => "P".into(),
        18 => "E".into(),
        e => format!("e{e}"),
    };
    format!("{amount}{suffix}")
}

/// The value as a whole number, when it is one.
fn whole_value(a: &Amount) -> Option<i128> {
    if a.exponent >= 0 {
        return a
            .mantissa
            .checked_mul(10_i128.checked_pow(a.exponent as u32)?);
    }
    let divisor = 10_i128.checked_pow(a.exponent.unsigned_abs())?;
    (a.mantissa % divisor == 0).then(|| a.mantissa / divisor)
}

fn remove_factors(mut value: i128, base: i128) -> (i128, u32) {
    let mut times = 0;
    while value != 0 && value % base == 0 {
        value /= base;
        times += 1;
    }
    (value, times)
}

#[cfg(test)]
#[path = "../../tests/unit/hash/go.rs"]
mod tests;
