#!/usr/bin/env python3
"""Keeps clap at the door of crates/cli: only `args/` (the argument groups and their conversion
into plain options), `cli.rs` (the clap parser's root) and `app.rs` (which converts and
dispatches) may import `crate::args` / `super::args` or name `clap`; every other module reads
the plain configuration of `options/`. Comments are not code: a doc line may mention either."""
import os, re, subprocess, sys

ROOT = "crates/cli/src"
ALLOWED = {"cli.rs", "app.rs"}
PATTERNS = [
    (re.compile(r"\b(crate|super)(::super)*::args\b"), "imports the clap argument groups (args)"),
    (re.compile(r"\b(crate|super)(::super)*::\{[^}]*\bargs\b"), "imports the clap argument groups (args)"),
    (re.compile(r"\bclap\b"), "names clap"),
]

files = subprocess.run(
    ["git", "ls-files", "--cached", "--others", "--exclude-standard", f"{ROOT}/*.rs"],
    capture_output=True, text=True, check=True,
).stdout.split()
problems = []
for path in filter(os.path.exists, files):
    relative = os.path.relpath(path, ROOT)
    if relative.startswith("args" + os.sep) or relative in ALLOWED:
        continue
    for number, line in enumerate(open(path, encoding="utf-8"), start=1):
        code = line.strip()
        if code.startswith("//"):
            continue
        code = re.sub(r"\s//.*$", "", code)
        for pattern, what in PATTERNS:
            if pattern.search(code):
                problems.append(f"{path}:{number}: {what}: {line.strip()}")
print("\n".join(problems) if problems else "clap stays in args/, cli.rs and app.rs")
sys.exit(1 if problems else 0)
