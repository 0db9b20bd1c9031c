#!/usr/bin/env bash
# Builds the three Lambda functions for `provided.al2023` with cargo-lambda and zig from
# .venv-lambda, in the size-optimised `lambda` profile (see Cargo.toml), and prints their sizes.
#   scripts/build-functions.sh              arm64 (Graviton; the default of infra/template.yaml)
#   scripts/build-functions.sh x86_64       x86_64
#   scripts/build-functions.sh --check      CI's cheaper check: the functions type-check for
#                                           aarch64-unknown-linux-gnu (C dependencies included,
#                                           built with Debian's cross gcc), with no codegen
#   scripts/build-functions.sh --setup-check  installs what --check needs, and nothing else
set -euo pipefail
cd "$(dirname "$0")/.."

functions=(-p fleetwright-tick -p fleetwright-interruption -p fleetwright-webhook)

# The aarch64 standard library (rustup) and Debian's aarch64 cross C compiler, for the C parts of
# the TLS stack (aws-lc-sys). Idempotent.
setup_check() {
    if ! rustup target list --installed | grep -qx aarch64-unknown-linux-gnu; then
        rustup target add aarch64-unknown-linux-gnu
    fi
    if ! command -v aarch64-linux-gnu-gcc >/dev/null; then
        local sudo=""
        [ "$(id -u)" = 0 ] || sudo=sudo
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
            gcc-aarch64-linux-gnu libc6-dev-arm64-cross >/dev/null
    fi
}

case "${1:-arm64}" in
    --setup-check)
        setup_check
        exit 0
        ;;
    --check)
        setup_check
        export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
        export AR_aarch64_unknown_linux_gnu=aarch64-linux-gnu-ar
        export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
        cargo check --target aarch64-unknown-linux-gnu --bins "${functions[@]}"
        exit 0
        ;;
    arm64) flag=--arm64 ;;
    x86_64) flag=--x86-64 ;;
    *) echo "usage: scripts/build-functions.sh [arm64 | x86_64 | --check | --setup-check]" >&2; exit 2 ;;
esac

scripts/setup-test-tools.sh >/dev/null
export PATH="$PWD/.venv-lambda/bin:$PATH"
cargo lambda build --profile lambda "$flag" --bin tick --bin interruption --bin webhook
out="${CARGO_TARGET_DIR:-target}/lambda"
for f in tick interruption webhook; do
    test -x "$out/$f/bootstrap" || { echo "$out/$f/bootstrap was not built" >&2; exit 1; }
    kind=""
    if command -v file >/dev/null; then kind=$(file -b "$out/$f/bootstrap" | cut -d, -f1-2); fi
    printf '%-13s %s MB  %s\n' "$f" "$(python3 -c 'import os,sys; print(f"{os.path.getsize(sys.argv[1]) / 1e6:.1f}")' "$out/$f/bootstrap")" "$kind"
done
