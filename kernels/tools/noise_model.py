#!/usr/bin/env python3
"""The empirical noise model of kw-detector-bench, from run reports measured
on a GPU (kernels/tools/detection-series.sh): per case, the candidate's
replicate residuals (log replicate location minus its run's mean, scaled back
to a single replicate's spread) and run residuals (log run location minus the
case's mean over the main runs), plus summaries. Resampling them keeps the
tails that a normal model would smooth away.

  noise_model.py --device "NVIDIA H100 80GB HBM3" --out model.json main-*.json pr-*.json

A/B replicates that carry their SM clock (measurements[].sm_mhz) also give
(time, clock) residual pairs: the bench's pull requests draw those, and the
A/B test compares at equal clock as it does on real reports.

Replicate locations follow common::replicate_locations: the 25%-trimmed mean
of a replicate's samples not marked throttled (all of them when fewer than 5
remain)."""
import argparse
import json
import math
import statistics
import sys


def trimmed_mean(values):
    values = sorted(values)
    cut = len(values) // 4
    kept = values[cut:len(values) - cut]
    return sum(kept) / len(kept)


def replicate_locations(measurement, min_samples=5):
    samples = measurement["samples_ns"]
    replicates = measurement.get("replicates") or [0] * len(samples)
    throttled = set(measurement.get("throttled_samples") or [])
    groups = {}
    for i, (value, replicate) in enumerate(zip(samples, replicates)):
        kept, every = groups.setdefault(replicate, ([], []))
        every.append(value)
        if i not in throttled:
            kept.append(value)
    return [trimmed_mean(kept if len(kept) >= min_samples else every) for _, (kept, every) in sorted(groups.items())]


def replicate_clocks(measurement):
    """Mean SM clock of each replicate, in replicate order; None without clocks."""
    clocks = measurement.get("sm_mhz")
    if not clocks:
        return None
    replicates = measurement.get("replicates") or [0] * len(clocks)
    groups = {}
    for value, replicate in zip(clocks, replicates):
        groups.setdefault(replicate, []).append(value)
    return [sum(v) / len(v) for _, v in sorted(groups.items())]


def within_sd(measurement):
    """Median over replicates of the robust relative spread of their samples."""
    samples = measurement["samples_ns"]
    replicates = measurement.get("replicates") or [0] * len(samples)
    groups = {}
    for value, replicate in zip(samples, replicates):
        groups.setdefault(replicate, []).append(value)
    spreads = []
    for values in groups.values():
        if len(values) < 5:
            continue
        center = statistics.median(values)
        spreads.append(1.4826 * statistics.median(abs(v - center) for v in values) / center)
    return statistics.median(spreads) if spreads else None


def candidate(measurements):
    for m in measurements or []:
        if m["impl"] == "candidate":
            return m
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("reports", nargs="+")
    args = parser.parse_args()

    cases = {}
    for path in args.reports:
        report = json.load(open(path))
        kind = "main" if report["branch"] == "main" else "ab"
        for c in report["cases"]:
            entry = cases.setdefault(c["name"], {"main": [], "ab": [], "ab_clock": [], "run_logs": [], "within": []})
            for side in ("measurements", "base_measurements"):
                m = candidate(c.get(side))
                if m is None:
                    continue
                logs = [math.log(x) for x in replicate_locations(m)]
                k = len(logs)
                if k >= 2:
                    mean = sum(logs) / k
                    # Deviations from a mean of k are sqrt((k-1)/k) of a
                    # replicate's own: scaled back.
                    entry[kind] += [(x - mean) * math.sqrt(k / (k - 1)) for x in logs]
                    clocks = replicate_clocks(m)
                    if kind == "ab" and clocks and len(clocks) == k:
                        # A replicate's time and clock residuals together:
                        # the A/B test compares at equal clock.
                        log_clocks = [math.log(f) for f in clocks]
                        clock_mean = sum(log_clocks) / k
                        entry["ab_clock"] += [((x - mean) * math.sqrt(k / (k - 1)),
                                               (f - clock_mean) * math.sqrt(k / (k - 1)))
                                              for x, f in zip(logs, log_clocks)]
                w = within_sd(m)
                if w is not None:
                    entry["within"].append(w)
                if kind == "main" and side == "measurements":
                    entry["run_logs"].append(sum(logs) / k)

    out_cases = []
    for name, entry in sorted(cases.items()):
        runs = entry["run_logs"]
        if not entry["main"] or not entry["ab"] or len(runs) < 2:
            print(f"{name}: skipped ({len(runs)} main runs)", file=sys.stderr)
            continue
        grand = sum(runs) / len(runs)
        scale = math.sqrt(len(runs) / (len(runs) - 1))
        out_cases.append({
            "name": name,
            "level_ns": math.exp(grand),
            "within_sd": statistics.median(entry["within"]) if entry["within"] else None,
            "between_sd": statistics.pstdev(entry["main"]),
            "ab_between_sd": statistics.pstdev(entry["ab"]),
            "run_sd": statistics.stdev(runs),
            # Main runs time every implementation interleaved; A/B jobs the
            # candidate alone: their replicates scatter differently.
            "replicate_residuals": [round(x, 6) for x in entry["main"]],
            "ab_replicate_residuals": [round(x, 6) for x in entry["ab"]],
            "ab_clock_residuals": [[round(t, 6), round(f, 6)] for t, f in entry["ab_clock"]],
            "run_residuals": [round((x - grand) * scale, 6) for x in runs],
        })
    model = {
        "device": args.device,
        "source": sorted(p.split("/")[-1] for p in args.reports),
        "main_runs": max(len(c["run_residuals"]) for c in out_cases),
        "cases": out_cases,
    }
    with open(args.out, "w") as f:
        json.dump(model, f, indent=1)
    for key in ("between_sd", "ab_between_sd", "run_sd"):
        values = sorted(c[key] for c in out_cases)
        print(f"{key}: median {statistics.median(values):.4f}, max {values[-1]:.4f}")
    print(f"{len(out_cases)} cases")


if __name__ == "__main__":
    main()
