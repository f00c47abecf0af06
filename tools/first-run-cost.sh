#!/usr/bin/env bash
# On the GPU machine: what a build's first preflight pays for. A new
# build's first launch_geometry took 16-23 s against 5.5 s for its second,
# and the difference lands in the driver's JIT cache. Each variant below runs
# the attention bench with a CUDA_CACHE_PATH of its own, so which stage pays,
# whether CUPTI's tracing is the cause, and what gets JIT-compiled show up
# apart. The reference cache is off throughout. (Commit f8a388d's version
# also measured the harness warming every case's caches on several threads
# first, since reverted.) Results in
# $OUT/first-run-cost.tar.gz and the summary on stdout.
#   tools/first-run-cost.sh [--skip-build]
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${OUT:-$root/gpu-results}/first-run-cost"
caches=/tmp/kw-first-run-caches
mkdir -p "$out"
cd "$root"
log() { printf '[first-run %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }

if [ "${1:-}" != --skip-build ]; then
  log "build (kernelwatch.json's commands)"
  { cmake --preset gpu -DKW_BUILD_AGENT=OFF -DKW_BUILD_TESTS=OFF &&
    cmake --build --preset gpu -j "$(nproc)" --target kw-bench-attention; } > "$out/build.log" 2>&1 ||
    { tail -30 "$out/build.log"; exit 1; }
fi
bench="$root/build/gpu/kernels/attention/kw-bench-attention"
export KWBENCH_REFERENCE_CACHE=off
rm -rf "$caches"

variant() {  # label cache-name [env...] -- bench args...
  local label=$1 cache=$2
  shift 2
  local env=()
  while [ "$1" != -- ]; do env+=("$1"); shift; done
  shift
  local started
  started=$(date +%s.%N)
  env CUDA_CACHE_PATH="$caches/$cache" "${env[@]}" "$bench" "$@" --json "$out/$label.json" > "$out/$label.log" 2>&1
  local rc=$?
  local wall
  wall=$(python3 -c "import time; print(f'{time.time() - $started:.1f}')")
  local cached
  cached=$(du -sk "$caches/$cache" 2>/dev/null | cut -f1)
  python3 - "$out/$label.log" "$label" "$rc" "$wall" "${cached:-0}" <<'PY' | tee -a "$out/summary.txt"
import re, sys
path, label, rc, wall, cached = sys.argv[1:]
per_stage, slowest, warmed = {}, {}, ""
for line in open(path, errors="replace"):
    if "warmed the caches" in line:
        warmed = "; " + line.split("] ", 1)[-1].strip()
    m = re.search(r"\[kwbench\] (\w+) (\S+) (?:passed|failed|skipped) \((\d+\.\d+) s\)", line)
    if not m:
        continue
    stage, case, seconds = m.group(1), m.group(2), float(m.group(3))
    per_stage[stage] = per_stage.get(stage, 0) + seconds
    if seconds > slowest.get(stage, ("", 0))[1]:
        slowest[stage] = (case, seconds)
stages = ", ".join(f"{s} {t:.1f} s (slowest {slowest[s][0]} {slowest[s][1]:.2f} s)" for s, t in per_stage.items())
print(f"{label}: exit {rc}, {wall} s wall, JIT cache {int(cached) / 1024:.1f} MiB; {stages}{warmed}")
PY
}

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sed 's/^/device: /' | tee "$out/summary.txt"
# The whole preflight, a fresh cache then the same cache: the figure to explain.
variant preflight-fresh a -- --stage preflight
variant preflight-again a -- --stage preflight
# correctness alone never traces with CUPTI: if it pays the same, CUPTI is not why.
variant correctness-fresh b -- --stage correctness
variant launch-geometry-fresh c -- --stage launch_geometry
variant launch-geometry-again c -- --stage launch_geometry
# Lazy loading off: every module's code loads (and JITs) at start.
variant load-eager-fresh d CUDA_MODULE_LOADING=EAGER -- --stage load
# With JIT forbidden, whatever needs it fails and names itself.
variant correctness-no-jit e CUDA_DISABLE_PTX_JIT=1 -- --stage correctness
grep -iE 'warmed|error|fail|unavailable|ptx|jit' "$out/correctness-no-jit.log" | sort | uniq -c | sort -rn | head -20 |
  tee -a "$out/summary.txt"
for lib in "$bench" "$root"/build/gpu/kernels/attention/libkw_attention.so; do
  echo "== $lib" >> "$out/objects.txt"
  cuobjdump --list-elf --list-ptx "$lib" >> "$out/objects.txt" 2>&1
done
ldd "$bench" >> "$out/objects.txt"
find "$caches" -type f -printf '%s %p\n' | sort -rn | head -40 > "$out/cache-files.txt"
tar -C "$(dirname "$out")" -czf "$(dirname "$out")/first-run-cost.tar.gz" first-run-cost && rm -rf "$out"
