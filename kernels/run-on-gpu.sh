#!/usr/bin/env bash
# On a GPU host (Ubuntu 24.04, CUDA 13, no libpqxx): builds agent + kernels
# with the `gpu` preset, runs every gpu-labelled test, then the harness noise
# figure (full_bench twice on the same build). Logs and JSON go to $OUT
# (default ./gpu-results); a summary is printed last.
#   kernels/run-on-gpu.sh [--skip-build] [--skip-tests] [--noise] [--tune]
#                         [--attention-check] [--attention-bench]
# --tune: kw-attention-tune (tile configurations of the attention kernel).
# --attention-check: kw-bench-attention load, launch_geometry, correctness,
#   quick_bench over every case.
# --attention-bench: its full_bench, PyTorch SDPA at the same shapes, and the
#   joined table (attention-table.md).
# --nvbench-kit: `kw run` of NVIDIA's NVBench examples (../shared/nvbench-kit,
#   carried as .device-carry/nvbench-kit) as a tracked repository of its own:
#   the report (nvbench-kit-report.json) must validate and hold per-sample
#   data for every state.
# --agent-health: `kw agent --once` on every GPU of this host against a
#   loopback stand-in for kw-server (there is no PostgreSQL here): what each
#   worker's claim says about its GPU and its health check (agent-health.json).
# --python-bench: `kw run` full_bench of the PyTorch example
#   (kernels/attention/python/attention_bench.py: the attention kernel through
#   ctypes against torch's SDPA), beside kw-bench-attention's candidate at the
#   same shapes (python-bench.md).
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out="${OUT:-$root/gpu-results}"
mkdir -p "$out"
build=1 tests=1 noise=0 tune=0 attention_check=0 attention_bench=0 nvbench_kit=0 python_bench=0 agent_health=0
for arg in "$@"; do
  case "$arg" in
    --skip-build) build=0 ;;
    --skip-tests) tests=0 ;;
    --noise) noise=1 ;;
    --tune) tune=1 ;;
    --attention-check) attention_check=1 ;;
    --attention-bench) attention_bench=1 ;;
    --nvbench-kit) nvbench_kit=1 ;;
    --python-bench) python_bench=1 ;;
    --agent-health) agent_health=1 ;;
    *) echo "unknown option $arg" >&2; exit 64 ;;
  esac
