#!/usr/bin/env python3
"""Fails when a source folder includes a folder it sits below.

usage: include_layers.py SRC_DIR LAYER [LAYER ...]

LAYERs are SRC_DIR's folders from the bottom up. A file in a layer may include
its own layer and those listed before it; files directly in SRC_DIR (shared
headers such as errors.hpp) may be included by every layer. Each back-edge is
printed as file:line with what it includes.
"""
import pathlib
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 64
    root = pathlib.Path(sys.argv[1])
    layers = sys.argv[2:]
    rank = {name: i for i, name in enumerate(layers)}
    missing = [name for name in layers if not (root / name).is_dir()]
    if missing:
        print(f"{root}: no folder {', '.join(missing)}", file=sys.stderr)
        return 64
    problems = []
    for path in sorted(root.rglob("*")):
        if path.suffix not in {".cpp", ".hpp", ".h", ".cu", ".cuh"}:
            continue
        relative = path.relative_to(root)
        if len(relative.parts) < 2:
            continue
        own = relative.parts[0]
        if own not in rank:
            problems.append(f"{relative}: folder {own} is in no layer (add it to the list)")
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            match = INCLUDE.match(line)
            if not match:
                continue
            target = match.group(1).split("/")[0]
            if target in rank and rank[target] > rank[own]:
                problems.append(f"{relative}:{number}: {own}/ includes {match.group(1)}, a layer above it")
    for problem in problems:
        print(problem)
    print(f"{root}: {'ok' if not problems else str(len(problems)) + ' back-edges'} "
          f"(layers, bottom up: {' < '.join(layers)})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
