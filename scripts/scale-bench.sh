#!/usr/bin/env bash
# The scale benchmark on a real kube-apiserver and etcd, built from upstream sources by
# scripts/control-plane.sh and started without controllers (the nodes have no kubelets). A loader
# writes the nodes, their NodeClaims and the pods through the API; then one tick per case runs
# against it in a process of its own, printing its phases (list, convert, cloud, decide, write)
# and its peak RSS; then every pod is listed three ways. The API server's and etcd's own RSS
# are printed at the end.
#
#   scripts/scale-bench.sh smoke     500 nodes / 5,000 pods on the debug build CI has made (a
#                                    check that the benchmark works, not a measurement)
#   scripts/scale-bench.sh 5k        5,000 nodes / 50,000 pods (release build)
#   scripts/scale-bench.sh 20k       20,000 nodes / 200,000 pods
#   scripts/scale-bench.sh N M       N nodes, M pods
#
# The cases are the ones of `cargo bench -p fleetwright-runtime --bench scale`
# (shared/runtime/benches/scale.rs, whose --real mode this runs). The bench writes only to the
# control plane this script starts (its own kubeconfig, on loopback), never to $KUBECONFIG's.
set -euo pipefail
cd "$(dirname "$0")/.."
which="${1:-5k}"

if [ "$which" = inside ]; then
    # Only under the control plane this script started (the bench refuses any other too).
    if [ ! -f "${FLEETWRIGHT_CONTROL_PLANE_DIR:-/nonexistent}/pids" ]; then
        echo "scale-bench: 'inside' runs only under scripts/control-plane.sh run" >&2
        exit 2
    fi
    shift
    "$@"
    echo "== scale-bench: the control plane's own peak RSS"
    while read -r pid; do
        name=$(ps -o comm= -p "$pid" || true)
        hwm=$(awk '/VmHWM/ {printf "%.0f MiB", $2 / 1024}' "/proc/$pid/status" 2>/dev/null || true)
        echo "   $name: $hwm"
    done <"$FLEETWRIGHT_CONTROL_PLANE_DIR/pids"
    exit 0
fi

case "$which" in
    smoke) size=(--nodes 500 --pods 5000 --pending 100) ;;
    5k) size=(--nodes 5000 --pods 50000 --pending 1000) ;;
    20k) size=(--nodes 20000 --pods 200000 --pending 1000) ;;
    *) size=(--nodes "$1" --pods "${2:?M pods}" --pending "${3:-1000}") ;;
esac

if [ "$which" = smoke ]; then
    # The features and profile of CI's test build, so nothing is built again.
    bench=(cargo test --workspace --all-features --bench scale --)
else
    bench=(cargo bench -p fleetwright-runtime --bench scale --)
fi
start=$(date +%s)
# Built before the control plane starts, so it idles through no compilation.
"${bench[@]:0:${#bench[@]}-1}" --no-run
FLEETWRIGHT_CONTROL_PLANE_PARTS=api scripts/control-plane.sh run "target/scale-bench-$which" -- \
    "$0" inside "${bench[@]}" --real "${size[@]}"
echo "== scale-bench $which: $(($(date +%s) - start)) s in all"
