#!/usr/bin/env python3
"""A small fixture from a real run report: some of its cases, each
replicate's first N samples (with their clocks and throttle marks), the
candidate implementation only, under another project name.

  tools/cut_report.py REPORT OUT --project NAME --samples N CASE...
"""
import argparse
import json
import statistics


def cut_measurement(m, samples):
    kept, index_map = [], {}
    per_replicate = {}
    for i, replicate in enumerate(m.get("replicates") or [0] * len(m["samples_ns"])):
        if per_replicate.get(replicate, 0) < samples:
            per_replicate[replicate] = per_replicate.get(replicate, 0) + 1
            index_map[i] = len(kept)
            kept.append(i)
    out = dict(m)
    for key in ("samples_ns", "replicates", "sm_mhz"):
        if key in m and len(m[key]) == len(m["samples_ns"]):
            out[key] = [m[key][i] for i in kept]
    out["throttled_samples"] = [index_map[i] for i in m.get("throttled_samples", []) if i in index_map]
    out["median_ns"] = statistics.median(out["samples_ns"])
    for key in ("energy_j", "energy_replicates", "power_w"):
        out.pop(key, None)
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("report")
    parser.add_argument("out")
    parser.add_argument("--project", required=True)
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("cases", nargs="+")
    args = parser.parse_args()
    report = json.load(open(args.report))
    report["project"] = args.project
    by_name = {c["name"]: c for c in report["cases"]}
    cases = []
    for name in args.cases:
        c = dict(by_name[name])
        for key in ("measurements", "base_measurements"):
            c[key] = [cut_measurement(m, args.samples) for m in c.get(key, []) if m["impl"] == "candidate"]
        cases.append(c)
    report["cases"] = cases
    with open(args.out, "w") as out:
        json.dump(report, out, separators=(",", ":"))


if __name__ == "__main__":
    main()
