#!/usr/bin/env python3
"""Fails when a top-level function of the dashboard's sources is over LIMIT lines.

usage: js_function_size.py LIMIT SOURCE_DIR

The dashboard is formatted by prettier (dashboard_format), so a top-level
function declaration starts at column 0 (`function`, `async function`,
`export [async] function`) and ends at the first line that is `}` alone at
column 0. Its lines run from its signature to that brace, as
cuda_function_size.py counts a C++ function's.
"""
import pathlib
import re
import sys

DECLARATION = re.compile(r"^(?:export\s+)?(?:async\s+)?function\s*\*?\s*([A-Za-z_$][\w$]*)")


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 64
    limit = int(sys.argv[1])
    root = pathlib.Path(sys.argv[2])
    long_ones = []
    count = 0
    for path in sorted(root.rglob("*.js")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines):
            match = DECLARATION.match(line)
            if not match:
                continue
            end = next((k for k in range(number, len(lines)) if lines[k] == "}"), None)
            if end is None:
                long_ones.append(f"{path.relative_to(root)}:{number + 1}: {match.group(1)} has no closing brace at column 0")
                continue
            count += 1
            length = end - number + 1
            if length > limit:
                long_ones.append(f"{path.relative_to(root)}:{number + 1}: {match.group(1)} is {length} lines "
                                 f"(at most {limit}: split it into named parts)")
    for problem in long_ones:
        print(problem)
    print(f"{root}: {count} functions, {len(long_ones)} over {limit} lines")
    return 1 if long_ones else 0


if __name__ == "__main__":
    sys.exit(main())
