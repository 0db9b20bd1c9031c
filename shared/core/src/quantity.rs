//! Kubernetes resource quantities (`100m`, `1.5`, `512Mi`, `2Gi`, `1e3`) parsed into integers.
//!
//! CPU is kept in millicores and everything else in base units (bytes, counts), always rounded up,
//! the way the kubelet and the scheduler round requests.

use crate::error::CoreError;

/// Parses a quantity into base units scaled by `scale` (1000 for millicores, 1 for bytes), rounding up.
pub fn parse_scaled(text: &str, scale: i64) -> Result<i64, CoreError> {
    let text = text.trim();
    let bad = || CoreError::Quantity(text.to_string());
    if text.is_empty() {
        return Err(bad());
    }
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let (number, exponent) = match suffix.strip_prefix(['e', 'E']) {
        Some(exp) if !number.is_empty() => {
            let e: i32 = exp.parse().map_err(|_| bad())?;
            (number, 10f64.powi(e))
        }
        _ => (number, suffix_multiplier(suffix).ok_or_else(bad)?),
    };
    let value: f64 = number.parse().map_err(|_| bad())?;
    if !value.is_finite() {
        return Err(bad());
    }
    let scaled = value * exponent * scale as f64;
    // Tolerate float noise such as 0.1 * 1000 = 100.00000000000001 before rounding up.
    let rounded = (scaled - 1e-6).ceil();
    if rounded.abs() > i64::MAX as f64 / 2.0 {
        return Err(bad());
    }
    Ok(rounded as i64)
}

fn suffix_multiplier(suffix: &str) -> Option<f64> {
    Some(match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024.0 * 1024.0,
        "Gi" => 1024.0 * 1024.0 * 1024.0,
        "Ti" => 1024.0f64.powi(4),
        "Pi" => 1024.0f64.powi(5),
        "Ei" => 1024.0f64.powi(6),
        _ => return None,
    })
}

/// CPU quantity in millicores.
pub fn parse_cpu_millis(text: &str) -> Result<i64, CoreError> {
    parse_scaled(text, 1000)
}

/// Any other quantity in base units.
pub fn parse_units(text: &str) -> Result<i64, CoreError> {
    parse_scaled(text, 1)
}

/// Formats millicores the way kubectl does: `1500m`, `2`.
pub fn format_cpu(millis: i64) -> String {
    if millis % 1000 == 0 {
        format!("{}", millis / 1000)
    } else {
        format!("{millis}m")
    }
}

/// Formats bytes with the largest binary suffix that divides them exactly (`512Mi`, `2Gi`).
pub fn format_bytes(bytes: i64) -> String {
    const UNITS: [(&str, i64); 4] = [
        ("Ti", 1 << 40),
        ("Gi", 1 << 30),
        ("Mi", 1 << 20),
        ("Ki", 1 << 10),
    ];
    for (suffix, size) in UNITS {
        if bytes != 0 && bytes % size == 0 {
            return format!("{}{suffix}", bytes / size);
        }
    }
    if bytes > (1 << 20) {
        return format!("{}Mi", (bytes + (1 << 20) - 1) >> 20);
    }
    bytes.to_string()
}

/// A Go duration (`time.ParseDuration`) in whole seconds, rounded up: a sequence of numbers
/// with units `h`, `m`, `s`, `ms`, `us`/`µs` or `ns` (`"5m"`, `"1h30m"`, `"1.5h"`). None when
/// the text is not one, or is negative.
pub fn parse_duration_seconds(text: &str) -> Option<i64> {
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    if rest == "0" {
        return Some(0);
    }
    let mut nanos: f64 = 0.0;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit] {
            "h" => 3.6e12,
            "m" => 6e10,
            "s" => 1e9,
            "ms" => 1e6,
            "us" | "µs" => 1e3,
            "ns" => 1.0,
            _ => return None,
        };
        nanos += number * scale;
        rest = &rest[unit..];
    }
    Some((nanos / 1e9).ceil() as i64)
}

#[cfg(test)]
#[path = "../tests/unit/quantity.rs"]
mod tests;
