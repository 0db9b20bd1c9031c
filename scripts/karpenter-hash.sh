#!/usr/bin/env bash
# Builds tests/karpenter-hash: a Go command that prints the drift hashes Karpenter itself computes
# (NodePool.Hash and EC2NodeClass.Hash from Karpenter v1.14.3's own packages, fetched from the Go
# module proxy at the versions its go.mod pins), and prints the absolute path of the binary.
#
#   scripts/karpenter-hash.sh [DIR]    build into DIR (default target/karpenter-hash); a second
#                                      run with the same sources reuses the binary
#
# shared/crds/tests/karpenter_hash.rs runs it (FLEETWRIGHT_KARPENTER_HASH) on generated objects
# and compares every hash with Fleetwright's port. The module asks for a newer Go than a machine
# may have; GOTOOLCHAIN=auto fetches that toolchain from the module proxy.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v go > /dev/null || { echo "karpenter-hash: go is not on PATH" >&2; exit 1; }
dir=${1:-target/karpenter-hash}
mkdir -p "$dir"
key=$(cat tests/karpenter-hash/go.mod tests/karpenter-hash/go.sum tests/karpenter-hash/main.go | sha256sum | cut -c1-16)
bin="$(cd "$dir" && pwd)/karpenter-hash-$key"
if [[ ! -x "$bin" ]]; then
    start=$(date +%s)
    (cd tests/karpenter-hash &&
        GOTOOLCHAIN="${GOTOOLCHAIN_KARPENTER_HASH:-auto}" GOFLAGS="-mod=readonly -buildvcs=false" \
            go build -o "$bin.tmp" . >&2)
    mv "$bin.tmp" "$bin"
    echo "karpenter-hash: built in $(($(date +%s) - start))s" >&2
fi
echo "$bin"
