#!/usr/bin/env python3
"""Flags Rust files over 600 lines and functions over 60 lines (a style check, not a parser:
a function runs from its `fn` line to the closing brace at the same indentation)."""
import re, subprocess, sys

MAX_FILE, MAX_FN = 600, 60
files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.rs"], capture_output=True, text=True).stdout.split()
problems = []
import os
for path in filter(os.path.exists, files):
    lines = open(path, encoding="utf-8").read().split("\n")
    if len(lines) > MAX_FILE:
        problems.append(f"{path}: {len(lines)} lines (file)")
    for i, line in enumerate(lines):
        m = re.match(r"^(\s*)(pub(\([^)]*\))? )?(async )?(const )?(unsafe )?fn (\w+)", line)
        if not m or line.rstrip().endswith(";"):
            continue
        indent = m.group(1)
        for j in range(i + 1, len(lines)):
            if lines[j] == indent + "}":
                if j - i + 1 > MAX_FN:
                    problems.append(f"{path}:{i + 1}: fn {m.group(7)} is {j - i + 1} lines")
                break
print("\n".join(problems) if problems else "sizes ok")
sys.exit(1 if problems else 0)
