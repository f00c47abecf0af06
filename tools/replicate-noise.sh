#!/usr/bin/env bash
# On the GPU machine: where a full_bench replicate's level comes from. Runs
# passes of the attention bench's candidate over the large and tiny cases,
# first all in one case order, then each in its own order, and keeps each
# case's median with the SM clock the in-band probe saw while it was timed.
# tools/replicate_noise.py reads the result:
#   tools/replicate-noise.sh [PASSES]   -> $OUT/replicate-noise.tar.gz
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${OUT:-$root/gpu-results}"
passes="${1:-10}"
bench="$root/build/gpu/kernels/attention/kw-bench-attention"
cases="${NOISE_CASES:-attention/*/d128/*s2048*,attention/*/d128/*s4096*,attention/*/d128/*s8192*,attention/*/d128/*s16384*,attention/*/d64/b1h1s128*,attention/*/d64/b2h4s128*}"
work=$(mktemp -d)
mkdir -p "$work/replicate-noise"
for order in same shuffled; do
  for i in $(seq 1 "$passes"); do
    seed=$([ "$order" = same ] && echo 7 || echo $((1000 + 2 * i + 1)))
    "$bench" --stage full_bench --case "$cases" --impls candidate --order-seed "$seed" --max-seconds 0.25 \
      --min-samples 10 --max-samples 200 --noise-target 0.005 \
      --json "$work/replicate-noise/$order-$i.json" > /dev/null 2>> "$work/replicate-noise/log.txt" ||
      echo "pass $order $i failed" >&2
  done
done
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader > "$work/replicate-noise/gpu.txt"
tar -C "$work" -czf "$out/replicate-noise.tar.gz" replicate-noise
python3 "$root/tools/replicate_noise.py" "$work/replicate-noise"
