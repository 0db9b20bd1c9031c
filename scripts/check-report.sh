#!/usr/bin/env bash
# The simulation report in a real browser: `fleetwright simulate --report` writes the page,
# Debian's Chromium (installed by scripts/setup-test-tools.sh) renders it headless with no
# network, and scripts/check-report.py checks the DOM its script drew (every plot and timeline
# marker) and the screenshot, saved as target/report/report.png.
# Needs the debug `fleetwright` binary (built by `cargo test --workspace --all-targets`).
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/report
rm -rf "$out" && mkdir -p "$out"
target/debug/fleetwright --quiet simulate --output json --report "$out/report.html" >"$out/report.json"

chromium=$(command -v chromium || command -v chromium-browser || true)
[ -n "$chromium" ] || { echo "check-report: chromium is not installed (scripts/setup-test-tools.sh)" >&2; exit 1; }
# The flags the machine needs: no sandbox as root, no GPU, and no background networking, whose
# connections this machine refuses.
flags=(--headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking
    --disable-component-update --disable-sync --disable-quic --hide-scrollbars
    --user-data-dir="$PWD/$out/profile" --window-size=1280,1700)
page="file://$PWD/$out/report.html"
timeout 120 "$chromium" "${flags[@]}" --dump-dom "$page" >"$out/dom.html" 2>"$out/chromium.log"
timeout 120 "$chromium" "${flags[@]}" --screenshot="$PWD/$out/report.png" "$page" \
    >>"$out/chromium.log" 2>&1
python3 scripts/check-report.py "$out/report.json" "$out/dom.html" "$out/report.png"
echo "check-report: screenshot at $out/report.png"
