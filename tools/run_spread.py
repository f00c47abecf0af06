#!/usr/bin/env python3
"""Does a case's run level scatter more than its replicates explain? Over
main runs of one build (detection-series.sh main-*.json), per case: the sd
of the run levels (log, the replicates each run keeps) against the pooled
between-replicate sd / sqrt(replicates per run). A ratio near 1 means the
runs scatter as the mean of their replicates would: the case's replicate
spread is a fair prior for its between-run spread (common::test_history).
--case NAME also prints that case's replicate locations run by run.

  run_spread.py [--case NAME] main-01.json ... main-10.json
"""
import argparse
import json
import math
import statistics

from noise_model import candidate, replicate_locations, without_outliers


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case")
    parser.add_argument("reports", nargs="+")
    args = parser.parse_args()
    runs = {}  # case -> [kept log locations of each run]
    for path in args.reports:
        for c in json.load(open(path))["cases"]:
            m = candidate(c.get("measurements"))
            if m is None:
                continue
            locations = replicate_locations(m)
            if c["name"] == args.case:
                print(f"{path}: " + " ".join(f"{x:.0f}" for x in locations))
            kept, _ = without_outliers([math.log(x) for x in locations])
            runs.setdefault(c["name"], []).append(kept)
    ratios = []
    for name, per_run in sorted(runs.items()):
        if len(per_run) < 3:
            continue
        levels = [sum(k) / len(k) for k in per_run]
        squares = sum(sum((x - sum(k) / len(k)) ** 2 for x in k) for k in per_run if len(k) > 1)
        df = sum(len(k) - 1 for k in per_run if len(k) > 1)
        replicate_sd = math.sqrt(squares / df)
        expected = replicate_sd / math.sqrt(statistics.mean(len(k) for k in per_run))
        ratio = statistics.stdev(levels) / expected
        ratios.append(ratio)
        print(f"{name:45s} run sd {100 * statistics.stdev(levels):.2f}%  replicate sd {100 * replicate_sd:.2f}%"
              f"  ratio {ratio:.2f}")
    print(f"{len(ratios)} cases: ratio median {statistics.median(ratios):.2f}, "
          f"range {min(ratios):.2f}-{max(ratios):.2f}")


if __name__ == "__main__":
    main()
