#!/usr/bin/env bash
# kakaobrain/trident (dozens of Triton kernels; benchmarks in
# triton.testing.perf_report form behind its own util.report wrapper) taken
# from kw init to GPU verdicts, as a team would:
#   stage  here: the public snapshot into .device-carry/trident
#   run    GPU machine (carry .device-carry): the snapshot as a git repository,
#          `kw init --only TRIDENT_BENCHES` (default benchmark_softmax), the
#          lines a person writes (tools/init-fills/trident.json: merged into
#          kernelwatch.json, and counted), then a main run and pull requests
#          on it, each `kw run --base`:
#            comment  a comment in the softmax kernel's module: no case timed but the audit
#            sync     torch.cuda.synchronize() added to the softmax launcher: slower
# Reports, kw init's output and logs in $OUT/trident.tar.gz, a line per run in
# $OUT/trident.txt; judge the reports here with tools/judge_series.py.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log_tag=trident
source "$root/tools/gpu-scratch.sh"
carry="$root/.device-carry/trident"
snapshot="/work/.mirror/kakaobrain+trident/repo"
commit=6c429c6b1a2d33711d964a9d643c2b4b1610afdf

stage() {
  rm -rf "$carry" && mkdir -p "$carry"
  git -C "$snapshot" archive "$commit" | tar -C "$carry" -xf - || exit 1
  du -sh "$carry"
}

run() {
  local top="${OUT:-$root/gpu-results}"
  local out="$top/trident" work="${TRIDENT_WORK:-/tmp/kw-trident}"
  rm -rf "$out" "$work" && mkdir -p "$out" "$work"
  local kw
  kw=$(kw_binary "$out") || exit 1
  inject_library "$out" || exit 1
  local repo="$work/trident"
  cp -r "$carry" "$repo"
  (cd "$repo" && git_ init -q -b main && git_ add -A && git_ commit -qm "trident as published") || exit 1
  log "kw init --only ${TRIDENT_BENCHES:-benchmark_softmax}"
  (cd "$repo" && "$kw" init . --only "${TRIDENT_BENCHES:-benchmark_softmax}") > "$out/init.txt" 2>&1
  cp "$repo/kernelwatch.json" "$out/kernelwatch-from-init.json"
  # What the person writes: the fill's keys over kw init's (a bench's by name).
  python3 - "$repo/kernelwatch.json" "$root/tools/init-fills/trident.json" <<'PY' || exit 1
import json, sys
path, fill_path = sys.argv[1:]
config, fill = json.load(open(path)), json.load(open(fill_path))
for key, value in fill.items():
    if key == "benches":
        for bench in config["benches"]:
            bench.update(value.get(bench["name"], {}))
    else:
        config[key] = value
json.dump(config, open(path, "w"), indent=2)
PY
  cp "$repo/kernelwatch.json" "$out/kernelwatch.json"
  (cd "$repo" && git_ add -A && git_ commit -qm "kernelwatch.json") || exit 1
  local base
  base=$(git -C "$repo" rev-parse main)
  (cd "$repo" && git_ checkout -q -b comment main &&
    sed -i 's/^class Softmax:$/class Softmax:  # forward: one program per row/' trident/kernel/softmax.py &&
    git_ commit -qam comment) || exit 1
  (cd "$repo" && git_ checkout -q -b sync main &&
    sed -i '0,/^        output = torch.empty_like(input)$/s//        output = torch.empty_like(input)\n        torch.cuda.synchronize()/' trident/operation/softmax.py &&
    git_ commit -qam sync) || exit 1
  for b in comment sync; do
    [ -n "$(git -C "$repo" diff --stat main "$b")" ] || { log "$b changes nothing: its sed no longer matches"; exit 1; }
  done
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  : > "$top/trident.txt"
  local kind ref started status
  for kind in ${TRIDENT_KINDS:-main comment sync}; do
    ref=$kind
    git -C "$repo" checkout -q "$ref"
    started=$SECONDS
    if [ "$kind" = main ]; then
      "$kw" run --repo "$repo" --cache-dir "$work/built" --name trident --branch main --out "$out/main-1.json" > "$out/main-1.log" 2>&1
    else
      "$kw" run --repo "$repo" --cache-dir "$work/built" --name trident --branch "$ref" --base "$base" \
        --out "$out/$kind-1.json" > "$out/$kind-1.log" 2>&1
    fi
    status=$?
    python3 "$root/tools/report_line.py" "$out/$kind-1.json" "$kind" "$status" "$((SECONDS - started))" | tee -a "$top/trident.txt"
  done
  tar -C "$top" -czf "$top/trident.tar.gz" trident && rm -rf "$out"
}

case "${1:-}" in
  stage) stage ;;
  run) run ;;
  *) echo "usage: $0 stage|run" >&2; exit 2 ;;
esac
