"""Reads tools/replicate-noise.sh's passes: per case, the spread of
the replicate level (log median) across passes in one fixed case order and
in shuffled orders, and how much of it the SM clock the probe saw explains
(regression of log time on log clock)."""
import collections
import json
import math
import pathlib
import statistics
import sys


def load(directory):
    rows = collections.defaultdict(list)  # (order, case) -> [(log median, log mhz)]
    for path in sorted(pathlib.Path(directory).glob("*-*.json")):
        order = path.name.split("-")[0]
        doc = json.loads(path.read_text())
        mhz = {c["name"]: c.get("details", {}).get("mean_probe_sm_mhz", 0)
               for c in doc["stage"]["details"].get("cases", [])}
        for c in doc.get("cases", []):
            m = next((m for m in c.get("measurements", []) if m["impl"] == "candidate"), None)
            if m and mhz.get(c["name"], 0) > 0:
                rows[(order, c["name"])].append((math.log(m["median_ns"]), math.log(mhz[c["name"]])))
    return rows


def main():
    rows = load(sys.argv[1])
    print("| case | order | passes | sd of level | clock sd | slope on clock | sd after the clock |")
    print("|---|---|---|---|---|---|---|")
    for (order, name), points in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        if len(points) < 3:
            continue
        t = [p[0] for p in points]
        f = [p[1] for p in points]
        sd_t, sd_f = statistics.stdev(t), statistics.stdev(f)
        mt, mf = statistics.mean(t), statistics.mean(f)
        sxx = sum((x - mf) ** 2 for x in f)
        slope = sum((x - mf) * (y - mt) for x, y in zip(f, t)) / sxx if sxx > 0 else 0
        resid = [y - mt - slope * (x - mf) for x, y in zip(f, t)]
        sd_r = math.sqrt(sum(r * r for r in resid) / max(1, len(resid) - 2))
        print(f"| {name} | {order} | {len(points)} | {100 * sd_t:.2f}% | {100 * sd_f:.2f}% | {slope:.2f} | {100 * sd_r:.2f}% |")


if __name__ == "__main__":
    main()