done
log() { printf '[gpu %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }

log "device: $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader 2>&1)"
log "cuda: $(nvcc --version | tail -1)"
if [ "$build" = 1 ]; then
  log "configure (preset gpu)"
  if ! cmake --preset gpu -DKW_BUILD_TESTS=ON -DKW_ATTENTION_TUNING=$([ "$tune" = 1 ] && echo ON || echo OFF) > "$out/configure.log" 2>&1; then tail -40 "$out/configure.log"; exit 1; fi
  log "build"
  if ! cmake --build --preset gpu -j "$(nproc)" > "$out/build.log" 2>&1; then
    grep -E 'error|Error' -A3 "$out/build.log" | head -80
    exit 1
  fi
  grep -E 'ptxas info *: (Used|Compiling)|spill' "$out/build.log" > "$out/ptxas.txt" || true
  grep -A2 'attention_forward_kernel' "$out/ptxas.txt" | grep -E 'spill|Used' | sort | uniq -c
  log "build done"
fi

status=0
if [ "$tests" = 1 ]; then
  log "gpu tests"
  # The Google Benchmark self-test bench, built elsewhere and carried here
  # (tools/stage-gbench-selftest.sh); its tests skip without it.
  [ -x .device-carry/gbench-selftest/kw-selftest-gbench ] && export KW_SELFTEST_GBENCH_DIR="$root/.device-carry/gbench-selftest"
  # kw profile's output (profile.json, profile.md, the raw ncu CSV) comes back.
  export KW_PROFILE_OUT="$out/profile"
  # KW_GPU_TESTS: a regex of the tests to run (default: every gpu test).
  ctest --preset gpu --output-on-failure ${KW_GPU_TESTS:+-R "$KW_GPU_TESTS"} > "$out/gpu-tests.log" 2>&1 || status=1
  grep -E '^\s*[0-9]+/[0-9]+ Test|tests passed|tests failed' "$out/gpu-tests.log"
fi

if [ "$nvbench_kit" = 1 ]; then
  log "nvbench kit: kw run"
  kit=/tmp/kw-nvbench-kit
  rm -rf "$kit" && cp -r .device-carry/nvbench-kit "$kit"
  few='"--stopping-criterion", "sample-count", "--target-samples", "50"'
  benches=""
  # throughput launches nvbench::copy_kernel<<<256, 256>>> (examples/throughput.cu):
  # its launch_geometry, through libkw_inject.so, must see exactly that.
  copy_launch='"launches": [{"kernel": "void nvbench::copy_kernel<*", "block": [256], "grid": [256], "max_registers": 64, "max_shared_bytes": 0}]'
  for example in throughput axes enums skip stream summaries auto_throughput exec_tag_sync exec_tag_timer custom_criterion; do
    extra=""
    [ "$example" = throughput ] && extra=", $copy_launch"
    benches="$benches{\"name\": \"$example\", \"path\": \"build/bin/nvbench.example.cpp17.$example\", \"format\": \"nvbench\", \"args\": [$few]$extra},"
  done
  cat > "$kit/kernelwatch.json" <<JSON
{"project": "nvbench-kit", "build": {"commands": ["bash build.sh"], "timeout_s": 900},
 "benches": [$benches
   {"name": "cpu_only", "path": "build/bin/nvbench.example.cpp17.cpu_only", "format": "nvbench",
    "args": ["-a", "Duration=0.002", $few]}],
 "timeouts_s": {"full_bench": 900}}
JSON
  (cd "$kit" && git init -q && git add -A && git -c user.name=kw -c user.email=kw@localhost commit -qm kit)
  if GIT_CEILING_DIRECTORIES=/tmp build/gpu/agent/kw run --repo "$kit" --out "$out/nvbench-kit-report.json" \
       > "$out/nvbench-kit-run.log" 2>&1; then
    build/gpu/agent/kw validate "$out/nvbench-kit-report.json" || status=1
    python3 - "$out/nvbench-kit-report.json" <<'PY' | tee "$out/nvbench-kit.md"
import json, sys
report = json.load(open(sys.argv[1]))
cases = report["cases"]
per_sample = [c for c in cases if len(c["measurements"][0]["samples_ns"]) > 1]
with_clock = [c for c in cases if "sm_mhz" in c["measurements"][0]]
print(f"device: {report['device']}")
print(f"{len(cases)} cases, {len(per_sample)} with per-sample data, {len(with_clock)} with per-sample SM clocks")
for stage in report["stages"]:
    print(f"  {stage['name']:16} {stage['status']:8} {stage['duration_ms'] / 1000:7.1f} s  {stage['message'][:300]}")
for c in cases:
    if len(c["measurements"][0]["samples_ns"]) <= 1:
        print(f"  one sample only: {c['name']}")
PY
  else
    status=1
    tail -30 "$out/nvbench-kit-run.log"
  fi
  # The same bench held to a wrong expectation (the 128-thread variant):
  # launch_geometry must fail and name what launched.
  log "nvbench kit: a wrong launch expectation"
  python3 - "$kit/kernelwatch.json" <<'PY'
import json, sys
config = json.load(open(sys.argv[1]))
config["benches"] = [b for b in config["benches"] if b["name"] == "throughput"]
config["benches"][0]["launches"][0]["block"] = [128]
json.dump(config, open(sys.argv[1], "w"))
PY
  (cd "$kit" && git -c user.name=kw -c user.email=kw@localhost commit -qam "wrong expectation")
  GIT_CEILING_DIRECTORIES=/tmp build/gpu/agent/kw run --repo "$kit" --stages launch_geometry \
    --out "$out/nvbench-kit-wrong-launch.json" > "$out/nvbench-kit-wrong-launch.log" 2>&1
  python3 - "$out/nvbench-kit-wrong-launch.json" <<'PY' | tee -a "$out/nvbench-kit.md" || status=1
import json, sys
stage = next(s for s in json.load(open(sys.argv[1]))["stages"] if s["name"] == "launch_geometry")
print(f"wrong expectation: launch_geometry {stage['status']}: {stage['message'][:400]}")
sys.exit(0 if stage["status"] == "failed" and "block (256,1,1), expected (128,1,1)" in stage["message"] else 1)
PY
fi
if [ "$python_bench" = 1 ]; then
  log "python bench: kw run full_bench of the PyTorch example"
  repo=/tmp/kw-python-bench
  rm -rf "$repo" && mkdir -p "$repo"
  cat > "$repo/kernelwatch.json" <<JSON
{"project": "python-bench", "build": {"commands": ["true"]},
 "benches": [{"name": "torch", "path": "$root/kernels/attention/python/attention_bench.py", "format": "python"}],
 "full_bench": {"replicates": 3, "max_replicates": 3, "replicate_seconds": 0.25}}
JSON
  (cd "$repo" && git init -q && git add -A && git -c user.name=kw -c user.email=kw@localhost commit -qm bench)
  export KW_ATTENTION_LIBRARY="$root/build/gpu/kernels/attention/libkw_attention.so"
  GIT_CEILING_DIRECTORIES=/tmp build/gpu/agent/kw run --repo "$repo" --out "$out/python-bench-report.json" \
    > "$out/python-bench-run.log" 2>&1 || { status=1; tail -30 "$out/python-bench-run.log"; }
  names=$(python3 -c "import json,sys; print(','.join(c['name'] for c in json.load(open(sys.argv[1]))['cases']))" \
    "$out/python-bench-report.json" 2>/dev/null)
  log "python bench: the same shapes through kw-bench-attention"
  build/gpu/kernels/attention/kw-bench-attention --stage full_bench --case "$names" --impls candidate \
    --max-seconds 0.5 --json "$out/python-bench-cpp.json" 2> "$out/python-bench-cpp.log" || status=1
  python3 - "$out/python-bench-report.json" "$out/python-bench-cpp.json" <<'PY' | tee "$out/python-bench.md"
import json, statistics, sys
report = json.load(open(sys.argv[1]))
cpp = {c["name"]: c for c in json.load(open(sys.argv[2]))["cases"]}
print(f"device: {report['device']['name']}, torch backend; {report['stages'][-1]['message'][:200]}")
for stage in report["stages"]:
    print(f"  {stage['name']:16} {stage['status']:8} {stage['duration_ms'] / 1000:7.1f} s  {stage['message'][:160]}")
print()
print("| case | kernel via PyTorch (us) | kernel via kwbench C++ (us) | torch SDPA (us) | speedup vs SDPA | TFLOP/s |")
print("|---|---:|---:|---:|---:|---:|")
for c in report["cases"]:
    m = {x["impl"]: x for x in c.get("measurements", [])}
    if "candidate" not in m:
        continue
    ours = statistics.median(m["candidate"]["samples_ns"]) / 1000
    sdpa = statistics.median(m["baseline:torch_sdpa"]["samples_ns"]) / 1000 if "baseline:torch_sdpa" in m else float("nan")
    other = cpp.get(c["name"])
    native = other["measurements"][0]["median_ns"] / 1000 if other else float("nan")
    flops = m["candidate"].get("flops", 0)
    print(f"| {c['name']} | {ours:.1f} | {native:.1f} | {sdpa:.1f} | {sdpa / ours:.2f}x | {flops / ours / 1e6:.0f} |")
PY
fi
if [ "$noise" = 1 ]; then
  bench=build/gpu/kernels/harness/kw-selftest-bench
  for run in 1 2; do
    log "noise run $run: full_bench"
    "$bench" --stage full_bench --json "$out/noise-run$run.json" 2> "$out/noise-run$run.log" || status=1
  done
  python3 tools/noise_figure.py "$out/noise-run1.json" "$out/noise-run2.json" | tee "$out/noise.md"
fi
if [ "$tune" = 1 ]; then
  log "attention tile configurations"
  build/gpu/kernels/attention/kw-attention-tune | tee "$out/tune.txt" || status=1
fi

attention=build/gpu/kernels/attention/kw-bench-attention
stage_summary() {  # stage name, JSON file
  python3 - "$1" "$2" <<'PY'
import json, sys
doc = json.load(open(sys.argv[2]))
stage = doc["stage"]
cases = stage.get("details", {}).get("cases", [])
failed = [c for c in cases if c["status"] == "failed"]
print(f"{sys.argv[1]}: {stage['status']} ({len(cases) - len(failed)}/{len(cases)} cases passed) {stage['message'][:300]}")
for c in failed[:20]:
    print(f"  FAILED {c['name']}: {c['message'][:300]}")
PY
}
if [ "$attention_check" = 1 ]; then
  lib=build/gpu/kernels/attention/libkw_attention.so
  "$attention" --stage load --library "$lib" --symbol kw_attention_forward --json "$out/attention-load.json" \
    2> "$out/attention-load.log" || status=1
  python3 -c "import json,sys; s=json.load(open(sys.argv[1]))['stage']; print('load:', s['status'], s['message'][:400])" \
    "$out/attention-load.json"
  for stage in ${KW_ATTENTION_STAGES:-launch_geometry correctness quick_bench}; do
    log "attention $stage"
    "$attention" --stage "$stage" --json "$out/attention-$stage.json" 2> "$out/attention-$stage.log" || status=1
    stage_summary "$stage" "$out/attention-$stage.json"
  done
fi
if [ "$attention_bench" = 1 ]; then
  log "attention full_bench"
  "$attention" --stage full_bench --max-seconds "${KW_ATTENTION_MAX_SECONDS:-2}" --json "$out/attention-full_bench.json" \
    2> "$out/attention-full_bench.log" || status=1
  stage_summary full_bench "$out/attention-full_bench.json"
  log "PyTorch SDPA"
  PYTHONUNBUFFERED=1 python3 kernels/attention/tools/sdpa_pytorch.py --out "$out/sdpa-pytorch.json" \
    > "$out/sdpa-pytorch.log" 2>&1 || { status=1; tail -5 "$out/sdpa-pytorch.log"; }
  python3 kernels/attention/tools/attention_table.py "$out/attention-full_bench.json" "$out/sdpa-pytorch.json" \
    | tee "$out/attention-table.md"
fi
if [ "$agent_health" = 1 ]; then
  log "kw agent: each GPU's worker and its health check"
  # A TEST DOUBLE of kw-server's claim endpoint: it records each claim and
  # answers 204 (no job), so each worker checks its GPU, claims once, exits.
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  python3 - "$port" "$out/agent-health.json" <<'PY' &
import http.server, json, sys
claims = []
class Claims(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        claims.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
        json.dump(claims, open(sys.argv[2], "w"), indent=2)
        self.send_response(204)
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Claims).serve_forever()
PY
  stand_in=$!
  sleep 1
  build/gpu/agent/kw agent --once --server "http://127.0.0.1:$port" --token stand-in --work-dir /tmp/kw-agent-health \
    --name "$(hostname)" > "$out/agent-health.log" 2>&1 || status=1
  kill "$stand_in"
  cat "$out/agent-health.log"
  python3 -c 'import json, sys; [print(c["agent"], json.dumps(c.get("gpu")), json.dumps(c.get("health"))) for c in json.load(open(sys.argv[1]))]' \
    "$out/agent-health.json" || status=1
  build/gpu/agent/kw gpu-check | tee "$out/gpu-check.txt" || status=1
fi
log "done (status $status)"
exit "$status"
