#!/usr/bin/env bash
# The chaos benchmark: `fleetwright simulate --chaos` on every scenario, with more seeds than CI.
#
#   scripts/chaos-bench.sh                 500 seeds on examples/simulate/chaos.yaml, then 100 on
#                                          each other scenario in examples/simulate/
#   scripts/chaos-bench.sh --quick         50 and 10 (a try before the full run)
#   CHAOS_SEEDS=N OTHER_SEEDS=M scripts/chaos-bench.sh    other counts
#   CHAOS_BIN=PATH scripts/chaos-bench.sh                 a fleetwright binary built already
#
# Each scenario's run shows its progress on stderr (a line every 5% of its seeds, and every
# violation as it is found); at the end a table gives per scenario the seeds, the violations
# and the wall time, and the script fails when any seed broke an invariant. Each scenario's
# full output is kept in target/chaos-bench/<scenario>.txt. CI runs 50 seeds on chaos.yaml
# (scripts/test.sh's chaos stage); this is the longer run behind the figures in docs/testing.md.
set -uo pipefail
cd "$(dirname "$0")/.."

chaos_seeds="${CHAOS_SEEDS:-500}"
other_seeds="${OTHER_SEEDS:-100}"
if [ "${1:-}" = "--quick" ]; then
    chaos_seeds="${CHAOS_SEEDS:-50}"
    other_seeds="${OTHER_SEEDS:-10}"
fi

# CHAOS_BIN: a fleetwright binary built already (a copy, say, so that a build meanwhile cannot
# replace it under the run); otherwise the release CLI is built.
bin="${CHAOS_BIN:-}"
if [ -z "$bin" ]; then
    echo "chaos-bench: building the release CLI" >&2
    cargo build --release -p fleetwright-cli >&2 || exit 1
    bin=target/release/fleetwright
fi
out=target/chaos-bench
mkdir -p "$out"

rows=()
failed=0
started=$SECONDS
for scenario in examples/simulate/chaos.yaml $(ls examples/simulate/*.yaml | grep -v '/chaos.yaml$'); do
    name=$(basename "$scenario" .yaml)
    seeds=$other_seeds
    [ "$name" = chaos ] && seeds=$chaos_seeds
    echo "chaos-bench: $name, $seeds seeds ($((SECONDS - started)) s so far)" >&2
    t0=$SECONDS
    "$bin" simulate --chaos --scenario "$scenario" --seeds "$seeds" >"$out/$name.txt"
    status=$?
    took=$((SECONDS - t0))
    summary=$(grep -E '^chaos: [0-9]+ seed\(s\)' "$out/$name.txt" | tail -1)
    violations=$(sed -nE 's/.* ([0-9]+) violation\(s\).*/\1/p' <<<"$summary")
    if [ -z "$violations" ]; then
        violations="error (exit $status; see $out/$name.txt)"
        failed=1
    elif [ "$violations" != 0 ]; then
        failed=1
    fi
    worst=$(sed -nE 's/.*worst pending time ([0-9]+ s).*/\1/p' <<<"$summary")
    rows+=("$(printf '%-22s %6s %12s %14s %8s s' "$name" "$seeds" "$violations" "${worst:--}" "$took")")
done

echo
printf '%-22s %6s %12s %14s %10s\n' scenario seeds violations "worst pending" time
for row in "${rows[@]}"; do
    echo "$row"
done
echo "total: $((SECONDS - started)) s; outputs in $out/"
if [ "$failed" != 0 ]; then
    echo "chaos-bench: some seeds broke an invariant (the VIOLATION lines in $out/*.txt name them)" >&2
    exit 1
fi
