#!/usr/bin/env bash
# On the GPU machine: what a python pull request costs after its build, this
# tree against an earlier one measured in the same call, one tree after the
# other on one GPU: the Triton row softmax's pull requests
# (tools/triton-fingerprint.sh: four shapes, one bench, repository defaults
# for full_bench) and the four bench forms' (tools/bench-forms-series.sh).
# BEFORE_TREE is the earlier tree's files (`git archive REV | tar -x -C DIR`);
# its kw and libkw_inject.so are built there. Results: $OUT/*-after.* and
# $OUT/*-before.* (each script's tarball and summary).
#   BEFORE_TREE=.device-carry/kw-before [COST_TRITON_KINDS="comment warps"]
#   [COST_FORMS_KINDS="comment"] [COST_TREES="after before"] [COST_DEADLINE=EPOCH_S]
#   tools/python-preflight-cost.sh
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log_tag=python-preflight-cost
source "$root/tools/gpu-scratch.sh"
out="${OUT:-$root/gpu-results}"
mkdir -p "$out"
before="${BEFORE_TREE:?names the files of the earlier tree}"
before="$(cd "$before" && pwd)"
log "building the earlier tree's kw in $before"
(cd "$before" && cmake --preset gpu -DKW_BUILD_TESTS=OFF > "$out/before-configure.log" 2>&1 &&
  cmake --build --preset gpu -j "$(nproc)" --target kw kw_inject > "$out/before-build.log" 2>&1) ||
  { tail -30 "$out/before-build.log" "$out/before-configure.log" >&2; exit 1; }
kw_after=$(kw_binary "$out") || exit 1
inject_library "$out" || exit 1
# COST_DEADLINE (epoch seconds): no series starts after it (a device call
# has a hard limit, and a series cut short leaves no tarball).
late() { [ -n "${COST_DEADLINE:-}" ] && [ "$(date +%s)" -ge "$COST_DEADLINE" ] && log "past the deadline: $1 not run"; }
for tree in ${COST_TREES:-after before}; do
  kw="$kw_after"
  [ "$tree" = before ] && kw="$before/build/gpu/agent/kw"
  log "$tree: $kw"
  # Each kw writes its own kwbench.py where it runs python benches from.
  export KW_HOME="/tmp/kw-home-$tree"
  late "$tree triton" || KW_BINARY="$kw" RESULT_SUFFIX="-$tree" TRITON_FULL_BENCH='{}' \
    TRITON_KINDS="${COST_TRITON_KINDS:-comment warps}" "$root/tools/triton-fingerprint.sh"
  if [ -n "${COST_FORMS_KINDS-comment}" ] && ! late "$tree bench forms"; then
    KW_BINARY="$kw" RESULT_SUFFIX="-$tree" FORMS_MAIN=0 FORMS_KINDS="${COST_FORMS_KINDS-comment}" \
      "$root/tools/bench-forms-series.sh"
  fi
done
log "done"
