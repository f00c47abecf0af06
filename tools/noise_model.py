#!/usr/bin/env python3
"""The empirical noise model of kw-detector-bench, from run reports measured
on a GPU (tools/detection-series.sh): per case, the candidate's
replicate residuals (log replicate location minus its run's mean, scaled back
to a single replicate's spread) and run residuals (log run location minus the
case's mean over the main runs), plus summaries. Resampling them keeps the
tails that a normal model would smooth away.

  noise_model.py --device "NVIDIA H100 80GB HBM3" --out model.json main-*.json pr-*.json

A/B replicates that carry their SM clock (measurements[].sm_mhz) also give
(time, clock) residual pairs: the bench's pull requests draw those, and the
A/B test compares at equal clock as it does on real reports. The base side
of every A/B job is also a run of one build, measured job after job: their
(run level, run clock) residual pairs are what the bench's main runs draw
when they are judged against their history at equal clock.

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


def without_outliers(logs, clocks=None):
    """A stored run's replicates as common::location keeps them: with four or
    more, those beyond 9% (log) of their median, the furthest first, fewer
    than half of them, are left out."""
    if len(logs) < 4:
        return logs, clocks
    center = statistics.median(logs)
    far = sorted(((abs(x - center), i) for i, x in enumerate(logs) if abs(x - center) > 0.09), reverse=True)
    drop = {i for _, i in far[:(len(logs) - 1) // 2]}
    kept = [x for i, x in enumerate(logs) if i not in drop]
    return kept, None if clocks is None else [f for i, f in enumerate(clocks) if i not in drop]


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


def run_clock_model(runs):
    """Runs of one build with clocks: their (level, clock) residual pairs and
    the sd of their level at equal clock, at the slope pooled inside the runs
    (common::history_at_clock)."""
    if len(runs) < 3:
        return {}
    sxx = sum((f - clock) ** 2 for _, clock, _, fs in runs for f in fs)
    sxy = sum((f - clock) * (x - level) for level, clock, xs, fs in runs for x, f in zip(xs, fs))
    slope = min(0.0, max(-1.25, sxy / sxx)) if sxx > 0 else 0.0
    levels = [level for level, _, _, _ in runs]
    clocks = [clock for _, clock, _, _ in runs]
    level_mean, clock_mean = sum(levels) / len(runs), sum(clocks) / len(runs)
    scale = math.sqrt(len(runs) / (len(runs) - 1))
    return {
        "run_clock_slope": round(slope, 4),
        "run_clock_sd": statistics.stdev([y - slope * x for y, x in zip(levels, clocks)]),
        "run_clock_residuals": [[round((y - level_mean) * scale, 6), round((x - clock_mean) * scale, 6)]
                                for y, x in zip(levels, clocks)],
    }


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
            entry = cases.setdefault(c["name"], {"main": [], "ab": [], "ab_clock": [], "run_logs": [], "within": [],
                                                 "base_runs": []})
            for side in ("measurements", "base_measurements"):
                m = candidate(c.get(side))
                if m is None:
                    continue
                logs = [math.log(x) for x in replicate_locations(m)]
                clocks = replicate_clocks(m)
                log_clocks = [math.log(f) for f in clocks] if clocks and len(clocks) == len(logs) else None
                # Residuals from the centre of the replicates a run keeps: an
                # outlier replicate keeps its own large residual, and does not
                # shift every other replicate of its side by a share of it.
                kept, kept_clocks = without_outliers(logs, log_clocks)
                k = len(kept)
                if k >= 2:
                    mean = sum(kept) / k
                    # Deviations from a mean of k are sqrt((k-1)/k) of a
                    # replicate's own: scaled back.
                    scale = math.sqrt(k / (k - 1))
                    entry[kind] += [(x - mean) * scale for x in logs]
                    if kind == "ab" and log_clocks:
                        # A replicate's time and clock residuals together:
                        # the A/B test compares at equal clock.
                        clock_mean = sum(kept_clocks) / k
                        entry["ab_clock"] += [((x - mean) * scale, (f - clock_mean) * scale)
                                              for x, f in zip(logs, log_clocks)]
                        if side == "base_measurements":
                            entry["base_runs"].append((mean, clock_mean, kept, kept_clocks))
                w = within_sd(m)
                if w is not None:
                    entry["within"].append(w)
                if kind == "main" and side == "measurements":
                    entry["run_logs"].append(sum(kept) / len(kept))

    out_cases = []
    for name, entry in sorted(cases.items()):
        clocked = run_clock_model(entry["base_runs"])
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
            **clocked,
        })
    model = {
        "device": args.device,
        "source": sorted(p.split("/")[-1] for p in args.reports),
        "main_runs": max(len(c["run_residuals"]) for c in out_cases),
        "cases": out_cases,
    }
    with open(args.out, "w") as f:
        json.dump(model, f, indent=1)
    for key in ("between_sd", "ab_between_sd", "run_sd", "run_clock_sd"):
        values = sorted(c[key] for c in out_cases if key in c)
        print(f"{key}: median {statistics.median(values):.4f}, max {values[-1]:.4f}")
    print(f"{len(out_cases)} cases")


if __name__ == "__main__":
    main()
