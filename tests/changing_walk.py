#!/usr/bin/env python3
"""Fails when docs/changing-kernelwatch.md no longer matches the tree: each
walk's table names files of code and a name to look for in each; every file
must exist and hold its name, and each heading's "(N files of code)" must be
its table's row count.

usage: changing_walk.py SOURCE_DIR
"""
import pathlib
import re
import sys

HEADING = re.compile(r"^## (.+) \((\d+) files? of code\)$")
ROW = re.compile(r"^\| `([^`]+)` \| `([^`]+)` \|")


def walks(page):
    found, current = [], None
    for line in page.splitlines():
        heading = HEADING.match(line)
        if heading:
            current = {"title": heading[1], "count": int(heading[2]), "rows": []}
            found.append(current)
            continue
        row = ROW.match(line)
        if row and current is not None:
            current["rows"].append((row[1], row[2]))
    return found


def main():
    root = pathlib.Path(sys.argv[1])
    page = root / "docs/changing-kernelwatch.md"
    problems = []
    found = walks(page.read_text())
    if len(found) != 3:
        problems.append(f"{page}: {len(found)} walks read, 3 expected (a threshold setting, a read endpoint, a preflight stage)")
    for walk in found:
        if len(walk["rows"]) != walk["count"]:
            problems.append(f"{walk['title']}: the heading says {walk['count']} files of code, its table lists "
                            f"{len(walk['rows'])}")
        for path, name in walk["rows"]:
            file = root / path
            if not file.is_file():
                problems.append(f"{walk['title']}: {path} does not exist")
            elif name not in file.read_text():
                problems.append(f"{walk['title']}: {path} has no `{name}`")
    for problem in problems:
        print(problem)
    if problems:
        sys.exit(1)
    print("changing_walk.py: " + ", ".join(f"{w['title']}: {w['count']} files" for w in found))


if __name__ == "__main__":
    main()
