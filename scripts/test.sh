#!/usr/bin/env bash
# The full test suite (the README's command 2; CI runs exactly this through .ci/run):
#   formatting; clippy with -D warnings on every target; every test of the workspace; the local
#   end-to-end stack; Karpenter's own CRDs and examples round-tripped, and the API server's
#   verdicts on a corpus of objects compared under Karpenter's CRDs and Fleetwright's; the
#   deployment checks (SAM, and the CDK construct with its equivalence test); the simulation
#   report in a headless browser; 50 chaos seeds (in the background beside the control-plane
#   stages); the scale benchmark on a real API server at 500 nodes; Karpenter's scheduler
#   beside Fleetwright's on a few hundred pods; and Karpenter's whole controller beside
#   Fleetwright on a small scenario, each on a real control plane. Heavier checks are scripts of their own, run
#   outside CI: the full chaos, peer and scale benchmarks (scripts/chaos-bench.sh,
#   scripts/peer-bench.sh, scripts/scale-bench.sh 5k), Karpenter's drift-hash code run again
#   (scripts/karpenter-hash.sh --check), and the arm64 build of the functions
#   (scripts/build-functions.sh --check, or the full build for a deploy).
#
# Clippy and the tests share one compilation: the test build runs with clippy-driver as the
# workspace's rustc wrapper (what `cargo clippy` itself does), so every lint of
# `cargo clippy --workspace --all-targets --all-features -- -D warnings` is checked while the
# test executables are built, and the dependency graph is compiled once. The tools the tests
# need install into venvs while cargo compiles. Each stage prints its time.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p target
# The suite builds everything once: incremental compilation would only add time and some 15 GB
# of target/debug/incremental, and the line tables of the workspace's crates (Cargo.toml's dev
# profile keeps them for a developer's backtraces) some 2 GB over the test executables. A test
# failure still names its file and line: that comes from the panic, not from debug info.
export CARGO_INCREMENTAL=0 CARGO_PROFILE_DEV_DEBUG=false

# The suite needs some 12 GB of disk (target/ about 6 GB, the Go toolchains, modules and build
# cache and the venvs the rest). A full disk fails deep in the build ("No space left on
# device"), so say what is free at the start, and what is used after each heavy stage.
disk() { df -Pk target | awk 'NR == 2 { printf "%d", $4 / 1024 / 1024 }'; }
echo "== disk: $(disk) GB free where target/ is; the suite needs about 12 GB"
if [ "$(disk)" -lt 12 ]; then
    echo "warning: less than 12 GB free; the build may fail with 'No space left on device'" >&2
fi

suite_start=$(date +%s)
stage_name=""
stage_start=$suite_start
stage_times=()
# Ends the running stage (printing its time) and starts the next one.
stage() {
    local now
    now=$(date +%s)
    if [ -n "$stage_name" ]; then
        stage_times+=("$(printf '%6ss  %s' $((now - stage_start)) "$stage_name")")
        printf '== stage done in %ss: %s\n' $((now - stage_start)) "$stage_name"
    fi
    [ -n "$stage_name" ] && printf '== disk: %s GB free, target/ %s\n' "$(disk)" "$(du -sh target 2>/dev/null | cut -f1)"
    stage_name="$1"
    stage_start=$now
    [ -n "$stage_name" ] && printf '\n== [%ss] %s\n' $((now - suite_start)) "$stage_name"
    return 0
}
summary() {
    stage ""
    echo
    echo "== stage times"
    printf '%s\n' "${stage_times[@]}"
    printf '%6ss  total\n' $(($(date +%s) - suite_start))
}

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

# The venvs (moto, cargo-lambda, cfn-lint/SAM) and the control plane's binaries install in the
# background while cargo compiles; their logs are printed if they fail.
stage "tools (in the background): scripts/setup-test-tools.sh, scripts/control-plane.sh build"
( scripts/setup-test-tools.sh && scripts/control-plane.sh build ) >target/setup-tools.log 2>&1 &
tools_pid=$!

