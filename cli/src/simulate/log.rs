//! Simulation logging: the runtime's own `tracing` events, printed as Karpenter prints its logs
//! (`<time>\t<LEVEL>\t<component>\t<message>\t<fields as JSON>`), stamped with the virtual clock
//! so two runs with one seed print the same lines. Lines go through the progress bar, when there
//! is one, so they do not tear it.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use chrono::{DateTime, SecondsFormat, Utc};
use indicatif::ProgressBar;
use serde_json::Value;
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, MakeWriter};
use tracing_subscriber::registry::LookupSpan;

/// The virtual clock the log lines are stamped with (seconds since the epoch).
#[derive(Clone, Debug, Default)]
pub struct Clock(Arc<AtomicI64>);

impl Clock {
    pub fn set(&self, now: DateTime<Utc>) {
        self.0.store(now.timestamp(), Ordering::Relaxed);
    }

    fn now(&self) -> DateTime<Utc> {
        DateTime::from_timestamp(self.0.load(Ordering::Relaxed), 0).unwrap_or_default()
    }
}

#[derive(Default)]
struct Fields {
    message: String,
    fields: BTreeMap<String, Value>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Value::String(value.to_string()));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, Value::from(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, Value::from(value));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, Value::from(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Value::from(value));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.put(field, Value::String(format!("{value:?}")));
    }
}

impl Fields {
    fn put(&mut self, field: &Field, value: Value) {
        if field.name() == "message" {
            self.message = match value {
                Value::String(s) => s,
                other => other.to_string(),
            };
        } else {
            self.fields.insert(field.name().to_string(), value);
        }
    }
}

/// The component a target names: `fleetwright_runtime::disrupt` → `disrupt`.
fn component(target: &str) -> &str {
    target.rsplit("::").next().unwrap_or(target)
}

/// Karpenter's console format on the virtual clock.
pub struct KarpenterFormat {
    pub clock: Clock,
}

impl<S, N> FormatEvent<S, N> for KarpenterFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        let mut fields = Fields::default();
        event.record(&mut fields);
        // Each tick's JSON summary: the simulation reports what ticks did in its own summary.
        if fields.fields.contains_key("summary") {
            return Ok(());
        }
        let meta = event.metadata();
        write!(
            writer,
            "{}\t{}\t{}\t{}",
            self.clock
                .now()
                .to_rfc3339_opts(SecondsFormat::Millis, true),
            meta.level(),
            component(meta.target()),
            fields.message
        )?;
        if !fields.fields.is_empty() {
            let json = serde_json::to_string(&fields.fields).unwrap_or_default();
            write!(writer, "\t{json}")?;
        }
        writeln!(writer)
    }
}

/// Writes whole lines to stdout, suspending the progress bar (if any) around each.
#[derive(Clone)]
pub struct LineWriter {
    bar: Option<ProgressBar>,
}

impl LineWriter {
    pub fn new(bar: Option<ProgressBar>) -> Self {
        LineWriter { bar }
    }
}

/// One event's bytes, flushed on drop.
pub struct Line {
    bar: Option<ProgressBar>,
    buffer: Vec<u8>,
}

impl Write for Line {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.buffer.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        if self.buffer.is_empty() {
            return;
        }
        let write = || {
            let _ = std::io::stdout().write_all(&self.buffer);
        };
        match &self.bar {
            Some(bar) => bar.suspend(write),
            None => write(),
        }
    }
}

impl<'a> MakeWriter<'a> for LineWriter {
    type Writer = Line;

    fn make_writer(&'a self) -> Line {
        Line {
            bar: self.bar.clone(),
            buffer: Vec::new(),
        }
    }
}

/// The log filter: `FLEETWRIGHT_LOG`, or info for Fleetwright and the simulation (with the
/// global `--quiet` and `-v` switches applied).
pub fn filter() -> tracing_subscriber::EnvFilter {
    crate::verbosity::filter(
        "warn,fleetwright_runtime=info,fleetwright_kube=info,fleetwright_aws=info,fleetwright_cloud=info,simulate=info",
    )
}

/// Installs the subscriber: Karpenter-style lines on stdout for `log`; for `json`, warnings
/// and errors only, on stderr.
pub fn install(lines: bool, clock: Clock, bar: Option<ProgressBar>) {
    let builder = tracing_subscriber::fmt().event_format(KarpenterFormat { clock });
    let result = if lines {
        builder
            .with_env_filter(filter())
            .with_writer(LineWriter::new(bar))
            .try_init()
    } else {
        builder
            .with_env_filter(crate::verbosity::filter("error"))
            .with_writer(std::io::stderr)
            .try_init()
    };
    if result.is_err() {
        tracing::debug!("a tracing subscriber is already installed");
    }
}

#[cfg(test)]
#[path = "../../tests/unit/simulate/log.rs"]
mod tests;
