#!/usr/bin/env python3
"""Prints a `kind: List` with one object per Karpenter CRD given, each holding every property its
schema declares (spec and status, one sample value each). cli/tests/strict_input.rs reads the
result (cli/tests/fixtures/karpenter-v1.15-all-fields.json) and asserts that no key of it is
taken for a typo. Regenerate it from Karpenter's own CRDs, fetched by the CRD agreement stage:

    python3 scripts/karpenter-all-fields.py target/karpenter-reference/v1.15.0/crds/*.yaml \
        > cli/tests/fixtures/karpenter-v1.15-all-fields.json
"""
import yaml, json, sys
def sample(schema, depth=0):
    t = schema.get('type')
    if 'x-kubernetes-int-or-string' in schema: return "1"
    if 'enum' in schema: return schema['enum'][0]
    if t == 'object' or 'properties' in schema:
        props = schema.get('properties')
        if props:
            # A budget's schedule is a value Fleetwright parses (a cron the CRD's pattern admits).
            return {k: "0 9 * * *" if k == 'schedule' else sample(v, depth+1) for k, v in props.items()}
        if 'additionalProperties' in schema:
            return {"k": sample(schema['additionalProperties'], depth+1) if isinstance(schema['additionalProperties'], dict) else "v"}
        return {}
    if t == 'array': return [sample(schema.get('items', {}), depth+1)]
    if t == 'string': return "x"
    if t == 'integer': return 1
    if t == 'number': return 1
    if t == 'boolean': return True
    return "x"
def our_class(value):
    # A class reference names the AWS provider's class, as any NodePool Fleetwright plans with
    # does; another provider's NodePool is ignored.
    if isinstance(value, dict):
        for k, v in value.items():
            if k == 'nodeClassRef' and isinstance(v, dict):
                v.update(group='karpenter.k8s.aws', kind='EC2NodeClass')
            else:
                our_class(v)
    elif isinstance(value, list):
        for v in value: our_class(v)
    return value
out = []
for path in sys.argv[1:]:
    crd = yaml.safe_load(open(path))
    kind = crd['spec']['names']['kind']
    for v in crd['spec']['versions']:
        if not v.get('storage'): continue
        props = v['schema']['openAPIV3Schema']['properties']
        obj = {"apiVersion": crd['spec']['group'] + "/" + v['name'], "kind": kind, "metadata": {"name": "all-" + kind.lower()}}
        for k in ('spec', 'status'):
            if k in props: obj[k] = sample(props[k])
        out.append(our_class(obj))
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": out}, indent=1, sort_keys=True))
