#!/usr/bin/env bash
# On a host with several GPUs: what splitting one job over them saves
# (docs/detection.md, "Sharding"; docs/PERFORMANCE.md). Builds kw, makes a
# scratch history of this tree holding the synthetic suite
# (tools/synthetic_suite.py, KERNELS GEMM instances, one case each) and
# builds its bench once. Then, for each N of SHARDS, a main run of every
# case (`kw run`): N = 1 on GPU 0, else `kw run --shard K/N` on GPU K-1, the
# N side by side, their reports merged with `kw merge-shards`. The timed
# runs build nothing (their config's build command only checks that the
# bench is there); each is timed from start to its last shard's report.
# Reports and logs go to $OUT/shards.tar.gz, the times to $OUT/shards.txt.
# SHARD_AA=COUNT adds sharded A/A pull requests (below); none starts after
# SHARD_DEADLINE (epoch seconds).
#   KERNELS=1000 SHARDS="2 1" [SHARD_FULL_BENCH='{"replicates": 3}'] [SHARD_AA=2] tools/shard-series.sh
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log_tag=shards
source "$root/tools/gpu-scratch.sh"
top="${OUT:-$root/gpu-results}"
out="$top/shards"
work="${SHARD_WORK:-/tmp/kw-shards}"
kernels="${KERNELS:-1000}"
mkdir -p "$out" "$work"
kw=$(kw_binary "$out") || exit 1
# Fingerprints in launch_geometry, as an agent takes them.
inject_library "$out" || exit 1
gpus=$(nvidia-smi -L | wc -l)
log "$gpus GPU(s): $(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | tr -s ' ' | tr '\n' ' ')"

repo="$work/repo"
if [ ! -d "$repo/.git" ]; then
  copy_tree "$repo"
  python3 "$root/tools/synthetic_suite.py" "$repo/kernels/synthetic" --kernels "$kernels" --per-file 20 || exit 1
  echo 'add_subdirectory(synthetic)' >> "$repo/kernels/CMakeLists.txt"
  # A main run's full_bench, cheap per case: what is compared is the split.
  full_bench=$(python3 -c "import json, os; fb = {'replicates': 3, 'max_replicates': 3, 'confirm_replicates': 0, 'replicate_seconds': 0.02, 'min_samples': 5, 'max_samples': 50, 'budget_s': 3600}; fb.update(json.loads(os.environ.get('SHARD_FULL_BENCH') or '{}')); print(json.dumps(fb))")
  cat > "$repo/kernelwatch.json" <<JSON
{
  "project": "synthetic",
  "build": {"commands": ["cmake --preset gpu -DKW_BUILD_TESTS=OFF -DKW_BUILD_AGENT=OFF",
                         "cmake --build --preset gpu -j $(nproc) --target kw-bench-synthetic"],
            "timeout_s": 1800},
  "benches": [{"name": "synthetic", "path": "build/gpu/kernels/synthetic/kw-bench-synthetic"}],
  "timeouts_s": {"load": 300, "launch_geometry": 900, "correctness": 900, "quick_bench": 900, "full_bench": 3600},
  "full_bench": $full_bench
}
JSON
  (cd "$repo" && git_ init -q -b main && git_ add -A && git_ commit -qm "synthetic suite, $kernels kernels") || exit 1
fi
started=$SECONDS
(cd "$repo" && cmake --preset gpu -DKW_BUILD_TESTS=OFF -DKW_BUILD_AGENT=OFF > "$out/suite-build.log" 2>&1 &&
  cmake --build --preset gpu -j "$(nproc)" --target kw-bench-synthetic >> "$out/suite-build.log" 2>&1) ||
  { tail -30 "$out/suite-build.log"; exit 1; }
log "suite of $kernels kernels built in $((SECONDS - started)) s"
python3 -c "import json, sys; c = json.load(open(sys.argv[1])); c['build']['commands'] = ['test -x ' + c['benches'][0]['path']]; json.dump(c, open(sys.argv[2], 'w'))" \
  "$repo/kernelwatch.json" "$work/timed.json"

