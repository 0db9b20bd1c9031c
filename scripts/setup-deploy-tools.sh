#!/usr/bin/env bash
# Installs what a deploy needs and nothing else, from PyPI into one venv under the repo:
# cargo-lambda and zig (it cross-links the arm64 functions) and the SAM CLI. A Rust toolchain
# is the only prerequisite (and Node.js, for a CDK deploy instead of SAM). The test suite's tools
# (moto, Chromium, the linters) are scripts/setup-test-tools.sh's.
#
#   scripts/setup-deploy-tools.sh
#   export PATH="$PWD/.venv-deploy/bin:$PATH"
#
# Idempotent: a working venv is kept.
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO_LAMBDA_VERSION="${CARGO_LAMBDA_VERSION:-1.9.*}"
if ! { .venv-deploy/bin/cargo-lambda lambda --version && .venv-deploy/bin/sam --version; } >/dev/null 2>&1; then
    echo "== installing cargo-lambda, ziglang and aws-sam-cli into .venv-deploy"
    python3 -m venv .venv-deploy
    .venv-deploy/bin/pip install --quiet --disable-pip-version-check \
        "cargo-lambda==${CARGO_LAMBDA_VERSION}" ziglang "aws-sam-cli==1.*"
fi
.venv-deploy/bin/cargo-lambda lambda --version
.venv-deploy/bin/sam --version
