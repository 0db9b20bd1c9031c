//! Durations as Karpenter's objects write them: Go's `time.Duration` text (`duration_seconds`)
//! and a NodePool's stricter pattern for `consolidateAfter` and `expireAfter`, with a hint for
//! the likely typos.

/// Parses a Go-style duration (`30s`, `1h30m`, `720h`) or `Never` (None).
pub fn duration_seconds(text: &str) -> Result<Option<i64>, String> {
    if text == "Never" {
        return Ok(None);
    }
    let mut total = 0f64;
    let mut number = String::new();
    let mut chars = text.chars().peekable();
    let mut any = false;
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() || c == '.' {
            number.push(c);
            continue;
        }
        let mut unit = c.to_string();
        if c == 'm' && chars.peek() == Some(&'s') {
            unit.push(chars.next().unwrap_or('s'));
        }
        let n: f64 = number
            .parse()
            .map_err(|_| format!("invalid duration {text:?}"))?;
        number.clear();
        total += n * match unit.as_str() {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 0.001,
            _ => return Err(format!("invalid duration {text:?}: unknown unit {unit:?}")),
        };
        any = true;
    }
    if !number.is_empty() || !any {
        return Err(format!(
            "invalid duration {text:?}: expected a number and a unit such as 30s or 720h"
        ));
    }
    Ok(Some(total.round() as i64))
}

/// A NodePool's `consolidateAfter` or `expireAfter`, as Karpenter's CRD admits them (pattern
/// `^(([0-9]+(s|m|h))+|Never)$`): whole numbers of hours, minutes and seconds, or `Never`.
pub(crate) fn nodepool_duration(text: &str) -> Result<Option<i64>, String> {
    if text == "Never" {
        return Ok(None);
    }
    let mut digits = 0;
    let mut parts = 0;
    let each = text.chars().all(|c| match c {
        '0'..='9' => {
            digits += 1;
            true
        }
        'h' | 'm' | 's' if digits > 0 => {
            digits = 0;
            parts += 1;
            true
        }
        _ => false,
    });
    if !(each && digits == 0 && parts > 0) {
        return Err(format!(
            "invalid duration {text:?}: Karpenter's NodePool takes whole hours, minutes and \
             seconds (such as 30s, 90s or 1h30m), or Never{}",
            duration_hint(text)
        ));
    }
    // Go's time.ParseDuration, which Karpenter reads it with, stops at about 292 years.
    match duration_seconds(text)? {
        Some(s) if s > 2_562_047 * 3600 => Err(format!(
            "invalid duration {text:?}: longer than Karpenter can read (about 292 years); for \
             no limit, Never"
        )),
        other => Ok(other),
    }
}

/// What a mistyped duration was likely meant to be, as `; did you mean …?` (or nothing).
fn duration_hint(text: &str) -> String {
    let trimmed = text.trim();
    let number: String = trimmed.chars().take_while(char::is_ascii_digit).collect();
    let unit = trimmed[number.len()..].trim();
    let meant = if trimmed.eq_ignore_ascii_case("never") {
        Some("Never".to_string())
    } else if number.is_empty() {
        None
    } else if unit.is_empty() {
        Some(format!("{number}s"))
    } else if ["min", "mins", "minute", "minutes"].contains(&unit) {
        Some(format!("{number}m"))
    } else if ["d", "day", "days"].contains(&unit) {
        number
            .parse::<u64>()
            .ok()
            .and_then(|d| d.checked_mul(24))
            .map(|h| format!("{h}h"))
    } else if ["H", "M", "S", "sec", "secs", "hr", "hrs"].contains(&unit) {
        let first = unit.chars().next().unwrap_or('s').to_ascii_lowercase();
        Some(format!("{number}{first}"))
    } else {
        (unit != &trimmed[number.len()..]).then(|| format!("{number}{unit}"))
    };
    meant.map_or_else(String::new, |m| format!("; did you mean {m:?}?"))
}
