#!/usr/bin/env bash
# On the GPU machine: the A/A and power series behind the verdict targets
# (docs/detection.md, docs/PERFORMANCE.md). Builds kw, makes a scratch git
# history of this tree (commits A, B = A + a no-op change, C = A + an
# injected slowdown), then measures with `kw run --stages full_bench`:
#   main-N.json   B alone (main runs of one build; posted as successive main
#                 commits by tools/post-series.sh)
#   pr-N.json     B against base A in the same job (A/A pull requests)
#   power-N.json  C against base A (C: the D=128 S>=2048 cases 3% slower,
#                 attention/fp16/d64/b1h1s128 10% slower)
# Every report keeps each sample's replicate: the empirical noise model of
# kw-detector-bench is extracted from them. Results go to $OUT/series.tar.gz.
#   SERIES="main:3 pr:3 power:2" [SERIES_CASES=GLOB] [SERIES_DEADLINE=EPOCH_S] tools/detection-series.sh
# SERIES_DEADLINE: start no run after this time (a device call has a hard limit;
# a run cut short is lost, one not started costs nothing). SERIES_FULL_BENCH:
# a JSON object over kernelwatch.json's full_bench (with its own SERIES_WORK:
# the setting is committed in the scratch history), e.g.
# '{"resolve_replicates": 0}' for the engine without its inconclusive rounds.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log_tag=series
source "$root/tools/gpu-scratch.sh"
out="${OUT:-$root/gpu-results}"
work="${SERIES_WORK:-/tmp/kw-series}"
series="${SERIES:-main:2 pr:2}"
# Every tiny shape and every S >= 2048 shape: the subset the targets name.
cases="${SERIES_CASES:-attention/*/d64/b1h1s*,attention/*/d64/b2h4s128*,attention/*s2048*,attention/*s4096*,attention/*s8192*,attention/*s16384*}"
injected="${SERIES_INJECT:-attention/*/d128/*s2048*=0.03;attention/*/d128/*s4096*=0.03;attention/*/d128/*s8192*=0.03;attention/*/d128/*s16384*=0.03;attention/fp16/d64/b1h1s128=0.10}"
mkdir -p "$out/series" "$work"
kw=$(kw_binary "$out/series") || exit 1

# The scratch history: the series config builds only the attention bench.
if [ ! -d "$work/b/.git" ]; then
  log "scratch history in $work"
  rm -rf "$work/b" "$work/c" "$work/built"
  attention_tree "$work/b" "$cases"
  (cd "$work/b" && git_ init -q -b main && git_ add -A && git_ commit -qm "A" &&
    echo "<!-- a no-op change -->" >> README.md && git_ commit -qam "B: no-op")
fi
base=$(git -C "$work/b" rev-parse HEAD~1)
if [ "$(git -C "$work/c" rev-parse HEAD 2>/dev/null)" = "$base" ] || [ ! -d "$work/c/.git" ]; then
  rm -rf "$work/c"
  git_ clone -q "$work/b" "$work/c"
  (cd "$work/c" && git_ checkout -q HEAD~1 && git_ checkout -q -b power &&
    sed -i "s|kInjectedSlowdown = \"\"|kInjectedSlowdown = \"$injected\"|" kernels/attention/bench/injected_slowdown.hpp &&
    grep -qF "$injected" kernels/attention/bench/injected_slowdown.hpp && git_ commit -qam "C: injected slowdown")
fi
# A power job whose head is its base would measure A/A and report it as power.
[ "$(git -C "$work/c" rev-parse HEAD)" != "$base" ] || { log "commit C was not made"; exit 1; }
log "A=$base B=$(git -C "$work/b" rev-parse HEAD) C=$(git -C "$work/c" rev-parse HEAD)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader

run() {  # kind index repo [base]
  local kind=$1 i=$2 repo=$3 extra=()
  [ $# -ge 4 ] && extra=(--base "$4")
  local started=$SECONDS
  "$kw" run --repo "$repo" --stages full_bench --cache-dir "$work/built" --name series --branch "$kind" \
    "${extra[@]}" --out "$out/series/$kind-$i.json" > "$out/series/$kind-$i.log" 2>&1
  local status=$?
  tar -C "$out" -czf "$out/series.tar.gz" series  # after every run: a call cut short keeps what it measured
  log "$kind $i: exit $status in $((SECONDS - started)) s; $(grep -E 'stage (build|full_bench) (passed|failed)' "$out/series/$kind-$i.log" | sed 's/.*stage //' | tr '\n' ' ' | cut -c1-300)"
}

series_run() {  # kind index
  case "$1" in
    main) run main "$2" "$work/b" ;;
    pr) run pr "$2" "$work/b" "$base" ;;
    power) run power "$2" "$work/c" "$base" ;;
    *) echo "unknown series $1" >&2; exit 64 ;;
  esac
}
series_each "$series" "$out/series" "${SERIES_DEADLINE:-}"
rm -rf "$out/series"
log "done: $(du -h "$out/series.tar.gz" | cut -f1)"
