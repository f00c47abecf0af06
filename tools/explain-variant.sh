#!/usr/bin/env bash
# On the GPU machine: the regression explanation's target on real
# hardware. A scratch history of this tree: A as it is, D = A with the
# attention kernel's head-dim-128 configuration swapped for the 8-warp
# variant kw-attention-tune measures beside it (ForwardTraits<128, 128, 64,
# 8, 1> in place of the tuned <..., 4, 2>), the bench's expectation table
# following it so the preflight passes. `kw run` measures A on main, then D as
# a pull request against A (A/B), every stage, so both reports hold the
# launches and the build's ptxas table; then `kw profile` runs the case D
# slowed most under Nsight Compute in A and D. Results:
# $OUT/explain-variant.tar.gz; kw-server's explanation of D's run is read on
# the VM (docs/PERFORMANCE.md).
#   EXPLAIN_CASES=GLOB tools/explain-variant.sh
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log_tag=explain
source "$root/tools/gpu-scratch.sh"
out="${OUT:-$root/gpu-results}"
work="${EXPLAIN_WORK:-/tmp/kw-explain}"
cases="${EXPLAIN_CASES:-attention/*/d128/*s4096*,attention/*/d128/*s8192*}"
mkdir -p "$out/explain" "$work"
kw=$(kw_binary "$out/explain") || exit 1

rm -rf "$work/a" "$work/built"
attention_tree "$work/a" "$cases"
tuned="ForwardTraits<128, 128, 64, 4, 2>"
wide="ForwardTraits<128, 128, 64, 8, 1>"
(cd "$work/a" && git_ init -q -b main && git_ add -A && git_ commit -qm "A: the tuned 4-warp configuration" &&
  git_ checkout -q -b pr &&
  sed -i "s|$tuned|$wide|" kernels/attention/src/launch.cuh &&
  sed -i 's|kStreamingD128{128, 128, 64, 128,|kStreamingD128{128, 128, 64, 256,|' kernels/attention/bench/expected_launches.hpp &&
  grep -qF "$wide" kernels/attention/src/launch.cuh && grep -qF "64, 256," kernels/attention/bench/expected_launches.hpp &&
  git_ commit -qam "D: the 8-warp variant for head dim 128") || { log "commit D was not made"; exit 1; }
base=$(git -C "$work/a" rev-parse main) head=$(git -C "$work/a" rev-parse pr)
log "A=$base D=$head"

measure() {  # name commit [base]
  local name=$1 commit=$2 extra=() started=$SECONDS
  [ $# -ge 3 ] && extra=(--base "$3")
  git -C "$work/a" checkout -q "$commit"
  "$kw" run --repo "$work/a" --cache-dir "$work/built" --name explain --branch "$name" "${extra[@]}" \
    --out "$out/explain/$name.json" > "$out/explain/$name.log" 2>&1
  log "$name: exit $? in $((SECONDS - started)) s; $(grep -E 'stage [a-z_]+ (passed|failed)' "$out/explain/$name.log" | sed 's/.*stage //' | cut -c1-90 | tr '\n' ' ')"
}
measure main "$base"
measure pr "$head" "$base"
# Why D is slower, from the hardware's counters: the case D slowed most
# (as kw-server picks a regression's worst case), under Nsight Compute in A
# and D, as a profile job runs it.
worst=$(python3 - "$out/explain/main.json" "$out/explain/pr.json" <<'PY'
import json, sys
median = lambda path: {c["name"]: next(m["median_ns"] for m in c["measurements"] if m["impl"] == "candidate")
                       for c in json.load(open(path))["cases"] if c.get("measurements")}
a, d = median(sys.argv[1]), median(sys.argv[2])
print(max((d[c] / a[c], c) for c in d if c in a)[1])
PY
)
log "profile of $worst under ncu"
"$kw" profile --repo "$work/a" --base "$base" --commit "$head" --case "$worst" --kernel attention --launch-count 4 \
  --cache-dir "$work/built" --out "$out/explain/profile" > "$out/explain/profile.log" 2>&1 || log "kw profile failed"
cat "$out/explain/profile/profile.md" 2>/dev/null || tail -20 "$out/explain/profile.log"
tar -C "$out" -czf "$out/explain-variant.tar.gz" explain && rm -rf "$out/explain"
log "done"
