#!/usr/bin/env bash
# On the GPU machine: kernelwatch against NVBench as projects pin it. For each
# version (the kits tools/make-nvbench-kit.sh makes, carried in .device-carry,
# and today's ../shared/nvbench-kit carried as .device-carry/nvbench-kit),
# NVBench's examples become a tracked repository of their own and kw runs it:
#   A     the kit with a kernelwatch.json (throughput with its launch declared,
#         auto_throughput)
#   B     A + a no-op change        -> <version>-aa.json   (kw run --base A)
#   C     A + auto_throughput's kernel copying about 3% more elements
#                                   -> <version>-slow.json (kw run --base A)
#   <version>-main.json: A alone, every stage (build, load, launch_geometry,
#   correctness, quick_bench, full_bench).
# Also what each NVBench says to an option it lacks (<version>-refused.txt).
# Reports and logs go to $OUT/nvbench-versions.tar.gz; judge the pull
# requests with tools/judge_series.py against a kw-server.
#   NVB_VERSIONS="2023 2025 today" tools/nvbench-versions.sh
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log_tag=nvbench-versions
source "$root/tools/gpu-scratch.sh"
out="${OUT:-$root/gpu-results}"
work="${NVB_WORK:-/tmp/kw-nvbench-versions}"
results="$out/nvbench-versions"
mkdir -p "$results" "$work"
kw=$(kw_binary "$results") || exit 1
inject_library "$results" || exit 1
status=0

kit_of() { [ "$1" = today ] && echo "$root/.device-carry/nvbench-kit" || echo "$root/.device-carry/nvbench-$1"; }
# NVBench named its examples nvbench.example.<name> until it built them per
# C++ dialect (nvbench.example.cpp17.<name>).
example_of() { [ "$1" = 2023 ] && echo "build/bin/nvbench.example.$2" || echo "build/bin/nvbench.example.cpp17.$2"; }

run() {  # version kind [base]
  local version=$1 kind=$2 extra=() started=$SECONDS
  [ $# -ge 3 ] && extra=(--base "$3")
  GIT_CEILING_DIRECTORIES="$work" "$kw" run --repo "$work/$version" --cache-dir "$work/$version-built" \
    --name "nvbench-$version" --branch "$kind" "${extra[@]}" --out "$results/$version-$kind.json" \
    > "$results/$version-$kind.log" 2>&1 || status=1
  log "$version $kind: $((SECONDS - started)) s; $(grep -E 'stage [a-z_]+ (passed|failed|skipped)' "$results/$version-$kind.log" |
    sed 's/.*stage //' | cut -c1-160 | tr '\n' '|')"
}

for version in ${NVB_VERSIONS:-2023 2025 today}; do
  repo="$work/$version"
  rm -rf "$repo" "$repo-built"
  cp -r "$(kit_of "$version")" "$repo"
  rm -rf "$repo/build"
  chmod -R u+w "$repo"
  # throughput launches nvbench::copy_kernel<<<256, 256>>> in every version.
  cat > "$repo/kernelwatch.json" <<JSON
{"project": "nvbench-$version",
 "build": {"commands": ["bash build.sh"], "timeout_s": 900},
 "benches": [
   {"name": "throughput", "path": "$(example_of "$version" throughput)", "format": "nvbench",
    "launches": [{"kernel": "void nvbench::copy_kernel<*", "block": [256], "grid": [256]}]},
   {"name": "auto_throughput", "path": "$(example_of "$version" auto_throughput)", "format": "nvbench"}],
 "full_bench": {"replicates": 4, "max_replicates": 6, "confirm_replicates": 4, "budget_s": 60,
                "replicate_seconds": 0.1, "min_samples": 10},
 "timeouts_s": {"full_bench": 900}}
JSON
  printf 'build/\n' > "$repo/.gitignore"
  (cd "$repo" && git_ init -q -b main && git_ add -A && git_ commit -qm "A: NVBench $version") || exit 1
  base=$(git -C "$repo" rev-parse HEAD)
  log "$version: A=$base ($(head -3 "$repo/SOURCES.txt" 2>/dev/null | grep -o 'NVIDIA/nvbench [0-9a-f]*' || echo today))"
  run "$version" main
  # What this NVBench answers to the newest option kernelwatch passes.
  (cd "$repo" && "./$(example_of "$version" throughput)" --no-batch --list > "$results/$version-refused.txt" 2>&1)
  echo "exit $?" >> "$results/$version-refused.txt"

  (cd "$repo" && echo "<!-- a no-op change -->" >> README.md && git_ add -A && git_ commit -qm "B: no-op")
  run "$version" aa "$base"
  (cd "$repo" && git_ checkout -q "$base" && git_ checkout -q -b slow &&
    sed -i 's|i < stride \* elements;|i < stride * (elements + elements / 33);|' nvbench/examples/auto_throughput.cu &&
    grep -q 'elements + elements / 33' nvbench/examples/auto_throughput.cu && git_ commit -qam "C: 3% more copies") ||
    { log "$version: commit C was not made"; status=1; continue; }
  run "$version" slow "$base"
  tar -C "$out" -czf "$out/nvbench-versions.tar.gz" nvbench-versions
done
python3 - "$results" <<'PY' | tee "$out/nvbench-versions.md"
import glob, json, os, sys
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    report = json.load(open(path))
    cases = report.get("cases", [])
    samples = sorted(len(m["samples_ns"]) for c in cases for m in c.get("measurements", [])[:1])
    print(f"## {os.path.basename(path)}: {len(cases)} cases, samples per case {samples[:1]}..{samples[-1:]}")
    for stage in report["stages"]:
        unread = stage.get("details", {}).get("unread_seconds")
        extra = f" (unread {unread:.1f} s)" if unread else ""
        print(f"  {stage['name']:16} {stage['status']:8} {stage['duration_ms'] / 1000:6.1f} s{extra}  {stage['message'][:400]}")
PY
tar -C "$out" -czf "$out/nvbench-versions.tar.gz" nvbench-versions
rm -rf "$results"
exit $status
