#!/usr/bin/env python3
"""The layout rules the code keeps, checked: no import cycle between the files of a crate, no
non-test source file over 600 lines, no test code under src/ (a unit test module is a
`#[cfg(test)] #[path = "../tests/unit/…"] mod tests;`), and no `_ =>` arm in the dry run's
descriptions.

    scripts/check-layout.py            prints each broken rule, exits 1 when any is broken

The files and cycles that broke a rule when the check came in are listed in
scripts/layout-exceptions.txt (a file with the most lines it may have, a cycle as printed): they
may shrink or go, never grow, and nothing new joins them. Remove a line once its file or cycle
keeps the rule.
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
CRATES = ["shared/core", "shared/bound", "shared/crds", "shared/cloud", "shared/sim",
          "shared/kube", "shared/aws", "shared/runtime", "functions/connect", "functions/tick",
          "functions/interruption", "functions/webhook", "cli", "tests/e2e"]
MAX_LINES = 600


def modules(src):
    """Module path (tuple) -> file, for every .rs file under src."""
    out = {}
    for dirpath, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, src)[:-3].split(os.sep)
            if rel[-1] in ("mod", "lib", "main"):
                rel = rel[:-1]
            out[tuple(rel)] = path
    return out


TEST_CODE = re.compile(r"#\[(?:tokio::)?test\b|#\[cfg\(test\)\]\s*\n(?:#\[[^\n]*\]\s*\n)*mod \w+ \{")
TEST_DECL = re.compile(r"#\[cfg\(test\)\]\s*\n(?:#\[[^\n]*\]\s*\n)*mod \w+;")


def test_code(text):
    """Whether a source file holds tests itself (tests live in the crate's tests/ folder)."""
    return TEST_CODE.search(text) is not None


def without_tests(text):
    """The text without its test module declarations."""
    return TEST_DECL.sub("", text)


def uses(text, me, known):
    """The modules of this crate a file's code names (`crate::a::b`, `super::x`, `self::x`)."""
    found = set()
    code = re.sub(r"//.*", "", without_tests(text))
    for m in re.finditer(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)", code):
        head, rest = m.group(1), m.group(2).split("::")[1:]
        if head == "crate":
            base = []
        elif head == "super":
            base = list(me[:-1])
        else:
            base = list(me)
        parts = base + rest
        # The longest prefix that is a module file.
        for n in range(len(parts), 0, -1):
            if tuple(parts[:n]) in known:
                target = tuple(parts[:n])
                if target != me and not is_ancestor(target, me):
                    found.add(target)
                break
    return found


def is_ancestor(a, b):
    return len(a) < len(b) and b[: len(a)] == a


def cycles(graph):
    """Strongly connected components of more than one file (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def exceptions():
    """The allowed files (path -> most lines) and cycles (as printed)."""
    files, cycles_allowed = {}, set()
    path = os.path.join(ROOT, "scripts", "layout-exceptions.txt")
    for line in open(path, encoding="utf-8"):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("cycle "):
            cycles_allowed.add(line[len("cycle "):])
        else:
            name, most = line.rsplit(" ", 1)
            files[name] = int(most)
    return files, cycles_allowed


def main():
    allowed_files, allowed_cycles = exceptions()
    broken = []
    for crate in CRATES:
        src = os.path.join(ROOT, crate, "src")
        if not os.path.isdir(src):
            continue
        known = modules(src)
        graph = {}
        for me, path in known.items():
            text = open(path, encoding="utf-8").read()
            graph[me] = uses(text, me, known)
            lines = len(without_tests(text).splitlines())
            rel = os.path.relpath(path, ROOT)
            most = max(MAX_LINES, allowed_files.get(rel, 0))
            if lines > most:
                broken.append(f"{rel}: {lines} lines (most {most})")
            if test_code(text):
                broken.append(f"{rel}: holds tests (unit tests go in {crate}/tests/unit/, by a #[path] module)")
        for comp in cycles(graph):
            names = " <-> ".join("::".join(c) or "lib" for c in comp)
            if f"{crate}: {names}" not in allowed_cycles:
                broken.append(f"{crate}: an import cycle between files: {names}")
    dry = os.path.join(ROOT, "shared/runtime/src/tick/dry_run.rs")
    if re.search(r"\b_\s*=>", open(dry, encoding="utf-8").read()):
        broken.append("shared/runtime/src/tick/dry_run.rs: a `_ =>` arm leaves actions undescribed")
    for b in broken:
        print(b)
    if broken:
        print(f"check-layout: {len(broken)} rule(s) broken", file=sys.stderr)
        return 1
    print("check-layout: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
