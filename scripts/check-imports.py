#!/usr/bin/env python3
"""Fails when goodput-core's top-level modules import each other in a cycle.

Reads every non-test source file of crates/core/src, resolves each `crate::`, `super::` and
`self::` path (in `use` lines and in code; comments and `#[cfg(test)]` items are skipped) to the
top-level module it names, and checks that the graph of those imports has no cycle. It prints
the cycle it finds (with the files that close it), or, with `--graph`, every edge.
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crates", "core", "src")
ATTR_PATH = re.compile(r'=\s*"((?:crate|super|self)(?:::super)*)::([A-Za-z_][A-Za-z0-9_]*)')
PATH = re.compile(r"\b((?:crate|super|self)(?:::super)*)::([A-Za-z_][A-Za-z0-9_]*)")
USE_GROUP = re.compile(r"\b(crate|super|self)::\{")


def strip_comments(text):
    """The text without comments and string literals (their contents can name modules), but
    with the paths that attributes give as strings (`#[serde(with = "crate::units::…")]`)."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif text[i] == '"' and not text[max(0, i - 1)] == "'":
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            literal = text[i : j + 1]
            attr = ATTR_PATH.match("=" + literal)
            out.append(f" {attr.group(1)}::{attr.group(2)} " if attr else '""')
            i = j + 1
        elif text.startswith("r#\"", i):
            j = text.find("\"#", i + 3)
            out.append('""')
            i = n if j < 0 else j + 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def strip_test_items(text):
    """The text without items under `#[cfg(test)]` (a `mod tests { … }` or `mod tests;`)."""
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]", text):
        if m.start() < i:
            continue
        out.append(text[i : m.start()])
        j = m.end()
        # The item ends at its first `;` before any `{`, or at the `}` closing its first `{`.
        brace = text.find("{", j)
        semi = text.find(";", j)
        if semi >= 0 and (brace < 0 or semi < brace):
            i = semi + 1
            continue
        depth, k = 0, brace
        while k < len(text):
            if text[k] == "{":
                depth += 1
            elif text[k] == "}":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        i = k + 1
    out.append(text[i:])
    return "".join(out)


def module_path(rel):
    """`runner/dispatch/mod.rs` → ['runner', 'dispatch']; `config.rs` → ['config']."""
    parts = rel[:-3].split(os.sep)
    if parts[-1] == "mod":
        parts = parts[:-1]
    return parts


def test_files():
    """Files that are only compiled for tests (`#[cfg(test)] mod x;`)."""
    skipped = set()
    for dirpath, _, files in os.walk(ROOT):
        for name in files:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(dirpath, name)
            text = strip_comments(open(path, encoding="utf-8").read())
            for m in re.finditer(r"#\[cfg\(test\)\]\s*(?:pub(?:\([a-z]+\))?\s+)?mod\s+(\w+)\s*;", text):
                here = dirpath if name in ("mod.rs", "lib.rs") else os.path.join(dirpath, name[:-3])
                skipped.add(os.path.join(here, m.group(1) + ".rs"))
                skipped.add(os.path.join(here, m.group(1), "mod.rs"))
                skipped.add(os.path.join(here, m.group(1)))
    return skipped


def edges():
    """(from, to) → files: each import of one top-level module by another."""
    tops = set()
    for entry in os.listdir(ROOT):
        if entry.endswith(".rs") and entry != "lib.rs":
            tops.add(entry[:-3])
        elif os.path.isdir(os.path.join(ROOT, entry)):
            tops.add(entry)
    skipped = test_files()
    found = {}
    for dirpath, _, files in os.walk(ROOT):
        if any(dirpath == s or dirpath.startswith(s + os.sep) for s in skipped):
            continue
        for name in files:
            path = os.path.join(dirpath, name)
            if not name.endswith(".rs") or name == "lib.rs" or path in skipped:
                continue
            rel = os.path.relpath(path, ROOT)
            here = module_path(rel)
            text = strip_test_items(strip_comments(open(path, encoding="utf-8").read()))
            for target in targets(text, here, tops):
                if target != here[0]:
                    found.setdefault((here[0], target), set()).add(rel)
    return tops, found


def resolve(anchor, first, here):
    """The top-level module `anchor::first` names from module `here` (None: not a module)."""
    if anchor == "crate":
        return first
    ups = anchor.count("super")
    if anchor.startswith("self"):
        base = list(here)
    else:
        base = here[: len(here) - ups] if ups <= len(here) else []
    path = base + [first]
    return path[0]


def targets(text, here, tops):
    for m in PATH.finditer(text):
        top = resolve(m.group(1), m.group(2), here)
        if top in tops:
            yield top
    # `use crate::{a, b::c}` and `use super::{…}` groups.
    for m in USE_GROUP.finditer(text):
        depth, k = 1, m.end()
        while k < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[k], 0)
            k += 1
        group = text[m.end() : k - 1]
        for name in re.findall(r"(?:^|[{,])\s*([A-Za-z_]\w*)", group):
            top = resolve(m.group(1), name, here)
            if top in tops:
                yield top


def find_cycle(tops, found):
    graph = {t: sorted({b for (a, b) in found if a == t}) for t in tops}
    state, stack = {}, []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in graph[node]:
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if not state.get(nxt):
                cycle = visit(nxt)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(tops):
        if not state.get(node):
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def layers(tops, found):
    """The modules by layer: each imports only modules of lower layers (needs no cycle)."""
    depth = {}

    def level(node, seen=()):
        if node not in depth:
            below = [b for (a, b) in found if a == node and b not in seen]
            depth[node] = 1 + max((level(b, seen + (node,)) for b in below), default=-1)
        return depth[node]

    for node in tops:
        level(node)
    return [sorted(n for n in tops if depth[n] == d) for d in range(max(depth.values()) + 1)]


def main():
    tops, found = edges()
    if "--layers" in sys.argv:
        for depth, names in enumerate(layers(tops, found)):
            print(depth, " ".join(names))
        return 0
    if "--graph" in sys.argv:
        for (a, b), files in sorted(found.items()):
            print(f"{a} -> {b}: {', '.join(sorted(files))}")
        return 0
    cycle = find_cycle(tops, found)
    if cycle is None:
        print(f"core: {len(tops)} top-level modules, {len(found)} imports between them, no cycle")
        return 0
    print("core's top-level modules import each other in a cycle:", " -> ".join(cycle))
    for a, b in zip(cycle, cycle[1:]):
        print(f"  {a} -> {b}: {', '.join(sorted(found[(a, b)]))}")
    print("Move the shared item down to the module both can import (see docs/architecture.md).")
    return 1


if __name__ == "__main__":
    sys.exit(main())
