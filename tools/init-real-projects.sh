#!/usr/bin/env bash
# `kw init` on four public projects nobody here wrote, each ending in
# `kw run --stages preflight` on the GPU machine:
#   nvbench-kit    NVIDIA's NVBench examples (../shared/nvbench-kit), built once
#                  by its own build.sh, as a team with a build tree has it
#   spdlog         gabime/spdlog: Google Benchmark targets behind SPDLOG_BUILD_BENCH
#   extension-cpp  pytorch/extension-cpp: a setup.py CUDAExtension with TORCH_LIBRARY ops
#   attorch        BobMcDear/attorch: Triton kernels (--only softmax_forward_kernel)
# The generated bench scripts get only their TODOs filled, by the patches in
# tools/init-fills/ (made against what kw init writes; a patch that
# no longer applies means kw init's output changed).
#
#   tools/init-real-projects.sh stage   # here: snapshots into .device-carry/init-projects
#   tools/init-real-projects.sh run     # GPU machine (carry .device-carry): $OUT/init-projects/
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log_tag=init-projects
source "$root/tools/gpu-scratch.sh"
carry="$root/.device-carry/init-projects"
fills="$root/tools/init-fills"

# Public snapshots (fetched with the search tool's fetch) and their commits.
mirror=/work/.mirror
declare -A snapshots=(
  [spdlog]="gabime+spdlog 62302019"
  [extension-cpp]="pytorch+extension-cpp 0ec4969"
  [attorch]="BobMcDear+attorch 67c2772"
)

stage() {
  rm -rf "$carry" && mkdir -p "$carry"
  for name in "${!snapshots[@]}"; do
    read -r repo commit <<< "${snapshots[$name]}"
    git -C "$mirror/$repo/repo" archive --prefix="$name/" "$commit" | tar -C "$carry" -xf - || exit 1
  done
  cp -r /work/shared/nvbench-kit "$carry/nvbench-kit" && rm -rf "$carry/nvbench-kit/build"
  # The GPU machine has no Google Benchmark: Debian's, as a CMake prefix.
  local prefix="$carry/gbench-prefix" lib=/usr/lib/x86_64-linux-gnu
  mkdir -p "$prefix/include" "$prefix/lib/x86_64-linux-gnu"
  cp -r /usr/include/benchmark "$prefix/include/"
  cp -r "$lib/cmake" "$prefix/lib/x86_64-linux-gnu/" 2>/dev/null
  rm -rf "$prefix/lib/x86_64-linux-gnu/cmake" && mkdir -p "$prefix/lib/x86_64-linux-gnu/cmake"
  cp -r "$lib/cmake/benchmark" "$prefix/lib/x86_64-linux-gnu/cmake/"
  cp -P "$lib"/libbenchmark.so* "$lib"/libbenchmark_main.a "$prefix/lib/x86_64-linux-gnu/"
  du -sh "$carry"/*
}

# init_and_preflight NAME KW_INIT_ARGS...: the project as a git repository of
# its own, kw init, the fill patch (if any), kw run --stages preflight.
init_and_preflight() {
  local name="$1" dir="$work/$1"
  shift
  log "$name: kw init $*"
  (cd "$dir" && "$kw" init . "$@") > "$results/$name-init.txt" 2>&1
  echo "kw init exit $?" >> "$results/$name-init.txt"
  cp "$dir/kernelwatch.json" "$results/$name-kernelwatch.json" 2>/dev/null
  if [ -f "$dir/kernelwatch_bench.py" ]; then
    cp "$dir/kernelwatch_bench.py" "$results/$name-generated.py"
    if [ -f "$fills/$name.patch" ]; then
      patch -d "$dir" -p2 < "$fills/$name.patch" > "$results/$name-patch.txt" 2>&1 ||
        { log "$name: the fill patch does not apply"; cat "$results/$name-patch.txt"; return 1; }
      cp "$dir/kernelwatch_bench.py" "$results/$name-filled.py"
    fi
  fi
  (cd "$dir" && git_ add -A && git_ commit -qm "kernelwatch.json from kw init")
  log "$name: kw run --stages preflight"
  (cd "$dir" && GIT_CEILING_DIRECTORIES="$work" "$kw" run --repo . --stages preflight \
    --out "$results/$name-preflight.json") > "$results/$name-preflight.txt" 2>&1
  local rc=$?
  echo "kw run exit $rc" >> "$results/$name-preflight.txt"
  log "$name: preflight exit $rc: $(python3 -c "
import json, sys
r = json.load(open('$results/$name-preflight.json'))
print(', '.join('%s %s' % (s['name'], s['status']) for s in r['stages']))" 2>&1)"
}

run() {
  local out="${OUT:-$root/gpu-results}"
  results="$out/init-projects"
  work="${INIT_WORK:-/tmp/kw-init-projects}"
  rm -rf "$results" "$work" && mkdir -p "$results" "$work"
  kw=$(kw_binary "$results") || exit 1
  cmake --build "$root/build/gpu" --target kw_inject >> "$results/kw-build.log" 2>&1
  for name in nvbench-kit spdlog extension-cpp attorch; do
    cp -r "$carry/$name" "$work/$name"
    (cd "$work/$name" && git_ init -q -b main && git_ add -A && git_ commit -qm "$name as published")
  done
  export CMAKE_PREFIX_PATH="$carry/gbench-prefix"

  # A team with an NVBench suite has built it once; kw init reads that tree.
  log "nvbench-kit: bash build.sh (the team's own build)"
  (cd "$work/nvbench-kit" && bash build.sh) > "$results/nvbench-kit-build.txt" 2>&1
  printf 'build/\n' >> "$work/nvbench-kit/.gitignore"
  init_and_preflight nvbench-kit
  init_and_preflight spdlog
  init_and_preflight extension-cpp
  init_and_preflight attorch --only softmax_forward_kernel
  tar -C "$out" -czf "$out/init-projects.tar.gz" init-projects
  log "done: $out/init-projects.tar.gz"
}

case "${1:-}" in
  stage) stage ;;
  run) run ;;
  *) echo "usage: $0 stage|run" >&2; exit 2 ;;
esac
