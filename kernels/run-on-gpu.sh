#!/usr/bin/env bash
# On a GPU host (Ubuntu 24.04, CUDA 13, no libpqxx): builds agent + kernels
# with the `gpu` preset, runs every gpu-labelled test, then the harness noise
# figure (full_bench twice on the same build). Logs and JSON go to $OUT
# (default ./gpu-results); a summary is printed last.
#   kernels/run-on-gpu.sh [--skip-build] [--skip-tests] [--noise] [--attention]
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out="${OUT:-$root/gpu-results}"
mkdir -p "$out"
build=1 tests=1 noise=0
for arg in "$@"; do
  case "$arg" in
    --skip-build) build=0 ;;
    --skip-tests) tests=0 ;;
    --noise) noise=1 ;;
    *) echo "unknown option $arg" >&2; exit 64 ;;
  esac
done
log() { printf '[gpu %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }

log "device: $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader 2>&1)"
log "cuda: $(nvcc --version | tail -1)"
if [ "$build" = 1 ]; then
  log "configure (preset gpu)"
  if ! cmake --preset gpu > "$out/configure.log" 2>&1; then tail -40 "$out/configure.log"; exit 1; fi
  log "build"
  if ! cmake --build --preset gpu -j "$(nproc)" > "$out/build.log" 2>&1; then
    grep -E 'error|Error' -A3 "$out/build.log" | head -80
    exit 1
  fi
  grep -E 'ptxas info *: (Used|Compiling)|spill' "$out/build.log" > "$out/ptxas.txt" || true
  log "build done"
fi

status=0
if [ "$tests" = 1 ]; then
  log "gpu tests"
  ctest --preset gpu --output-on-failure > "$out/gpu-tests.log" 2>&1 || status=1
  grep -E '^\s*[0-9]+/[0-9]+ Test|tests passed|tests failed' "$out/gpu-tests.log"
fi

if [ "$noise" = 1 ]; then
  bench=build/gpu/kernels/harness/kw-selftest-bench
  for run in 1 2; do
    log "noise run $run: full_bench"
    "$bench" --stage full_bench --json "$out/noise-run$run.json" 2> "$out/noise-run$run.log" || status=1
  done
  python3 kernels/tools/noise_figure.py "$out/noise-run1.json" "$out/noise-run2.json" | tee "$out/noise.md"
fi
log "done (status $status)"
exit "$status"
