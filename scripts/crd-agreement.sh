#!/usr/bin/env bash
# Fleetwright's CRDs against Karpenter's on real API servers: two control planes
# (scripts/control-plane.sh), one given Karpenter v1.15.0's own CRDs (fetched from its Go module by
# scripts/karpenter-reference.sh; nothing is committed) and one Fleetwright's; every object of
# cli/tests/fixtures/crd-corpus is created on both with dryRun=All and strict field validation,
# and the verdicts must agree. Prints the table of verdicts.
#
#   scripts/crd-agreement.sh [ARGS]     ARGS go to the test binary (after --ignored --nocapture)
#
# Two control planes rather than one whose CRDs are swapped: both CRD sets define the same
# group and kinds, and a fresh API server cannot serve a stale schema.
set -euo pipefail
cd "$(dirname "$0")/.."

reference=$(scripts/karpenter-reference.sh)
scripts/control-plane.sh build >/dev/null
dir="$(pwd)/target/crd-agreement"
mkdir -p "$dir"
stop_all() {
    scripts/control-plane.sh stop "$dir/karpenter" || true
    scripts/control-plane.sh stop "$dir/fleetwright" || true
}
trap stop_all EXIT
scripts/control-plane.sh start "$dir/karpenter" &
karpenter=$!
scripts/control-plane.sh start "$dir/fleetwright" &
fleetwright=$!
wait "$karpenter"
wait "$fleetwright"

FLEETWRIGHT_KARPENTER_REFERENCE="$reference" \
    KARPENTER_CRDS_KUBECONFIG="$dir/karpenter/admin.kubeconfig" \
    FLEETWRIGHT_CRDS_KUBECONFIG="$dir/fleetwright/admin.kubeconfig" \
    cargo test --workspace --all-features --test crd_agreement -- --ignored --nocapture --test-threads 1 "$@"
