#!/usr/bin/env python3
"""One table for one scenario of scripts/peer-e2e.sh: Karpenter's and Fleetwright's values and
their ratio (Fleetwright / Karpenter; below 1 is Fleetwright lower, which is better on every row
but pods running and utilisation). Reads DIR/{karpenter,fleetwright}.json (simulate's reports)
and DIR/{karpenter,fleetwright}-audit.log (the control plane's audit log, where every request of
the `autoscaler` identity is one event).

usage: peer-e2e.py DIR SCENARIO KARPENTER_VERSION [--check]

With --check (the CI smoke) it fails when, under either autoscaler, a scale step's replicas were
not all running within its window, or the run made no request through the autoscaler's
identity (so it did not run as that identity); and, when Fleetwright ran in shadow mode beside
Karpenter, when its shadow recorded no tick or its identity (`fleetwright`) wrote anything but its
Lease and state ConfigMap."""

import json
import os
import sys
from pathlib import Path

# What Fleetwright's shadow may write: its Lease and its state ConfigMap.
SHADOW_OWN = {("leases", "fleetwright-tick"), ("configmaps", "fleetwright-state")}
# Fleetwright's namespace on the control plane (its Lease and state ConfigMap).
SHADOW_NAMESPACE = os.environ.get("FLEETWRIGHT_NAMESPACE", "karpenter")

# The functions' memory sizes in infra/template.yaml (tick's is the TickMemorySize default).
MEMORY_GB = {"tick": 1.0, "interruption": 0.5, "webhook": 0.25}


def load(path):
    return json.loads(Path(path).read_text())


def requests(audit):
    """Requests the autoscaler made: total, writes, and pods evicted through the Eviction API."""
    total = writes = evictions = 0
    for line in Path(audit).read_text().splitlines():
        event = json.loads(line)
        if event.get("user", {}).get("username") != "autoscaler":
            continue
        total += 1
        verb = event.get("verb")
        if verb in ("create", "update", "patch", "delete", "deletecollection"):
            writes += 1
        ref = event.get("objectRef", {})
        code = event.get("responseStatus", {}).get("code", 0)
        if ref.get("subresource") == "eviction" and verb == "create" and 200 <= code < 300:
            evictions += 1
    return total, writes, evictions


def shadow_writes(audit):
    """The writes of Fleetwright's identity: (verb, resource, namespace/name), in order."""
    out = []
    for line in Path(audit).read_text().splitlines():
        event = json.loads(line)
        if event.get("user", {}).get("username") != "fleetwright":
            continue
        ref = event.get("objectRef", {})
        # Asking the API server who the identity is stores nothing.
        if ref.get("resource") == "selfsubjectreviews":
            continue
        name = f"{ref.get('namespace', '')}/{ref.get('name', '')}"
        resource = ref.get("resource", "")
        if ref.get("subresource"):
            resource += "/" + ref["subresource"]
        out.append((event.get("verb"), resource, name))
    return out


def shadow_summary(out, report):
    """Prints what the shadow would have done beside Karpenter; returns its failures."""
    shadow = report.get("shadow")
    if shadow is None:
        # The smoke always asks for the shadow: a report without it is a shadow that did not run.
        return ["shadow: the Karpenter run's report has no shadow"] if os.environ.get("PEER_E2E_SHADOW") else []
    writes = shadow_writes(out / "karpenter-audit.log")
    own = lambda w: w[2].split("/")[0] == SHADOW_NAMESPACE and (w[1], w[2].split("/")[-1]) in SHADOW_OWN
    others = [w for w in writes if not own(w)]
    print(
        f"\nFleetwright in shadow mode beside Karpenter: {shadow.get('ticks', 0)} ticks; it would have "
        f"created up to {shadow.get('wouldCreate', 0)} NodeClaim(s) at once, Karpenter created "
        f"{shadow.get('otherCreatedNodeclaims', 0)}; nodes both would disrupt "
        f"{len(shadow.get('disruptedByBoth', []))}, only Fleetwright {len(shadow.get('onlyFleetwright', []))}, "
        f"only Karpenter {len(shadow.get('onlyOther', []))}. Its identity wrote {len(writes)} time(s), "
        f"{len(others)} of them outside its Lease and state ConfigMap."
    )
    failures = []
    if shadow.get("ticks", 0) == 0:
        failures.append("shadow: no shadow tick was recorded")
    if others:
        failures.append(f"shadow: Fleetwright's identity wrote outside its own objects: {others[:5]}")
    # Its Lease is written every tick: none in the audit log means it ran as another identity.
    if not any(w[0] == "update" and w[1] == "leases" for w in writes):
        failures.append("shadow: no Lease update by the `fleetwright` identity in the audit log")
    return failures


def fmt(v):
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.4f}" if abs(v) < 10 else f"{v:.1f}"
    return str(v)


def ratio(f, k):
    if f is None or k is None:
        return "—"
    if k == 0:
        return "=" if f == 0 else "∞"
    return f"{f / k:.2f}"


def steps(report, key, kind):
    return [(s["at"], s["action"], s.get(key)) for s in report["steps"] if s["action"].startswith(kind)]


