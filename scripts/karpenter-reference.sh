#!/usr/bin/env bash
# Karpenter's own CRD schemas and example manifests, at a pinned version, from its Go module on
# the Go module proxy (nothing is committed): github.com/aws/karpenter-provider-aws holds the
# CRDs Karpenter installs on AWS (NodePool, NodeClaim and NodeOverlay as generated for AWS, and
# EC2NodeClass) in pkg/apis/crds, and its example manifests in examples/v1.
#
#   scripts/karpenter-reference.sh [DIR]    fetch into DIR (default target/karpenter-reference),
#                                           print the absolute path of DIR/VERSION; a second
#                                           run finds them there
#
# The round-trip test reads DIR (cli/tests/karpenter_reference.rs, through
# FLEETWRIGHT_KARPENTER_REFERENCE). `go mod download` fetches each module's zip into the module
# cache even when the local Go is older than the module asks for (it then reports an error but
# names the zip), so the zip is read directly; its checksum is the proxy's, checked by Go.
set -euo pipefail

VERSION=v1.15.0
dir=${1:-target/karpenter-reference}
mkdir -p "$dir"
# Absolute: the tests that read it run in their own package's directory.
dest="$(cd "$dir" && pwd)/$VERSION"
if [[ -f "$dest/.complete" ]]; then
    echo "$dest"
    exit 0
fi
command -v go > /dev/null || { echo "karpenter-reference: go is not on PATH" >&2; exit 1; }
rm -rf "$dest"
mkdir -p "$dest/crds" "$dest/examples"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

zip_of() {
    local module=$1 zip
    # Outside any module, so no go.mod is read or written.
    zip=$(cd "$scratch" && GOFLAGS=-mod=mod go mod download -json "$module@$VERSION" 2> /dev/null |
        sed -n 's/^[[:space:]]*"Zip": "\(.*\)",\{0,1\}$/\1/p')
    if [[ -z "$zip" || ! -f "$zip" ]]; then
        echo "karpenter-reference: could not download $module@$VERSION from $(go env GOPROXY)" >&2
        exit 1
    fi
    echo "$zip"
}

aws=$(zip_of github.com/aws/karpenter-provider-aws)
# Python's zipfile rather than unzip, which a fresh machine may lack.
python3 - "$aws" "github.com/aws/karpenter-provider-aws@$VERSION" "$dest" <<'PY'
import fnmatch, os, sys, zipfile
archive, root, dest = sys.argv[1:]
wanted = {"crds": root + "/pkg/apis/crds/karpenter.*.yaml", "examples": root + "/examples/v1/*.yaml"}
with zipfile.ZipFile(archive) as z:
    for name in z.namelist():
        for folder, pattern in wanted.items():
            if fnmatch.fnmatch(name, pattern):
                with open(os.path.join(dest, folder, os.path.basename(name)), "wb") as out:
                    out.write(z.read(name))
PY
count=$(ls "$dest/crds" | wc -l)
if [[ "$count" -lt 4 ]]; then
    echo "karpenter-reference: expected 4 CRDs in the modules, found $count" >&2
    exit 1
fi
echo "$VERSION" > "$dest/.complete"
echo "$dest"
