#!/usr/bin/env python3
"""The energy (or, with KIND time, the time) comparisons of one stored A/A
run, split at 100 us of kernel time: how many came out p < 0.05 and p < 0.01 and how far they moved. Run it
against a kw-server holding a re-judged energy series
(tools/rejudge-series.sh on an energy series' reports, then the server
started again on that data directory).

  energy_aa_split.py http://127.0.0.1:PORT RUN_ID [KIND]
"""
import json
import statistics
import sys
import urllib.request

server, run_id = sys.argv[1], sys.argv[2]
kind = sys.argv[3] if len(sys.argv) > 3 else "energy"
run = json.load(urllib.request.urlopen(f"{server}/api/v1/runs/{run_id}?per_page=2000"))
median_ns = {c["name"]: next(m for m in c["measurements"] if m["impl"] == "candidate")["median_ns"]
             for c in run["cases"]}
energy = [c for c in run["comparisons"] if c["kind"] == kind and c["impl"] == "candidate"]
print(f"run {run_id}: verdict {run['verdict']}, {len(energy)} {kind} comparisons")
for label, short in (("kernels < 100 us", True), ("kernels >= 100 us", False)):
    rows = [c for c in energy if (median_ns[c["case"]] < 1e5) == short]
    if not rows:
        print(f"{label}: not judged")
        continue
    moved = sorted(abs(c["ratio"] - 1) for c in rows)
    print(f"{label}: {len(rows)} cases, p < 0.05: {sum(c['p_value'] < 0.05 for c in rows)}, "
          f"p < 0.01: {sum(c['p_value'] < 0.01 for c in rows)}, flagged: "
          f"{sum(c['status'] != 'unchanged' for c in rows)}, |change| median {100 * statistics.median(moved):.2f}% "
          f"max {100 * moved[-1]:.2f}%, smallest p {min(c['p_value'] for c in rows):.2g}")
