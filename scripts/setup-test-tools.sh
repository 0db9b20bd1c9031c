#!/usr/bin/env bash
# Installs the tools the test suite needs, into venvs and node_modules under the repo where it
# can (Chromium comes from Debian's archive):
#   .venv-moto   moto[server], the local AWS API the fleetwright-aws integration tests talk to;
#   .venv-lambda cargo-lambda and zig;
#   .venv-infra  cfn-lint, the SAM CLI and kubernetes-validate;
#   Debian's chromium (the report check) and infra/cdk/node_modules (npm ci).
# Idempotent: an existing, working venv is kept.
set -euo pipefail
cd "$(dirname "$0")/.."

MOTO_VERSION="${MOTO_VERSION:-5.1.*}"
if ! .venv-moto/bin/moto_server --help >/dev/null 2>&1; then
    echo "== installing moto[server] into .venv-moto"
    python3 -m venv .venv-moto
    .venv-moto/bin/pip install --quiet --disable-pip-version-check "moto[server]==${MOTO_VERSION}"
fi

# cargo-lambda (the local Lambda emulator `cargo lambda watch`/`invoke`, and `cargo lambda build`)
# with zig as its cross linker, both from PyPI. `cargo lambda` finds zig through
# `python3 -m ziglang`, so callers put .venv-lambda/bin first on PATH.
CARGO_LAMBDA_VERSION="${CARGO_LAMBDA_VERSION:-1.9.*}"
if ! .venv-lambda/bin/cargo-lambda lambda --version >/dev/null 2>&1; then
    echo "== installing cargo-lambda and ziglang into .venv-lambda"
    python3 -m venv .venv-lambda
    .venv-lambda/bin/pip install --quiet --disable-pip-version-check \
        "cargo-lambda==${CARGO_LAMBDA_VERSION}" ziglang
fi

# The infrastructure checks: cfn-lint (runs the SAM transform offline), the SAM CLI
# (`sam validate --lint`), and kubernetes-validate, which ships the Kubernetes JSON schemas
# (and jsonschema, used for the CRD schemas).
if ! { .venv-infra/bin/cfn-lint --version && .venv-infra/bin/sam --version \
        && .venv-infra/bin/kubernetes-validate --version; } >/dev/null 2>&1; then
    echo "== installing cfn-lint, aws-sam-cli and kubernetes-validate into .venv-infra"
    python3 -m venv .venv-infra
    .venv-infra/bin/pip install --quiet --disable-pip-version-check \
        "cfn-lint==1.*" "aws-sam-cli==1.*" "kubernetes-validate==1.*"
fi

# Debian's Chromium, for the report check (scripts/check-report.sh renders the simulation's
# HTML report headless). From Debian's package archive, as root or through sudo.
if ! command -v chromium >/dev/null 2>&1; then
    echo "== installing chromium (Debian)"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get install -y --no-install-recommends chromium >/dev/null 2>&1 \
        || { $sudo apt-get update -qq && $sudo apt-get install -y --no-install-recommends chromium >/dev/null; }
fi

# The CDK construct's packages (aws-cdk-lib, the cdk CLI, TypeScript), from the npm registry at
# the versions package-lock.json pins.
if [ ! -x infra/cdk/node_modules/.bin/cdk ] || [ infra/cdk/package-lock.json -nt infra/cdk/node_modules/.package-lock.json ]; then
    echo "== installing the CDK construct's npm packages (npm ci)"
    (cd infra/cdk && npm ci --no-audit --no-fund --loglevel=error)
fi
