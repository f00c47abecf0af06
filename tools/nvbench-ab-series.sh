#!/usr/bin/env bash
# On the GPU machine: NVIDIA's NVBench examples (../shared/nvbench-kit, carried
# as .device-carry/nvbench-kit) as a tracked repository, measured by `kw run
# --stages full_bench` through the measurement engine:
#   A     the kit with a kernelwatch.json of one bench (auto_throughput: 4 states)
#   B     A + a no-op change
#   C     A + auto_throughput's kernel copying about 3% more elements
#   aa-N.json    B against base A in the same job (A/A pull requests)
#   slow-N.json  C against base A
#   main-N.json  B alone (what a main run costs, against a pull request's A/B)
# Reports go to $OUT/nvbench-series.tar.gz after every run; judge them with
# tools/judge_series.py against a kw-server.
#   NVB_SERIES="aa:10 slow:10 main:2" [NVB_DEADLINE=EPOCH_S] tools/nvbench-ab-series.sh
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log_tag=nvbench-series
source "$root/tools/gpu-scratch.sh"
out="${OUT:-$root/gpu-results}"
work="${NVB_WORK:-/tmp/kw-nvbench-series}"
series="${NVB_SERIES:-aa:2 slow:2 main:1}"
mkdir -p "$out/nvbench-series" "$work"
kw=$(kw_binary "$out/nvbench-series") || exit 1

if [ ! -d "$work/b/.git" ]; then
  log "scratch history in $work"
  rm -rf "$work/b" "$work/c" "$work/built"
  cp -r "$root/.device-carry/nvbench-kit" "$work/b"
  rm -rf "$work/b/build"
  cat > "$work/b/kernelwatch.json" <<'JSON'
{"project": "nvbench-kit",
 "build": {"commands": ["bash build.sh"], "timeout_s": 900},
 "benches": [{"name": "auto_throughput", "path": "build/bin/nvbench.example.cpp17.auto_throughput",
              "format": "nvbench"}],
 "full_bench": {"replicates": 4, "max_replicates": 6, "confirm_replicates": 4, "budget_s": 60,
                "replicate_seconds": 0.1, "min_samples": 10},
 "timeouts_s": {"full_bench": 900}}
JSON
  (cd "$work/b" && git_ init -q -b main && git_ add -A && git_ commit -qm "A: the kit" &&
    echo "<!-- a no-op change -->" >> README.md && git_ commit -qam "B: no-op")
fi
base=$(git -C "$work/b" rev-parse HEAD~1)
if [ ! -d "$work/c/.git" ]; then
  git_ clone -q "$work/b" "$work/c"
  # Each thread copies about 3% more elements (its loop runs on over
  # elements/33 more), so the kernel moves about 3% more bytes.
  (cd "$work/c" && git_ checkout -q HEAD~1 && git_ checkout -q -b slow &&
    sed -i 's|i < stride \* elements;|i < stride * (elements + elements / 33);|' nvbench/examples/auto_throughput.cu &&
    grep -q 'elements + elements / 33' nvbench/examples/auto_throughput.cu && git_ commit -qam "C: 3% more copies")
fi
[ "$(git -C "$work/c" rev-parse HEAD)" != "$base" ] || { log "commit C was not made"; exit 1; }
log "A=$base B=$(git -C "$work/b" rev-parse HEAD) C=$(git -C "$work/c" rev-parse HEAD)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader

run() {  # kind index repo [base]
  local kind=$1 i=$2 repo=$3 extra=()
  [ $# -ge 4 ] && extra=(--base "$4")
  local started=$SECONDS
  GIT_CEILING_DIRECTORIES="$work" "$kw" run --repo "$repo" --stages full_bench --cache-dir "$work/built" \
    --name nvbench-series --branch "$kind-$i" "${extra[@]}" --out "$out/nvbench-series/$kind-$i.json" \
    > "$out/nvbench-series/$kind-$i.log" 2>&1
  local status=$?
  tar -C "$out" -czf "$out/nvbench-series.tar.gz" nvbench-series
  log "$kind $i: exit $status in $((SECONDS - started)) s; $(grep -E 'stage (build|full_bench) (passed|failed)' "$out/nvbench-series/$kind-$i.log" | sed 's/.*stage //' | tr '\n' ' ' | cut -c1-300)"
}

series_run() {  # kind index
  case "$1" in
    main) run main "$2" "$work/b" ;;
    aa) run aa "$2" "$work/b" "$base" ;;
    slow) run slow "$2" "$work/c" "$base" ;;
    *) echo "unknown series $1" >&2; exit 64 ;;
  esac
}
series_each "$series" "$out/nvbench-series" "${NVB_DEADLINE:-}"
rm -rf "$out/nvbench-series"
log "done: $(du -h "$out/nvbench-series.tar.gz" | cut -f1)"
