# Sourced by the GPU-machine scripts (detection-series.sh, time-to-verdict.sh):
# kw built with the gpu preset, and this tree copied into a scratch directory
# that becomes a git history of its own. Needs $root (this repository) and
# $log_tag (the script's name in its progress lines).

log() { printf '[%s %s] %s\n' "$log_tag" "$(date -u +%H:%M:%S)" "$*"; }
git_() { git -c user.name=kernelwatch -c user.email=kw@localhost -c advice.detachedHead=false "$@"; }

# kw_binary LOGDIR: kw of this tree, built (incrementally on a machine that
# built it before: a kw left from another tree carries another kwbench.py);
# prints its path. KW_BINARY: another tree's kw instead (a baseline measured
# in the same call), its libkw_inject.so built beside it.
kw_binary() {
  if [ -n "${KW_BINARY:-}" ]; then
    echo "$KW_BINARY"
    return 0
  fi
  if [ ! -f "$root/build/gpu/CMakeCache.txt" ]; then
    (cd "$root" && cmake --preset gpu -DKW_BUILD_TESTS=OFF > "$1/kw-configure.log" 2>&1) ||
      { tail -30 "$1/kw-configure.log" >&2; return 1; }
  fi
  (cd "$root" && cmake --build --preset gpu -j "$(nproc)" --target kw > "$1/kw-build.log" 2>&1) ||
    { tail -30 "$1/kw-build.log" >&2; return 1; }
  echo "$root/build/gpu/agent/kw"
}

# inject_library LOGDIR: libkw_inject.so of this tree built, for the
# fingerprints a launch pass takes.
inject_library() {
  [ -z "${KW_BINARY:-}" ] || return 0
  (cd "$root" && cmake --build --preset gpu -j "$(nproc)" --target kw_inject > "$1/inject-build.log" 2>&1) ||
    { tail -20 "$1/inject-build.log" >&2; return 1; }
}

# copy_tree DEST: this tree's files, without builds, results or git.
copy_tree() {
  mkdir -p "$1"
  (cd "$root" && tar --exclude=./build --exclude=./.git --exclude=./gpu-results --exclude=./dashboards/node_modules \
    -cf - .) | tar -C "$1" -xf -
}

# attention_tree DEST CASES: copy_tree, with a kernelwatch.json that builds
# only the attention bench and runs the CASES glob, full_bench as this
# repository's with SERIES_FULL_BENCH's keys (a JSON object) over it.
attention_tree() {
  copy_tree "$1"
  cat > "$1/kernelwatch.json" <<JSON
{
  "project": "kernelwatch",
  "build": {"commands": ["cmake --preset gpu -DKW_BUILD_TESTS=OFF -DKW_BUILD_AGENT=OFF",
                         "cmake --build --preset gpu -j $(nproc) --target kw-bench-attention"]},
  "benches": [{"name": "attention", "path": "build/gpu/kernels/attention/kw-bench-attention", "cases": "$2"}],
  "full_bench": $(python3 -c "import json, os; fb = json.load(open('$root/kernelwatch.json'))['full_bench']; fb.update(json.loads(os.environ.get('SERIES_FULL_BENCH') or '{}')); print(json.dumps(fb))")
}
JSON
}

# series_each SERIES DIR [DEADLINE]: for each KIND:COUNT of SERIES, calls the
# caller's `series_run KIND N` COUNT times, N the next number of KIND's
# reports in DIR (KIND-N.json); none is started after DEADLINE (epoch seconds).
series_each() {
  local item kind count n
  for item in $1; do
    kind=${item%%:*} count=${item##*:}
    for _ in $(seq 1 "$count"); do
      if [ -n "${3:-}" ] && [ "$(date +%s)" -ge "$3" ]; then
        echo "deadline reached: $kind and later not started"
        return 0
      fi
      n=$(ls "$2" | grep -c "^$kind-.*\.json$")
      series_run "$kind" $((n + 1)) || return
    done
  done
}
