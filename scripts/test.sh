#!/usr/bin/env bash
# The full test suite: formatting, lints, and every test of the workspace, in one cargo
# invocation so the dependency graph is built once (see ../shared/TOOLCHAIN.md on feature
# unification). CI runs exactly this through .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."

# Tools the tests need, installed into venvs under the repo.
scripts/setup-test-tools.sh

# A moto server on a free loopback port for the AWS adapter's integration tests; stopped by PID
# on exit. Every AWS variable points at it, so no test can reach a real AWS endpoint.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -p target
.venv-moto/bin/moto_server -H 127.0.0.1 -p "$port" >target/moto.log 2>&1 &
moto_pid=$!
trap 'kill "$moto_pid" 2>/dev/null || true; wait "$moto_pid" 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
    if python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/moto-api/')" 2>/dev/null; then
        break
    fi
    sleep 0.2
done
export FLEETWRIGHT_MOTO_ENDPOINT="http://127.0.0.1:$port"
export AWS_ENDPOINT_URL="$FLEETWRIGHT_MOTO_ENDPOINT"
export AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1
export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing
export AWS_EC2_METADATA_DISABLED=true
unset AWS_PROFILE AWS_SESSION_TOKEN AWS_CONTAINER_CREDENTIALS_FULL_URI AWS_CONTAINER_CREDENTIALS_RELATIVE_URI
echo "== moto server on $FLEETWRIGHT_MOTO_ENDPOINT (pid $moto_pid)"

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

echo "== cargo test --workspace --all-targets"
cargo test --workspace --all-targets

echo "== scripts/e2e.sh (the local stack: moto, cargo lambda watch, the Kubernetes API fake)"
scripts/e2e.sh

echo "== scripts/check-infra.sh (cfn-lint, sam validate --lint, manifests against the schemas)"
scripts/check-infra.sh

echo "== scripts/build-functions.sh (cargo lambda build --release --arm64, the template's default)"
scripts/build-functions.sh
