#!/usr/bin/env bash
# The local end-to-end stack: moto, `cargo lambda watch` (the Lambda runtime and invoke APIs) and
# the harness (tests/e2e), which starts the HTTP Kubernetes API fake, runs the three function
# binaries against the emulator, sends `cargo lambda invoke` with the events/ files and checks
# the effects through the APIs.
#
#   scripts/e2e.sh                 the acceptance scenario (run by scripts/test.sh, so by CI)
#   scripts/e2e.sh latency [N]     the latency benchmark: webhook -> launch, p50/p99 over N runs
#
# The function binaries are the ones `cargo test --workspace --all-targets` built (target/debug),
# so the watcher runs with --only-lambda-apis: letting it build them would rebuild the AWS SDK
# with a different feature set (see ../shared/TOOLCHAIN.md). Logs go to target/e2e/.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup-test-tools.sh >/dev/null
export PATH="$PWD/.venv-lambda/bin:$PATH"
logs="$PWD/target/e2e"
mkdir -p "$logs"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_port() {
    for _ in $(seq 1 150); do
        if python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=1)" "$1" 2>/dev/null; then return 0; fi
        sleep 0.2
    done
    echo "e2e: nothing listens on 127.0.0.1:$1" >&2
    return 1
}

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

moto_port=$(free_port)
.venv-moto/bin/python scripts/moto-server.py -H 127.0.0.1 -p "$moto_port" >"$logs/moto.log" 2>&1 &
pids+=($!)
wait_port "$moto_port"

lambda_port=$(free_port)
cargo lambda watch --only-lambda-apis --ignore-changes --invoke-address 127.0.0.1 --invoke-port "$lambda_port" >"$logs/watch.log" 2>&1 &
pids+=($!)
wait_port "$lambda_port"

export FLEETWRIGHT_MOTO_ENDPOINT="http://127.0.0.1:$moto_port"
export AWS_ENDPOINT_URL="$FLEETWRIGHT_MOTO_ENDPOINT"
export AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1
export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing
export AWS_EC2_METADATA_DISABLED=true
unset AWS_PROFILE AWS_SESSION_TOKEN AWS_CONTAINER_CREDENTIALS_FULL_URI AWS_CONTAINER_CREDENTIALS_RELATIVE_URI
export FLEETWRIGHT_LAMBDA_PORT="$lambda_port"
export FLEETWRIGHT_BIN_DIR="${FLEETWRIGHT_BIN_DIR:-$PWD/target/debug}"
export FLEETWRIGHT_E2E_LOGS="$logs"
echo "== e2e: moto on :$moto_port, cargo lambda watch on :$lambda_port, logs in $logs"

harness="$FLEETWRIGHT_BIN_DIR/fleetwright-e2e"
case "${1:-check}" in
    check) "$harness" check ;;
    latency) "$harness" latency --runs "${2:-20}" ;;
    *) echo "usage: scripts/e2e.sh [check | latency [N]]" >&2; exit 2 ;;
esac