def main():
    out, scenario, version = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    k, f = load(out / "karpenter.json"), load(out / "fleetwright.json")
    rows = [
        ("cost integral ($)", k["costIntegral"], f["costIntegral"]),
        ("node-hours", k["nodeHours"], f["nodeHours"]),
        ("peak nodes", k["peakNodes"], f["peakNodes"]),
        ("nodes launched", k["instancesLaunched"], f["instancesLaunched"]),
        ("pod pending p50 (s)", k["pendingLatency"]["p50"], f["pendingLatency"]["p50"]),
        ("pod pending p99 (s)", k["pendingLatency"]["p99"], f["pendingLatency"]["p99"]),
        ("pod pending max (s)", k["pendingLatency"]["max"], f["pendingLatency"]["max"]),
    ]
    for (at, action, kv), (_, _, fv) in zip(steps(k, "allRunningAfter", "scale"), steps(f, "allRunningAfter", "scale")):
        rows.append((f"all replicas running after `{action}` at {at}s (s)", kv, fv))
    for (at, action, kv), (_, _, fv) in zip(steps(k, "nearSettledAfter", "scale"), steps(f, "nearSettledAfter", "scale")):
        rows.append((f"cost within 5 % of settled after `{action}` at {at}s (s)", kv, fv))
    for (at, action, kv), (_, _, fv) in zip(steps(k, "nearSettledAfter", "apply"), steps(f, "nearSettledAfter", "apply")):
        rows.append((f"cost within 5 % of settled after `{action}` at {at}s (s)", kv, fv))
    for (at, action, kv), (_, _, fv) in zip(steps(k, "noNodesAfter", "delete"), steps(f, "noNodesAfter", "delete")):
        rows.append((f"teardown: no node left after `{action}` at {at}s (s)", kv, fv))
    rows.append(("final nodes", k["finalNodes"], f["finalNodes"]))
    # Karpenter's events title-case the reason (`Empty`); Fleetwright's commands do not.
    kd, fd = ({r.capitalize(): n for r, n in d["nodesDisrupted"].items()} for d in (k, f))
    for reason in sorted(set(kd) | set(fd)):
        rows.append((f"nodes disrupted: {reason}", kd.get(reason, 0), fd.get(reason, 0)))
    kr, fr = requests(out / "karpenter-audit.log"), requests(out / "fleetwright-audit.log")
    rows.append(("pods evicted (churn)", kr[2], fr[2]))
    rows.append(("API requests by the autoscaler", kr[0], fr[0]))
    rows.append(("of them writes", kr[1], fr[1]))
    usage = k.get("autoscaler", {}).get("karpenter") or {}
    invocations = f.get("autoscaler", {}).get("invocations", {})
    seconds = sum(i["seconds"] for i in invocations.values())
    gb_seconds = sum(i["seconds"] * MEMORY_GB.get(name, 1.0) for name, i in invocations.items())
    count = sum(i["count"] for i in invocations.values())
    last_k = k["samples"][-1] if k["samples"] else {}
    last_f = f["samples"][-1] if f["samples"] else {}
    rows.append(("pods running at the end", last_k.get("runningPods"), last_f.get("runningPods")))
    # Utilization at the best-packed sample (one a minute): how full the fleet was.
    for key, name in (("cpuUtilization", "CPU"), ("memoryUtilization", "memory")):
        best = lambda r: max((s[key] for s in r["samples"] if s.get(key) is not None), default=None)
        rows.append((f"{name} requested / allocatable, best minute sample", best(k), best(f)))

    print(f"\n### {scenario} ({k['durationSeconds']} s; Karpenter {version} KWOK controller beside Fleetwright)\n")
    print("| | Karpenter | Fleetwright | Fleetwright / Karpenter |")
    print("|---|---|---|---|")
    for name, kv, fv in rows:
        print(f"| {name} | {fmt(kv)} | {fmt(fv)} | {ratio(fv, kv)} |")
    print(
        f"| compute | {usage.get('cpuSeconds', 0):.1f} CPU-s, peak RSS {usage.get('peakRssMib', 0):.0f} MiB "
        f"| {count} invocations, {seconds:.1f} s, {gb_seconds:.1f} GB-s | |"
    )
    return shadow_summary(out, k)


def check(out, shadow_failures):
    failures = list(shadow_failures)
    for side in ("karpenter", "fleetwright"):
        report = load(out / f"{side}.json")
        for at, action, after in steps(report, "allRunningAfter", "scale"):
            if after is None:
                failures.append(f"{side}: `{action}` at {at}s: not every replica ran within the step")
        if requests(out / f"{side}-audit.log")[0] == 0:
            failures.append(f"{side}: no request of the autoscaler identity in the audit log")
    for failure in failures:
        print(f"peer-e2e: {failure}", file=sys.stderr)
    return not failures


if __name__ == "__main__":
    shadow_failures = main()
    if "--check" in sys.argv[4:] and not check(Path(sys.argv[1]), shadow_failures):
        sys.exit(1)
