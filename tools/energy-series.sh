#!/usr/bin/env bash
# On the GPU machine: joules per iteration of the bundled attention suite and
# their A/A spread. Builds kw, makes a scratch history of this tree with
# full_bench.energy_seconds set (ENERGY_SECONDS, default 0.2), and measures it
# with `kw run --stages full_bench` RUNS times (default 2): one build measured
# again, so the spread between its replicates and between the runs is the
# energy figure's noise. Reports go to $OUT/energy.tar.gz; summarise them on
# the VM with tools/energy_summary.py.
#   [ENERGY_SECONDS=0.2] [RUNS=2] [ENERGY_CASES=GLOB] tools/energy-series.sh
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log_tag=energy
source "$root/tools/gpu-scratch.sh"
out="${OUT:-$root/gpu-results}"
work="${ENERGY_WORK:-/tmp/kw-energy}"
seconds="${ENERGY_SECONDS:-0.2}"
runs="${RUNS:-2}"
cases="${ENERGY_CASES:-attention/*}"
mkdir -p "$out/energy" "$work"
kw=$(kw_binary "$out/energy") || exit 1
rm -rf "$work/tree"
attention_tree "$work/tree" "$cases"
python3 - "$work/tree/kernelwatch.json" "$seconds" <<'PY'
import json, sys
path, seconds = sys.argv[1], float(sys.argv[2])
config = json.load(open(path))
config["full_bench"]["energy_seconds"] = seconds
json.dump(config, open(path, "w"), indent=1)
PY
(cd "$work/tree" && git_ init -q -b main && git_ add -A && git_ commit -qm "energy series")
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,temperature.gpu,power.draw,power.limit --format=csv,noheader
for i in $(seq 1 "$runs"); do
  started=$SECONDS
  "$kw" run --repo "$work/tree" --stages full_bench --cache-dir "$work/built" --name energy --branch main \
    --out "$out/energy/main-$i.json" > "$out/energy/main-$i.log" 2>&1
  status=$?
  tar -C "$out" -czf "$out/energy.tar.gz" energy
  log "run $i: exit $status in $((SECONDS - started)) s; $(grep -E 'stage full_bench (passed|failed)' "$out/energy/main-$i.log" | sed 's/.*stage //' | cut -c1-200)"
done
rm -rf "$out/energy"
