#!/usr/bin/env bash
# The deployment checks, all offline: cfn-lint (with the SAM transform) and `sam validate --lint`
# on infra/template.yaml, then `fleetwright manifests` output (and the example NodePools and
# the simulation scenarios' objects)
# validated against the Kubernetes schemas and the CRDs the project ships.
# Needs the debug `fleetwright` binary (built by `cargo test --workspace --all-targets`) and
# .venv-infra (scripts/setup-test-tools.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
export SAM_CLI_TELEMETRY=0 AWS_REGION="${AWS_REGION:-us-east-1}" AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"

echo "== cfn-lint infra/template.yaml"
.venv-infra/bin/cfn-lint infra/template.yaml

echo "== sam validate --lint"
.venv-infra/bin/sam validate --lint --template infra/template.yaml

echo "== fleetwright manifests | validate-manifests.py"
mkdir -p target/infra
target/debug/fleetwright manifests \
    --function-url https://abcdefghijklmnopqrstuvwxyz012345.lambda-url.us-east-1.on.aws/ \
    --token 0123456789abcdef0123456789abcdef \
    --cluster-name dev --node-role FleetwrightNodeRole-dev >target/infra/manifests.yaml
# The simulation scenarios' initial objects, as the manifests they stand for.
for scenario in examples/simulate/*.yaml; do
    .venv-infra/bin/python -c 'import sys, yaml
objects = yaml.safe_load(open(sys.argv[1]))["objects"]
yaml.safe_dump_all(objects, sys.stdout)' "$scenario" >"target/infra/scenario-$(basename "$scenario")"
done
.venv-infra/bin/python scripts/validate-manifests.py --crds infra/crds/karpenter-v1.yaml \
    target/infra/manifests.yaml examples/*.yaml target/infra/scenario-*.yaml \
    shared/kube/tests/fixtures/karpenter-v1/*.yaml
