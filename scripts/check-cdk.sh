#!/usr/bin/env bash
# The CDK construct (infra/cdk): its tests (aws-cdk-lib/assertions, and the equivalence test
# against infra/template.yaml after the SAM transform), then `cdk synth` of the example app,
# offline, for a public cluster and for a private one with VPC endpoints, each template
# checked by cfn-lint. Needs infra/cdk/node_modules and .venv-infra
# (scripts/setup-test-tools.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
export CDK_DISABLE_CLI_TELEMETRY=true AWS_EC2_METADATA_DISABLED=true
export AWS_REGION="${AWS_REGION:-us-east-1}" AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"
export SAM_PYTHON="$PWD/.venv-infra/bin/python"
out="$PWD/target/cdk"
rm -rf "$out" && mkdir -p "$out"

echo "== infra/cdk: npm test"
(cd infra/cdk && npm test --silent 2>&1) | tee "$out/test.log" | grep -E '^(not )?ok|^# (pass|fail)'
grep -q '^# fail 0' "$out/test.log" || { cat "$out/test.log" >&2; echo "infra/cdk tests failed" >&2; exit 1; }

# Placeholder `cargo lambda build` output: synth packages it, nothing runs it.
code="$out/lambda"
for fn in tick interruption webhook; do
    mkdir -p "$code/$fn" && printf '#!/bin/sh\n' >"$code/$fn/bootstrap"
done
synth() {
    local mode=$1; shift
    echo "== cdk synth ($mode)"
    (cd infra/cdk && npx --no-install cdk synth --no-notices --quiet --output "$out/$mode" \
        -c clusterName=dev -c codeDirectory="$code" "$@")
    .venv-infra/bin/cfn-lint "$out/$mode"/Fleetwright-dev.template.json
    echo "cfn-lint: $out/$mode/Fleetwright-dev.template.json ok"
}
synth public
synth private -c vpcId=vpc-0123456789abcdef0 -c availabilityZones=us-east-1a,us-east-1b \
    -c privateSubnetIds=subnet-0123456789abcdef0,subnet-0123456789abcdef1 \
    -c securityGroupId=sg-0123456789abcdef0 -c createVpcEndpoints=true
