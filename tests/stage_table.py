#!/usr/bin/env python3
"""Fails when a list of the run's stages outside common/kw/common/stages.hpp
disagrees with its table: the stages the C++ code reads from kStageTable,
but the Python harness and the docs cannot.

usage: stage_table.py SOURCE_DIR

Checked: kwbench.py's --stage choices (every stage after the build, in
order, then "preflight") and its preflight's per-case stages, docs/run-report.md's list of a stage's `name`, docs/repo-config.md's
`timeouts_s.<stage>` keys and its example.
"""
import pathlib
import re
import sys

ROW = re.compile(r'\{StageName::(\w+),\s*"(\w+)",\s*(true|false),\s*(true|false),\s*(true|false),\s*(true|false)\}')


def table(root):
    text = (root / "common/kw/common/stages.hpp").read_text()
    rows = [{"name": m[1], "text": m[2], "preflight": m[3] == "true", "timeout": m[5] == "true"}
            for m in ROW.finditer(text)]
    if not rows:
        sys.exit("stage_table.py: no rows read from common/kw/common/stages.hpp")
    return rows


def backticked(line):
    return re.findall(r"`(\w+)`", line)


def main():
    root = pathlib.Path(sys.argv[1])
    rows = table(root)
    after_build = [r["text"] for r in rows][2:]
    timed = [r["text"] for r in rows if r["timeout"]]
    problems = []

    kwbench = (root / "kernels/python/kwbench.py").read_text()
    choices = re.search(r'add_argument\("--stage", choices=\[([^\]]*)\]', kwbench)
    found = re.findall(r'"(\w+)"', choices[1]) if choices else []
    # "preflight" names the stages before full_bench run in one process, as the C++ harness's does.
    if found != after_build + ["preflight"]:
        problems.append(f"kernels/python/kwbench.py --stage choices {found}, the table's {after_build} and preflight")
    per_case = re.search(r'_PREFLIGHT_CASE_STAGES = \(([^)]*)\)', kwbench)
    in_process = re.findall(r'"(\w+)"', per_case[1]) if per_case else []
    preflight = [r["text"] for r in rows if r["preflight"]][1:]  # after load
    if in_process != preflight:
        problems.append(f"kernels/python/kwbench.py _PREFLIGHT_CASE_STAGES {in_process}, the table's {preflight}")

    report_doc = (root / "docs/run-report.md").read_text().splitlines()
    # The stages section's row of `name` (the agent's and the device's come first).
    names = [backticked(line.split("|")[4]) for line in report_doc
             if line.startswith("| `name` | string | yes |") and "`build`" in line]
    if not names or names[0] != ["build"] + after_build:
        problems.append(f"docs/run-report.md stage names {names[:1]}, the table's {['build'] + after_build}")

    config_doc = (root / "docs/repo-config.md").read_text().splitlines()
    keys = [backticked(line.split("|")[3]) for line in config_doc if line.startswith("| `timeouts_s.<stage>`")]
    if not keys or keys[0] != timed:
        problems.append(f"docs/repo-config.md timeouts_s keys {keys[:1]}, the table's {timed}")
    example = [re.findall(r'"(\w+)":', line) for line in config_doc if '"timeouts_s": {' in line]
    if not example or example[0][1:] != timed:
        problems.append(f"docs/repo-config.md's example timeouts_s {example[:1]}, the table's {timed}")

    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
