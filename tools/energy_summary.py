#!/usr/bin/env python3
"""Summarises tools/energy-series.sh: each case's joules per iteration
(the geometric mean of its replicates) in two runs of one build, the spread
between its replicates and between the runs.

  energy_summary.py main-1.json main-2.json
"""
import json
import math
import statistics as st
import sys


def candidate(case):
    return next(m for m in case["measurements"] if m["impl"] == "candidate")


def main():
    first, second = (json.load(open(path)) for path in sys.argv[1:3])
    by_name = {c["name"]: c for c in second["cases"]}
    rows = []
    for case in first["cases"]:
        other = by_name.get(case["name"])
        a, b = candidate(case), candidate(other) if other else {}
        if "energy_j" not in a or "energy_j" not in b:
            print(f"{case['name']}: no energy")
            continue
        level = lambda values: math.exp(st.mean(math.log(v) for v in values))
        rows.append({"case": case["name"], "joules": level(a["energy_j"]), "again": level(b["energy_j"]),
                     "replicate_sd": st.stdev(math.log(v) for v in a["energy_j"]),
                     "watts": st.mean(a["power_w"]), "median_us": a["median_ns"] / 1e3})
    for label, keep in (("kernels >= 100 us", lambda r: r["median_us"] >= 100),
                        ("kernels < 100 us", lambda r: r["median_us"] < 100)):
        part = [r for r in rows if keep(r)]
        if not part:
            continue
        diffs = [abs(math.log(r["again"] / r["joules"])) for r in part]
        sds = [r["replicate_sd"] for r in part]
        print(f"{label}: {len(part)} cases, {min(r['joules'] for r in part):.4g}-{max(r['joules'] for r in part):.4g} J "
              f"per iteration at {min(r['watts'] for r in part):.0f}-{max(r['watts'] for r in part):.0f} W; "
              f"between the runs median {100 * st.median(diffs):.2f}% (max {100 * max(diffs):.2f}%), "
              f"between replicates median sd {100 * st.median(sds):.2f}% (max {100 * max(sds):.2f}%)")
    for r in rows:
        print(f"  {r['case']:<42} {r['joules']:.4g} J  {r['again']:.4g} J  {100 * math.log(r['again'] / r['joules']):+.2f}%"
              f"  replicate sd {100 * r['replicate_sd']:.2f}%  {r['watts']:.0f} W  {r['median_us']:.1f} us")


if __name__ == "__main__":
    main()
