#!/usr/bin/env bash
# On a host of two GPUs of one model: what a second GPU buys.
# detection-series.sh's scratch build measured as main runs:
#   main-1, main-2  on GPU 0 alone, one after the other (main-2: one job's
#                   time with the build cached);
#   main-3, main-4  at once, main-3 on GPU 0 and main-4 on GPU 1, each `kw run`
#                   pinned by CUDA_VISIBLE_DEVICES as a kw agent worker is.
# Jobs per hour: 2 / (the pair's wall time) against 1 / main-2's. Posted in
# order (tools/rejudge-series.sh), main-4 is judged against main-3:
# the same build on the other GPU, the A/A across the GPUs.
#   OUT=DIR tools/two-gpu-series.sh     (DIR/series.tar.gz, DIR/two-gpu.txt)
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${OUT:-$root/gpu-results}"
work="${SERIES_WORK:-/tmp/kw-series}"
log() { printf '[two-gpu %s] %s\n' "$(date -u +%H:%M:%S)" "$*" | tee -a "$out/two-gpu.txt"; }
mkdir -p "$out"
nvidia-smi --query-gpu=index,name,uuid,clocks.sm,temperature.gpu,power.draw --format=csv,noheader | tee -a "$out/two-gpu.txt"
[ "$(nvidia-smi -L | wc -l)" -ge 2 ] || { log "fewer than two GPUs"; exit 1; }

# main-1 and main-2 on GPU 0, through detection-series.sh (it builds the scratch history).
CUDA_VISIBLE_DEVICES=0 SERIES="main:2" OUT="$out" bash "$root/tools/detection-series.sh" 2>&1 | tee "$out/series.log"
mkdir -p "$out/series" && tar -C "$out" -xzf "$out/series.tar.gz"
one=$(grep -oE 'main 2: exit 0 in [0-9]+ s' "$out/series.log" 2>/dev/null | grep -oE '[0-9]+ s' | cut -d' ' -f1)
kw="$root/build/gpu/agent/kw"
pair_started=$SECONDS
for gpu in 0 1; do
  i=$((3 + gpu))
  CUDA_VISIBLE_DEVICES=$gpu "$kw" run --repo "$work/b" --stages full_bench --cache-dir "$work/built" --name "series-gpu$gpu" \
    --branch main --out "$out/series/main-$i.json" > "$out/series/main-$i.log" 2>&1 &
done
wait
pair=$((SECONDS - pair_started))
tar -C "$out" -czf "$out/series.tar.gz" series
log "one job on one GPU (main-2): ${one:-?} s; two jobs on two GPUs at once (main-3, main-4): $pair s"
for i in 2 3 4; do log "main-$i: $(grep -E 'stage full_bench (passed|failed)' "$out/series/main-$i.log" | sed 's/.*stage //' | cut -c1-200)"; done
rm -rf "$out/series"
