#!/usr/bin/env bash
# Karpenter's whole controller and Fleetwright on one scenario, each on a fresh real control plane:
#
#   scripts/peer-e2e.sh                  every scenario of examples/peer/ (release build)
#   scripts/peer-e2e.sh SCENARIO.yaml... those scenarios (release build)
#   scripts/peer-e2e.sh smoke            examples/peer/smoke.yaml on the debug build (what CI runs)
#   PEER_E2E_PROFILE=debug scripts/peer-e2e.sh ...   the debug build for any of them
#   PEER_E2E_SHADOW=1 scripts/peer-e2e.sh ...         Fleetwright in shadow mode beside Karpenter
#                                                     (the smoke always runs it)
#
# Karpenter is its KWOK controller (sigs.k8s.io/karpenter/kwok: provisioning, disruption,
# consolidation, termination and repair, with Karpenter's KWOK cloud provider), built from the Go
# module proxy at the version peers/karpenter/go.mod pins, with Karpenter's CRDs from the same
# module. `fleetwright simulate --kubeconfig --karpenter BIN` runs it against the control plane, on
# an instance-types file written from the scenario's catalog (the same types, allocatable
# resources, zones, capacity types and prices), and plays the scenario's steps around it;
# without --karpenter the same command runs Fleetwright's tick, interruption and webhook on a
# simulated cloud. Nodes register 5 s after their launch under both (the simulated kubelets'
# delay, and the KWOKNodeClass's nodeRegistrationDelay); kwok then makes them Ready. Both
# autoscalers run as the control plane's `autoscaler` identity, whose every request is in the
# audit log, and both run at the same time, each on its own control plane. With the shadow, the
# Karpenter run also runs Fleetwright's tick in shadow mode (`FLEETWRIGHT_DRY_RUN`) under the
# control plane's `fleetwright` identity: scripts/peer-e2e.py reads from the audit log that it
# wrote nothing but its Lease and state ConfigMap, and prints what it would have done. Each run's report, log and audit log are kept in target/peer-e2e/SCENARIO/, and
# scripts/peer-e2e.py prints one table for each scenario: both values and their ratio.
set -euo pipefail
cd "$(dirname "$0")/.."

# PEER_E2E_PROFILE=debug runs the other scenarios on the debug build too (no release build of
# every dependency; the scheduling core is optimised in the dev profile).
profile="${PEER_E2E_PROFILE:-release}"
scenarios=()
check=()
if [ "${1:-}" = smoke ]; then
    profile=debug
    check=(--check)
    export PEER_E2E_SHADOW=1
    scenarios=(examples/peer/smoke.yaml)
elif [ $# -gt 0 ]; then
    scenarios=("$@")
else
    scenarios=(examples/peer/story.yaml examples/peer/two-pools.yaml examples/peer/drift.yaml
        examples/peer/scale-out.yaml examples/peer/consolidation.yaml)
fi

if ! command -v go >/dev/null 2>&1; then
    echo "peer-e2e: Go is not on PATH (Karpenter is built from its Go module; see ../shared/TOOLCHAIN.md)" >&2
    exit 1
fi
export GOTOOLCHAIN="${GOTOOLCHAIN_PEER:-auto}"
export GOFLAGS="-mod=readonly -buildvcs=false"
mkdir -p target/peers
start=$(date +%s)
(cd peers/karpenter && go build -o ../../target/peers/karpenter-kwok sigs.k8s.io/karpenter/kwok)
module=$(cd peers/karpenter && go list -m -f '{{.Dir}}' sigs.k8s.io/karpenter)
version=$(cd peers/karpenter && go list -m -f '{{.Version}}' sigs.k8s.io/karpenter)
echo "== peer-e2e: Karpenter $version's KWOK controller built in $(($(date +%s) - start))s"

if [ "$profile" = release ]; then
    cargo build --release -p fleetwright-cli
else
    cargo build -p fleetwright-cli
fi
# A copy, so that a build while the scenarios run cannot change the binary under them.
mkdir -p target/peer-e2e
cp "target/$profile/fleetwright" target/peer-e2e/fleetwright
fleetwright="$PWD/target/peer-e2e/fleetwright"
karpenter="$PWD/target/peers/karpenter-kwok"

# One scenario under one autoscaler, on a control plane of its own.
run_one() {
    local scenario=$1 side=$2 out=$3
    local extra=() shadow=
    if [ "$side" = karpenter ]; then
        extra=(--karpenter "$karpenter" --karpenter-crds "$module/pkg/apis/crds"
            --karpenter-crds "$module/kwok/apis/crds")
        shadow="${PEER_E2E_SHADOW:-}"
    fi
    local began
    began=$(date +%s)
    # shellcheck disable=SC2016
    PEER_SHADOW="$shadow" scripts/control-plane.sh run "$out/$side-control-plane" -- bash -c '
        shadow=()
        [ -n "$PEER_SHADOW" ] && shadow=(--shadow-kubeconfig "$FLEETWRIGHT_CONTROL_PLANE_DIR/fleetwright.kubeconfig")
        "$0" simulate --kubeconfig "$KUBECONFIG" \
            --controller-kubeconfig "$FLEETWRIGHT_CONTROL_PLANE_DIR/autoscaler.kubeconfig" \
            --scenario "$1" --output json "${@:4}" "${shadow[@]}" >"$2/$3.json" 2>"$2/$3.log"
        status=$?
        cp "$FLEETWRIGHT_CONTROL_PLANE_DIR/audit.log" "$2/$3-audit.log"
        exit $status' "$fleetwright" "$scenario" "$out" "$side" ${extra[@]+"${extra[@]}"} || {
        echo "peer-e2e: the $side run of $scenario failed; its log:" >&2
        tail -n 40 "$out/$side.log" >&2
        return 1
    }
    echo "== peer-e2e: $(basename "$scenario") with $side in $(($(date +%s) - began))s"
}

# The control plane's binaries, built (or found) once: the two runs below start at the same time.
scripts/control-plane.sh build >/dev/null
# Both autoscalers run at once, each on its own control plane: they share the machine under the
# same load, and a scenario takes its duration once. Stopping the script stops both runs.
runs=()
trap 'for p in "${runs[@]}"; do kill "$p" 2>/dev/null || true; done' INT TERM
for scenario in "${scenarios[@]}"; do
    out="target/peer-e2e/$(basename "$scenario" .yaml)"
    rm -rf "$out" && mkdir -p "$out"
    run_one "$scenario" karpenter "$out" &
    karpenter_run=$!
    run_one "$scenario" fleetwright "$out" &
    fleetwright_run=$!
    runs=("$karpenter_run" "$fleetwright_run")
    failed=0
    wait "$karpenter_run" || failed=1
    wait "$fleetwright_run" || failed=1
    [ "$failed" = 0 ] || exit 1
    python3 scripts/peer-e2e.py "$out" "$(basename "$scenario")" "$version" ${check[@]+"${check[@]}"}
done
