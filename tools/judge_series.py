#!/usr/bin/env python3
"""Posts the reports of a pull-request series (tools/nvbench-ab-series.sh:
aa-N.json, slow-N.json, main-N.json) to a kw-server and prints each verdict
with its cases' ratios: the A/A and detection targets are read off real
verdicts, not recomputed. Main runs go first (each a new commit on main);
pull requests are judged on the A/B measured in their own job.

  judge_series.py --server URL --token AGENT_TOKEN REPORT.json ...

The project the reports name must exist: make the token with
`kw-server token create --scope agent --name series --project PROJECT`.
"""
import argparse
import collections
import hashlib
import json
import os

from post_series import request


def kind_of(path):
    return os.path.basename(path).split("-")[0]


def full_bench(report):
    return next(s for s in report["stages"] if s["name"] == "full_bench")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("reports", nargs="+")
    args = parser.parse_args()
    reports = sorted(args.reports, key=lambda p: (kind_of(p) != "main", p))
    verdicts = collections.defaultdict(collections.Counter)
    seconds = collections.defaultdict(list)
    for path in reports:
        with open(path) as f:
            report = json.load(f)
        kind = kind_of(path)
        # Each report its own commit: a series measures one build again and again.
        report["commit"] = hashlib.sha1(path.encode()).hexdigest()
        if kind == "main":
            report["branch"] = "main"
            report.pop("base_commit", None)
        answer = request(args.server, args.token, "POST", "/api/v1/runs", report)
        run = request(args.server, args.token, "GET", f"/api/v1/runs/{answer['run_id']}?per_page=2000")
        verdicts[kind][answer["verdict"]] += 1
        stage = full_bench(report)
        seconds[kind].append(stage["duration_ms"] / 1000)
        cases = [c for c in run["comparisons"] if c["impl"] == "candidate" and c["kind"] == "time"]
        detail = ", ".join(f"{c['case'].split('/', 1)[-1]} {c['ratio']:.4f} [{c['lower']:.4f},{c['upper']:.4f}] {c['status']}"
                           for c in cases if c.get("ratio") is not None)
        print(f"{os.path.basename(path)}: {answer['verdict']} (run {answer['run_id']}, full_bench "
              f"{stage['duration_ms'] / 1000:.1f} s): {detail}")
    print()
    for kind, counts in verdicts.items():
        mean = sum(seconds[kind]) / len(seconds[kind])
        print(f"{kind}: {sum(counts.values())} runs: {dict(counts)}; full_bench mean {mean:.1f} s")


if __name__ == "__main__":
    main()