stage "cargo fmt --all -- --check"
cargo fmt --all -- --check

stage "scripts/check-layout.py (no import cycle between files, no source file over 600 lines, no test code under src/, no silent action in the dry run)"
python3 scripts/check-layout.py

# One compilation for the lints and the tests (see above). The same variables stay set for the
# test run, so nothing is rebuilt between the two.
export RUSTC_WORKSPACE_WRAPPER
RUSTC_WORKSPACE_WRAPPER="$(rustup which clippy-driver 2>/dev/null || command -v clippy-driver)"
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
stage "clippy -D warnings + build: cargo test --workspace --all-targets --all-features --no-run (clippy-driver wraps rustc)"
cargo test --workspace --all-targets --all-features --no-run

stage "waiting for the tools"
if ! wait "$tools_pid"; then
    cat target/setup-tools.log >&2
    echo "installing the test tools failed (log above)" >&2
    exit 1
fi

# A moto server on a free loopback port for the AWS integration tests; stopped by PID on exit.
# Every AWS variable points at it, so no test can reach a real AWS endpoint.
stage "cargo test --workspace --all-targets --all-features (against a fresh moto)"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# moto, with the EC2 capacity reservations it lacks (scripts/moto-server.py).
.venv-moto/bin/python scripts/moto-server.py -H 127.0.0.1 -p "$port" >target/moto.log 2>&1 &
pids+=($!)
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
echo "moto server on $FLEETWRIGHT_MOTO_ENDPOINT"
cargo test --workspace --all-targets --all-features

