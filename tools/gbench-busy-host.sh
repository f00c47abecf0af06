#!/usr/bin/env bash
# Google Benchmark on a busy CPU host, measured as the engine measures a pull
# request: the four benchmarks of tests/data/gbench-busy-host/bench.cpp built
# twice (the second with a comment added: a no-op change), their replicates
# alternating head, base, base, head, ... with the adapter's arguments, while
# two compilers rebuild a file in a loop on the same cores (a shared runner
# building another project). Writes every repetition's CPU time as
# tests/data/gbench-busy-host/passes.json (the fixture of
# Detection.GbenchOnABusyHost*, common/tests/detection_test.cpp).
#
#   tools/gbench-busy-host.sh [PASSES]   # default 300; about 4 s a pass on 2 cores
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
passes=${1:-300}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
data="$root/tests/data/gbench-busy-host"
c++ -O2 -std=c++17 -o "$work/base" "$data/bench.cpp" -lbenchmark -lpthread
{ echo "// only a comment changed"; cat "$data/bench.cpp"; } > "$work/head.cpp"
c++ -O2 -std=c++17 -o "$work/head" "$work/head.cpp" -lbenchmark -lpthread
printf '#include <map>\n#include <regex>\n#include <string>\nint main() { std::map<std::string, std::regex> m; }\n' \
  > "$work/load.cpp"
for i in 0 1; do
  (while :; do c++ -O2 -c "$work/load.cpp" -o "$work/load$i.o"; done) &
done
# The adapter's arguments (agent/src/pipeline/adapters.cpp) for full_bench's
# min_samples 10 and replicate_seconds 0.1.
args=(--benchmark_repetitions=10 --benchmark_min_time=0.01 --benchmark_format=json
  --benchmark_out_format=json --benchmark_report_aggregates_only=false
  --benchmark_display_aggregates_only=true --benchmark_enable_random_interleaving=true)
for ((p = 0; p < passes; p++)); do
  order=(head base)
  ((p % 2)) && order=(base head)
  for side in "${order[@]}"; do
    "$work/$side" "${args[@]}" --benchmark_out="$work/$p-$side.json" > /dev/null
  done
  ((p % 20 == 19)) && echo "pass $((p + 1)) of $passes"
done
kill $(jobs -p) 2> /dev/null || true
python3 - "$work" "$passes" "$data/passes.json" << 'PY'
import json, os, platform, sys, datetime
work, passes, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def cpu_times(path):
    times = {}
    for e in json.load(open(path))["benchmarks"]:
        if e.get("run_type") == "iteration":
            times.setdefault(e["run_name"], []).append(float(f"{e['cpu_time']:.5g}"))
    return times
rows = [{"first": "base" if p % 2 else "head",
         **{side: cpu_times(f"{work}/{p}-{side}.json") for side in ("head", "base")}} for p in range(passes)]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
json.dump({"host": f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}",
           "date": datetime.date.today().isoformat(),
           "load": "two `c++ -O2 -c` loops of a <regex> file, all the time",
           "unit": "ns of CPU time, one number per repetition",
           "passes": rows}, open(out, "w"), separators=(",", ":"))
print(f"wrote {out}: {passes} passes")
PY
