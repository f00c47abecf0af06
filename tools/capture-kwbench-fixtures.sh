#!/usr/bin/env bash
# On the GPU machine, after kernels/run-on-gpu.sh built build/gpu: what the C++
# kwbench writes for --list, each stage and --stage preflight, from the
# harness's self-test benches (one good case, and the broken bench whose
# stages fail), written to $OUT/kwbench-h100 for tests/data/kwbench-h100.
# full_bench's samples are cut to the first 20 (the schema, not the numbers,
# is what the fixture holds). kw_kwbench_fixtures_schema validates them in CI
# against kernels/stage.schema.json.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${OUT:-$root/gpu-results}/kwbench-h100"
mkdir -p "$out"
good="$root/build/gpu/kernels/harness/kw-selftest-bench"
broken="$root/build/gpu/kernels/harness/kw-selftest-broken-bench"
case_glob="selftest.scale/n33554432"
run() {  # NAME BENCH ARGS...: the bench's document as NAME.json; its exit status is not the point
  local name="$1" bench="$2"
  shift 2
  "$bench" "$@" --json "$out/$name.json" > "$out/$name.log" 2>&1 || true
  rm -f "$out/$name.log"
}
run list "$good" --list
run load "$good" --stage load
for stage in launch_geometry correctness quick_bench; do run "$stage" "$good" --stage "$stage" --case "$case_glob"; done
run full_bench "$good" --stage full_bench --case "$case_glob" --max-seconds 1
run preflight "$good" --stage preflight --case "$case_glob"
run broken-list "$broken" --list
run broken-preflight "$broken" --stage preflight
run broken-correctness "$broken" --stage correctness
python3 - "$out" <<'PY'
import json, pathlib, sys
for path in sorted(pathlib.Path(sys.argv[1]).glob("*.json")):
    document = json.loads(path.read_text())
    for entry in [document] + document.get("preflight", []):
        for case in entry.get("cases", []):
            for m in case.get("measurements", []):
                for key in ("samples_ns", "sm_mhz"):
                    if key in m:
                        m[key] = m[key][:20]
                m["throttled_samples"] = [i for i in m.get("throttled_samples", []) if i < 20]
                if not m["throttled_samples"]:
                    del m["throttled_samples"]
    path.write_text(json.dumps(document, indent=1) + "\n")
    print(f"{path.name}: {path.stat().st_size} bytes")
PY
python3 "$root/tests/support/json_schema.py" "$root/kernels/stage.schema.json" "$out"/*.json && echo "all valid"