# README command 1 builds the CLI with its default features (no AWS SDK); the run above has
# them all on. Build and lint that CLI too (its binary alone: a test build would compile the
# tests' AWS dev-dependencies again, with other features), and check what it says without AWS.
stage "the CLI with default features, as README command 1 builds it: cargo build -p fleetwright-cli, and its answer to an AWS verb"
cargo build -p fleetwright-cli
if without_aws=$(target/debug/fleetwright replay-event --cluster cli/tests/fixtures/interrupted-cluster.yaml \
    --from-queue http://127.0.0.1:1/q 2>&1); then
    echo "replay-event --from-queue succeeded without the aws feature" >&2
    exit 1
fi
grep -q -- "--features aws" <<<"$without_aws" || {
    echo "replay-event --from-queue without the aws feature did not say how to get it: $without_aws" >&2
    exit 1
}
echo "without the aws feature, replay-event --from-queue says: $without_aws"

# The chaos mode (cli/src/simulate/chaos/) over 50 seeds: faults injected, invariants checked every
# simulated second. It runs the debug CLI the stage above built (the scheduling core is optimised
# in the dev profile too, so it runs about 1.5 times as long as a release build, and no release
# build of every dependency is needed), at the lowest priority, in the background while the
# control-plane stages below mostly wait on the real clock.
# A copy of the binary, so that later stages' builds cannot replace it under the run.
# Then 8 seeds of the reboot scenario: reboots for repair under the same faults (ticks cut off
# between a reboot's writes, API errors), with the same invariants.
chaos_cmd="fleetwright simulate --chaos --seeds 50; fleetwright simulate --chaos --seeds 8 --scenario examples/simulate/reboot-repair.yaml"
cp target/debug/fleetwright target/chaos-fleetwright
(nice -n 19 target/chaos-fleetwright simulate --chaos --seeds 50 &&
    nice -n 19 target/chaos-fleetwright simulate --chaos --seeds 8 \
        --scenario examples/simulate/reboot-repair.yaml) >target/chaos.log 2>&1 &
chaos_pid=$!
pids+=("$chaos_pid")

# The real control plane (kube-apiserver, etcd, controller-manager, scheduler, kwok; built from
# the Go module proxy by the tools job above) and the tests that need it, under the RBAC
# `fleetwright manifests` grants. Same features as the test run, so nothing is rebuilt.
stage "the real control plane: scripts/control-plane.sh run ... cargo test --test control_plane -- --ignored"
story=the_readme_story_ends_with_every_pod_running_and_no_node_left
scripts/control-plane.sh run target/control-plane -- \
    cargo test --workspace --all-features --test control_plane -- --ignored --test-threads 1 --skip "$story"
# The README's story through `simulate --kubeconfig`, on a control plane of its own (four
# minutes of wall clock: the controllers, the scheduler and kwok run in real time).
stage "the README's story on a second real control plane: simulate --kubeconfig (4 min of wall clock)"
scripts/control-plane.sh run target/control-plane-story -- \
    cargo test --workspace --all-features --test control_plane -- --ignored --exact "$story"

# The scale benchmark on a real kube-apiserver and etcd, small: 500 nodes and 5,000 pods
# written through the API, then the provisioning, consolidation and confirmation ticks with their
# phases and peak RSS, on the debug build above (a check that the benchmark works; the figures
# are scripts/scale-bench.sh 5k's).
stage "the scale benchmark on a real API server, smoke: scripts/scale-bench.sh smoke"
scripts/scale-bench.sh smoke

# Karpenter's own v1.15 CRDs and example manifests, fetched from its Go module on the proxy at
# a pinned version (nothing committed): every example and an object with every field of
# Karpenter's schemas round-trip, and Fleetwright's CRDs prune none of Karpenter's fields.
stage "Karpenter's CRDs and examples: scripts/karpenter-reference.sh, cargo test --test karpenter_reference -- --ignored"
FLEETWRIGHT_KARPENTER_REFERENCE=$(scripts/karpenter-reference.sh) \
    cargo test --workspace --all-features --test karpenter_reference -- --ignored

# Fleetwright's CRDs against Karpenter v1.15.0's own, on two real control planes (one with each
# set; both define the same kinds): every object of cli/tests/fixtures/crd-corpus is created with
# dryRun=All and strict field validation on both, and the API servers' verdicts must agree.
stage "CRDs that validate as Karpenter's: scripts/crd-agreement.sh (the corpus on two real control planes)"
scripts/crd-agreement.sh

stage "scripts/e2e.sh (the local stack: moto, cargo lambda watch, the Kubernetes API fake)"
scripts/e2e.sh

stage "scripts/check-infra.sh (cfn-lint, sam validate --lint, manifests against the schemas)"
scripts/check-infra.sh

stage "scripts/check-cdk.sh (the CDK construct's tests, its equivalence with the SAM template, cdk synth + cfn-lint)"
scripts/check-cdk.sh

stage "scripts/check-report.sh (simulate --report rendered by headless Chromium; target/report/report.png)"
scripts/check-report.sh

stage "chaos, started in the background after the CLI's debug build: $chaos_cmd"
chaos_status=0
wait "$chaos_pid" || chaos_status=$?
cat target/chaos.log
if [ "$chaos_status" -ne 0 ]; then
    echo "the chaos mode failed (exit $chaos_status; its output is above)" >&2
    exit 1
fi

# Karpenter's own provisioning scheduler beside Fleetwright's on a few hundred pods (the Go
# harness in peers/karpenter, built from the Go module proxy), so that the harness cannot rot.
# It fails when the independent checker finds a broken constraint in either plan.
stage "Karpenter side by side, smoke: scripts/peer-bench.sh smoke; plan --compare karpenter on a real-cluster mix"
scripts/peer-bench.sh smoke --repeat 1
# An absolute path: the test runs in the crate's directory.
FLEETWRIGHT_KARPENTER_PEER="$PWD/target/peers/karpenter-peer" \
    cargo test --workspace --all-features --test plan_compare -- --ignored

# Karpenter's whole controller (its KWOK controller, built from the same Go module) and
# Fleetwright on one small scenario, each on a fresh control plane (3 minutes of wall clock
# each): the table of docs/benchmarks.md's "Karpenter's whole controller" section, small. It
# fails when either run fails or leaves a replica of a scale step not running.
stage "Karpenter's whole controller beside Fleetwright, smoke: scripts/peer-e2e.sh smoke"
scripts/peer-e2e.sh smoke


summary
