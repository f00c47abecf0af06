#!/usr/bin/env bash
# On the GPU machine: the time-to-verdict figures of docs/PERFORMANCE.md.
# Makes a scratch git history of this tree and runs `kw run` (every stage,
# the bundled suite of kernelwatch.json) three times in the same checkout:
#   cold.json         commit A from a fresh clone: no build directory
#   incremental.json  commit B = A + a change to one kernel source: the
#                     build is incremental
#   wrong.json        commit C = B + a softmax scale 5% off: correctness
#                     must fail, and how soon after the build is the figure
# Each report keeps its stages' costs; kw's log (LABEL.log) has the wall
# clock of every stage's start and end. Results in $OUT/time-to-verdict.tar.gz.
#   tools/time-to-verdict.sh
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log_tag=ttv
source "$root/tools/gpu-scratch.sh"
out="${OUT:-$root/gpu-results}/time-to-verdict"
work="${TTV_WORK:-/tmp/kw-ttv}"
mkdir -p "$out"
kw=$(kw_binary "$out") || exit 1
rm -rf "$work"
copy_tree "$work"
(cd "$work" && git_ init -q -b main && git_ add -A && git_ commit -qm "A")
# A reference cache of an earlier run would hide the correctness stage's cost.
export KWBENCH_REFERENCE_CACHE="$work.references"
rm -rf "$KWBENCH_REFERENCE_CACHE"

measure() {  # label
  local started=$SECONDS
  "$kw" run --repo "$work" --branch main --out "$out/$1.json" > "$out/$1.log" 2>&1
  log "$1: exit $? in $((SECONDS - started)) s"
}
measure cold
echo "// a change that leaves the kernel as it was" >> "$work/kernels/attention/src/forward_fp16_d64.cu"
(cd "$work" && git_ commit -qam "B: one kernel source changed")
measure incremental
python3 - "$work/kernels/attention/src/forward.cu" <<'PY'
import sys
path = sys.argv[1]
text = open(path).read()
old = "launch_forward<kHeadDim, T>(params, stream);"
assert old in text, "forward.cu: the launch line moved; update time-to-verdict.sh"
text = text.replace(old, "ForwardParams wrong = params; wrong.softmax_scale *= 1.05f; "
                         "launch_forward<kHeadDim, T>(wrong, stream);")
open(path, "w").write(text)
PY
(cd "$work" && git_ commit -qam "C: softmax scale 5% off")
measure wrong

python3 - "$out" <<'PY' | tee "$out/summary.txt"
import json, os, re, sys
from datetime import datetime
out = sys.argv[1]
def clock(line):
    m = re.search(r"\[kw (\d\d:\d\d:\d\d)\]", line)
    return datetime.strptime(m.group(1), "%H:%M:%S") if m else None
for label in ("cold", "incremental", "wrong"):
    try:
        report = json.load(open(os.path.join(out, label + ".json")))
    except (OSError, ValueError) as error:
        print(f"{label}: no report ({error})")
        continue
    stages = " ".join(f"{s['name']} {s['status']} {s['duration_ms'] / 1000:.1f}s" for s in report["stages"])
    start = datetime.fromisoformat(report["started_at"].replace("Z", "+00:00"))
    end = datetime.fromisoformat(report["finished_at"].replace("Z", "+00:00"))
    print(f"{label}: {(end - start).total_seconds():.1f} s to the report; {stages}")
    lines = open(os.path.join(out, label + ".log")).read().splitlines()
    built = next((clock(l) for l in lines if "stage build passed" in l), None)
    failed = next((clock(l) for l in lines if re.search(r"stage (load|launch_geometry|correctness|quick_bench) failed", l)), None)
    if built and failed:
        print(f"  first failed preflight stage reported {(failed - built).total_seconds():.0f} s after the build ended")
PY
tar -C "$(dirname "$out")" -czf "$(dirname "$out")/time-to-verdict.tar.gz" time-to-verdict && rm -rf "$out"
