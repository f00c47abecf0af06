#!/usr/bin/env bash
# On the GPU machine: skipping identical code on a Triton kernel (docs/detection.md,
# "Fingerprints"; docs/PERFORMANCE.md, "Skipping identical code"). Makes a
# scratch repository with a Triton row softmax as a python bench (four
# shapes), its first commit A with num_warps=4, and pull requests on A:
#   docs    a README line: nothing any case runs
#   warps   num_warps=8: every case's kernel, compiled by Triton at run time
#   comment a comment in the bench script: its Python source, not its kernel
# each measured with `kw run --base A` (2 replicates a side, no confirmation:
# what it shows is which cases are timed; TRITON_FULL_BENCH, a JSON object,
# sets full_bench keys over these, '{}' the defaults). Reports and logs go to
# $OUT/triton-fingerprints.tar.gz, two lines per pull request to
# $OUT/triton-fingerprints.txt (what was timed; each stage's seconds).
# KW_BINARY measures another tree's kw (tools/gpu-scratch.sh), RESULT_SUFFIX
# names its results apart.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log_tag=triton-fingerprints
source "$root/tools/gpu-scratch.sh"
top="${OUT:-$root/gpu-results}"
tag="triton-fingerprints${RESULT_SUFFIX:-}"  # RESULT_SUFFIX: a second tree's results beside the first's
out="$top/$tag"
work="${TRITON_WORK:-/tmp/kw-triton}"
mkdir -p "$out"
rm -rf "$work" && mkdir -p "$work/repo"
kw=$(kw_binary "$out") || exit 1
inject_library "$out" || exit 1
repo="$work/repo"
cat > "$repo/softmax_bench.py" <<'PY'
"""Row softmax in Triton, one case per shape."""
import sys

import torch
import triton
import triton.language as tl

import kwbench

NUM_WARPS = 4


@triton.jit
def softmax_kernel(out_ptr, in_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n_cols
    x = tl.load(in_ptr + row * n_cols + offsets, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    numerator = tl.exp(x)
    tl.store(out_ptr + row * n_cols + offsets, numerator / tl.sum(numerator, axis=0), mask=mask)


class Softmax(kwbench.Case):
    def __init__(self, rows, cols):
        self.name = "softmax/fp32/%dx%d" % (rows, cols)
        self.rows, self.cols = rows, cols

    def setup(self, state):
        self.x = torch.randn(self.rows, self.cols, device="cuda")
        self.y = torch.empty_like(self.x)

    def run_candidate(self, state):
        softmax_kernel[(self.rows,)](self.y, self.x, self.cols, BLOCK=triton.next_power_of_2(self.cols),
                                    num_warps=NUM_WARPS)
        return self.y

    def reference(self, state):
        return torch.softmax(self.x.double(), dim=1)

    def expected_launch(self):
        return kwbench.Launch("softmax_kernel*", block=None)


if __name__ == "__main__":
    sys.exit(kwbench.main([Softmax(r, c) for r, c in ((4096, 1024), (4096, 2048), (16384, 1024), (1024, 4096))]))
PY
full_bench=$(python3 -c "import json, os; print(json.dumps(json.loads(os.environ.get('TRITON_FULL_BENCH') or '{\"replicates\": 2, \"max_replicates\": 2, \"confirm_replicates\": 0, \"resolve_replicates\": 0}')))")
cat > "$repo/kernelwatch.json" <<JSON
{
  "project": "triton-softmax",
  "build": {"commands": ["python3 -c 'import torch, triton'"]},
  "benches": [{"name": "softmax", "path": "softmax_bench.py", "format": "python"}],
  "full_bench": $full_bench
}
JSON
echo "# Triton softmax" > "$repo/README.md"
(cd "$repo" && git_ init -q -b main && git_ add -A && git_ commit -qm A) || exit 1
base=$(git -C "$repo" rev-parse main)
branch() {  # name sed-expression file
  (cd "$repo" && git_ checkout -q -b "$1" main && sed -i "$2" "$3" && git_ commit -qam "$1") || exit 1
}
branch docs 's/$/ (row-wise)/' README.md
branch warps 's/^NUM_WARPS = 4$/NUM_WARPS = 8/' softmax_bench.py
branch comment 's/^    row = tl.program_id(0)$/    row = tl.program_id(0)  # one program per row/' softmax_bench.py
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
summary="$top/$tag.txt"
: > "$summary"
for kind in ${TRITON_KINDS:-docs warps comment}; do
  git -C "$repo" checkout -q "$kind"
  started=$SECONDS
  "$kw" run --repo "$repo" --cache-dir "$work/built" --name triton --branch "$kind" --base "$base" \
    --out "$out/$kind.json" > "$out/$kind.log" 2>&1
  status=$?
  line=$(python3 - "$out/$kind.json" "$kind" "$status" "$((SECONDS - started))" <<'PY'
import json, sys
path, kind, status, seconds = sys.argv[1:]
try:
    report = json.load(open(path))
except Exception as error:
    print("%s: exit %s in %s s, no report (%s)" % (kind, status, seconds, error)); sys.exit()
stage = {s["name"]: s for s in report["stages"]}["full_bench"]
prints = stage["details"].get("softmax", {}).get("fingerprints", {})
timed = [c["name"] for c in report["cases"] if c.get("measurements")]
skipped = [c["name"] for c in report["cases"] if c.get("identical_to_base")]
audited = [c["name"] for c in report["cases"] if c.get("audit")]
changed = {name: sorted(diff) if isinstance(diff, (list, dict)) else diff for name, diff in prints.get("changed", {}).items()}
passes = stage["details"].get("softmax", {}).get("passes", [])
cost = "full_bench %.1f s (%.1f s counted on the GPU), %d passes, %d prepared, %.1f s a timed case" % (
    stage["duration_ms"] / 1000, stage["gpu_seconds"], len(passes),
    stage["details"].get("softmax", {}).get("prepared_passes", 0), stage["duration_ms"] / 1000 / max(len(timed), 1))
print("%s: exit %s in %s s; full_bench %s: %d timed (%d audited), %d identical not timed; %s; changed: %s"
      % (kind, status, seconds, stage["status"], len(timed), len(audited), len(skipped), cost, json.dumps(changed)))
PY
)
  log "$line"
  echo "$line" >> "$summary"
  python3 "$root/tools/report_line.py" "$out/$kind.json" "$kind" "$status" "$((SECONDS - started))" | tee -a "$summary"
done
tar -C "$top" -czf "$top/$tag.tar.gz" "$tag" && rm -rf "$out"
