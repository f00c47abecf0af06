#!/usr/bin/env python3
"""Fails when a C++ or CUDA source in agent/, server/ or common/ (tests
included) passes MAX lines: past that a file holds more than one idea, and
a change to one reads through the others.

usage: source_size.py MAX SOURCE_DIR
"""
import pathlib
import sys

SUFFIXES = {".cpp", ".hpp", ".h", ".cu", ".cuh"}


def main():
    limit, root = int(sys.argv[1]), pathlib.Path(sys.argv[2])
    over, checked = [], 0
    for component in ("agent", "server", "common"):
        for path in sorted((root / component).rglob("*")):
            if path.suffix not in SUFFIXES or not path.is_file():
                continue
            checked += 1
            lines = path.read_text(errors="replace").count("\n")
            if lines > limit:
                over.append(f"{path.relative_to(root)}: {lines} lines, over {limit}: split it by what it does")
    for line in over:
        print(line)
    if over:
        sys.exit(1)
    if checked < 100:
        sys.exit(f"source_size.py: only {checked} sources read under {root}")
    print(f"source_size.py: {checked} sources, none over {limit} lines")


if __name__ == "__main__":
    main()
