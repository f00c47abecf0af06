#!/usr/bin/env bash
# Records real NVBench output for the agent's NVBench adapter: builds
# NVIDIA's NVBench examples from ../shared/nvbench-kit on the GPU host and
# runs a few of them with --jsonbin, so the summaries come with their
# per-sample sidecars (FILE-bin/N.bin, float32 seconds), exactly as `kw run`
# gets them. The kit travels to the GPU machine as a carried copy:
#
#   cp -r ../shared/nvbench-kit .device-carry/   # .device-carry/ is ignored
#   device: OUT=... bash tools/capture-nvbench-fixtures.sh   (carry .device-carry)
#
# Writes $OUT/nvbench-fixtures.tar.gz: each example's JSON, sidecars and log,
# the build log, and nvidia-smi's view of the GPU. About 2 minutes on an H100.
set -uo pipefail
KIT="${KIT:-.device-carry/nvbench-kit}"
: "${OUT:?set OUT to the output folder}"
work=/tmp/nvbench-kit
rm -rf "$work" && cp -r "$KIT" "$work" || exit 1
fx="$OUT/nvbench"
mkdir -p "$fx"
echo "[capture] building the kit ($(date -u +%H:%M:%S))"
if ! BUILD_DIR="$work/build" bash "$work/build.sh" > "$fx/build.log" 2>&1; then
  tail -30 "$fx/build.log"
  exit 1
fi
bin="$work/build/bin"
ls "$bin" > "$fx/binaries.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$fx/nvidia-smi.csv" 2>&1

# One example: NAME, the file stem, then its flags. Run inside $fx so the
# sidecar paths NVBench writes into the JSON are relative, as a bench's are.
run() {
  local example=$1 stem=$2
  shift 2
  echo "[capture] $stem: $example $* ($(date -u +%H:%M:%S))"
  (cd "$fx" && timeout 120 "$bin/nvbench.example.cpp17.$example" "$@" > "$stem.log" 2>&1)
  echo "[capture] $stem exited $?"
}
few=(--stopping-criterion sample-count --target-samples 40)
run throughput throughput --jsonbin throughput.json "${few[@]}"
run axes axes -b copy_type_sweep -b single_float64_axis --jsonbin axes.json "${few[@]}"
run enums enums --jsonbin enums.json "${few[@]}"
run skip skip --jsonbin skip.json "${few[@]}"
run cpu_only cpu_only -a Duration=0.002 --jsonbin cpu_only.json --stopping-criterion sample-count --target-samples 10
# A summary without sidecars: what a bench run with --json only gives.
run throughput throughput-summary-only --json throughput-summary-only.json "${few[@]}"
du -sh "$fx"
tar -C "$OUT" -czf "$OUT/nvbench-fixtures.tar.gz" nvbench && rm -rf "$fx"
