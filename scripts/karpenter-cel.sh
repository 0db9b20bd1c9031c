#!/usr/bin/env bash
# Builds tests/karpenter-cel: a Go command that answers, with Karpenter v1.15.0's own kubelet CEL
# environment (github.com/aws/karpenter-provider-aws/pkg/cel, from the Go module proxy at the
# versions its go.mod pins), whether an expression compiles and what it evaluates to for an
# instance type; prints the absolute path of the binary.
#
#   scripts/karpenter-cel.sh [DIR]    build into DIR (default target/karpenter-cel); a second run
#                                     with the same sources reuses the binary
#   scripts/karpenter-cel.sh --check  build, then compare Fleetwright's expressions with the
#                                     command's answers (cargo test --test karpenter_cel -- --ignored)
#   scripts/karpenter-cel.sh --record the same, and write the answers to
#                                     shared/core/tests/karpenter-cel.jsonl (after a change to the
#                                     corpus or to the pinned Karpenter)
#
# Every `cargo test` compares with the recorded answers; building Karpenter's package (cel-go and
# the Kubernetes API types, a minute or two cold) is left to this script. The module asks for a
# newer Go than a machine may have; GOTOOLCHAIN=auto fetches that toolchain from the proxy.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v go > /dev/null || { echo "karpenter-cel: go is not on PATH" >&2; exit 1; }
mode=build
case "${1:-}" in
    --check) mode=check; shift ;;
    --record) mode=record; shift ;;
esac
dir=${1:-target/karpenter-cel}
mkdir -p "$dir"
key=$(cat tests/karpenter-cel/go.mod tests/karpenter-cel/go.sum tests/karpenter-cel/main.go | sha256sum | cut -c1-16)
bin="$(cd "$dir" && pwd)/karpenter-cel-$key"
if [[ ! -x "$bin" ]]; then
    start=$(date +%s)
    (cd tests/karpenter-cel &&
        GOTOOLCHAIN="${GOTOOLCHAIN_KARPENTER_CEL:-auto}" GOFLAGS="-mod=readonly -buildvcs=false" \
            go build -o "$bin.tmp" . >&2)
    mv "$bin.tmp" "$bin"
    echo "karpenter-cel: built in $(($(date +%s) - start))s" >&2
fi
if [ "$mode" = build ]; then
    echo "$bin"
    exit 0
fi
record=()
[ "$mode" = record ] && record=(env FLEETWRIGHT_KARPENTER_CEL_RECORD=1)
"${record[@]}" env FLEETWRIGHT_KARPENTER_CEL="$bin" \
    cargo test --workspace --all-features --test karpenter_cel -- --ignored --nocapture
