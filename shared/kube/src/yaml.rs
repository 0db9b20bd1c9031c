//! YAML output that YAML 1.1 readers (kubectl, go-yaml v2) read back unchanged: any string that
//! such a reader could take for a boolean, a number, null or a timestamp is double-quoted, so a
//! tag value `"no"` stays a string instead of becoming `false`.

use serde_json::Value;

/// One document, block style, ending in a newline.
pub fn to_string(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value, 0, Context::Document);
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

#[derive(Clone, Copy, PartialEq)]
enum Context {
    Document,
    MapValue,
    ListItem,
}

fn write_value(out: &mut String, value: &Value, indent: usize, context: Context) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            let mut first = true;
            for (k, v) in map {
                let skip_indent = first && context == Context::ListItem;
                if context == Context::MapValue && first {
                    out.push('\n');
                }
                if !skip_indent {
                    out.push_str(&" ".repeat(indent));
                }
                first = false;
                out.push_str(&scalar(k));
                out.push(':');
                write_value(out, v, indent + 2, Context::MapValue);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            if context == Context::MapValue {
                out.push('\n');
            }
            for (i, item) in items.iter().enumerate() {
                if !(i == 0 && context == Context::ListItem) {
                    out.push_str(&" ".repeat(indent));
                }
                out.push_str("- ");
                let nested = match item {
                    Value::Object(m) => !m.is_empty(),
                    Value::Array(a) => !a.is_empty(),
                    _ => false,
                };
                if nested {
                    write_value(out, item, indent + 2, Context::ListItem);
                } else {
                    out.push_str(&inline(item));
                    out.push('\n');
                }
            }
        }
        other => {
            if context == Context::MapValue {
                out.push(' ');
            }
            out.push_str(&inline(other));
            out.push('\n');
        }
    }
}

/// Scalars and empty collections on one line.
fn inline(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => scalar(s),
        Value::Array(_) => "[]".into(),
        Value::Object(_) => "{}".into(),
    }
}

/// A string, plain when no YAML 1.1 or 1.2 reader could read it as anything but that string.
fn scalar(s: &str) -> String {
    if is_plain_safe(s) {
        s.to_string()
    } else {
        // A JSON string is a YAML double-quoted scalar; serializing a &str cannot fail.
        serde_json::to_string(s).unwrap_or_else(|_| format!("{s:?}"))
    }
}

fn is_plain_safe(s: &str) -> bool {
    const WORDS: [&str; 22] = [
        "y", "yes", "n", "no", "true", "false", "on", "off", "null", "~", "nan", ".nan", "inf",
        ".inf", "-inf", "-.inf", "+.inf", "<<", "=", "none", "yes!", "",
    ];
    let first = s.chars().next();
    !WORDS.contains(&s.to_ascii_lowercase().as_str())
        && first.is_some_and(|c| c.is_ascii_alphabetic() || c == '/' || c == '_')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./@".contains(c))
        && !s
            .chars()
            .all(|c| c.is_ascii_digit() || "._-+:eE".contains(c))
}

#[cfg(test)]
#[path = "../tests/unit/yaml.rs"]
mod tests;
