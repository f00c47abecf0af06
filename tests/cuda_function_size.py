#!/usr/bin/env python3
"""Fails when a host function in a CUDA source (.cu, .cuh) is over LIMIT lines.

usage: cuda_function_size.py LIMIT SOURCE_DIR

clang-tidy's readability-function-size holds the C++ sources (clang_tidy.py);
it cannot read nvcc's command lines, so this holds the host code of the CUDA
sources to the same limit. Device code (__global__, __device__ without
__host__) is exempt: a kernel is one function by nature. A function is what
opens a brace after a closing parenthesis at namespace or class scope; its
lines run from its signature's first line to its closing brace, as
clang-tidy counts them.
"""
import pathlib
import re
import subprocess
import sys

STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)\'')
OPENS_BODY = re.compile(r"\)\s*(?:const\s*)?(?:noexcept\s*)?(?:override\s*)?(?:->[^{]*)?(?::[^{]*)?\{\s*$")
CONTROL = re.compile(r"^\s*(?:if|for|while|switch|else|do|catch)\b")


def functions(lines):
    """(first line, last line, signature) of each function body at namespace
    or class scope, 1-based."""
    depth = 0
    scopes = []  # the depths at which a namespace, class or extern block opened
    found = []
    current = None
    for number, raw in enumerate(lines, 1):
        code = STRING.sub('""', raw.split("//", 1)[0])
        at_scope = depth == (scopes[-1] + 1 if scopes else 0)
        if current is None and at_scope and OPENS_BODY.search(code) and not CONTROL.match(code):
            first = number
            while first > 1 and lines[first - 2].strip() and not re.search(r"[;{}]\s*$", lines[first - 2]) \
                    and not lines[first - 2].lstrip().startswith(("//", "#")):
                first -= 1
            current = (first, depth, " ".join(l.strip() for l in lines[first - 1:number]))
        elif current is None and re.search(r"\b(?:namespace|class|struct|union|extern\s+\"C\")\b[^;()]*\{\s*$",
                                           code):
            scopes.append(depth)
        depth += code.count("{") - code.count("}")
        if current is not None and depth <= current[1]:
            found.append((current[0], number, current[2]))
            current = None
        while scopes and depth <= scopes[-1]:
            scopes.pop()
    return found


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 64
    limit, root = int(sys.argv[1]), pathlib.Path(sys.argv[2])
    files = subprocess.run(["git", "ls-files", "*.cu", "*.cuh"], cwd=root, capture_output=True, text=True,
                           check=True).stdout.split()
    over = []
    checked = 0
    for name in files:
        lines = (root / name).read_text(encoding="utf-8").split("\n")
        for first, last, signature in functions(lines):
            device = re.search(r"\b__global__\b|\b__device__\b", signature) and "__host__" not in signature
            if device:
                continue
            checked += 1
            if last - first + 1 > limit:
                over.append(f"{name}:{first}: {last - first + 1} lines: {signature[:100]}")
    for line in over:
        print(line)
    print(f"{checked} host functions in {len(files)} CUDA sources; {len(over)} over {limit} lines")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
