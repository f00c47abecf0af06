#!/usr/bin/env python3
"""Run-to-run noise of full_bench: two kwbench JSON files from the same build
on the same GPU; per case and implementation, the relative difference of the
two medians, and the median |difference| over cases longer than 50 us."""
import json
import statistics
import sys


def medians(path):
    with open(path) as f:
        doc = json.load(f)
    out = {}
    for case in doc["cases"]:
        for m in case.get("measurements", []):
            out[(case["name"], m["impl"])] = (m["median_ns"], len(m["samples_ns"]))
    return doc.get("device") or {}, out


def main(first, second):
    device, a = medians(first)
    _, b = medians(second)
    print(f"device: {device.get('name', '?')}, driver {device.get('driver', '?')}")
    print("| case | impl | median run 1 (us) | median run 2 (us) | samples | rel. diff |")
    print("|---|---|---|---|---|---|")
    long_diffs = []
    for key in sorted(a):
        if key not in b:
            continue
        (m1, n1), (m2, n2) = a[key], b[key]
        diff = (m2 - m1) / m1
        if m1 > 50_000:
            long_diffs.append(abs(diff))
        print(f"| {key[0]} | {key[1]} | {m1 / 1000:.2f} | {m2 / 1000:.2f} | {n1}/{n2} | {100 * diff:+.3f}% |")
    if long_diffs:
        print(f"\nmedian |relative difference| over {len(long_diffs)} case/impl pairs longer than 50 us: "
              f"{100 * statistics.median(long_diffs):.3f}%")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: noise_figure.py RUN1.json RUN2.json")
    main(sys.argv[1], sys.argv[2])