summary="$top/shards.txt"
: > "$summary"
for n in ${SHARDS:-2 1}; do
  if [ "$n" -gt "$gpus" ]; then log "$n shards: this host has $gpus GPU(s)"; continue; fi
  started=$(date +%s.%N)
  for k in $(seq 1 "$n"); do
    shard=() name="n$n"
    [ "$n" -gt 1 ] && shard=(--shard "$k/$n") name="n$n-shard$k"
    CUDA_VISIBLE_DEVICES=$((k - 1)) "$kw" run --repo "$repo" --config "$work/timed.json" --name "gpu$((k - 1))" \
      "${shard[@]}" --out "$out/$name.json" > "$out/$name.log" 2>&1 &
  done
  wait
  seconds=$(python3 -c "import sys, time; print('%.1f' % (time.time() - float(sys.argv[1])))" "$started")
  run="$out/n$n.json"
  if [ "$n" -gt 1 ]; then
    "$kw" merge-shards "$out"/n"$n"-shard*.json --out "$out/n$n-merged.json" >> "$out/n$n-merge.log" 2>&1
    run="$out/n$n-merged.json"
  fi
  line=$(python3 - "$run" "$n" "$seconds" "$out" <<'PY'
import glob, json, sys
run, n, seconds, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
try:
    report = json.load(open(run))
except Exception as error:
    print("%d GPU(s): %s s wall; no run (%s)" % (n, seconds, error)); sys.exit()
stages = {s["name"]: s for s in report["stages"]}
measured = sum(1 for c in report["cases"] if c.get("measurements"))
parts = ["%s %s %.1f s" % (name, stages[name]["status"], stages[name]["duration_ms"] / 1000)
         for name in ("load", "launch_geometry", "correctness", "quick_bench", "full_bench") if name in stages]
shards = ""
if n > 1:
    per = []
    for f in sorted(glob.glob("%s/n%d-shard*.json" % (out, n))):
        r = json.load(open(f))
        s = {x["name"]: x for x in r["stages"]}
        per.append("%d cases, full_bench %.1f s" % (len(r["cases"]), s["full_bench"]["duration_ms"] / 1000))
    shards = "; shards: " + " | ".join(per)
print("%d GPU(s): %s s wall, %d cases measured, %s; gpu_seconds %.1f%s"
      % (n, seconds, measured, ", ".join(parts), report["gpu_seconds"], shards))
PY
)
  log "$line"
  echo "$line" >> "$summary"
done

# Sharded A/A pull requests: A + a README line, `kw run --base A --shard K/N`
# on every GPU side by side (N the host's GPUs, skipping identical code and
# its audit on, as a job has them), merged; aa/ holds main-1 (A's one-GPU
# run) and pr-I (each merged job) for tools/rejudge-series.sh on the VM. The
# first job's shards build the base once, with its own kernelwatch.json (one
# builds in the shared cache, the others wait for it).
aa_jobs="${SHARD_AA:-0}" deadline="${SHARD_DEADLINE:-}"
if [ "$aa_jobs" -gt 0 ]; then
  mkdir -p "$out/aa" && cp "$out/n1.json" "$out/aa/main-1.json"
  base=$(git -C "$repo" rev-parse main)
  (cd "$repo" && git_ checkout -q -b aa main && echo "A README line." > README-aa.md && git_ add -A &&
    git_ commit -qm "a README line") || exit 1
  # The detection's own replicate settings: the timing runs' are cut to what a split shows.
  python3 -c "import json, sys; c = json.load(open(sys.argv[1])); fb = c['full_bench']; [fb.pop(k) for k in ('replicates', 'max_replicates', 'confirm_replicates')]; json.dump(c, open(sys.argv[2], 'w'))" \
    "$work/timed.json" "$work/aa.json" || exit 1
  for i in $(seq 1 "$aa_jobs"); do
    if [ -n "$deadline" ] && [ "$(date +%s)" -ge "$deadline" ]; then log "deadline: A/A job $i not started"; break; fi
    started=$SECONDS
    for k in $(seq 1 "$gpus"); do
      CUDA_VISIBLE_DEVICES=$((k - 1)) "$kw" run --repo "$repo" --cache-dir "$work/built" --base "$base" \
        --config "$work/aa.json" --name "gpu$((k - 1))" --shard "$k/$gpus" \
        --out "$out/aa/shard-$i-$k.json" > "$out/aa/shard-$i-$k.log" 2>&1 &
    done
    wait
    # The merged run holds every shard's cases: the shards' own reports go once it is made.
    "$kw" merge-shards "$out"/aa/shard-"$i"-*.json --out "$out/aa/pr-$i.json" >> "$out/aa/merge.log" 2>&1 &&
      rm "$out"/aa/shard-"$i"-*.json
    line=$(python3 - "$out/aa/pr-$i.json" <<'PY'
import json, sys
try:
    report = json.load(open(sys.argv[1]))
except Exception as error:
    print("no merged run (%s)" % error); sys.exit()
cases = report["cases"]
stage = {s["name"]: s for s in report["stages"]}["full_bench"]
print("%d cases: %d timed (%d audited), %d identical not timed; full_bench %s %.1f s"
      % (len(cases), sum(1 for c in cases if c.get("measurements")), sum(1 for c in cases if c.get("audit")),
         sum(1 for c in cases if c.get("identical_to_base")), stage["status"], stage["duration_ms"] / 1000))
PY
)
    log "A/A $i over $gpus GPUs in $((SECONDS - started)) s: $line"
    echo "aa-$i ($gpus shards): $((SECONDS - started)) s, $line" >> "$summary"
  done
fi
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader >> "$summary"
tar -C "$top" -czf "$top/shards.tar.gz" shards && rm -rf "$out"
log "done: $(du -h "$top/shards.tar.gz" | cut -f1)"
