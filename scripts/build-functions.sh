#!/usr/bin/env bash
# Builds the three Lambda functions for the template's default architecture (arm64, Graviton)
# with cargo-lambda and zig from .venv-lambda, and prints their sizes.
#   scripts/build-functions.sh            # arm64 (the default of infra/template.yaml)
#   scripts/build-functions.sh x86_64
set -euo pipefail
cd "$(dirname "$0")/.."
arch="${1:-arm64}"
export PATH="$PWD/.venv-lambda/bin:$PATH"
case "$arch" in
    arm64) flag=--arm64 ;;
    x86_64) flag=--x86-64 ;;
    *) echo "unknown architecture $arch (arm64 or x86_64)" >&2; exit 2 ;;
esac
cargo lambda build --release "$flag" --bin tick --bin interruption --bin webhook
for f in tick interruption webhook; do
    test -x "target/lambda/$f/bootstrap" || { echo "target/lambda/$f/bootstrap was not built" >&2; exit 1; }
    kind=""
    if command -v file >/dev/null; then kind=$(file -b "target/lambda/$f/bootstrap" | cut -d, -f1-2); fi
    printf '%-13s %s  %s\n' "$f" "$(du -h "target/lambda/$f/bootstrap" | cut -f1)" "$kind"
done
