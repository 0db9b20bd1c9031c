#!/usr/bin/env python3
"""Validates Kubernetes manifests offline.

Usage: validate-manifests.py --crds CRDS.yaml FILE...

Built-in kinds are checked (strictly: unknown fields fail) against the Kubernetes JSON schemas
that `kubernetes-validate` ships. Custom resources (NodePool, EC2NodeClass, NodeClaim) are
checked against the openAPIV3Schema of the CustomResourceDefinitions found in the given files.
Exits non-zero naming every object that fails.
"""

import argparse
import sys

import jsonschema
import kubernetes_validate
import yaml

KUBERNETES_VERSION = "1.31"


def documents(path):
    with open(path, encoding="utf-8") as f:
        for doc in yaml.safe_load_all(f):
            if not doc:
                continue
            if doc.get("kind") == "List":
                yield from doc.get("items", [])
            else:
                yield doc


def crd_schemas(docs):
    schemas = {}
    for doc in docs:
        if doc.get("kind") != "CustomResourceDefinition":
            continue
        spec = doc["spec"]
        for version in spec["versions"]:
            key = (f"{spec['group']}/{version['name']}", spec["names"]["kind"])
            schemas[key] = version["schema"]["openAPIV3Schema"]
    return schemas


def name_of(doc):
    meta = doc.get("metadata", {})
    ns = meta.get("namespace")
    name = meta.get("name", "<unnamed>")
    return f"{doc.get('kind')}/{ns + '/' if ns else ''}{name}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--crds", action="append", default=[])
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()

    all_docs = [(path, doc) for path in args.crds + args.files for doc in documents(path)]
    schemas = crd_schemas(doc for _, doc in all_docs)
    failures = []
    checked = 0
    for path, doc in all_docs:
        if path in args.crds and path not in args.files:
            continue
        key = (doc.get("apiVersion"), doc.get("kind"))
        try:
            if key in schemas:
                jsonschema.validate(doc, schemas[key])
            else:
                kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
            checked += 1
        except (jsonschema.ValidationError, kubernetes_validate.ValidationError) as e:
            where = "/".join(str(p) for p in getattr(e, "absolute_path", getattr(e, "path", [])))
            failures.append(f"{path}: {name_of(doc)}: {where}: {e.message}")
        except kubernetes_validate.SchemaNotFoundError as e:
            failures.append(f"{path}: {name_of(doc)}: no schema for {key}: {e}")
    for failure in failures:
        print(f"INVALID {failure}", file=sys.stderr)
    print(f"validated {checked} object(s) against Kubernetes {KUBERNETES_VERSION} and "
          f"{len(schemas)} CRD schema(s); {len(failures)} invalid")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
