#!/usr/bin/env bash
# On the GPU machine, after kernels/run-on-gpu.sh built build/gpu: what a
# python pull request's full_bench costs with and without prepared replicate
# processes (full_bench.prepare_processes), back to back on one GPU. The
# bench is the PyTorch example (kernels/attention/python/attention_bench.py:
# the attention kernel through ctypes, beside torch's SDPA); each job is
# `kw run --base A` of an A/A pull request that times every case (skipping
# identical code off: what is measured is a pull request that changed them).
# PY_AB_CASES narrows the bench to a glob of its cases (a project of a few
# shapes); PY_AB_FULL_BENCH (a JSON object) sets full_bench keys over the
# series' own. Summary on stdout and in $OUT/python-ab-cost.txt.
#   PY_AB_JOBS=2 [PY_AB_SETTINGS="false true"] [PY_AB_CASES='*/b1h*'] tools/python-ab-cost.sh
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${OUT:-$root/gpu-results}"
jobs="${PY_AB_JOBS:-2}"
repo=/tmp/kw-python-ab
kw="$root/build/gpu/agent/kw"
export KW_ATTENTION_LIBRARY="$root/build/gpu/kernels/attention/libkw_attention.so"
git_() { git -c user.name=kernelwatch -c user.email=kw@localhost "$@"; }
config() {  # prepare_processes
  python3 - "$1" <<'PY'
import json, os, sys
bench = {"name": "torch", "path": os.environ["root"] + "/kernels/attention/python/attention_bench.py",
         "format": "python"}
if os.environ.get("PY_AB_CASES"):
    bench["cases"] = os.environ["PY_AB_CASES"]
full_bench = {"replicates": 4, "max_replicates": 4, "replicate_seconds": 0.25, "skip_identical": False,
              "prepare_processes": sys.argv[1] == "true"}
full_bench.update(json.loads(os.environ.get("PY_AB_FULL_BENCH") or "{}"))
print(json.dumps({"project": "python-ab", "build": {"commands": ["true"]}, "benches": [bench],
                  "full_bench": full_bench}, indent=1))
PY
}
export root
rm -rf "$repo" && mkdir -p "$repo" && cd "$repo" && git_ init -q -b main
config true > kernelwatch.json && git_ add -A && git_ commit -qm A
base=$(git rev-parse HEAD)
: > "$out/python-ab-cost.txt"
for i in $(seq 1 "$jobs"); do
  for prepare in ${PY_AB_SETTINGS:-false true}; do
    git_ checkout -q "$base" && git_ checkout -q -B "pr-$prepare-$i"
    config "$prepare" > kernelwatch.json && echo "<!-- $i -->" >> README.md && git_ add -A && git_ commit -qm "B $prepare $i"
    GIT_CEILING_DIRECTORIES=/tmp "$kw" run --repo "$repo" --base "$base" --stages full_bench \
      --out "$out/py-ab-$prepare-$i.json" > "$out/py-ab-$prepare-$i.log" 2>&1
    python3 - "$out/py-ab-$prepare-$i.json" "$prepare" <<'PY' | tee -a "$out/python-ab-cost.txt"
import json, sys
report = json.load(open(sys.argv[1]))
stage = next(s for s in report["stages"] if s["name"] == "full_bench")
details = stage["details"].get("torch", {})
passes = details.get("passes", [])
cases = max((p["cases"] for p in passes), default=0)
print(f"prepare_processes={sys.argv[2]}: {stage['status']}, full_bench {stage['duration_ms'] / 1000:.1f} s "
      f"({stage['gpu_seconds']:.1f} s counted), {cases} cases, {len(passes)} passes, "
      f"{details.get('prepared_passes', 0)} prepared; {stage['duration_ms'] / 1000 / max(cases, 1):.1f} s a case; "
      "pass seconds " + ", ".join("%.1f" % p["seconds"] for p in passes))
PY
  done
done
