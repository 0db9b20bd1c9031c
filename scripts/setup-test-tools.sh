#!/usr/bin/env bash
# Installs the tools the test suite needs into venvs under the repo (never system-wide):
#   .venv-moto   moto[server], the local AWS API the fleetwright-aws integration tests talk to.
# Idempotent: an existing, working venv is kept.
set -euo pipefail
cd "$(dirname "$0")/.."

MOTO_VERSION="${MOTO_VERSION:-5.1.*}"
if ! .venv-moto/bin/moto_server --help >/dev/null 2>&1; then
    echo "== installing moto[server] into .venv-moto"
    python3 -m venv .venv-moto
    .venv-moto/bin/pip install --quiet --disable-pip-version-check "moto[server]==${MOTO_VERSION}"
fi
