#!/usr/bin/env bash
# On the GPU machine, after kernels/run-on-gpu.sh built the gpu preset: where
# a bench's preflight and full_bench time goes. Runs the attention
# bench over every case as the agent does and splits each run's wall clock
# into process start-up, the cases' setup, their timed part and what lies
# between cases (teardown, the next start), from kwbench's own lines
# stamped as they arrive. Results: $OUT/overhead-profile.tar.gz, and the
# summary on stdout.
#   tools/overhead-profile.sh [BENCH]
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bench="${1:-$root/build/gpu/kernels/attention/kw-bench-attention}"
out="${OUT:-$root/gpu-results}/overhead-profile"
mkdir -p "$out"
[ -x "$bench" ] || { echo "no bench at $bench: run kernels/run-on-gpu.sh first" >&2; exit 1; }
# The agent's full_bench arguments for one replicate (agent/src/pipeline/adapters.cpp, KwbenchAdapter::measure,
# kernelwatch.json's full_bench).
replicate_args=(--max-seconds 0.1 --min-samples 5 --max-samples 200 --noise-target 0.005 --order-seed 7921)

stamped() {  # label, command...: runs it, each output line stamped with seconds since its start
  local label=$1
  shift
  python3 -u - "$out/$label.log" "$@" <<'PY'
import subprocess, sys, time
log = open(sys.argv[1], "w")
started = time.monotonic()
child = subprocess.Popen(sys.argv[2:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
for line in child.stdout:
    log.write(f"{time.monotonic() - started:9.3f} {line}")
child.wait()
log.write(f"{time.monotonic() - started:9.3f} exit {child.returncode}\n")
PY
}

export KWBENCH_REFERENCE_CACHE="$out/references"
rm -rf "$KWBENCH_REFERENCE_CACHE"
stamped list "$bench" --list --json "$out/list.json"
stamped preflight-cold "$bench" --stage preflight --json "$out/preflight-cold.json"
stamped preflight-cached "$bench" --stage preflight --json "$out/preflight-cached.json"
stamped full-bench-candidate "$bench" --stage full_bench --impls candidate "${replicate_args[@]}" \
  --json "$out/full-bench-candidate.json"
stamped full-bench-candidate-in-process "$bench" --stage full_bench --impls candidate --in-process \
  "${replicate_args[@]}" --json "$out/full-bench-candidate-in-process.json"
stamped full-bench-baselines "$bench" --stage full_bench --impls 'baseline:*' "${replicate_args[@]}" \
  --json "$out/full-bench-baselines.json"

python3 - "$out" <<'PY' | tee "$out/summary.txt"
import json, os, re, sys
out = sys.argv[1]
def lines(label):
    rows = []
    for text in open(os.path.join(out, label + ".log")):
        stamp, _, rest = text.strip().partition(" ")
        rows.append((float(stamp), rest))
    return rows
for label in ("list", "preflight-cold", "preflight-cached", "full-bench-candidate",
              "full-bench-candidate-in-process", "full-bench-baselines"):
    rows = lines(label)
    wall = rows[-1][0]
    # A line per case and stage: "[kwbench] STAGE CASE STATUS (SECONDS s): ...", as
    # each ends (a child's) or all at the end (--in-process, which prints
    # "[kwbench] STAGE CASE ..." as each starts).
    result = re.compile(r"\[kwbench\] \w+ \S+ (?:passed|failed|skipped) \((\d+\.\d+) s\)")
    case_lines = [(t, float(m.group(1))) for t, text in rows if (m := result.search(text))]
    starts = [t for t, text in rows if re.search(r"\[kwbench\] \w+ \S+ \.\.\.$", text)]
    first = starts[0] if starts else next((t - seconds for t, seconds in case_lines), wall)
    in_cases = sum(seconds for _, seconds in case_lines)
    summary = f"{label}: {wall:.1f} s wall, {rows[-1][1]}; start-up {first:.1f} s"
    if case_lines:
        summary += f"; {len(case_lines)} case results taking {in_cases:.1f} s"
        summary += f"; between cases and after the last {wall - first - in_cases:.1f} s"
    path = os.path.join(out, label + ".json")
    if os.path.exists(path) and label.startswith("full-bench"):
        doc = json.load(open(path))
        details = [c.get("details", {}) for c in doc["stage"]["details"].get("cases", [])]
        setup = sum(d.get("setup_seconds", 0) for d in details)
        measure = sum(d.get("measure_seconds", 0) for d in details)
        if all("warmup_seconds" in d for d in details):
            warmup = sum(d["warmup_seconds"] for d in details)
            summary += f"; setup {setup - warmup:.1f} s, warm-up {warmup:.1f} s, timed {measure:.1f} s"
        else:  # a harness from before the warm-up was reported apart
            summary += f"; setup and warm-up {setup:.1f} s, timed {measure:.1f} s"
    if os.path.exists(path) and label.startswith("preflight"):
        doc = json.load(open(path))
        summary += "; " + ", ".join(f"{p['stage']['name']} {p['stage']['status']} {p['stage'].get('duration_ms', 0) / 1000:.1f} s"
                                    for p in doc.get("preflight", []))
    print(summary)
PY
rm -rf "$out/references"
tar -C "$(dirname "$out")" -czf "$(dirname "$out")/overhead-profile.tar.gz" overhead-profile && rm -rf "$out"
