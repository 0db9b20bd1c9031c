//! `simulate --report FILE.html`: the report as one self-contained page. The data is embedded as
//! JSON and a small inline script draws the plots (nodes; hourly cost against the LP bound;
//! running and pending pods) and the timeline (scenario steps, launches, interruptions,
//! disruptions) as SVG, so the page needs no network and no file beside it. The summary table
//! is the one the terminal shows. scripts/check-report.sh renders it in headless Chromium.

use anyhow::Context;

use super::report::Report;

const STYLE: &str = r#"
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #1d2330; background: #fff; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 24px 0 8px; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(420px, 1fr)); gap: 16px; }
figure { margin: 0; border: 1px solid #d9dde6; border-radius: 6px; padding: 8px; }
figcaption { font-weight: 600; margin-bottom: 4px; }
svg text { font: 11px system-ui, sans-serif; fill: #4a5468; }
.legend span { margin-right: 12px; } .legend i { display: inline-block; width: 12px; height: 3px; vertical-align: middle; margin-right: 4px; }
table { border-collapse: collapse; font-size: 13px; } td, th { padding: 2px 10px 2px 0; text-align: left; }
pre { background: #f5f6f8; padding: 12px; overflow-x: auto; font-size: 12px; }
"#;

const SCRIPT: &str = r#"
(function () {
  const NS = 'http://www.w3.org/2000/svg';
  const data = JSON.parse(document.getElementById('report-data').textContent);
  const end = Math.max(1, data.durationSeconds);
  const colors = ['#2f6fde', '#d9622b', '#2a9d5c', '#8a4fd8'];
  function el(name, attrs, parent) {
    const e = document.createElementNS(NS, name);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  function text(parent, x, y, s, anchor) {
    const t = el('text', { x: x, y: y, 'text-anchor': anchor || 'start' }, parent);
    t.textContent = s;
    return t;
  }
  function clock(t) { return Math.floor(t / 60) + ':' + String(t % 60).padStart(2, '0'); }
  const W = 560, H = 240, L = 56, R = 24, T = 10, B = 28;
  function x(t) { return L + (W - L - R) * t / end; }
  function axes(svg, max, unit) {
    const y = (v) => T + (H - T - B) * (1 - v / max);
    for (let i = 0; i <= 4; i++) {
      const v = max * i / 4;
      el('line', { x1: L, x2: W - R, y1: y(v), y2: y(v), stroke: '#eceef3' }, svg);
      text(svg, L - 6, y(v) + 4, unit === '$' ? '$' + v.toFixed(2) : String(Math.round(v)), 'end');
    }
    for (let i = 0; i <= 6; i++) {
      const t = Math.round(end * i / 6);
      text(svg, x(t), H - 8, clock(t), 'middle');
    }
    for (const s of data.steps) {
      el('line', { x1: x(s.at), x2: x(s.at), y1: T, y2: H - B, stroke: '#b8bfcc', 'stroke-dasharray': '3 3' }, svg);
    }
    return y;
  }
  function plot(id, title, series, unit) {
    const fig = document.getElementById(id);
    const cap = document.createElement('figcaption');
    cap.textContent = title;
    fig.appendChild(cap);
    const svg = el('svg', { width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, class: 'plot', 'data-plot': id }, fig);
    let max = 0;
    for (const s of series) for (const p of s.points) max = Math.max(max, p[1]);
    // Counts get whole-number gridlines; dollars a 10 % headroom.
    max = unit === '$' ? (max > 0 ? max * 1.1 : 1) : Math.max(4, Math.ceil(max * 1.1 / 4) * 4);
    const y = axes(svg, max, unit);
    const legend = document.createElement('div');
    legend.className = 'legend';
    series.forEach((s, i) => {
      const d = s.points.map((p, k) => (k ? 'L' : 'M') + x(p[0]).toFixed(1) + ' ' + y(p[1]).toFixed(1)).join(' ');
      el('path', { d: d, fill: 'none', stroke: colors[i], 'stroke-width': 2, class: 'series', 'data-points': s.points.length }, svg);
      const item = document.createElement('span');
      item.innerHTML = '<i style="background:' + colors[i] + '"></i>';
      item.appendChild(document.createTextNode(s.name));
      legend.appendChild(item);
    });
    fig.appendChild(legend);
  }
  const samples = data.samples;
  plot('plot-nodes', 'Nodes', [
    { name: 'nodes', points: samples.map((s) => [s.t, s.nodes]) },
    { name: 'ready nodes', points: samples.map((s) => [s.t, s.readyNodes]) },
  ]);
  plot('plot-cost', 'Hourly cost against the LP lower bound', [
    { name: 'fleet $/hour', points: samples.map((s) => [s.t, s.hourlyCost]) },
    { name: 'LP bound $/hour', points: samples.map((s) => [s.t, s.lowerBound]) },
  ], '$');
  plot('plot-pods', 'Running and pending pods', [
    { name: 'running', points: samples.map((s) => [s.t, s.runningPods]) },
    { name: 'pending', points: samples.map((s) => [s.t, s.pendingPods]) },
  ]);

  const events = [];
  for (const s of data.steps) events.push({ at: s.at, lane: 0, kind: 'step', what: s.action });
  for (const l of data.launches) events.push({ at: l.at, lane: 1, kind: 'launch', what: l.instanceType + ' ' + l.capacityType + ' in ' + l.zone + ' (' + l.nodepool + ')' });
  for (const i of data.interruptions) events.push({ at: i.at, lane: 2, kind: 'interruption', what: i.instanceId + ' (' + i.instanceType + '), ' + i.podsDisplaced + ' pod(s) displaced' });
  for (const d of data.disruptionEvents) events.push({ at: d.at, lane: 3, kind: 'disruption', what: d.command });
  events.sort((a, b) => a.at - b.at || a.lane - b.lane);
  const lanes = ['scenario steps', 'launches', 'interruptions', 'disruptions'];
  const fig = document.getElementById('timeline');
  const TH = 30 + lanes.length * 28;
  const svg = el('svg', { width: W * 2, height: TH, viewBox: '0 0 ' + W * 2 + ' ' + TH, class: 'plot', 'data-plot': 'timeline' }, fig);
  const tx = (t) => 110 + (W * 2 - 134) * t / end;
  lanes.forEach((name, i) => {
    const ly = 20 + i * 28;
    text(svg, 0, ly + 4, name);
    el('line', { x1: 110, x2: W * 2 - 24, y1: ly, y2: ly, stroke: '#eceef3' }, svg);
  });
  for (let i = 0; i <= 8; i++) {
    const t = Math.round(end * i / 8);
    text(svg, tx(t), TH - 4, clock(t), 'middle');
  }
  for (const e of events) {
    const m = el('circle', { cx: tx(e.at), cy: 20 + e.lane * 28, r: 5, fill: colors[e.lane], class: 'event' }, svg);
    el('title', {}, m).textContent = clock(e.at) + ' ' + e.kind + ': ' + e.what;
  }
  const body = document.getElementById('events');
  for (const e of events) {
    const row = body.insertRow();
    row.insertCell().textContent = clock(e.at);
    row.insertCell().textContent = e.kind;
    row.insertCell().textContent = e.what;
  }
  document.body.setAttribute('data-rendered', 'true');
})();
"#;

/// Escapes text for HTML element content.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The page.
pub fn page(report: &Report) -> anyhow::Result<String> {
    // `</` cannot end the script element early once escaped; JSON reads `\/` as `/`.
    let data = serde_json::to_string(report)?.replace("</", "<\\/");
    let title = format!(
        "Fleetwright simulation: {} (seed {})",
        report.scenario, report.seed
    );
    Ok(format!(
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'">
<title>{title}</title><style>{STYLE}</style></head>
<body>
<h1>{title}</h1>
<p>{description}</p>
<div class="grid">
<figure id="plot-nodes"></figure>
<figure id="plot-cost"></figure>
<figure id="plot-pods"></figure>
</div>
<h2>Timeline</h2>
<figure id="timeline"></figure>
<table><thead><tr><th>time</th><th>event</th><th>what</th></tr></thead><tbody id="events"></tbody></table>
<h2>Summary</h2>
<pre id="summary">{table}</pre>
<script type="application/json" id="report-data">{data}</script>
<script>{SCRIPT}</script>
</body></html>
"#,
        title = escape(&title),
        description = escape(&report.description),
        table = escape(&report.table()),
    ))
}

/// Fails at once when the report could not be written at the end of the run: its directory
/// is missing, or the file cannot be created there.
pub fn check_writable(path: &std::path::Path) -> anyhow::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    if !dir.is_dir() {
        anyhow::bail!(
            "--report {}: the directory {} does not exist",
            path.display(),
            dir.display()
        );
    }
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .with_context(|| format!("--report {}: cannot be written", path.display()))?;
    Ok(())
}

#[cfg(test)]
#[path = "../../tests/unit/simulate/html.rs"]
mod tests;
