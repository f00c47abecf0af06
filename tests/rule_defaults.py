#!/usr/bin/env python3
"""Fails when a detection rule parameter's default is written anywhere but
kw/common/detection.hpp.

usage: rule_defaults.py SOURCE_DIR

A copy of a default (`min_threshold = 0.01` in a settings struct, a literal
in a query) is how one rule became three: the server, the agent and the
store each judged by their own. The sources of server/, agent/, common/ and
kernels/ are read; a parameter's name set to a number literal is a copy,
unless KNOWN names it with the reason it is another quantity of that name.
The schema's column defaults are checked against the rule by MigrationsTest.
"""
import pathlib
import re
import sys

PARAMETERS = ("min_threshold", "energy_threshold", "run_alpha", "screen_alpha", "min_history", "min_samples",
              "prior_df", "prior_conflict_alpha", "outlier_sds", "resolution", "kMaxRunAlpha", "history_runs",
              "outlier_floor", "min_clock_sd", "energy_sd")
RULE = pathlib.PurePosixPath("common/kw/common/detection.hpp")
COPY = re.compile(r"\b(" + "|".join(PARAMETERS) + r")\b['\"]?\s*(?:=|\{|:)\s*-?\d")
SUFFIXES = {".cpp", ".hpp", ".h", ".cu", ".cuh", ".py"}
# (path, parameter): why that line is not a copy of the rule's default.
KNOWN = {
    ("agent/src/project/repo_config.hpp", "min_samples"): "the samples a bench takes, not the rule's minimum",
    ("kernels/harness/src/stages.hpp", "min_samples"): "the samples a bench takes, not the rule's minimum",
    ("common/kw/common/judge.hpp", "min_threshold"): "a case's threshold, filled in by threshold_for",
    ("server/bench/server_bench.hpp", "history_runs"): "the runs the bench stores, not a case's history window",
}


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 64
    root = pathlib.Path(sys.argv[1])
    copies = []
    for top in ("server", "agent", "common", "kernels"):
        for path in sorted((root / top).rglob("*")):
            relative = pathlib.PurePosixPath(path.relative_to(root).as_posix())
            if path.suffix not in SUFFIXES or relative == RULE or "tests" in relative.parts:
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
                code = line.split("//", 1)[0]
                if code.lstrip().startswith("#"):
                    code = ""  # a Python comment or a preprocessor line
                for match in COPY.finditer(code):
                    if (str(relative), match.group(1)) not in KNOWN:
                        copies.append(f"{relative}:{number}: {match.group(1)}'s default belongs in {RULE}: "
                                      f"{line.strip()}")
    for copy in copies:
        print(copy)
    print(f"{root}: {len(copies)} copies of the rule's defaults" if copies else f"{root}: ok")
    return 1 if copies else 0


if __name__ == "__main__":
    sys.exit(main())
