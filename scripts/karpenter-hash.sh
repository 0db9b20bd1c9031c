#!/usr/bin/env bash
# Builds tests/karpenter-hash: a Go command that prints the drift hashes Karpenter itself computes
# (NodePool.Hash, version v3, and EC2NodeClass.Hash, version v6, from Karpenter v1.15.0's own
# packages, fetched from the Go module proxy at the versions its go.mod pins), and prints the
# absolute path of the binary.
#
#   scripts/karpenter-hash.sh [DIR]    build into DIR (default target/karpenter-hash); a second
#                                      run with the same sources reuses the binary
#   scripts/karpenter-hash.sh --check  build, then compare Fleetwright's port with the command on
#                                      4,000 generated objects (cargo test --test karpenter_hash
#                                      -- --ignored)
#   scripts/karpenter-hash.sh --record the same, and write what the command printed to
#                                      shared/crds/tests/karpenter-hashes.txt (after a change to
#                                      the generator or to the pinned Karpenter)
#
# Every `cargo test` compares the port with the recorded hashes; building Karpenter's packages
# (some 10 CPU-minutes cold, with the AWS SDK's EC2 types) is left to this script. The module asks
# for a newer Go than a machine may have; GOTOOLCHAIN=auto fetches that toolchain from the proxy.
# The build reads go.sum as it is (-mod=readonly): `go mod tidy` needs -e at v1.15.0, whose AWS
# provider asks for an SDK module the proxy does not serve, for tests the command never builds.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v go > /dev/null || { echo "karpenter-hash: go is not on PATH" >&2; exit 1; }
mode=build
case "${1:-}" in
    --check) mode=check; shift ;;
    --record) mode=record; shift ;;
esac
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
if [ "$mode" = build ]; then
    echo "$bin"
    exit 0
fi
record=()
[ "$mode" = record ] && record=(env FLEETWRIGHT_KARPENTER_HASH_RECORD=1)
"${record[@]}" env FLEETWRIGHT_KARPENTER_HASH="$bin" \
    cargo test --workspace --all-features --test karpenter_hash -- --ignored --nocapture
