#!/usr/bin/env python3
"""Runs clang-tidy, with the committed .clang-tidy, over the C++ sources that
the build compiles under the given folders, and fails on any finding.

usage: clang_tidy.py CLANG_TIDY BUILD_DIR SOURCE_DIR FOLDER [FOLDER ...]

BUILD_DIR holds compile_commands.json (CMAKE_EXPORT_COMPILE_COMMANDS);
FOLDERs are relative to SOURCE_DIR. Each finding is printed once, as
clang-tidy gives it (file:line:column: warning: ... [check]), with its notes;
a header's finding reached from several sources is printed once.
"""
import json
import os
import pathlib
import re
import subprocess
import sys
import time

FINDING = re.compile(r"^(/[^:]+):(\d+):(\d+): (warning|error): .*\[([\w.,-]+)\]$")


def main() -> int:
    if len(sys.argv) < 5:
        print(__doc__, file=sys.stderr)
        return 64
    tidy, build, source = sys.argv[1], pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3]).resolve()
    folders = [source / folder for folder in sys.argv[4:]]
    database = build / "compile_commands.json"
    if not database.exists():
        print(f"{database}: missing (configure with CMAKE_EXPORT_COMPILE_COMMANDS=ON)", file=sys.stderr)
        return 64
    files = sorted({
        entry["file"] for entry in json.loads(database.read_text())
        if entry["file"].endswith(".cpp") and any(
            pathlib.Path(entry["file"]).resolve().is_relative_to(folder) for folder in folders)
    })
    if not files:
        print(f"no C++ source of the build under {', '.join(sys.argv[4:])}", file=sys.stderr)
        return 64
    seen = set()
    findings = []
    started = time.monotonic()
    for number, file in enumerate(files, 1):
        result = subprocess.run([tidy, "-p", str(build), "--quiet", file],
                                capture_output=True, text=True, check=False)
        block = None
        for line in result.stdout.splitlines():
            match = FINDING.match(line)
            if match:
                location = os.path.normpath(match.group(1)), match.group(2), match.group(3), match.group(5)
                block = None if location in seen else []
                if block is not None:
                    seen.add(location)
                    findings.append(block)
                    line = line.replace(match.group(1), os.path.relpath(location[0], source), 1)
            if block is not None:
                block.append(line)
        if result.returncode != 0 and not findings:
            print(result.stderr[-4000:], file=sys.stderr)
            print(f"clang-tidy failed on {file} (exit {result.returncode})", file=sys.stderr)
            return 1
        print(f"[{number}/{len(files)}] {os.path.relpath(file, source)}", file=sys.stderr, flush=True)
    for block in findings:
        print("\n".join(block))
    print(f"clang-tidy: {len(findings)} finding(s) in {len(files)} source(s) under "
          f"{', '.join(sys.argv[4:])} ({time.monotonic() - started:.0f} s)")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
