#!/usr/bin/env python3
"""Fails when a source folder includes a folder it sits below.

usage: include_layers.py SRC_DIR LAYER [LAYER ...] [--forbid LAYER REGEX ...]

LAYERs are SRC_DIR's folders from the bottom up. A file in a layer may include
its own layer and those listed before it; files directly in SRC_DIR (shared
headers such as errors.hpp) may be included by every layer. Each back-edge is
printed as file:line with what it includes.

--forbid FOLDER REGEX: no line of a file under FOLDER (relative to SRC_DIR;
comments aside) matches REGEX, e.g. code that must leave the database to the
layer below it. A FOLDER with a * is a pattern of the files' paths instead
(service/*_service.*).
"""
import fnmatch
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
    forbidden = []
    if "--forbid" in layers:
        rules = layers[layers.index("--forbid"):]
        layers = layers[:layers.index("--forbid")]
        if len(rules) % 3 != 0 or any(flag != "--forbid" for flag in rules[::3]):
            print(__doc__, file=sys.stderr)
            return 64
        forbidden = [(rules[i + 1], re.compile(rules[i + 2])) for i in range(0, len(rules), 3)]
    rank = {name: i for i, name in enumerate(layers)}
    missing = [name for name in layers + [layer for layer, _ in forbidden if "*" not in layer]
               if not (root / name).is_dir()]
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
            code = line.split("//", 1)[0]
            for layer, pattern in forbidden:
                under = (fnmatch.fnmatch(relative.as_posix(), layer) if "*" in layer
                         else relative.as_posix().startswith(layer + "/"))
                if under and pattern.search(code):
                    where = layer if "*" in layer else layer + "/"
                    problems.append(f"{relative}:{number}: {where} may not use {pattern.pattern}: {line.strip()}")
            match = INCLUDE.match(line)
            if not match:
                continue
            target = match.group(1).split("/")[0]
            if target in rank and rank[target] > rank[own]:
                problems.append(f"{relative}:{number}: {own}/ includes {match.group(1)}, a layer above it")
    for problem in problems:
        print(problem)
    print(f"{root}: {'ok' if not problems else str(len(problems)) + ' problems'} "
          f"(layers, bottom up: {' < '.join(layers)})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
