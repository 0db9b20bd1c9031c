//! The global `--quiet` and `-v` switches: how much the command logs, chosen once in `main` and
//! read by every verb's log setup. `FLEETWRIGHT_LOG` (an `EnvFilter` directive) still wins over
//! both. Colour goes to a terminal only, never into pipes and files (and never with `NO_COLOR`).

use std::io::IsTerminal;
use std::sync::OnceLock;

use tracing_subscriber::EnvFilter;

/// How much to log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Level {
    /// Errors only, and no progress bar.
    Quiet,
    #[default]
    Normal,
    /// `-v`: Fleetwright's debug lines.
    Debug,
    /// `-vv`: everything at trace.
    Trace,
}

static LEVEL: OnceLock<Level> = OnceLock::new();

impl Level {
    pub fn from_flags(quiet: bool, verbose: u8) -> Level {
        match (quiet, verbose) {
            (true, _) => Level::Quiet,
            (false, 0) => Level::Normal,
            (false, 1) => Level::Debug,
            (false, _) => Level::Trace,
        }
    }
}

/// Sets the level for this process (the first call wins).
pub fn set(level: Level) {
    let _ = LEVEL.set(level);
}

pub fn get() -> Level {
    LEVEL.get().copied().unwrap_or_default()
}

/// Targets of Fleetwright's own log lines: every `fleetwright*` crate and module (targets
/// match by prefix), and the simulation's components.
const CRATES: [&str; 2] = ["fleetwright", "simulate"];

/// The log filter: `FLEETWRIGHT_LOG` when set, else `normal` at the normal level, errors only
/// when quiet, and Fleetwright's crates at debug or trace with `-v` or `-vv`.
pub fn filter(normal: &str) -> EnvFilter {
    if let Ok(filter) = EnvFilter::try_from_env("FLEETWRIGHT_LOG") {
        return filter;
    }
    let directive = match get() {
        Level::Quiet => "error".to_string(),
        Level::Normal => normal.to_string(),
        Level::Debug => directives("info", "debug"),
        Level::Trace => directives("debug", "trace"),
    };
    EnvFilter::new(directive)
}

fn directives(others: &str, ours: &str) -> String {
    let mut out = others.to_string();
    for c in CRATES {
        out.push_str(&format!(",{c}={ours}"));
    }
    out
}

/// Whether log lines on stderr may carry ANSI colour codes.
pub fn colour() -> bool {
    std::env::var_os("NO_COLOR").is_none() && std::io::stderr().is_terminal()
}

#[cfg(test)]
#[path = "../tests/unit/verbosity.rs"]
mod tests;
