#!/usr/bin/env python3
"""Fails when a header of the given folders includes, however deeply, a
header whose path holds FORBIDDEN (e.g. pqxx/): what include_layers.py checks
a line at a time, checked through every include by the compiler itself.

usage: headers_without.py CXX FORBIDDEN INCLUDE_DIRS(;-separated) FOLDER... [-- FILE...]
"""
import pathlib
import subprocess
import sys


def main() -> int:
    if len(sys.argv) < 5:
        print(__doc__, file=sys.stderr)
        return 64
    cxx, forbidden, include_dirs = sys.argv[1], sys.argv[2], [d for d in sys.argv[3].split(";") if d]
    targets = []
    for item in sys.argv[4:]:
        path = pathlib.Path(item)
        targets += sorted(path.glob("*.hpp")) if path.is_dir() else [path]
    flags = ["-std=c++20", "-x", "c++", "-E", "-H", "-o", "/dev/null", "-"]
    for directory in include_dirs:
        flags += ["-I", directory]
    problems = 0
    for header in targets:
        result = subprocess.run([cxx] + flags, input=f'#include "{header.resolve()}"\n', text=True,
                                capture_output=True)
        if result.returncode != 0:
            print(f"{header}: does not preprocess:\n{result.stderr[-2000:]}")
            problems += 1
            continue
        chain = [line for line in result.stderr.splitlines() if line.startswith(".")]
        for i, line in enumerate(chain):
            if forbidden in line:
                depth = len(line) - len(line.lstrip("."))
                path = [line.strip(". ")]
                for before in reversed(chain[:i]):
                    d = len(before) - len(before.lstrip("."))
                    if d < depth:
                        path.insert(0, before.strip(". "))
                        depth = d
                print(f"{header}: includes {forbidden} through " + " -> ".join(path))
                problems += 1
                break
    print(f"{len(targets)} headers: " + ("ok" if not problems else f"{problems} include {forbidden}"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
