#!/usr/bin/env bash
# The full test suite: formatting, lints, and every test of the workspace, in one cargo
# invocation so the dependency graph is built once (see ../shared/TOOLCHAIN.md on feature
# unification). CI runs exactly this through .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

echo "== cargo test --workspace --all-targets"
cargo test --workspace --all-targets
