#!/usr/bin/env bash
# Fleetwright and Karpenter side by side, on the same inputs, in one run.
#
#   scripts/peer-bench.sh            the full benchmark: Karpenter's benchmark shape at 1k/5k/10k
#                                    pods, the four cost mixes and four real-cluster mixes; then
#                                    Karpenter's own BenchmarkScheduling suite as published,
#                                    beside Fleetwright's karpenter-shape figures from this run
#   scripts/peer-bench.sh smoke      a few hundred pods (what CI runs, so the harness cannot rot)
#   scripts/peer-bench.sh generated  200 generated clusters (six pool shapes × pod shapes ×
#                                    constraint kinds, 20–2,000 pods), each also under a limit that
#                                    does not bind: the distribution of Fleetwright/Karpenter and
#                                    the five cases furthest behind (`generated:N` for N of them;
#                                    about 9 minutes per 30 on this machine)
#
# The harness (peers/karpenter, its own Go module) calls Karpenter's provisioner as a dependency,
# pinned in peers/karpenter/go.mod and fetched from the Go module proxy. Extra arguments go to
# `fleetwright bench` (for example --repeat 5 or --seed 7).
set -euo pipefail
cd "$(dirname "$0")/.."
which="${1:-full}"
[ $# -gt 0 ] && shift

if ! command -v go >/dev/null 2>&1; then
    echo "peer-bench: Go is not on PATH (the harness is a Go module; see ../shared/TOOLCHAIN.md)" >&2
    exit 1
fi
# A Go older than the module asks for fetches the right toolchain from the module proxy.
export GOTOOLCHAIN="${GOTOOLCHAIN_PEER:-auto}"
export GOFLAGS="-mod=readonly -buildvcs=false"
mkdir -p target/peers
start=$(date +%s)
(cd peers/karpenter && go build -o ../../target/peers/karpenter-peer .)
echo "== peer-bench: the Karpenter harness built in $(($(date +%s) - start))s ($(go version))"

# The smoke checks that the harness and the comparison still run, not their speed: it takes the
# debug build CI has already made (the scheduling core is optimised in the dev profile too).
if [ "$which" = smoke ]; then
    cargo build -p fleetwright-cli
    fleetwright=target/debug/fleetwright
else
    cargo build --release -p fleetwright-cli
    fleetwright=target/release/fleetwright
fi
# Both on one core (the harness inherits the affinity; Go sizes GOMAXPROCS from it).
pin=()
command -v taskset >/dev/null 2>&1 && pin=(taskset -c 0)
"${pin[@]}" "$fleetwright" bench --peer karpenter --peer-bin target/peers/karpenter-peer --cases "$which" "$@"

if [ "$which" = full ]; then
    echo
    echo "== Karpenter's own BenchmarkScheduling suite, as published (one run each), and Fleetwright on the same shape"
    (cd peers/karpenter && go test -c -tags=test_performance -o ../../target/peers/karpenter-scheduling.test \
        sigs.k8s.io/karpenter/pkg/controllers/provisioning/scheduling)
    "${pin[@]}" target/peers/karpenter-scheduling.test -test.run=XXX -test.benchtime=1x \
        -test.bench='^BenchmarkScheduling[0-9]+$' | grep -E 'Benchmark|PASS|FAIL'
    "${pin[@]}" target/release/fleetwright bench --pods 1,50,100,500,1000,2000,5000 --repeat 3 | grep -E 'CASE|karpenter-shape'
fi
