#!/usr/bin/env bash
# Regenerates the compressed catalog embedded in fleetwright-core from ../shared/data/aws
# (the exact outputs of `aws ec2 describe-instance-types`, `describe-instance-type-offerings`
# for every region there, and the on-demand price table for us-east-1).
set -euo pipefail
cd "$(dirname "$0")/.."
src=../shared/data/aws
dst=shared/core/data
for f in describe-instance-types.json ondemand-prices-us-east-1.csv \
    $(cd "$src" && ls instance-type-offerings-*.json); do
  gzip -9 -n -c "$src/$f" > "$dst/$f.gz"
done
ls -l "$dst"
