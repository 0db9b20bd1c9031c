#!/usr/bin/env python3
"""Prints infra/template.yaml after the SAM transform, as plain CloudFormation JSON, offline.

The CDK equivalence test (infra/cdk/test/equivalence.test.ts) compares it with the CDK
construct's synthesized template. The transform needs an S3 CodeUri, so the local `../` of each
function is replaced by a placeholder (the code location is not compared). Run with the
.venv-infra Python (scripts/setup-test-tools.sh), which has the SAM translator.
"""
import json
import os
import sys

from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "infra/template.yaml"
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    template = yaml_parse(open(path).read())
    for resource in template["Resources"].values():
        if resource["Type"] == "AWS::Serverless::Function":
            resource["Properties"]["CodeUri"] = "s3://placeholder/code.zip"
    json.dump(transform(template, {}, None), sys.stdout, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
